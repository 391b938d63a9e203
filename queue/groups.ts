// Groups: fair claiming between the tenants of one queue, a concurrency limit per group, and
// pause/resume of one group (docs/protocol.md, "Groups"). Admission is decided inside the claim
// script (queue/scripts/includes/admission.lua); these calls only change the limits and read
// the per-group state.
import { assertQueueName, QueueKeys } from "./keys.ts";
import * as gateway from "./gateway.ts";
import type { RedisClient } from "./scripts.ts";
import { formatRateLimit, RateLimitError, type RateLimit } from "./control.ts";

/** A group name's limit in UTF-8 bytes. */
export const GROUP_MAX_BYTES = 128;

export class InvalidGroupError extends Error {
  override name = "InvalidGroupError";
}

/** Refuses what cannot name a group: not a string, empty, or longer than 128 UTF-8 bytes. */
export function assertGroup(group: unknown, what = "group"): asserts group is string {
  if (typeof group !== "string" || group === "")
    throw new InvalidGroupError(`${what} must be a non-empty string, got ${JSON.stringify(group)}`);
  const bytes = Buffer.byteLength(group);
  if (bytes > GROUP_MAX_BYTES)
    throw new InvalidGroupError(`${what} is ${bytes} bytes, limit ${GROUP_MAX_BYTES}`);
}

function checkConcurrency(concurrency: number | null): void {
  if (concurrency === null) return;
  if (!Number.isInteger(concurrency) || concurrency < 1 || concurrency > 1_000_000)
    throw new InvalidGroupError(`concurrency must be an integer 1..1000000, got ${concurrency}`);
}

async function groupControl(
  redis: RedisClient,
  queue: string,
  action: "pause" | "resume" | "limit" | "rate" | "onDead" | "weight",
  group: string,
  concurrency = "",
): Promise<number> {
  assertQueueName(queue);
  return gateway.groupControl(redis, { keys: new QueueKeys(queue), action, group, value: concurrency });
}

function checkRate(rate: RateLimit | null): void {
  if (rate === null) return;
  if (!Number.isInteger(rate.max) || rate.max < 1 || rate.max > 1_000_000)
    throw new RateLimitError(`group rate limit max must be an integer 1..1000000, got ${rate.max}`);
  if (!Number.isInteger(rate.perMs) || rate.perMs < 1 || rate.perMs > 24 * 3_600_000)
    throw new RateLimitError(`group rate limit window must be 1 ms..24 h in whole ms, got ${rate.perMs}`);
}

/** What a dead job does to its group: `continue` (the default) runs the next, `block` pauses the group. */
export type GroupOnDead = "block" | "continue";

/** Settings of a group (or, some of them, of every group) that setGroupLimit takes. */
export interface GroupLimit {
  concurrency?: number | null;
  rate?: RateLimit | null;
  /** Turns per round of the ring (1..1000; null = 1): one group's only. */
  weight?: number | null;
  onDead?: GroupOnDead | null;
}

function checkWeight(weight: number | null, group: string | undefined): void {
  if (weight === null) return;
  if (group === undefined) throw new InvalidGroupError("weight is set per group: name one");
  if (!Number.isInteger(weight) || weight < 1 || weight > 1000)
    throw new InvalidGroupError(`weight must be an integer 1..1000, got ${weight}`);
}

function checkOnDead(onDead: GroupOnDead | null): void {
  if (onDead !== null && onDead !== "block" && onDead !== "continue")
    throw new InvalidGroupError(`onDead must be block or continue, got ${JSON.stringify(onDead)}`);
}

/**
 * Set (or, with `null`, remove) the limits of one group, or with `group` undefined the default
 * for every group of the queue; a limit left out is unchanged. `concurrency`: at most that many
 * jobs of a group hold a lease at once, across every worker (a lease counts until it is settled
 * or swept); 1 makes the group a sequence (docs/protocol.md, "Sequences"). `rate`: at most `max`
 * job starts of a group in any window of `perMs` (the queue rate limit's semantics, per group).
 * `weight` (one group only): it takes up to that many jobs per turn of the round-robin.
 * `onDead`: `block` pauses the group when one of its jobs dies (until that job is retried from
 * the dead letters, or the group is resumed); `continue` (the default) runs the next job.
 */
export async function setGroupLimit(
  redis: RedisClient,
  queue: string,
  group: string | undefined,
  limit: GroupLimit,
): Promise<void> {
  if (group !== undefined) assertGroup(group);
  if (limit.concurrency !== undefined) checkConcurrency(limit.concurrency);
  if (limit.rate !== undefined) checkRate(limit.rate);
  if (limit.weight !== undefined) checkWeight(limit.weight, group);
  if (limit.onDead !== undefined) checkOnDead(limit.onDead);
  if (limit.concurrency !== undefined)
    await groupControl(
      redis,
      queue,
      "limit",
      group ?? "",
      limit.concurrency === null ? "" : String(limit.concurrency),
    );
  if (limit.rate !== undefined)
    await groupControl(
      redis,
      queue,
      "rate",
      group ?? "",
      limit.rate === null ? "" : `${limit.rate.max}/${limit.rate.perMs}`,
    );
  if (limit.weight !== undefined)
    await groupControl(redis, queue, "weight", group!, limit.weight === null ? "" : String(limit.weight));
  if (limit.onDead !== undefined) await groupControl(redis, queue, "onDead", group ?? "", limit.onDead ?? "");
}

/** No job of the group starts until it is resumed (running ones finish). */
export async function pauseGroup(redis: RedisClient, queue: string, group: string): Promise<void> {
  assertGroup(group);
  await groupControl(redis, queue, "pause", group);
}

export async function resumeGroup(redis: RedisClient, queue: string, group: string): Promise<void> {
  assertGroup(group);
  await groupControl(redis, queue, "resume", group);
}

export interface GroupState {
  group: string;
  waiting: number;
  running: number;
  /** The group's concurrency limit (its own, else the queue's default); null = none. */
  concurrency: number | null;
  /** Whether the limit is the group's own override. */
  override: boolean;
  /** The group's rate limit (its own, else the queue's default), e.g. "10/s"; null = none. */
  rate: string | null;
  paused: boolean;
  /** Turns per round of the ring (1 unless set). */
  weight: number;
  /** What a dead job does to the group (its own setting, else the default). */
  onDead: GroupOnDead;
  /** The dead job that paused the group (onDead "block"), or null. */
  blockedBy: string | null;
}

export interface QueueGroups {
  /** The default concurrency for every group (null = none). */
  defaultConcurrency: number | null;
  /** The default rate limit for every group, e.g. "10/s" (null = none). */
  defaultRate: string | null;
  /** What a dead job does to a group without its own setting. */
  defaultOnDead: GroupOnDead;
  /** Jobs waiting in all groups together. */
  waiting: number;
  /** Every group that has waiting or running jobs or a setting, most waiting first. */
  groups: GroupState[];
}

/**
 * The queue's groups: those with waiting or running jobs, and those with a setting. Reads three
 * hashes of the queue (O(G): for listings, not for scaling decisions).
 */
export async function listGroups(redis: RedisClient, queue: string): Promise<QueueGroups> {
  assertQueueName(queue);
  const k = new QueueKeys(queue);
  const [waiting, running, control] = await Promise.all([
    redis.hgetall(k.groupWaiting),
    redis.hgetall(k.groupRunning),
    redis.hgetall(k.groupControl),
  ]);
  const defaultConcurrency = control.concurrency ? Number(control.concurrency) : null;
  const names = new Set<string>();
  for (const g of Object.keys(waiting)) if (g !== "") names.add(g);
  for (const g of Object.keys(running)) names.add(g);
  for (const field of Object.keys(control)) {
    const m = /^(?:concurrency|paused|rate|weight|onDead):(.+)$/s.exec(field);
    if (m) names.add(m[1]!);
  }
  const groups = [...names].map((group): GroupState => {
    const own = control[`concurrency:${group}`];
    return {
      group,
      waiting: Math.max(0, Number(waiting[group] ?? 0)),
      running: Math.max(0, Number(running[group] ?? 0)),
      concurrency: own ? Number(own) : defaultConcurrency,
      override: own !== undefined,
      rate: rateText(control[`rate:${group}`] ?? control.rate),
      paused: control[`paused:${group}`] === "1",
      weight: Number(control[`weight:${group}`] ?? 1),
      onDead: onDeadOf(control[`onDead:${group}`] ?? control.onDead),
      blockedBy: control[`blockedBy:${group}`] ?? null,
    };
  });
  groups.sort((a, b) => b.waiting - a.waiting || b.running - a.running || (a.group < b.group ? -1 : 1));
  return {
    defaultConcurrency,
    defaultRate: rateText(control.rate),
    defaultOnDead: onDeadOf(control.onDead),
    waiting: Math.max(0, Number(waiting[""] ?? 0)),
    groups,
  };
}

function onDeadOf(stored: string | undefined): GroupOnDead {
  return stored === "block" ? "block" : "continue";
}

/** A stored `<max>/<windowMs>` as the CLI writes it ("10/s"). */
function rateText(stored: string | undefined): string | null {
  const m = stored ? /^(\d+)\/(\d+)$/.exec(stored) : null;
  return m ? formatRateLimit({ max: Number(m[1]), perMs: Number(m[2]) }) : null;
}

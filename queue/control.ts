// Queue control: cancel a job, pause/resume a queue, a global rate limit per queue. Pause and
// rate limit are enforced inside the claim script (queue/scripts/includes/control.lua); they
// live in the pipeline's meta hash so a claim reads them with a read it makes anyway. The pause
// is `paused:<queue>` at layout 1 and `hold:<queue>` from layout 2 on, where `paused:<queue>` is
// the fence that keeps the release before layouts off the queue (docs/protocol.md).
import { assertJobId, DOORBELL_CHANNEL, PIPELINES_KEY, PipelineKeys, QueueKeys } from "./keys.ts";
import * as gateway from "./gateway.ts";
import type { RedisClient } from "./scripts.ts";

/** How long a cancelled job's record stays readable in Redis (PostgreSQL records keep it for good). */
export const CANCELLED_RETENTION_SECONDS = 24 * 3600;

export class RateLimitError extends Error {
  override name = "RateLimitError";
}

/** At most `max` job starts in any window of `perMs` milliseconds, across every worker of the queue. */
export interface RateLimit {
  max: number;
  perMs: number;
}

const PER: Record<string, number> = { s: 1000, m: 60_000, h: 3_600_000 };
const MAX_RATE = 1_000_000;

/** "20/s", "100/m", "5/h" → a RateLimit; anything else is a RateLimitError naming the problem. */
export function parseRateLimit(text: string): RateLimit {
  const m = /^\s*(\d+)\s*\/\s*(s|m|h)\s*$/.exec(text);
  if (!m)
    throw new RateLimitError(
      `invalid rate limit ${JSON.stringify(text)}: expected <N>/<s|m|h>, e.g. 20/s, 100/m, 5/h`,
    );
  const max = Number(m[1]);
  if (max < 1 || max > MAX_RATE)
    throw new RateLimitError(`invalid rate limit ${JSON.stringify(text)}: N must be 1..${MAX_RATE}`);
  return { max, perMs: PER[m[2]!]! };
}

/** A RateLimit as the CLI writes it ("20/s"); other windows in ms ("20/250ms"). */
export function formatRateLimit(limit: RateLimit): string {
  const unit = Object.entries(PER).find(([, ms]) => ms === limit.perMs)?.[0];
  return `${limit.max}/${unit ?? `${limit.perMs}ms`}`;
}

function checkRateLimit(limit: RateLimit): void {
  if (!Number.isInteger(limit.max) || limit.max < 1 || limit.max > MAX_RATE)
    throw new RateLimitError(`rate limit max must be an integer 1..${MAX_RATE}, got ${limit.max}`);
  if (!Number.isInteger(limit.perMs) || limit.perMs < 1 || limit.perMs > 24 * 3_600_000)
    throw new RateLimitError(`rate limit window must be 1 ms..24 h in whole ms, got ${limit.perMs}`);
}

/** The meta-hash fields of one queue's control (see control.lua). */
export function controlFields(queue: string) {
  return {
    paused: `paused:${queue}`,
    hold: `hold:${queue}`,
    rate: `rate:${queue}`,
    rateLog: `rlog:${queue}`,
    layout: "layout",
  };
}

/**
 * The fields a pause sets and a resume removes under the layout in force: `hold:` from layout 2 on
 * (`paused:` is then the fence against the release before layouts); at layout 1 both, so a finalize
 * between reading the layout and the write leaves the pause in force.
 */
function pauseFields(queue: string, layout: number): string[] {
  const f = controlFields(queue);
  return layout >= 2 ? [f.hold] : [f.paused, f.hold];
}

/** The field whose '1' means "paused" under the layout in force. */
function pauseField(queue: string, layout: number): string {
  const f = controlFields(queue);
  return layout >= 2 ? f.hold : f.paused;
}

/** The layout in force as mirrored in `<P>meta` (absent: 1). */
function metaLayout(raw: string | null | undefined): number {
  const n = Number(raw);
  return Number.isInteger(n) && n >= 1 ? n : 1;
}

export interface QueueControlState {
  paused: boolean;
  rateLimit: RateLimit | null;
}

export type CancelOutcome = "cancelled" | "finished" | "notFound";

export interface CancelResult {
  id: string;
  /** `cancelled`: it was waiting, delayed, running or a fan-out parent; `finished`: nothing changed. */
  outcome: CancelOutcome;
  /** What the job was: ready, delayed, active, fannedOut, joined — or its final state when finished. */
  state: string;
  queue: string;
  /** Jobs cancelled: 1, or for a fan-out parent its unfinished children (and join). */
  jobsCancelled: number;
}

/** One queue control event, in the queue's event stream (not a job transition: not in the outbox). */
async function controlEvent(redis: RedisClient, queue: string, type: string, fields: string[] = []) {
  await redis.xadd(
    new QueueKeys(queue).events,
    "MAXLEN",
    "~",
    10_000,
    "*",
    "type",
    type,
    "id",
    "",
    "queue",
    queue,
    "at",
    String(Date.now()),
    ...fields,
  );
}

export async function pauseQueue(redis: RedisClient, queue: string): Promise<void> {
  const k = new QueueKeys(queue);
  const layout = metaLayout(await redis.hget(k.meta, controlFields(queue).layout));
  await redis.hset(k.meta, Object.fromEntries(pauseFields(queue, layout).map((f) => [f, "1"])));
  await controlEvent(redis, queue, "paused");
}

export async function resumeQueue(redis: RedisClient, queue: string): Promise<void> {
  const k = new QueueKeys(queue);
  const layout = metaLayout(await redis.hget(k.meta, controlFields(queue).layout));
  await redis
    .multi()
    .hdel(k.meta, ...pauseFields(queue, layout))
    .lpush(k.wake, "1")
    .del(k.doorbell)
    .exec();
  // A pool held at zero while paused has jobs waiting and no worker: ring for it (docs/protocol.md,
  // "Doorbell"). The resume has happened: a ring refused (an ACL user without the channel) only
  // leaves the operator to see it at its next poll.
  await redis.publish(DOORBELL_CHANNEL, k.doorbell).catch(() => 0);
  await controlEvent(redis, queue, "resumed");
}

/** Set (or with null, remove) the queue's rate limit; waiting workers are woken to re-check. */
export async function setRateLimit(
  redis: RedisClient,
  queue: string,
  limit: RateLimit | null,
): Promise<void> {
  const k = new QueueKeys(queue);
  const f = controlFields(queue);
  if (limit === null) {
    await redis.multi().hdel(k.meta, f.rate, f.rateLog).lpush(k.wake, "1").exec();
    await controlEvent(redis, queue, "rateLimit", ["rateLimit", "off"]);
    return;
  }
  checkRateLimit(limit);
  await redis.multi().hset(k.meta, f.rate, `${limit.max}/${limit.perMs}`).lpush(k.wake, "1").exec();
  await controlEvent(redis, queue, "rateLimit", ["rateLimit", formatRateLimit(limit)]);
}

export async function queueControl(redis: RedisClient, queue: string): Promise<QueueControlState> {
  const k = new QueueKeys(queue);
  const f = controlFields(queue);
  const names = [f.layout, f.rate, f.paused, f.hold];
  const read = new Map((await redis.hmget(k.meta, ...names)).map((v, i) => [names[i]!, v]));
  const paused = read.get(pauseField(queue, metaLayout(read.get(f.layout))));
  return parseQueueControl(paused ?? null, read.get(f.rate) ?? null);
}

/** A queue's control from its pause (as the layout in force keeps it) and rate-limit fields. */
export function parseQueueControl(paused: string | null, rate: string | null): QueueControlState {
  const m = /^(\d+)\/(\d+)$/.exec(rate ?? "");
  return {
    paused: paused === "1",
    rateLimit: m ? { max: Number(m[1]), perMs: Number(m[2]) } : null,
  };
}

/**
 * Cancel a job by id (see cancel_job.lua): searched in `queueOrPipeline`'s pipeline, else in
 * every known pipeline.
 */
export async function cancelJob(
  redis: RedisClient,
  id: string,
  opts: { queueOrPipeline?: string; retentionSeconds?: number } = {},
): Promise<CancelResult> {
  assertJobId(id);
  const pipelines = opts.queueOrPipeline
    ? [opts.queueOrPipeline.split("/")[0]!]
    : await redis.smembers(PIPELINES_KEY);
  for (const pipeline of pipelines) {
    const p = new PipelineKeys(pipeline);
    const r = await gateway.cancelJob<CancelOutcome>(redis, {
      pipeline: p,
      id,
      now: Date.now(),
      retentionSeconds: opts.retentionSeconds ?? CANCELLED_RETENTION_SECONDS,
    });
    if (r.outcome !== "notFound") return { id, ...r };
  }
  return { id, outcome: "notFound", state: "", queue: "", jobsCancelled: 0 };
}

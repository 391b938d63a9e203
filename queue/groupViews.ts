// The dashboard's views of a queue's groups (docs/protocol.md, "Groups"), bounded for queues with
// 100,000 groups: the top groups by waiting come from an incremental HSCAN of `<Q>gwaiting` (many
// short commands, never one long one; the API caches the answer for a few seconds), then only the
// top groups' running count, limits and oldest waiting job are read. A group's jobs: its waiting
// jobs from its own line and sorted set, its running ones from the queue's in-flight set (bounded).
import { assertGroup, type GroupState } from "./groups.ts";
import { assertQueueName, QueueKeys } from "./keys.ts";
import { formatRateLimit } from "./control.ts";
import type { RedisClient } from "./scripts.ts";

export interface GroupRow extends GroupState {
  /** When the job at the head of the group's line (the next to run) was enqueued; null when none. */
  oldestCreatedAt: number | null;
}

export interface TopGroups {
  defaultConcurrency: number | null;
  defaultRate: string | null;
  /** Jobs waiting in all groups together. */
  waiting: number;
  /** Groups with waiting jobs. */
  groupsWaiting: number;
  groups: GroupRow[];
}

const SCAN_COUNT = 1000;
/** A search by prefix stops after this many matches. */
const SEARCH_MATCHES = 200;

function rateText(stored: string | null | undefined): string | null {
  const m = stored ? /^(\d+)\/(\d+)$/.exec(stored) : null;
  return m ? formatRateLimit({ max: Number(m[1]), perMs: Number(m[2]) }) : null;
}

/**
 * The `top` groups by waiting jobs (ties: by name), or with `search` the groups whose name starts
 * with it (an exact name first; at most 200 matches looked at). Reads `<Q>gwaiting` by HSCAN.
 */
export async function topGroups(
  redis: RedisClient,
  queue: string,
  opts: { top: number; search?: string },
): Promise<TopGroups> {
  assertQueueName(queue);
  const k = new QueueKeys(queue);
  const top = Math.max(1, Math.min(200, Math.floor(opts.top)));
  const [defaults, total, count] = await Promise.all([
    redis.hmget(k.groupControl, "concurrency", "rate", "onDead"),
    redis.hget(k.groupWaiting, ""),
    redis.hlen(k.groupWaiting),
  ]);
  let best: [string, number][] = [];
  if (opts.search) {
    assertGroup(opts.search, "search");
    const exact = await redis.hget(k.groupWaiting, opts.search);
    const seen = new Map<string, number>();
    seen.set(opts.search, Number(exact ?? 0));
    // (MATCH takes a glob: the search's own glob characters are escaped)
    const pattern = `${opts.search.replace(/[*?[\]\\]/g, (c) => `\\${c}`)}*`;
    let cursor = "0";
    do {
      const [next, flat] = await redis.hscan(k.groupWaiting, cursor, "MATCH", pattern, "COUNT", SCAN_COUNT);
      cursor = next;
      for (let i = 0; i < flat.length; i += 2) if (flat[i] !== "") seen.set(flat[i]!, Number(flat[i + 1]));
    } while (cursor !== "0" && seen.size < SEARCH_MATCHES);
    best = [...seen].sort((a, b) => (a[0] === opts.search ? -1 : b[0] === opts.search ? 1 : b[1] - a[1]));
    best = best.slice(0, top);
  } else {
    // A bounded top-N kept while scanning: sorted, trimmed when it doubles.
    let cursor = "0";
    do {
      const [next, flat] = await redis.hscan(k.groupWaiting, cursor, "COUNT", SCAN_COUNT);
      cursor = next;
      for (let i = 0; i < flat.length; i += 2) if (flat[i] !== "") best.push([flat[i]!, Number(flat[i + 1])]);
      if (best.length > 2 * top) best = order(best).slice(0, top);
    } while (cursor !== "0");
    best = order(best).slice(0, top);
  }
  const names = best.map(([g]) => g);
  const rows = names.length ? await groupRows(redis, k, names, best) : [];
  return {
    defaultConcurrency: defaults[0] ? Number(defaults[0]) : null,
    defaultRate: rateText(defaults[1]),
    waiting: Math.max(0, Number(total ?? 0)),
    groupsWaiting: Math.max(0, count - (total === null ? 0 : 1)),
    groups: rows,
  };
}

function order(list: [string, number][]): [string, number][] {
  return list.sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1));
}

/** Running, limits, pause and the oldest waiting job of the named groups: one pipeline. */
async function groupRows(
  redis: RedisClient,
  k: QueueKeys,
  names: string[],
  waiting: [string, number][],
): Promise<GroupRow[]> {
  const F = 6;
  const fields = names.flatMap((g) => [
    `concurrency:${g}`,
    `rate:${g}`,
    `paused:${g}`,
    `weight:${g}`,
    `onDead:${g}`,
    `blockedBy:${g}`,
  ]);
  const [running, control, defaults] = await Promise.all([
    redis.hmget(k.groupRunning, ...names),
    redis.hmget(k.groupControl, ...fields),
    redis.hmget(k.groupControl, "concurrency", "rate", "onDead"),
  ]);
  // The head of each group: its first prioritised job, else the first of its line.
  const heads = await Promise.all(
    names.map(async (g) => {
      const p = await redis.zrange(k.groupReady(g), 0, 0);
      return p[0] ?? (await redis.lindex(k.groupLine(g), 0));
    }),
  );
  const created = await Promise.all(
    heads.map((id) => (id ? redis.hget(k.job(id), "createdAt") : Promise.resolve(null))),
  );
  return names.map((group, i) => {
    const own = control[F * i];
    return {
      group,
      waiting: Math.max(0, waiting[i]![1]),
      running: Math.max(0, Number(running[i] ?? 0)),
      concurrency: own ? Number(own) : defaults[0] ? Number(defaults[0]) : null,
      override: own !== null && own !== undefined,
      rate: rateText(control[F * i + 1] ?? defaults[1]),
      paused: control[F * i + 2] === "1",
      weight: Number(control[F * i + 3] ?? 1),
      onDead: (control[F * i + 4] ?? defaults[2]) === "block" ? "block" : "continue",
      blockedBy: control[F * i + 5] ?? null,
      oldestCreatedAt: created[i] ? Number(created[i]) : null,
    };
  });
}

export interface GroupJob {
  id: string;
  state: "ready" | "active";
  createdAt: number | null;
  priority: number;
}

export interface GroupJobs {
  group: string;
  waiting: number;
  running: number;
  /** The group's next waiting jobs in the order they will run (prioritised first), then its running ones. */
  jobs: GroupJob[];
  /** Running jobs are found in the queue's in-flight set: false when it held more than could be looked at. */
  runningComplete: boolean;
}

/** In-flight jobs looked at for a group's running ones. */
const INFLIGHT_SCAN = 5000;

/** One group's next `limit` waiting jobs and its running ones. */
export async function groupJobs(
  redis: RedisClient,
  queue: string,
  group: string,
  limit = 50,
): Promise<GroupJobs> {
  assertQueueName(queue);
  assertGroup(group);
  const k = new QueueKeys(queue);
  const n = Math.max(1, Math.min(200, Math.floor(limit)));
  const [waiting, running, prioritised, inflight] = await Promise.all([
    redis.hget(k.groupWaiting, group),
    redis.hget(k.groupRunning, group),
    redis.zrange(k.groupReady(group), 0, n - 1),
    redis.zrange(k.inflight, 0, INFLIGHT_SCAN - 1),
  ]);
  // (the line may hold stale entries — cancelled or deleted jobs: skipped by their record's state)
  const line = prioritised.length < n ? await redis.lrange(k.groupLine(group), 0, 2 * n - 1) : [];
  const ids = [...new Set([...prioritised, ...line])];
  const read = async (id: string) => {
    const [state, createdAt, priority, g] = await redis.hmget(
      k.job(id),
      "state",
      "createdAt",
      "priority",
      "group",
    );
    return { id, state, createdAt, priority, g };
  };
  const waitingJobs = (await Promise.all(ids.map(read)))
    .filter((j) => j.state === "ready" && j.g === group)
    .slice(0, n);
  const runningJobs = (await Promise.all(inflight.map(read))).filter((j) => j.g === group);
  const job = (j: Awaited<ReturnType<typeof read>>, state: GroupJob["state"]): GroupJob => ({
    id: j.id,
    state,
    createdAt: j.createdAt ? Number(j.createdAt) : null,
    priority: Number(j.priority ?? 0),
  });
  return {
    group,
    waiting: Math.max(0, Number(waiting ?? 0)),
    running: Math.max(0, Number(running ?? 0)),
    jobs: [...waitingJobs.map((j) => job(j, "ready")), ...runningJobs.map((j) => job(j, "active"))],
    runningComplete: inflight.length < INFLIGHT_SCAN,
  };
}

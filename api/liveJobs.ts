// Pages of the jobs that live in Redis sets (ready, delayed, in-flight, dead), read with a
// score cursor so a page costs O(log n + page) whatever the set's size — never a whole set;
// ready continues into the line of priority-0 jobs by position (O(position + page)), then into
// the grouped waiting jobs: group by group in name order (each group's prioritised jobs, then its
// line), by position within the group. Finding the next groups reads the group names (O(G), as
// listGroups) once per page that reaches them.
// Order: ready = next to run first (jobs without a group run before every group; groups take
// turns, docs/protocol.md "Groups"); delayed = soonest due; active = lease deadline; dead = newest.
import { QueueKeys, type RedisClient } from "../queue/index.ts";
import { decodeCursor, encodeCursor } from "./cursor.ts";
import { progressWhile } from "../records/index.ts";
import type { Page } from "./records.ts";

export interface LiveJob {
  id: string;
  queue: string;
  state: string;
  attempts: number;
  maxAttempts: number | null;
  createdAt: string | null;
  startedAt: string | null;
  progress: number | null;
  deadReason: string | null;
  /** The job's group (docs/protocol.md, "Groups"), or null. */
  group: string | null;
  /** The set's score: due time, lease deadline or dead-letter time (ms), or the ready order. */
  score: number;
}

const SETS = { ready: "ready", delayed: "delayed", active: "inflight", dead: "dead" } as const;
export const LIVE_STATES = Object.keys(SETS) as (keyof typeof SETS)[];
const TIE_SLACK = 50;
/**
 * A line entry's place (docs/protocol.md, "Ready jobs"): after every sorted-set score
 * ((1000 − priority) × 2^42 + seq), by its position from the line's head. Positions move as
 * workers claim, so a page read while the line moves may repeat or skip a few jobs.
 */
const LINE_BASE = 1001 * 2 ** 42;
/**
 * A grouped job's place: after the whole line, by its position within its group (the group's
 * sorted set by rank, then its line). Its cursor is (GROUP_BASE + position, group).
 */
const GROUP_BASE = 1002 * 2 ** 42;

/** (score, id) of a page's last entry; in the groups, (GROUP_BASE + position, group). */
const isLiveCursor = (v: unknown[]): v is [number, string] =>
  typeof v[0] === "number" && Number.isFinite(v[0]) && typeof v[1] === "string";

/** A page's entry: id, score, and for a grouped job its group and position within it. */
type Entry = [id: string, score: number, group?: string, position?: number];

/**
 * The groups with waiting jobs in name order from `from` on (inclusive), at least `want` of them
 * when there are: `<Q>gnames` by ZRANGEBYLEX, O(log G + want). Groups that had waiting jobs
 * before that index existed are missing from it until they go idle: then (fewer names indexed
 * than `<Q>gwaiting` holds) every name is read, O(G).
 */
async function groupNames(
  redis: RedisClient,
  k: QueueKeys,
  from: string | null,
  want: number,
): Promise<string[]> {
  const [indexed, fields] = await Promise.all([redis.zcard(k.groupNames), redis.hlen(k.groupWaiting)]);
  // (gwaiting holds every waiting group and the total, field '')
  if (indexed >= fields - 1)
    return redis.zrangebylex(k.groupNames, from === null ? "-" : `[${from}`, "+", "LIMIT", 0, want);
  const all = (await redis.hkeys(k.groupWaiting)).filter((g) => g !== "").sort();
  return from === null ? all : all.filter((g) => g >= from);
}

/**
 * Up to `want` grouped waiting jobs from `from` (a group and a position within it) onwards:
 * groups in name order (those with waiting jobs), each group's sorted set by rank, then its
 * line. Stale line entries are read too (the caller drops them).
 */
async function groupedEntries(
  redis: RedisClient,
  k: QueueKeys,
  from: { group: string; position: number } | null,
  want: number,
): Promise<Entry[]> {
  // (every group listed has a waiting job: `want` groups fill a page)
  const groups = await groupNames(redis, k, from?.group ?? null, want);
  const out: Entry[] = [];
  for (const group of groups) {
    if (out.length >= want) break;
    let position = from && group === from.group ? from.position : 0;
    const queued = await redis.zrange(k.groupReady(group), position, position + want - out.length - 1);
    for (const id of queued) out.push([id, GROUP_BASE + position, group, position++]);
    if (out.length >= want) break;
    const inSet = await redis.zcard(k.groupReady(group));
    const lineFrom = position - inSet;
    const line = await redis.lrange(k.groupLine(group), lineFrom, lineFrom + want - out.length - 1);
    for (const id of line) out.push([id, GROUP_BASE + position, group, position++]);
  }
  return out;
}

const iso = (ms: string | null) => (ms && Number(ms) > 0 ? new Date(Number(ms)).toISOString() : null);

export async function liveJobs(
  redis: RedisClient,
  queue: string,
  state: keyof typeof SETS,
  limit: number,
  cursor?: string,
): Promise<Page<LiveJob>> {
  const k = new QueueKeys(queue);
  const key = k[SETS[state]];
  const desc = state === "dead";
  const after = cursor ? decodeCursor(cursor, isLiveCursor) : null;
  const want = limit + 1 + TIE_SLACK;
  const entries: Entry[] = [];
  const inGroups = state === "ready" && after !== null && after[0] >= GROUP_BASE;
  if (!(state === "ready" && after && after[0] >= LINE_BASE)) {
    const bound = after ? String(after[0]) : desc ? "+inf" : "-inf"; // inclusive: ties are skipped below
    const raw = desc
      ? await redis.zrevrangebyscore(key, bound, "-inf", "WITHSCORES", "LIMIT", 0, want)
      : await redis.zrangebyscore(key, bound, "+inf", "WITHSCORES", "LIMIT", 0, want);
    for (let i = 0; i < raw.length; i += 2) {
      const id = raw[i]!;
      const score = Number(raw[i + 1]);
      // Ties on the cursor's score: skip what the previous page already showed.
      if (after && score === after[0] && (desc ? id >= after[1] : id <= after[1])) continue;
      entries.push([id, score]);
    }
  }
  // Ready jobs of priority 0 wait in the line after every prioritised one: positions from its head.
  const lineFrom =
    state === "ready" && !inGroups && entries.length <= limit
      ? after && after[0] >= LINE_BASE
        ? after[0] - LINE_BASE + 1
        : 0
      : -1;
  const line = lineFrom >= 0 ? await redis.lrange(k.line, lineFrom, lineFrom + limit - entries.length) : [];
  line.forEach((id, i) => entries.push([id, LINE_BASE + lineFrom + i]));
  // Then the grouped jobs (one more than the page, to know whether there is a next one).
  if (state === "ready" && entries.length <= limit) {
    const from = inGroups ? { group: after[1], position: after[0] - GROUP_BASE + 1 } : null;
    entries.push(...(await groupedEntries(redis, k, from, limit + 1 - entries.length)));
  }
  const shown = entries.slice(0, limit);
  const more = entries.length > limit;
  const pipe = redis.pipeline();
  for (const [id] of shown)
    pipe.hmget(
      k.job(id),
      "state",
      "attemptsMade",
      "attempts",
      "createdAt",
      "startedAt",
      "progress",
      "deadReason",
      "group",
    );
  const replies = shown.length > 0 ? ((await pipe.exec()) ?? []) : [];
  const items: LiveJob[] = [];
  shown.forEach(([id, score, group], i) => {
    const [err, v] = replies[i] ?? [null, []];
    // A job key that is not a hash is shown as such (as QueueAdmin.job does); any other error fails the page.
    if (err && !/WRONGTYPE/.test(err.message)) throw err;
    const f = (err ? [] : (v as (string | null)[])) as (string | null)[];
    // A stale line entry (its job was cancelled or deleted while waiting) is not a ready job.
    if (!err && (score >= LINE_BASE || group !== undefined) && f[0] !== "ready") return;
    const jobState = err ? "malformed" : (f[0] ?? state);
    items.push({
      id,
      queue,
      state: jobState,
      attempts: Number(f[1] ?? 0),
      maxAttempts: f[2] ? Number(f[2]) : null,
      createdAt: iso(f[3] ?? null),
      startedAt: iso(f[4] ?? null),
      progress: progressWhile(jobState, f[5] ? Number(f[5]) : null),
      deadReason: f[6] || null,
      group: f[7] || null,
      score,
    });
  });
  const last = shown.at(-1);
  return {
    items,
    next: more && last ? encodeCursor([last[1], last[2] ?? last[0]]) : null,
  };
}

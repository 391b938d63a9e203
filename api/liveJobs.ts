// Pages of the jobs that live in Redis sets (ready, delayed, in-flight, dead), read with a
// score cursor so a page costs O(log n + page) whatever the set's size — never a whole set;
// ready continues into the line of priority-0 jobs by position (O(position + page)).
// Order: ready = next to run first; delayed = soonest due; active = lease deadline; dead = newest.
import { QueueKeys, type RedisClient } from "../queue/index.ts";
import { decodeCursor, encodeCursor } from "./cursor.ts";
import { progressWhile, type Page } from "./records.ts";

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

/** (score, id) of a page's last entry. */
const isLiveCursor = (v: unknown[]): v is [number, string] =>
  typeof v[0] === "number" && Number.isFinite(v[0]) && typeof v[1] === "string";

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
  const entries: [string, number][] = [];
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
    state === "ready" && entries.length <= limit
      ? after && after[0] >= LINE_BASE
        ? after[0] - LINE_BASE + 1
        : 0
      : -1;
  const line = lineFrom >= 0 ? await redis.lrange(k.line, lineFrom, lineFrom + limit - entries.length) : [];
  line.forEach((id, i) => entries.push([id, LINE_BASE + lineFrom + i]));
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
    );
  const replies = shown.length > 0 ? ((await pipe.exec()) ?? []) : [];
  const items: LiveJob[] = [];
  shown.forEach(([id, score], i) => {
    const [err, v] = replies[i] ?? [null, []];
    // A job key that is not a hash is shown as such (as QueueAdmin.job does); any other error fails the page.
    if (err && !/WRONGTYPE/.test(err.message)) throw err;
    const f = (err ? [] : (v as (string | null)[])) as (string | null)[];
    // A stale line entry (its job was cancelled or deleted while waiting) is not a ready job.
    if (!err && score >= LINE_BASE && f[0] !== "ready") return;
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
      score,
    });
  });
  const last = shown.at(-1);
  return {
    items,
    next: more && last ? encodeCursor([last[1], last[0]]) : null,
  };
}

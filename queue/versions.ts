// Outcome counters per worker template version (`<queue>versions`, written by the settle, fail and
// release scripts: queue/scripts/includes/versions.lua): what a canary rollout is judged on.
import { QueueKeys } from "./keys.ts";
import type { RedisClient } from "./scripts.ts";

/** Run time buckets: 0 below 1 ms, b ≥ 1 for [2^(b-1), 2^b) ms, up to this one (includes/versions.lua). */
export const VERSION_TOP_BUCKET = 24;

/** One version's counters: monotonic, so a period's are the difference of two reads. */
export interface VersionCounters {
  /** Completed attempts (the sum of `buckets`). */
  completed: number;
  /** Attempts the handler failed (exception, timeout, invalid result), retried or not. */
  failed: number;
  /** Of those, the ones that dead-lettered their job. */
  dead: number;
  /** Jobs handed back for what is not the handler's doing (a dependency, a rate limit, a drain). */
  other: number;
  /** Completed attempts by run time bucket (index b as above). */
  buckets: number[];
}

export function emptyCounters(): VersionCounters {
  return { completed: 0, failed: 0, dead: 0, other: 0, buckets: new Array(VERSION_TOP_BUCKET + 1).fill(0) };
}

/** The counters of every version from the hash's fields (`<version>:<counter>` → count). */
export function parseVersionCounters(fields: Record<string, string>): Map<string, VersionCounters> {
  const out = new Map<string, VersionCounters>();
  for (const [field, value] of Object.entries(fields)) {
    const at = field.lastIndexOf(":");
    if (at <= 0) continue;
    const version = field.slice(0, at);
    const counter = field.slice(at + 1);
    const n = Number(value) || 0;
    let c = out.get(version);
    if (!c) out.set(version, (c = emptyCounters()));
    if (counter === "f") c.failed += n;
    else if (counter === "d") c.dead += n;
    else if (counter === "o") c.other += n;
    else if (/^h\d+$/.test(counter)) {
      const b = Math.min(VERSION_TOP_BUCKET, Number(counter.slice(1)));
      c.buckets[b]! += n;
      c.completed += n;
    }
  }
  return out;
}

/** Every version's counters on a queue. */
export async function readVersionCounters(
  redis: RedisClient,
  queue: string,
): Promise<Map<string, VersionCounters>> {
  return parseVersionCounters(await redis.hgetall(new QueueKeys(queue).versions));
}

/** `now` minus `base`, counter by counter (a counter reset — the hash deleted — reads as now). */
export function countersSince(now: VersionCounters, base: VersionCounters | undefined): VersionCounters {
  if (!base || now.completed < base.completed || now.failed < base.failed) return now;
  return {
    completed: now.completed - base.completed,
    failed: now.failed - base.failed,
    dead: now.dead - base.dead,
    other: now.other - base.other,
    buckets: now.buckets.map((n, i) => Math.max(0, n - (base.buckets[i] ?? 0))),
  };
}

/** The counters as flat fields (status.rollout.baseline) and back. */
export function countersToFields(c: VersionCounters): Record<string, number> {
  const f: Record<string, number> = { f: c.failed, d: c.dead, o: c.other };
  c.buckets.forEach((n, b) => {
    if (n > 0) f[`h${b}`] = n;
  });
  return f;
}

export function countersFromFields(f: Record<string, number> | undefined): VersionCounters | undefined {
  if (!f) return undefined;
  const fields: Record<string, string> = {};
  for (const [k, v] of Object.entries(f)) fields[`v:${k}`] = String(v);
  return parseVersionCounters(fields).get("v") ?? emptyCounters();
}

/**
 * The q-quantile of the completed attempts' run time (ms), interpolated inside its bucket
 * (undefined: none completed). Bucket b ≥ 1 spans [2^(b-1), 2^b) ms.
 */
export function runTimeQuantile(c: VersionCounters, q: number): number | undefined {
  if (c.completed === 0) return undefined;
  const rank = q * c.completed;
  let below = 0;
  for (let b = 0; b < c.buckets.length; b++) {
    const n = c.buckets[b]!;
    if (n === 0) continue;
    if (below + n >= rank) {
      const lo = b === 0 ? 0 : 2 ** (b - 1);
      const hi = b === 0 ? 1 : 2 ** b;
      return lo + ((hi - lo) * (rank - below)) / n;
    }
    below += n;
  }
  return 2 ** VERSION_TOP_BUCKET;
}

// Both versions' outcome counters over a canary rollout, for the chart on the dashboard's pool
// page. Every API replica samples, on an interval, the `<queue>versions` counters of each pool
// whose rollout is in progress into one hash per queue, `<Q>rollouthist`, under its time bucket
// (replicas sampling the same bucket overwrite one field). A sample holds the counters as they
// stand (monotonic), so the failure rate between two samples is what each version ended between
// them. Fields older than an hour or of another canary are deleted as new ones are written; the
// key expires two hours after the last write. docs/protocol.md, docs/rollouts.md.
import type { Logger } from "pino";
import { PeriodicSampler } from "./periodicSampler.ts";
import { QueueKeys, readVersionCounters, type RedisClient } from "../queue/index.ts";

export const ROLLOUT_HISTORY_MS = 3_600_000;
const EXPIRE_MS = 2 * ROLLOUT_HISTORY_MS;

/** One version's counters at a sample: attempts ended (completed + handler failures) and failures. */
export interface VersionTotals {
  attempts: number;
  failed: number;
}

export interface RolloutSample {
  at: number;
  canaryHash: string;
  step: number;
  weight: number;
  stable: VersionTotals;
  canary: VersionTotals;
}

/** Where the pools come from (api/context.ts's PoolSource: its list is all the sampler reads). */
interface PoolList {
  list(allowed: (queue: string) => boolean): Promise<unknown[]>;
}

/** What the sampler needs of a pool (the Pools list's summary). */
interface PoolRow {
  queue: string;
  rollout: {
    phase: string;
    step: number;
    weight: number;
    stableHash: string | null;
    canaryHash: string | null;
  } | null;
}

export class RolloutHistory extends PeriodicSampler {
  private readonly pools: PoolList;

  constructor(
    redis: RedisClient,
    pools: PoolList,
    intervalMs: number,
    log?: Logger,
    onError?: (err: unknown) => void,
  ) {
    super(redis, intervalMs, log, onError);
    this.pools = pools;
  }

  /** Sample every pool whose rollout is in progress (one HGETALL, HKEYS, HSET per pool). */
  async sample(now = Date.now()): Promise<void> {
    const bucket = now - (now % this.intervalMs);
    const rows = (await this.pools.list(() => true)) as PoolRow[];
    for (const p of rows) {
      const r = p.rollout;
      if (r?.phase !== "Progressing" || !r.stableHash || !r.canaryHash) continue;
      const all = await readVersionCounters(this.redis, p.queue);
      const totals = (hash: string): VersionTotals => {
        const c = all.get(hash);
        return { attempts: (c?.completed ?? 0) + (c?.failed ?? 0), failed: c?.failed ?? 0 };
      };
      const sample: RolloutSample = {
        at: bucket,
        canaryHash: r.canaryHash,
        step: r.step,
        weight: r.weight,
        stable: totals(r.stableHash),
        canary: totals(r.canaryHash),
      };
      const key = new QueueKeys(p.queue).rolloutHistory;
      const old = Object.entries(await this.redis.hgetall(key))
        .filter(([at, v]) => Number(at) < now - ROLLOUT_HISTORY_MS || !v.includes(`"${r.canaryHash}"`))
        .map(([at]) => at);
      const m = this.redis.multi().hset(key, String(bucket), JSON.stringify(sample));
      if (old.length > 0) m.hdel(key, ...old);
      await m.pexpire(key, EXPIRE_MS).exec();
    }
    this.log?.debug({ bucket }, "rollouts sampled");
  }

  /** A rollout's samples of the last hour, oldest first. */
  async read(queue: string, canaryHash: string, now = Date.now()): Promise<RolloutSample[]> {
    const all = await this.redis.hgetall(new QueueKeys(queue).rolloutHistory);
    return Object.entries(all)
      .filter(([at]) => Number(at) >= now - ROLLOUT_HISTORY_MS)
      .sort(([a], [b]) => Number(a) - Number(b))
      .flatMap(([, v]) => {
        try {
          const s = JSON.parse(v) as RolloutSample;
          return s.canaryHash === canaryHash ? [s] : [];
        } catch {
          return [];
        }
      });
  }
}

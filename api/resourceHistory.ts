// The last hour of every resource's utilization, for the dashboard's Resources page. Every API
// replica samples the resources (listResources) on an interval and writes the sample into one
// hash per resource in Redis, `<P>reshist:<name>`, under its time bucket: replicas sampling
// the same bucket overwrite one field, so two replicas show one history, and it survives a
// restart. Fields older than an hour are deleted as new ones are written; the key expires two
// hours after the last write (a removed resource's history goes by itself). docs/protocol.md.
import { PeriodicSampler } from "./periodicSampler.ts";
import { listResources, PipelineKeys, type ResourceState } from "../queue/index.ts";

export const HISTORY_MS = 3_600_000;
const EXPIRE_MS = 2 * HISTORY_MS;

/** One sample: key id → unit → utilization (used / max), and the ids benched then. */
export interface ResourceSample {
  at: number;
  keys: Record<string, Record<string, number>>;
  benched: string[];
}

export function historyKey(pipeline: string, name: string): string {
  return new PipelineKeys(pipeline).resourceHistory(name);
}

/** The sample a resource's state makes at `bucket` (utilizations rounded to 0.1 %). */
export function sampleOf(r: ResourceState, bucket: number): ResourceSample {
  const keys: ResourceSample["keys"] = {};
  for (const k of r.keys)
    keys[k.id] = Object.fromEntries(k.limits.map((l) => [l.unit, Math.round(l.utilization * 1000) / 1000]));
  return { at: bucket, keys, benched: r.keys.filter((k) => k.benchedUntil !== null).map((k) => k.id) };
}

export class ResourceHistory extends PeriodicSampler {
  /** Sample every resource now into its history (one HSET, HKEYS and HDEL per resource). */
  async sample(now = Date.now(), resources?: ResourceState[]): Promise<void> {
    const bucket = now - (now % this.intervalMs);
    for (const r of resources ?? (await listResources(this.redis))) {
      const key = historyKey(r.pipeline, r.name);
      const old = (await this.redis.hkeys(key)).filter((f) => Number(f) < now - HISTORY_MS);
      const m = this.redis.multi().hset(key, String(bucket), JSON.stringify(sampleOf(r, bucket)));
      if (old.length > 0) m.hdel(key, ...old);
      await m.pexpire(key, EXPIRE_MS).exec();
    }
    this.log?.debug({ bucket }, "resource utilization sampled");
  }

  /** A resource's samples of the last hour, oldest first. */
  async read(pipeline: string, name: string, now = Date.now()): Promise<ResourceSample[]> {
    const all = await this.redis.hgetall(historyKey(pipeline, name));
    return Object.entries(all)
      .filter(([at]) => Number(at) >= now - HISTORY_MS)
      .sort(([a], [b]) => Number(a) - Number(b))
      .flatMap(([, v]) => {
        try {
          return [JSON.parse(v) as ResourceSample];
        } catch {
          return [];
        }
      });
  }
}

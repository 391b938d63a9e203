// The external metric the pools' HPAs read (conveyor-backlog): a pool's backlog, served only
// while its last good reading is fresh — a stale number would scale on a wrong value, so the
// metrics API answers 503 instead and the HPA holds its replica count.
import { withDefaults, type WorkerPool, type WorkerPoolSpec } from "../apis/v1alpha1/types.ts";
import type { MetricLookup } from "../metricsapi/server.ts";
import type { BacklogSample } from "../scaling/backlog.ts";

/** Backlog readings older than this are not acted on (and not served to the HPA). */
export function freshnessMs(spec: WorkerPoolSpec | undefined): number {
  return Math.max(3 * (spec?.scaling.pollSeconds ?? 5) * 1000, 15_000);
}

/** Whether a sample's last good reading is recent enough to act on. */
export function isFresh(
  sample: BacklogSample | undefined,
  spec: WorkerPoolSpec | undefined,
  now: number,
): boolean {
  return !!sample?.lastGood && now - sample.lastGood.at <= freshnessMs(spec);
}

/** The metric of `namespace/name`: its backlog if read recently, else why not. */
export function backlogMetric(
  namespace: string,
  name: string,
  pool: WorkerPool | undefined,
  sample: BacklogSample | undefined,
): MetricLookup {
  if (!pool) return { kind: "not-found", message: `no WorkerPool ${namespace}/${name}` };
  let spec: WorkerPoolSpec | undefined;
  try {
    spec = withDefaults(pool.spec);
  } catch {
    spec = undefined;
  }
  const good = sample?.lastGood;
  if (!good)
    return {
      kind: "unavailable",
      message: sample?.error
        ? `backlog of ${namespace}/${name} unavailable: ${sample.error}`
        : `backlog of ${namespace}/${name} not read yet`,
    };
  if (Date.now() - good.at > freshnessMs(spec))
    return {
      kind: "unavailable",
      message: `backlog of ${namespace}/${name} is stale: ${sample?.error ?? "no recent poll"}`,
    };
  return { kind: "ok", value: good.counts.backlog, at: good.at };
}

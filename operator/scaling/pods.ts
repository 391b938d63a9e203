// The pods' side of a scale-in: which pods run jobs (the workers' busy/idle reports), the
// pod-deletion-cost that makes a ReplicaSet delete the idle ones first, and the pods to cordon
// while a scale-in is held at the busy ones.
import type { WorkerPool } from "../apis/v1alpha1/types.ts";
import type { WorkerReport } from "../../queue/index.ts";
import { RESOURCES, resourcePath } from "../apis/coordinates.ts";
import { apiCode } from "../kube/client.ts";
import type { PoolScaler, PoolState, ReconcileContext } from "../controllers/context.ts";
import { DELETION_COST_ANNOTATION } from "../controllers/names.ts";

export const IDLE_COST = "-100";
export const BUSY_COST = "100";
/** A report older than this says nothing about the pod any more. */
export const REPORT_STALE_MS = 60_000;

/** Each pod's latest report, among those not stale. */
function latestReports(reports: WorkerReport[], now: number): Map<string, WorkerReport> {
  const byPod = new Map<string, WorkerReport>();
  for (const r of reports) {
    if (now - r.seen > REPORT_STALE_MS) continue;
    const prev = byPod.get(r.pod);
    if (!prev || prev.seen < r.seen) byPod.set(r.pod, r);
  }
  return byPod;
}

/**
 * The pod-deletion-cost each pod should carry, from the workers' busy/idle reports: idle pods
 * lowest (deleted first on scale-in), busy pods high. A pod without a recent report (starting,
 * or hung) is left as it is (undefined).
 */
export function deletionCosts(
  pods: string[],
  reports: WorkerReport[],
  now: number,
): Map<string, string | undefined> {
  const byPod = latestReports(reports, now);
  const out = new Map<string, string | undefined>();
  for (const pod of pods) {
    const r = byPod.get(pod);
    out.set(pod, r ? (r.busy > 0 ? BUSY_COST : IDLE_COST) : undefined);
  }
  return out;
}

/**
 * While a scale-in is held at the pods running jobs: the pods to cordon (they claim nothing new)
 * — every pod but `hold.wanted` of them. New jobs then go to the pods that stay, and the others
 * go idle and are removed, instead of a stream of new jobs spreading one per pod and holding
 * every pod as long as it lasts. The pods kept before stay kept (the new jobs went to them; the
 * reports' busy counts lag a heartbeat and must not move the choice); among the rest the busiest
 * are kept. Empty when no scale-in is held.
 */
export function podsToCordon(
  hold: PoolScaler["scaleInHold"],
  pods: readonly string[],
  reports: WorkerReport[],
  now: number,
  cordoned: readonly string[] = [],
): string[] {
  if (!hold?.message) return [];
  const busy = latestReports(reports, now);
  const was = new Set(cordoned);
  const keptBefore = (pod: string) => (was.size > 0 && !was.has(pod) ? 1 : 0);
  const ranked = [...pods].sort(
    (a, b) =>
      keptBefore(b) - keptBefore(a) ||
      (busy.get(b)?.busy ?? 0) - (busy.get(a)?.busy ?? 0) ||
      a.localeCompare(b),
  );
  return ranked.slice(Math.max(1, hold.wanted)).sort();
}

/** Pods among `pods` whose fresh report says they run jobs: what a scale-in must not go below. */
export function busyPods(pods: string[], reports: WorkerReport[], now: number): number {
  let n = 0;
  for (const cost of deletionCosts(pods, reports, now).values()) if (cost === BUSY_COST) n++;
  return n;
}

/**
 * Marks each pod with controller.kubernetes.io/pod-deletion-cost from the workers' reports, so
 * a ReplicaSet scaling in deletes idle pods first. Patches only pods whose cost changes.
 * `required`: fail when the reports cannot be read (the operator's own scale-in waits for them);
 * otherwise best effort.
 */
export async function updateDeletionCosts(
  ctx: ReconcileContext,
  key: string,
  pool: WorkerPool,
  state: PoolState,
  required: boolean,
  /** The reports when this reconcile already read them. */
  read?: WorkerReport[],
): Promise<number> {
  const pods = ctx.podsOf(pool);
  if (pods.length <= 1) return 0;
  let reports: WorkerReport[];
  try {
    reports = read ?? (await ctx.workerReports(key));
  } catch (err) {
    if (required) throw err;
    ctx.log.debug({ pool: key, err: String(err) }, "cannot read worker reports");
    return 0;
  }
  let patched = 0;
  const now = Date.now();
  const costs = deletionCosts(
    pods.map((p) => p.metadata.name ?? ""),
    reports,
    now,
  );
  for (const [podName, w] of state.costsWritten)
    if (now - w.at > 30_000 || !costs.has(podName)) state.costsWritten.delete(podName);
  for (const pod of pods) {
    const podName = pod.metadata.name ?? "";
    const want = costs.get(podName);
    if (want === undefined) continue;
    const have =
      state.costsWritten.get(podName)?.value ?? pod.metadata.annotations?.[DELETION_COST_ANNOTATION];
    if (have === want) continue;
    try {
      await ctx.client.mergePatch(
        resourcePath(RESOURCES.pods, { namespace: pool.metadata.namespace, name: podName }),
        {
          metadata: { annotations: { [DELETION_COST_ANNOTATION]: want } },
        },
      );
      state.costsWritten.set(podName, { value: want, at: now });
      ctx.metrics.deletionCostPatches.inc();
      patched++;
    } catch (err) {
      if (apiCode(err) === 404) continue; // the pod went away
      throw err;
    }
  }
  return patched;
}

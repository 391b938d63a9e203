// The pool's HorizontalPodAutoscaler (autoscaling/v2), in `hpa` mode: it scales the worker
// Deployment between max(1, minReplicas) and maxReplicas on the operator's external metric
// (total backlog; target AverageValue = targetBacklogPerReplica, so desired =
// ceil(backlog / target)). The HPA cannot scale from or to zero (HPAScaleToZero is alpha):
// the operator does 0↔1 itself and keeps the HPA while the Deployment is at zero — the HPA
// then reports ScalingActive=False ("scaling is disabled since the replica count of the
// target is zero") and resumes by itself once the operator has activated the pool.
import type { WorkerPool, WorkerPoolSpec } from "../apis/v1alpha1/types.ts";
import { RESOURCES, apiVersionOf, resourcePath } from "../apis/coordinates.ts";
import type { ReconcileContext } from "./context.ts";
import { configHash, isSubset } from "./diff.ts";
import {
  CONFIG_HASH_ANNOTATION,
  METRIC_NAME,
  METRIC_POOL_LABEL,
  isControlledBy,
  ownerReference,
  poolLabels,
} from "./names.ts";
import type { HPA } from "./objects.ts";
import { Reason, type Problem } from "./reasons.ts";

/**
 * Whether the pool should have an HPA at all. Not while its queue is paused: the operator then
 * scales it down to its running jobs and its minimum itself (queueControl.ts).
 */
export function wantsHPA(spec: WorkerPoolSpec, queuePaused = false): boolean {
  return spec.scaling.mode === "hpa" && !spec.scaling.paused && spec.replicas === undefined && !queuePaused;
}

/** `minReplicasFloor`: the pods running jobs while a scale-in is held for them (hpaMinReplicasFloor). */
export function desiredHPA(
  pool: WorkerPool,
  spec: WorkerPoolSpec,
  minReplicasFloor = 0,
  maxReplicas = spec.scaling.maxReplicas,
): HPA {
  const s = spec.scaling;
  const hpa: HPA = {
    apiVersion: apiVersionOf(RESOURCES.horizontalPodAutoscalers),
    kind: RESOURCES.horizontalPodAutoscalers.kind,
    metadata: {
      name: pool.metadata.name,
      namespace: pool.metadata.namespace,
      labels: poolLabels(pool),
      ownerReferences: [ownerReference(pool)],
    },
    spec: {
      scaleTargetRef: {
        apiVersion: apiVersionOf(RESOURCES.deployments),
        kind: RESOURCES.deployments.kind,
        name: pool.metadata.name,
      },
      minReplicas: Math.max(1, s.minReplicas, minReplicasFloor),
      maxReplicas,
      metrics: [
        {
          type: "External",
          external: {
            metric: {
              name: METRIC_NAME,
              selector: { matchLabels: { [METRIC_POOL_LABEL]: pool.metadata.name } },
            },
            target: { type: "AverageValue", averageValue: String(s.targetBacklogPerReplica) },
          },
        },
      ],
      ...(s.behavior ? { behavior: s.behavior } : {}),
    },
  };
  hpa.metadata.annotations = { [CONFIG_HASH_ANNOTATION]: configHash(hpa) };
  return hpa;
}

/**
 * The HPA concern: in `hpa` mode apply the desired HPA when it changed or drifted; otherwise
 * delete ours (a conflicting HPA of that name that is not ours is reported, never touched).
 */
export async function reconcileHPA(
  ctx: ReconcileContext,
  key: string,
  pool: WorkerPool,
  spec: WorkerPoolSpec,
  live: HPA | undefined,
  problems: Problem[],
  queuePaused = false,
  minReplicasFloor = 0,
  maxReplicas = spec.scaling.maxReplicas,
): Promise<HPA | undefined> {
  const path = resourcePath(RESOURCES.horizontalPodAutoscalers, {
    namespace: pool.metadata.namespace,
    name: pool.metadata.name,
  });
  if (!wantsHPA(spec, queuePaused)) {
    if (live && isControlledBy(live, pool)) {
      const uid = live.metadata.uid ?? "";
      const deletedAt = ctx.deletedHPAs.get(uid);
      if (deletedAt === undefined || Date.now() - deletedAt > 30_000) {
        ctx.log.info(
          {
            pool: key,
            mode: spec.scaling.mode,
            paused: spec.scaling.paused,
            pinned: spec.replicas !== undefined,
          },
          "deleting HorizontalPodAutoscaler (not used now)",
        );
        await ctx.client.delete(path, { preconditionsUid: uid || undefined });
        for (const [u, at] of ctx.deletedHPAs) if (Date.now() - at > 60_000) ctx.deletedHPAs.delete(u);
        ctx.deletedHPAs.set(uid, Date.now());
        ctx.hpaOverlay.delete(key);
      }
    }
    return undefined;
  }
  if (live && !isControlledBy(live, pool)) {
    problems.push({
      reason: Reason.HPAConflict,
      message: `HorizontalPodAutoscaler ${pool.metadata.name} exists and is not controlled by this WorkerPool`,
    });
    return live;
  }
  const desired = desiredHPA(pool, spec, minReplicasFloor, maxReplicas);
  const hash = desired.metadata.annotations![CONFIG_HASH_ANNOTATION];
  if (live && live.metadata.annotations?.[CONFIG_HASH_ANNOTATION] === hash && isSubset(desired, live))
    return live;
  ctx.log.info({ pool: key }, live ? "updating HorizontalPodAutoscaler" : "creating HorizontalPodAutoscaler");
  const applied = await ctx.client.apply<HPA>(path, desired);
  ctx.hpaOverlay.set(key, applied);
  return applied;
}

/**
 * The HPA's change of the replica count, `from` → `to`, as a decision for status (the operator
 * sees it at its next pass: "Why it scaled" lists it beside the operator's own). Its numbers:
 * the operator's backlog reading over the `from` replicas against the target — the HPA writes
 * its status after the scale, so the metric there may still be the sync before (a backlog of 1
 * "above target 100") — else that metric when it agrees; and the HPA's limit when one held it.
 */
export function hpaScaleDecision(
  hpa: HPA | undefined,
  spec: WorkerPoolSpec,
  from: number,
  to: number,
  backlog: number | undefined,
): { reason: typeof Reason.HPAScaleUp | typeof Reason.HPAScaleDown; message: string } {
  const target = spec.scaling.targetBacklogPerReplica;
  const up = to > from;
  const measured = quantity(hpa?.status?.currentMetrics?.[0]?.external?.current?.averageValue);
  const perReplica =
    backlog !== undefined && from > 0
      ? Math.round((backlog / from) * 100) / 100
      : measured !== undefined && measured > target === up
        ? measured
        : undefined;
  const limited = hpa?.status?.conditions?.find((c) => c.type === "ScalingLimited" && c.status === "True");
  return {
    reason: up ? Reason.HPAScaleUp : Reason.HPAScaleDown,
    message:
      `HPA: backlog/replica ${up ? "above" : "below"} target` +
      (perReplica !== undefined ? `: ${perReplica} ${up ? ">" : "<"} ${target}` : ` ${target}`) +
      ` → ${to} replica(s)` +
      (backlog !== undefined ? ` (backlog ${backlog})` : "") +
      (limited?.message ? `; ${limited.reason ?? "ScalingLimited"}: ${limited.message}` : ""),
  };
}

/** A Kubernetes quantity as the HPA writes a metric ("750", "125500m"); undefined when absent or another form. */
function quantity(q: string | undefined): number | undefined {
  const m = q === undefined ? null : /^(\d+(?:\.\d+)?)(m?)$/.exec(q);
  if (!m) return undefined;
  const v = Number(m[1]) / (m[2] === "m" ? 1000 : 1);
  return Math.round(v * 100) / 100;
}

// The scale write: a decision to the Deployment's scale subresource, with its record (status
// via the pool's state, an Event, a log line, a metric) and the HPA algorithm's rate memory.
import type { WorkerPool, WorkerPoolSpec } from "../apis/v1alpha1/types.ts";
import { rfc3339 } from "../../lib/time.ts";
import { RESOURCES, resourcePath } from "../apis/coordinates.ts";
import type { PoolState, ReconcileContext } from "../controllers/context.ts";
import type { Deployment } from "../controllers/objects.ts";
import { Reason } from "../controllers/reasons.ts";
import { poolAttributes, withSpan } from "../tracing.ts";
import { recordScale, type ScaleDecision } from "./decide.ts";

/**
 * Writes a decision to the scale subresource and records it (status via state, Event, log
 * line, metric), inside a `scale WorkerPool` span while tracing. Returns the Deployment as it
 * is after the write.
 */
export async function applyScale(
  ctx: ReconcileContext,
  key: string,
  pool: WorkerPool,
  spec: WorkerPoolSpec,
  deployment: Deployment,
  state: PoolState,
  d: ScaleDecision,
  stableShare?: (total: number) => number,
): Promise<Deployment> {
  return withSpan(
    "scale WorkerPool",
    {
      ...poolAttributes(pool.metadata.namespace, pool.metadata.name),
      "conveyor.scale.from": d.from,
      "conveyor.scale.to": d.replicas,
      "conveyor.scale.reason": d.reason,
      "conveyor.scale.message": d.message,
    },
    () => writeScale(ctx, key, pool, spec, deployment, state, d, stableShare),
  );
}

async function writeScale(
  ctx: ReconcileContext,
  key: string,
  pool: WorkerPool,
  spec: WorkerPoolSpec,
  deployment: Deployment,
  state: PoolState,
  d: ScaleDecision,
  stableShare?: (total: number) => number,
): Promise<Deployment> {
  const path = resourcePath(RESOURCES.deployments, {
    namespace: pool.metadata.namespace,
    name: pool.metadata.name,
    subresource: "scale",
  });
  // The precondition: the decision was made from this version; a scale since (the HPA's, a
  // kubectl scale) fails the write with 409 and the reconcile decides again from the new count.
  const written = stableShare ? stableShare(d.replicas) : d.replicas;
  const res = await ctx.client.mergePatch<{ metadata?: { resourceVersion?: string } }>(path, {
    metadata: { resourceVersion: deployment.metadata.resourceVersion },
    spec: { replicas: written },
  });
  const at = Date.now();
  recordScale(state.scaler, spec, d, at);
  state.expect = { replicas: d.replicas, until: at + 30_000 };
  state.lastDecision = {
    replicas: d.replicas,
    from: d.from,
    reason: d.reason,
    message: d.message,
    at: rfc3339(at),
  };
  const updated: Deployment = {
    ...deployment,
    metadata: {
      ...deployment.metadata,
      resourceVersion: res.metadata?.resourceVersion ?? deployment.metadata.resourceVersion,
    },
    spec: { ...deployment.spec, replicas: d.replicas },
  };
  // The overlay holds the Deployment as written (the stable share during a rollout); the caller
  // gets the pool's total it decided, which the rollout's split divides.
  ctx.deploymentOverlay.set(key, { ...updated, spec: { ...updated.spec, replicas: written } });
  const direction = d.replicas > d.from ? "up" : "down";
  ctx.metrics.decisions.inc({
    namespace: pool.metadata.namespace,
    workerpool: pool.metadata.name,
    direction,
    reason: d.reason,
  });
  ctx.log.info(
    { pool: key, from: d.from, to: d.replicas, reason: d.reason, message: d.message },
    "scaled worker Deployment",
  );
  await ctx.events.record(
    pool,
    "Normal",
    direction === "up" ? Reason.ScaledUp : Reason.ScaledDown,
    `${d.from} → ${d.replicas}: ${d.reason}: ${d.message}`,
  );
  return updated;
}

// The pool's HorizontalPodAutoscaler (autoscaling/v2), in `hpa` mode: it scales the worker
// Deployment between max(1, minReplicas) and maxReplicas on the operator's external metric
// (total backlog; target AverageValue = targetBacklogPerReplica, so desired =
// ceil(backlog / target)). The HPA cannot scale from or to zero (HPAScaleToZero is alpha):
// the operator does 0↔1 itself and keeps the HPA while the Deployment is at zero — the HPA
// then reports ScalingActive=False ("scaling is disabled since the replica count of the
// target is zero") and resumes by itself once the operator has activated the pool.
import type { WorkerPool, WorkerPoolSpec } from "../apis/v1alpha1/types.ts";
import type { KubeObject } from "../kube/client.ts";
import { configHash } from "./diff.ts";
import { CONFIG_HASH_ANNOTATION, METRIC_NAME, METRIC_POOL_LABEL, ownerReference, poolLabels } from "./names.ts";

export interface HPA extends KubeObject {
  spec?: {
    scaleTargetRef: { apiVersion: string; kind: string; name: string };
    minReplicas?: number;
    maxReplicas: number;
    metrics?: unknown[];
    behavior?: unknown;
  };
  status?: {
    currentReplicas?: number;
    desiredReplicas?: number;
    lastScaleTime?: string;
    conditions?: { type: string; status: string; reason?: string; message?: string }[];
  };
}

/** Whether the pool should have an HPA at all. */
export function wantsHPA(spec: WorkerPoolSpec): boolean {
  return spec.scaling.mode === "hpa" && !spec.scaling.paused && spec.replicas === undefined;
}

export function desiredHPA(pool: WorkerPool, spec: WorkerPoolSpec): HPA {
  const s = spec.scaling;
  const hpa: HPA = {
    apiVersion: "autoscaling/v2",
    kind: "HorizontalPodAutoscaler",
    metadata: {
      name: pool.metadata.name,
      namespace: pool.metadata.namespace,
      labels: poolLabels(pool),
      ownerReferences: [ownerReference(pool)],
    },
    spec: {
      scaleTargetRef: { apiVersion: "apps/v1", kind: "Deployment", name: pool.metadata.name },
      minReplicas: Math.max(1, s.minReplicas),
      maxReplicas: s.maxReplicas,
      metrics: [
        {
          type: "External",
          external: {
            metric: { name: METRIC_NAME, selector: { matchLabels: { [METRIC_POOL_LABEL]: pool.metadata.name } } },
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

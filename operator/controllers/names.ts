// Names, labels and references shared by the operator's concerns.
import { RESOURCES, apiVersionOf } from "../apis/coordinates.ts";
import type { WorkerPool } from "../apis/v1alpha1/types.ts";
import type { KubeObject, OwnerReference } from "../kube/client.ts";

export const MANAGED_BY = "conveyor-operator";
export const POOL_LABEL = "conveyor.dev/workerpool";
/** The label selector the HPA's external metric carries: `workerpool=<name>`. */
export const METRIC_POOL_LABEL = "workerpool";
export const METRIC_NAME = "conveyor-backlog";
export const CONFIG_HASH_ANNOTATION = "conveyor.dev/config-hash";
/** With --restrict-secret-access, the operator reads only Secrets with this label set to "true" (or in its own namespace). */
export const SECRET_ACCESS_LABEL = "conveyor.dev/secret-access";
export const DELETION_COST_ANNOTATION = "controller.kubernetes.io/pod-deletion-cost";

/** Labels on everything the operator makes for a pool (the managed-by label scopes its informers). */
export function poolLabels(pool: { metadata: { name: string } }): Record<string, string> {
  return {
    "app.kubernetes.io/name": "conveyor-worker",
    "app.kubernetes.io/instance": pool.metadata.name,
    "app.kubernetes.io/managed-by": MANAGED_BY,
    [POOL_LABEL]: pool.metadata.name,
  };
}

/** The Deployment's selector: immutable, so minimal. */
export function selectorLabels(pool: { metadata: { name: string } }): Record<string, string> {
  return { [POOL_LABEL]: pool.metadata.name };
}

export function selectorString(pool: { metadata: { name: string } }): string {
  return Object.entries(selectorLabels(pool))
    .map(([k, v]) => `${k}=${v}`)
    .join(",");
}

export function ownerReference(pool: WorkerPool): OwnerReference {
  return {
    apiVersion: apiVersionOf(RESOURCES.workerPools),
    kind: RESOURCES.workerPools.kind,
    name: pool.metadata.name,
    uid: pool.metadata.uid,
    controller: true,
    blockOwnerDeletion: true,
  };
}

export function isControlledBy(obj: KubeObject, pool: WorkerPool): boolean {
  return !!obj.metadata.ownerReferences?.some((r) => r.controller && r.uid === pool.metadata.uid);
}

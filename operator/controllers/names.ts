// Names, labels and references shared by the operator's concerns.
import { API_VERSION, KIND } from "../apis/v1alpha1/schema.ts";
import type { WorkerPool } from "../apis/v1alpha1/types.ts";
import type { KubeObject, OwnerReference } from "../kube/client.ts";

export const MANAGED_BY = "conveyor-operator";
export const POOL_LABEL = "conveyor.dev/workerpool";
/** The label selector the HPA's external metric carries: `workerpool=<name>`. */
export const METRIC_POOL_LABEL = "workerpool";
export const METRIC_NAME = "conveyor-backlog";
export const CONFIG_HASH_ANNOTATION = "conveyor.dev/config-hash";
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
    apiVersion: API_VERSION,
    kind: KIND,
    name: pool.metadata.name,
    uid: pool.metadata.uid,
    controller: true,
    blockOwnerDeletion: true,
  };
}

/** The WorkerPool that controls an object (its controller owner reference), as a key. */
export function ownerKey(obj: KubeObject): string | undefined {
  const ref = obj.metadata.ownerReferences?.find(
    (r) => r.controller && r.kind === KIND && r.apiVersion.startsWith("conveyor.dev/"),
  );
  return ref ? `${obj.metadata.namespace}/${ref.name}` : undefined;
}

export function isControlledBy(obj: KubeObject, pool: WorkerPool): boolean {
  return !!obj.metadata.ownerReferences?.some((r) => r.controller && r.uid === pool.metadata.uid);
}

export function poolKey(pool: { metadata: { namespace?: string; name?: string } }): string {
  return `${pool.metadata.namespace}/${pool.metadata.name}`;
}

export function splitKey(key: string): { namespace: string; name: string } {
  const i = key.indexOf("/");
  return { namespace: key.slice(0, i), name: key.slice(i + 1) };
}

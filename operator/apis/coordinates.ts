// Every API resource the operator (and its tests and CLI) talks to, named once: group, version,
// plural for paths, kind and apiVersion for objects and owner references. Code writes
// `resourcePath(RESOURCES.deployments, { namespace, name })`, never the strings again.
import { apiPath } from "../kube/client.ts";
import { GROUP, KIND, PLURAL, VERSION } from "./v1alpha1/schema.ts";

export interface Resource {
  /** "" for the core group. */
  group: string;
  version: string;
  plural: string;
  kind: string;
}

function resource(group: string, version: string, plural: string, kind: string): Resource {
  return { group, version, plural, kind };
}

export const RESOURCES = {
  workerPools: resource(GROUP, VERSION, PLURAL, KIND),
  deployments: resource("apps", "v1", "deployments", "Deployment"),
  horizontalPodAutoscalers: resource(
    "autoscaling",
    "v2",
    "horizontalpodautoscalers",
    "HorizontalPodAutoscaler",
  ),
  pods: resource("", "v1", "pods", "Pod"),
  secrets: resource("", "v1", "secrets", "Secret"),
  configMaps: resource("", "v1", "configmaps", "ConfigMap"),
  events: resource("", "v1", "events", "Event"),
  leases: resource("coordination.k8s.io", "v1", "leases", "Lease"),
} as const satisfies Record<string, Resource>;

/** `apps/v1`, or `v1` for the core group. */
export function apiVersionOf(r: Resource): string {
  return r.group ? `${r.group}/${r.version}` : r.version;
}

/** The REST path of a resource: the collection (all or one namespace), an object, or its subresource. */
export function resourcePath(
  r: Resource,
  where: { namespace?: string; name?: string; subresource?: string } = {},
): string {
  return apiPath({ group: r.group, version: r.version, plural: r.plural, ...where });
}

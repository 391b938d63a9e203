// The Kubernetes API as the operator sees it: the shapes of objects, lists and watch events,
// API paths, and the errors it answers with (which ones a user must fix).

export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata: {
    name?: string;
    namespace?: string;
    uid?: string;
    resourceVersion?: string;
    generation?: number;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    ownerReferences?: OwnerReference[];
    deletionTimestamp?: string;
    creationTimestamp?: string;
  };
}

export interface OwnerReference {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  controller?: boolean;
  blockOwnerDeletion?: boolean;
}

export interface KubeList<T> {
  metadata: { resourceVersion?: string; continue?: string };
  items: T[];
}

export interface WatchEvent<T> {
  type: "ADDED" | "MODIFIED" | "DELETED" | "BOOKMARK" | "ERROR";
  object: T;
}

/** The patch types the operator sends (the Content-Type of a PATCH). */
export const PatchStrategy = {
  ServerSideApply: "application/apply-patch+yaml",
  MergePatch: "application/merge-patch+json",
} as const;

/** An HTTP error status from the API server; `body` is the response (usually a Status). */
export class ApiException extends Error {
  override name = "ApiException";
  readonly code: number;
  readonly body: string;
  readonly headers: Record<string, string>;
  constructor(code: number, message: string, body: string, headers: Record<string, string>) {
    super(message);
    this.code = code;
    this.body = body;
    this.headers = headers;
  }
}

/** Thrown instead of a write when this replica is not the leader. */
export class NotLeaderError extends Error {
  override name = "NotLeaderError";
}

/** `pods`, `deployments/scale`, `workerpools/status` from an API path. */
export function resourceOf(path: string): string {
  const parts = path.split("?")[0]!.split("/").filter(Boolean);
  // /api/v1/... or /apis/group/version/...
  let rest = parts[0] === "api" ? parts.slice(2) : parts.slice(3);
  if (rest[0] === "namespaces" && rest.length >= 3) rest = rest.slice(2);
  const [resource = "namespaces", , sub] = rest;
  return sub ? `${resource}/${sub}` : resource;
}

export function isNotFound(err: unknown): boolean {
  return err instanceof ApiException && err.code === 404;
}

export function isConflict(err: unknown): boolean {
  return err instanceof ApiException && err.code === 409;
}

export function apiCode(err: unknown): number | undefined {
  return err instanceof ApiException ? err.code : undefined;
}

/** The API server's message for an error (Status.message), else the error's message. */
export function apiMessage(err: unknown): string {
  if (err instanceof ApiException) {
    try {
      const s = JSON.parse(String(err.body)) as { message?: string };
      if (s.message) return s.message;
    } catch {
      // not JSON
    }
    return err.message;
  }
  return err instanceof Error ? err.message : String(err);
}

/** /apis/apps/v1/namespaces/ns/deployments[/name[/sub]] and friends. */
export function apiPath(o: {
  group: string;
  version: string;
  plural: string;
  namespace?: string;
  name?: string;
  subresource?: string;
}): string {
  const base = o.group ? `/apis/${o.group}/${o.version}` : `/api/${o.version}`;
  let p = base;
  if (o.namespace) p += `/namespaces/${encodeURIComponent(o.namespace)}`;
  p += `/${o.plural}`;
  if (o.name) p += `/${encodeURIComponent(o.name)}`;
  if (o.subresource) p += `/${o.subresource}`;
  return p;
}

/**
 * An error the user can fix (an invalid field, a policy that forbids it): worth reporting, not
 * retrying hot. Server-side apply answers 500 for fields it cannot convert (a bad quantity, an
 * unknown field in a passed-through pod template): those too.
 */
export function isUserError(err: unknown): boolean {
  const code = apiCode(err);
  if (code === 400 || code === 403 || code === 422) return true;
  return (
    code === 500 &&
    /failed to create typed patch object|failed to convert new object|unable to convert unstructured object|field not declared in schema/i.test(
      apiMessage(err),
    )
  );
}

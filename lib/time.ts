// Timestamps as the Kubernetes API writes them.

/** RFC 3339 in UTC with whole seconds (metav1.Time): 2026-11-23T14:27:09Z. */
export function rfc3339(at: Date | number): string {
  return new Date(at).toISOString().replace(/\.\d{3}Z$/, "Z");
}

// Work-queue keys: `namespace/name`, as client-go's MetaNamespaceKeyFunc.

export function objectKey(obj: { metadata: { namespace?: string; name?: string } }): string {
  return `${obj.metadata.namespace ?? ""}/${obj.metadata.name ?? ""}`;
}

export function splitKey(key: string): { namespace: string; name: string } {
  const i = key.indexOf("/");
  return { namespace: key.slice(0, i), name: key.slice(i + 1) };
}

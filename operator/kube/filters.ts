// Named event filters (controller-runtime's predicates): which informer events enqueue a key.
// A filter answers for the event kinds it names and lets the others through; the name shows
// in logs and tests what a controller reacts to.
import type { KubeObject } from "./client.ts";

export interface EventFilter<T extends KubeObject = KubeObject> {
  readonly name: string;
  create?: (obj: T) => boolean;
  update?: (obj: T, old: T) => boolean;
  delete?: (obj: T) => boolean;
}

function sameRecord(a: Record<string, string> | undefined, b: Record<string, string> | undefined): boolean {
  const ak = Object.keys(a ?? {});
  if (ak.length !== Object.keys(b ?? {}).length) return false;
  return ak.every((k) => a![k] === b?.[k]);
}

/** An update that changed the spec (metadata.generation): not our own status writes. */
export const GenerationChanged: EventFilter = {
  name: "GenerationChanged",
  update: (obj, old) => obj.metadata.generation !== old.metadata.generation,
};

export const LabelsChanged: EventFilter = {
  name: "LabelsChanged",
  update: (obj, old) => !sameRecord(obj.metadata.labels, old.metadata.labels),
};

/** An update while the object is being deleted (a finalizer's turn, or its last state). */
export const BeingDeleted: EventFilter = {
  name: "BeingDeleted",
  update: (obj) => !!obj.metadata.deletionTimestamp,
};

/** Passes an event when any of the filters passes it. */
export function anyOf<T extends KubeObject>(...filters: EventFilter<T>[]): EventFilter<T> {
  const passes = (kind: "create" | "update" | "delete", ...args: [T, T?]) =>
    filters.some((f) => {
      const fn = f[kind] as ((...a: [T, T?]) => boolean) | undefined;
      return fn ? fn(...args) : true;
    });
  return {
    name: filters.map((f) => f.name).join("|"),
    create: (obj) => passes("create", obj),
    update: (obj, old) => passes("update", obj, old),
    delete: (obj) => passes("delete", obj),
  };
}

export function passes<T extends KubeObject>(
  filters: readonly EventFilter<T>[],
  kind: "create" | "update" | "delete",
  obj: T,
  old?: T,
): boolean {
  return filters.every((f) => {
    if (kind === "update") return f.update ? f.update(obj, old!) : true;
    const fn = f[kind];
    return fn ? fn(obj) : true;
  });
}

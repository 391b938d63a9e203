// WorkerPool types, derived from the schema in ./schema.ts (never written by hand).
import { applyDefaults, type FromSchema } from "../jsonschema.ts";
import { API_VERSION, KIND, specSchema, statusSchema } from "./schema.ts";

/** A spec as the operator reads it: every defaulted field is present. */
export type WorkerPoolSpec = FromSchema<typeof specSchema, true>;
/** A spec as a user writes it: defaulted fields are optional. */
export type WorkerPoolSpecInput = FromSchema<typeof specSchema, false>;
export type WorkerPoolStatus = FromSchema<typeof statusSchema, false>;
export type Condition = NonNullable<WorkerPoolStatus["conditions"]>[number];
export type ScalingSpec = WorkerPoolSpec["scaling"];
export type ScalingBehavior = NonNullable<ScalingSpec["behavior"]>;
export type ScalingRules = NonNullable<ScalingBehavior["scaleUp"]>;

export interface ObjectMeta {
  name: string;
  namespace: string;
  uid: string;
  generation?: number;
  resourceVersion?: string;
  creationTimestamp?: string;
  deletionTimestamp?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

export interface WorkerPool {
  apiVersion: typeof API_VERSION;
  kind: typeof KIND;
  metadata: ObjectMeta;
  spec: WorkerPoolSpec;
  status?: WorkerPoolStatus;
}

/** What a user applies (tests, docs). */
export interface WorkerPoolInput {
  apiVersion: typeof API_VERSION;
  kind: typeof KIND;
  metadata: {
    name: string;
    namespace?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
  };
  spec: WorkerPoolSpecInput;
}

/** The spec with the schema's defaults filled in (as the API server stores it). */
export function withDefaults(spec: WorkerPoolSpecInput): WorkerPoolSpec {
  return applyDefaults(specSchema, spec) as WorkerPoolSpec;
}

export const CONDITION_READY = "Ready";
export const CONDITION_SCALING_ACTIVE = "ScalingActive";
export const CONDITION_DEGRADED = "Degraded";
/** The queue is paused (spec.paused or `conveyor pause`): no claims, the pool drains to its minimum. */
export const CONDITION_PAUSED = "Paused";
/** A canary rollout (spec.rollout) was rolled back or aborted: the pool runs the stable template. */
export const CONDITION_ROLLED_BACK = "RolledBack";

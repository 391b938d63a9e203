// The WorkerPool's status: what the operator reports of the pool.
import type { JSONSchemaProps } from "../../jsonschema.ts";

const condition = {
  type: "object",
  required: ["type", "status", "lastTransitionTime", "reason", "message"],
  properties: {
    type: { type: "string", maxLength: 316, description: "Ready, ScalingActive or Degraded." },
    status: { type: "string", enum: ["True", "False", "Unknown"] },
    observedGeneration: { type: "integer", format: "int64", minimum: 0 },
    lastTransitionTime: { type: "string", format: "date-time" },
    reason: {
      type: "string",
      maxLength: 1024,
      minLength: 1,
      pattern: "^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$",
    },
    message: { type: "string", maxLength: 32768 },
  },
} as const;

/** Scale decisions kept in status.recentDecisions: bounded, so status (and the cache) stays small. */
export const RECENT_DECISIONS = 8;

const decisionProperties = {
  replicas: { type: "integer" },
  from: { type: "integer" },
  reason: { type: "string" },
  message: { type: "string" },
  at: { type: "string", format: "date-time" },
  backlog: { type: "integer", description: "The backlog the decision was made at." },
} as const;

export const statusSchema = {
  type: "object",
  properties: {
    observedGeneration: {
      type: "integer",
      format: "int64",
      description: "The generation the status describes.",
    },
    conditions: {
      type: "array",
      "x-kubernetes-list-type": "map",
      "x-kubernetes-list-map-keys": ["type"],
      items: condition,
    },
    replicas: { type: "integer", description: "Pods of the worker Deployment (status.replicas)." },
    readyReplicas: { type: "integer" },
    desiredReplicas: {
      type: "integer",
      description: "The Deployment's spec.replicas: what the HPA or the operator asked for.",
    },
    readyOfDesired: { type: "string", description: "ready/desired, for kubectl get." },
    selector: { type: "string", description: "Label selector of the pool's pods (scale subresource)." },
    backlog: { type: "integer", description: "Ready + due-delayed + in-flight jobs at the last poll." },
    inflight: { type: "integer", description: "Jobs running at the last poll." },
    oldestReadySince: {
      type: "string",
      format: "date-time",
      description:
        "When the oldest waiting (ready) job was enqueued, at the last poll; absent when none waits. kubectl get wp -o wide shows its age (Oldest).",
    },
    lastScaleTime: {
      type: "string",
      format: "date-time",
      description: "When the operator last changed the replica count.",
    },
    control: {
      type: "object",
      description: "Queue control in force in Redis, and where it came from.",
      properties: {
        paused: { type: "boolean" },
        rateLimit: { type: "string", description: "e.g. 50/s; absent when none." },
        source: {
          type: "string",
          enum: ["spec", "redis"],
          description:
            "spec: spec.paused/spec.rateLimit set it; redis: set by the CLI or API, not managed by the spec.",
        },
        replicaCap: {
          type: "integer",
          description:
            "Replicas the rate limit or the resources can feed or the groups can use, the lowest (the pool is not scaled above this).",
        },
        capReason: { type: "string" },
        capBy: {
          type: "string",
          enum: ["rateLimit", "resources", "groups"],
          description:
            "What binds the cap: the queue's rate limit, the pool's resources, or groups at their limit or paused (the metric's `cap` label).",
        },
        summary: {
          type: "string",
          description:
            "paused, limited 50/s (cap 3), budget openai (cap 2), groups (cap 2), or empty: for kubectl get.",
        },
      },
    },
    contract: {
      type: "object",
      description: "The contract this pool published to its queue (spec.contract); absent when none.",
      properties: {
        hash: { type: "string", description: "Its content hash, as `conveyor contract get` shows it." },
        publishedAt: { type: "string", format: "date-time", description: "When the operator published it." },
        source: {
          type: "string",
          description: "inline (spec.contract) or configmap/<name>.",
        },
      },
    },
    rollout: {
      type: "object",
      description:
        "The canary rollout (spec.rollout): in progress, or how the last one ended. Kept here so an operator restart or a new leader resumes it.",
      properties: {
        phase: {
          type: "string",
          enum: ["Progressing", "Promoted", "RolledBack", "Aborted"],
          description: "Progressing: a canary runs; the others: how the last rollout ended.",
        },
        step: { type: "integer", description: "Index of the current step in spec.rollout.canary.steps." },
        weight: { type: "integer", description: "The canary's percent of the replicas at this step." },
        stableHash: {
          type: "string",
          description: "Template hash of the stable version (the pool's Deployment).",
        },
        canaryHash: { type: "string", description: "Template hash of the canary (`<pool>-canary`)." },
        startedAt: { type: "string", format: "date-time", description: "When the rollout started." },
        stepStartedAt: { type: "string", format: "date-time", description: "When the current step started." },
        baseline: {
          type: "object",
          description:
            "Both versions' counters (`<queue>versions`) when the step started: the step is judged on what they ended since.",
          properties: {
            stable: { type: "object", additionalProperties: { type: "integer" } },
            canary: { type: "object", additionalProperties: { type: "integer" } },
          },
        },
        verdict: {
          type: "string",
          description:
            "The last judgement: promote, rollback or wait, with its reason and figures in message.",
        },
        message: { type: "string" },
        summary: { type: "string", description: "e.g. step 1/2 10% or rolled back: for kubectl get." },
      },
    },
    lastDecision: {
      type: "object",
      description:
        "The last replica change and why: the operator's own, or the HPA's as the operator observed it (HPAScaleUp, HPAScaleDown).",
      properties: decisionProperties,
    },
    recentDecisions: {
      type: "array",
      maxItems: RECENT_DECISIONS,
      description: `The last ${RECENT_DECISIONS} replica changes (the operator's and the HPA's), oldest first (what the dashboard charts).`,
      items: { type: "object", properties: decisionProperties },
    },
  },
} as const satisfies JSONSchemaProps;

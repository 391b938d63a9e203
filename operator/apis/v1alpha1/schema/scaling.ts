// spec.scaling: autoscaling on the queue's backlog (docs/operator.md).
import type { JSONSchemaProps } from "../../jsonschema.ts";

const scalingRules = (direction: "up" | "down") =>
  ({
    type: "object",
    description: `How fast the pool may scale ${direction} (autoscaling/v2 HPAScalingRules, passed to the HPA; \`direct\` mode applies the same rules).`,
    properties: {
      stabilizationWindowSeconds: {
        type: "integer",
        minimum: 0,
        maximum: 3600,
        description: `Recommendations of the last N seconds are considered and the ${direction === "up" ? "lowest" : "highest"} is used (HPA default: ${direction === "up" ? 0 : 300}).`,
      },
      selectPolicy: {
        type: "string",
        enum: ["Max", "Min", "Disabled"],
        description: "Which policy wins when several apply (HPA default: Max).",
      },
      policies: {
        type: "array",
        maxItems: 10,
        "x-kubernetes-list-type": "atomic",
        description: "Limits on the change per period.",
        items: {
          type: "object",
          required: ["type", "value", "periodSeconds"],
          properties: {
            type: { type: "string", enum: ["Pods", "Percent"] },
            value: { type: "integer", minimum: 1 },
            periodSeconds: { type: "integer", minimum: 1, maximum: 1800 },
          },
        },
      },
    },
  }) as const;

export const scalingSchema = {
  type: "object",
  default: {},
  description: "Autoscaling on the queue's backlog (ready + due-delayed + in-flight jobs).",
  "x-kubernetes-validations": [
    // has(): the API server validates the `default: {}` itself before filling its children.
    {
      rule: "!has(self.minReplicas) || !has(self.maxReplicas) || self.minReplicas <= self.maxReplicas",
      message: "scaling.minReplicas must be <= scaling.maxReplicas",
    },
    {
      rule: "!has(self.targetWaitSeconds) || !has(self.mode) || self.mode == 'direct'",
      message:
        "scaling.targetWaitSeconds needs scaling.mode: direct (the operator sizes a pool for a wait target itself; an HPA can only follow a per-replica average)",
    },
  ],
  properties: {
    mode: {
      type: "string",
      enum: ["hpa", "direct"],
      default: "hpa",
      description:
        "hpa: an HPA follows the operator's external metric (external.metrics.k8s.io). direct: no HPA; the operator runs the HPA algorithm itself and writes the Deployment's scale (for clusters whose external metrics API is taken).",
    },
    minReplicas: {
      type: "integer",
      minimum: 0,
      maximum: 10000,
      default: 0,
      description: "0 allows scale to zero.",
    },
    maxReplicas: { type: "integer", minimum: 1, maximum: 10000, default: 10 },
    targetBacklogPerReplica: {
      type: "integer",
      minimum: 1,
      maximum: 1000000,
      default: 10,
      description:
        "Desired replicas = ceil(backlog / targetBacklogPerReplica), tolerance 10%. With targetWaitSeconds: used only until job durations are measured.",
    },
    targetWaitSeconds: {
      type: "number",
      minimum: 0,
      exclusiveMinimum: true,
      maximum: 86400,
      description:
        "Latency mode (needs mode: direct): size the pool so a new job starts within this many seconds of its enqueue, from the arrival rate, the mean time a job holds a slot, the ready backlog and the oldest waiting job's age; scale-down follows behavior.scaleDown (stabilization window). See docs/operator.md#latency-mode.",
    },
    activationBacklog: {
      type: "integer",
      minimum: 0,
      default: 0,
      description: "Scale from zero only when the backlog exceeds this.",
    },
    cooldownSeconds: {
      type: "integer",
      minimum: 0,
      maximum: 86400,
      default: 120,
      description:
        "Scale to zero after this long with no backlog and nothing in flight (only when minReplicas is 0).",
    },
    pollSeconds: {
      type: "integer",
      minimum: 1,
      maximum: 3600,
      default: 5,
      description: "How often the backlog is read.",
    },
    behavior: {
      type: "object",
      description:
        "autoscaling/v2 HorizontalPodAutoscalerBehavior (scale-up/down rate limits and stabilization windows).",
      properties: { scaleUp: scalingRules("up"), scaleDown: scalingRules("down") },
    },
    paused: {
      type: "boolean",
      default: false,
      description:
        "Freeze the replica count: no HPA, no scaling decisions. The Deployment itself is still reconciled.",
    },
  },
} as const satisfies JSONSchemaProps;

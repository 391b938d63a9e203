// spec.rollout: a template change rolled out as a canary judged by its jobs (docs/rollouts.md).
import type { JSONSchemaProps } from "../../jsonschema.ts";

/** Most canary steps; the last step is followed by 100 %. */
export const MAX_ROLLOUT_STEPS = 10;

export const rolloutSchema = {
  type: "object",
  description:
    "Roll a template change out as a canary (docs/rollouts.md): a second Deployment `<pool>-canary` of the new template takes each step's weight of the pool's replicas, and each step is judged by both versions' jobs (promote, or roll back to the stable template). Unset: a template change rolls every pod at once.",
  required: ["canary"],
  properties: {
    canary: {
      type: "object",
      required: ["steps"],
      properties: {
        steps: {
          type: "array",
          minItems: 1,
          maxItems: MAX_ROLLOUT_STEPS,
          "x-kubernetes-list-type": "atomic",
          description:
            "The canary's share of the pool's replicas, step by step (weights rising, each below 100), each held at least holdSeconds and judged before the next; after the last, 100 % (promoted).",
          items: {
            type: "object",
            required: ["weight"],
            properties: {
              weight: {
                type: "integer",
                minimum: 1,
                maximum: 99,
                description:
                  "Percent of the pool's replicas on the canary (at least one pod while the pool has any).",
              },
              holdSeconds: {
                type: "integer",
                minimum: 0,
                maximum: 86400,
                default: 300,
                description: "The least time the step lasts before it is judged.",
              },
            },
          },
        },
        analysis: {
          type: "object",
          default: {},
          description:
            "How a step is judged, over the jobs each version ended during it. Dependency failures, rate-limit hand-backs and drain hand-backs are not the handler's and do not count.",
          properties: {
            minJobs: {
              type: "integer",
              minimum: 1,
              maximum: 1000000,
              default: 100,
              description: "Jobs each version must end during a step before it is judged.",
            },
            maxFailureRatio: {
              type: "number",
              minimum: 1,
              maximum: 1000,
              default: 2,
              description:
                "Roll back when the canary's failure rate exceeds the stable version's times this (and the absolute ceiling's floor, see maxFailureRate).",
            },
            maxFailureRate: {
              type: "number",
              minimum: 0,
              maximum: 1,
              default: 0.05,
              description:
                "Roll back when the canary's failure rate (failed attempts ÷ attempts) exceeds this.",
            },
            maxP95Ratio: {
              type: "number",
              minimum: 1,
              maximum: 1000,
              default: 2,
              description:
                "Roll back when the canary's p95 job duration exceeds the stable version's times this.",
            },
          },
        },
      },
    },
  },
} as const satisfies JSONSchemaProps;

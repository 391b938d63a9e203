// spec.contract: the JSON Schemas of the stage's job data and results (docs/contracts.md).
import type { JSONSchemaProps } from "../../jsonschema.ts";

/** A JSON Schema inside spec.contract: free-form (checked by the operator when it compiles the contract). */
const embeddedSchema = (what: string) =>
  ({
    type: "object",
    "x-kubernetes-preserve-unknown-fields": true,
    description: `JSON Schema of ${what}.`,
  }) as const;

export const contractSchema = {
  type: "object",
  description:
    "The stage's contract (docs/contracts.md): JSON Schemas (draft 2020-12, or draft-07 by $schema) for its job data and results, for untasked jobs and per named task — inline, or from a ConfigMap. The operator checks it and publishes it to the queue's Redis (`<queue>contract`, source operator:<namespace>/<pool>) when its hash differs from the one in force: while set it wins over `conveyor contract set`. Removing it deletes the queue's contract if this pool published it. Jobs already waiting are not re-checked.",
  "x-kubernetes-validations": [
    {
      rule: "[has(self.data) || has(self.result) || has(self.tasks), has(self.configMapRef)].filter(x, x).size() == 1",
      message: "contract must set either data/result/tasks inline or configMapRef (exactly one)",
    },
  ],
  properties: {
    data: embeddedSchema("job data (untasked jobs)"),
    result: embeddedSchema("results (untasked jobs)"),
    tasks: {
      type: "object",
      maxProperties: 100,
      description:
        "Per named task (the job's `task`; names match ^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$): its data and result schemas.",
      additionalProperties: {
        type: "object",
        properties: {
          data: embeddedSchema("the task's job data"),
          result: embeddedSchema("the task's results"),
        },
      },
    },
    configMapRef: {
      type: "object",
      required: ["name"],
      description:
        "A ConfigMap in the pool's namespace whose key holds the contract ({data, result, tasks}) as JSON or YAML. The operator watches it and publishes each change.",
      properties: {
        name: { type: "string", minLength: 1, maxLength: 253, description: "Name of the ConfigMap." },
        key: {
          type: "string",
          minLength: 1,
          maxLength: 253,
          default: "contract.json",
          description: 'Key in the ConfigMap (default "contract.json").',
        },
      },
    },
  },
} as const satisfies JSONSchemaProps;

// spec.resources: the budgets of rate-limited APIs a pool's jobs use (docs/budgets.md).
import type { JSONSchemaProps } from "../../jsonschema.ts";

/**
 * spec.resources: a resource's name or a key's id (also a Secret key), and a limit
 * `<unit>=<max>/<window>` — the grammar of queue/resources.ts; a unit test keeps them equal.
 */
export const RESOURCE_NAME_PATTERN = "^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$";
export const RESOURCE_LIMIT_PATTERN = "^[a-z][a-z0-9_]{0,31}=[0-9]{1,13}/[0-9]{0,8}(ms|s|m|h)$";

export const resourcesSchema = {
  type: "array",
  maxItems: 20,
  "x-kubernetes-list-type": "map",
  "x-kubernetes-list-map-keys": ["name"],
  description:
    "Budgets of rate-limited APIs the pool's jobs use (docs/budgets.md): each a named set of keys with limits per window. The operator writes the key ids and limits (never a credential) into the pipeline's Redis when they differ, and mounts the Secret's key of each id into the worker at /var/run/conveyor/resources/<name>/<id>. The pool is capped at the replicas the keys' request rate can feed.",
  items: {
    type: "object",
    required: ["name", "keys"],
    properties: {
      name: {
        type: "string",
        pattern: RESOURCE_NAME_PATTERN,
        description: "The resource's name, as jobs name it in `uses` (e.g. openai).",
      },
      ceiling: {
        type: "integer",
        minimum: 1,
        maximum: 100,
        description:
          "Admit a job only while a key's usage stays at or below this percentage of each limit (default 90).",
      },
      secretRef: {
        type: "object",
        required: ["name"],
        description:
          "A Secret in the pool's namespace holding each key's credential under the key's id; mounted read-only into the worker container (the operator never reads it).",
        properties: {
          name: { type: "string", minLength: 1, maxLength: 253, description: "Name of the Secret." },
        },
      },
      keys: {
        type: "array",
        minItems: 1,
        maxItems: 100,
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["id"],
        items: {
          type: "object",
          required: ["id", "limits"],
          properties: {
            id: {
              type: "string",
              pattern: RESOURCE_NAME_PATTERN,
              description: "The key's id (also its key in secretRef's Secret).",
            },
            limits: {
              type: "array",
              minItems: 1,
              maxItems: 10,
              "x-kubernetes-list-type": "atomic",
              description:
                "`<unit>=<max>/<window>`, the window s, m, h (or 2s, 500ms): requests=60/m (each job is one request), tokens=200000/m (what jobs declare in `uses`).",
              items: { type: "string", maxLength: 64, pattern: RESOURCE_LIMIT_PATTERN },
            },
          },
        },
      },
    },
  },
} as const satisfies JSONSchemaProps;

// spec.notify: completion notifications (docs/notifications.md).
import type { JSONSchemaProps } from "../../jsonschema.ts";
import { NOTIFY_EVENTS } from "../../../../queue/types.ts";

export const notifySchema = {
  type: "object",
  description:
    "Completion notifications (docs/notifications.md): the pool's workers POST a signed JSON body to url when a job ends in one of events, at least once, retried for up to 24 h. The HMAC secret comes from secretRef (mounted as a file, never in the pod spec). Jobs may add their own URL at enqueue; these workers send those too, with this secret.",
  required: ["url", "secretRef"],
  properties: {
    url: {
      type: "string",
      maxLength: 2048,
      pattern: "^https?://[^\\s]+$",
      description: "Where to POST (https://, or http:// when allowed).",
    },
    events: {
      type: "array",
      minItems: 1,
      maxItems: 3,
      "x-kubernetes-list-type": "set",
      items: { type: "string", enum: [...NOTIFY_EVENTS] },
      description: "The job ends notified (default: completed, dead, cancelled).",
    },
    secretRef: {
      type: "object",
      description:
        "A key of a Secret in the pool's namespace holding the signing secret (at least 16 characters).",
      required: ["name"],
      properties: {
        name: { type: "string", minLength: 1, maxLength: 253, description: "Name of the Secret." },
        key: {
          type: "string",
          minLength: 1,
          maxLength: 253,
          default: "secret",
          description: 'Key in the Secret (default "secret").',
        },
      },
    },
    allow: {
      type: "array",
      maxItems: 32,
      items: { type: "string", maxLength: 64, pattern: "^[0-9A-Fa-f:.]+/[0-9]{1,3}$" },
      description:
        "CIDRs a destination may resolve into although loopback, link-local or private (refused otherwise), e.g. 10.20.0.0/16 for an in-cluster receiver.",
    },
  },
} as const satisfies JSONSchemaProps;

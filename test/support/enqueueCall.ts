// enqueue_jobs called by hand, as the tests of its wire do: its KEYS for a queue and its call
// record with the settings every call names (docs/protocol.md, "How the scripts are called").
import type { QueueKeys } from "../../queue/index.ts";

export { enqueueJobsKeys } from "../../queue/gateway.ts";

/** The call record for `k` with `jobFields` `["id", "data"]` unless `fields` names others; `fields` wins. */
export function enqueueJobsRecord(k: QueueKeys, fields: Record<string, unknown> = {}) {
  return {
    jobPrefix: k.jobPrefix,
    idempotencyPrefix: k.idempotencyPrefix,
    queue: k.queue,
    now: Date.now(),
    maxPayloadBytes: 1000,
    idempotencyTtlSeconds: 60,
    jobFields: ["id", "data"],
    ...fields,
  };
}

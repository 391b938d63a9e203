// enqueue_jobs called by hand, as the tests of its wire do: its KEYS for a queue and its call
// record with the settings every call names (docs/protocol.md, "How the scripts are called").
import { QueueKeys } from "../../queue/index.ts";

/** enqueue_jobs' KEYS, in its order. */
export function enqueueJobsKeys(k: QueueKeys): string[] {
  return [k.ready, k.delayed, k.counts, k.wake, k.outbox, k.meta, k.seq, k.contract];
}

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

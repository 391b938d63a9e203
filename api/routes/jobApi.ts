// The producer-facing additions of the HTTP job API: batch enqueue, the dead-letter
// list, and the OpenAPI document itself.
import {
  ContractViolationError,
  EnvelopeError,
  newJobId,
  parseEnvelope,
  PayloadTooLargeError,
  ReplicationError,
  type JobToEnqueue,
} from "../../queue/index.ts";
import type { ApiContext } from "../context.ts";
import { contractRefusal, HttpError } from "../http.ts";
import { openApiDocument } from "../openapi.ts";
import type { Handlers } from "../router.ts";

export const statusUrl = (id: string, queue: string) =>
  `/jobs/${encodeURIComponent(id)}?queue=${encodeURIComponent(queue)}`;

/**
 * With durability "replicated": the primary applied the enqueue but no replica confirmed it, so
 * it may not survive a failover. 503 (try again: enqueue is idempotent by id), naming the ids.
 */
export function replicationUnconfirmed(err: ReplicationError, ids: string[]): HttpError {
  const which =
    ids.length === 1
      ? `job ${ids[0]}`
      : `${ids.length} jobs (${ids.slice(0, 3).join(", ")}${ids.length > 3 ? ", …" : ""})`;
  return new HttpError(
    503,
    `${which}: ${err.message}; enqueue again with the same id${ids.length === 1 ? "" : "s"} (idempotent) to be sure`,
    { "retry-after": "1" },
    null,
    "replication_unconfirmed",
  );
}

export function jobApiHandlers(ctx: ApiContext): Handlers {
  let document: Record<string, unknown> | undefined;
  return {
    async openapi() {
      document ??= openApiDocument();
      return { body: document };
    },

    async enqueueBatch({ params, body }) {
      const queue = params.queue!;
      // The schema checked every job already; parseEnvelope is the producer's own reading of it.
      // Ids are given here so a payload-size refusal can name the job by its index.
      const jobs: JobToEnqueue[] = (body as { jobs: unknown[] }).jobs.map((raw, index) => {
        try {
          const job = parseEnvelope(raw);
          return { ...job, id: job.id ?? newJobId() };
        } catch (err) {
          if (err instanceof EnvelopeError)
            throw HttpError.field(400, `body.jobs.${index}`, err.message, "invalid_field");
          throw err;
        }
      });
      await ctx.recordsSwitch?.ensure(queue);
      let results;
      try {
        results = await ctx.producer.enqueueMany(queue, jobs);
      } catch (err) {
        if (err instanceof ReplicationError)
          throw replicationUnconfirmed(
            err,
            jobs.map((j) => j.id!),
          );
        if (err instanceof ContractViolationError)
          throw contractRefusal(
            err,
            err.jobs.length === 1 ? `body.jobs.${err.jobs[0]!.index}.data` : "body.jobs",
          );
        if (!(err instanceof PayloadTooLargeError)) throw err;
        const index = jobs.findIndex((j) => err.message.startsWith(`job ${j.id} `));
        throw HttpError.field(
          413,
          index >= 0 ? `body.jobs.${index}.data` : "body.jobs",
          `nothing enqueued: ${err.message}`,
          "payload_too_large",
        );
      }
      const outcomes = results.map((r, index) => ({
        index,
        id: r.id,
        outcome: r.created ? "created" : r.replaced ? "replaced" : "existing",
        status: statusUrl(r.id, queue),
      }));
      const created = outcomes.filter((o) => o.outcome === "created").length;
      const replaced = outcomes.filter((o) => o.outcome === "replaced").length;
      return {
        status: 202,
        body: { queue, created, existing: outcomes.length - created - replaced, replaced, jobs: outcomes },
      };
    },

    async listDead({ params, query }) {
      const queue = params.queue!;
      const [dead, counts] = await Promise.all([
        ctx.admin.deadJobs(queue, query.limit as number),
        ctx.admin.counts(queue),
      ]);
      return { body: { queue, total: counts.dead, dead } };
    },
  };
}

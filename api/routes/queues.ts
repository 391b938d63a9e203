// Queue routes: the queue list with live counts, one queue's counts, stats, workers, the
// enqueue endpoint, and the queue-level actions (pause/resume, rate limit, dead letters).
import {
  ContractViolationError,
  EnvelopeError,
  formatRateLimit,
  newJobId,
  parseDuration,
  parseEnvelope,
  parseRateLimit,
  QueueKeys,
  ReplicationError,
  scheduleJson,
} from "../../queue/index.ts";
import { requireRecords, type ApiContext } from "../context.ts";
import type { StatsWindow } from "../../records/index.ts";
import { contractRefusal, HttpError } from "../http.ts";
import type { Handlers } from "../router.ts";
import { replicationUnconfirmed } from "./jobApi.ts";
import { queueInScope } from "../tokens.ts";

export interface QueueSummary {
  queue: string;
  ready: number;
  delayed: number;
  inflight: number;
  completed: number;
  dead: number;
  cancelled: number;
  backlog: number;
  /** Waiting jobs no resource key can pay for now (docs/budgets.md): not in ready or backlog. */
  waitingForBudget: number;
  paused: boolean;
  /** "20/s", or null. */
  rateLimit: string | null;
  schedules: number;
  /** Age (ms) of the job at the head of the ready line; null when none waits. */
  oldestWaitingMs: number | null;
  workers: number;
  /** Whether any worker ever claimed from the queue or serves it now (QueueStats.served). */
  served: boolean;
}

export async function queueSummary(ctx: ApiContext, queue: string): Promise<QueueSummary> {
  const k = new QueueKeys(queue);
  const [counts, stats, workers] = await Promise.all([
    // (the oldest ready job's createdAt, read in the same script: the earliest head of the sorted
    // set, the line and the next group)
    ctx.admin.counts(queue, { oldestReady: true }),
    ctx.admin.stats(queue),
    ctx.redis.hlen(k.workers),
  ]);
  const created = counts.oldestReadyAt ?? 0;
  const oldestWaitingMs = created > 0 ? Math.max(0, Date.now() - created) : null;
  return {
    queue,
    ready: counts.ready,
    delayed: counts.delayed,
    inflight: counts.inflight,
    completed: counts.completed,
    dead: counts.dead,
    cancelled: stats.cancelled,
    backlog: counts.backlog,
    waitingForBudget: counts.waitingForBudget ?? 0,
    paused: stats.paused,
    rateLimit: stats.rateLimit,
    schedules: stats.schedules,
    oldestWaitingMs,
    workers,
    served: stats.served,
  };
}

export function queueHandlers(ctx: ApiContext): Handlers {
  const q = (params: Record<string, string>) => params.queue!; // allowed: the router checked
  return {
    async listQueues({ principal }) {
      const queues = (await ctx.directory.list()).filter((name) => queueInScope(principal.scope, name));
      return { body: { queues: await Promise.all(queues.map((name) => queueSummary(ctx, name))) } };
    },
    async queueCounts({ params }) {
      const queue = q(params);
      return { body: { ...(await ctx.admin.counts(queue)), ...(await queueSummary(ctx, queue)) } };
    },
    async enqueue({ params, body }) {
      const queue = q(params);
      let envelope;
      try {
        envelope = parseEnvelope(body);
      } catch (err) {
        if (err instanceof EnvelopeError)
          throw HttpError.field(
            400,
            "body",
            err.message.replace(/^a job must be/, "body must be"),
            "invalid_field",
          );
        throw err;
      }
      const { data, ...options } = envelope;
      // (the id given here, not by the producer, so an unconfirmed enqueue can name it)
      if (options.id === undefined && options.idempotencyKey === undefined) options.id = newJobId();
      await ctx.recordsSwitch?.ensure(queue);
      let result;
      try {
        result = await ctx.producer.enqueue(queue, data, options);
      } catch (err) {
        if (err instanceof ReplicationError)
          throw replicationUnconfirmed(err, [options.id ?? `with key ${options.idempotencyKey}`]);
        if (err instanceof ContractViolationError) throw contractRefusal(err, "body.data");
        throw err;
      }
      const status = `/jobs/${encodeURIComponent(result.id)}?queue=${encodeURIComponent(queue)}`;
      return {
        status: 202,
        body: {
          id: result.id,
          created: result.created,
          ...(result.replaced ? { replaced: true } : {}),
          status,
        },
        headers: { location: status },
      };
    },
    async queueStats({ params, query }) {
      const queue = q(params);
      const window = query.window as StatsWindow;
      if (!ctx.records) return { body: { queue, window, minutes: [], history: false } };
      return {
        body: { queue, window, minutes: await requireRecords(ctx).minuteStats(queue, window), history: true },
      };
    },
    async queueWorkers({ params }) {
      const queue = q(params);
      const now = Date.now();
      const workers = (await ctx.admin.workers(queue))
        .map((w) => ({ ...w, free: Math.max(0, w.slots - w.busy), lastSeenMs: now - w.seen }))
        .sort((a, b) => a.id.localeCompare(b.id));
      return { body: { queue, workers } };
    },
    async pause({ params }) {
      const queue = q(params);
      await ctx.admin.pause(queue);
      return { body: { queue, paused: true } };
    },
    async resume({ params }) {
      const queue = q(params);
      await ctx.admin.resume(queue);
      return { body: { queue, paused: false } };
    },
    async setRateLimit({ params, body }) {
      const queue = q(params);
      const { limit } = body as { limit: string | null };
      const parsed = limit === null ? null : parseRateLimit(limit);
      await ctx.admin.setRateLimit(queue, parsed);
      return { body: { queue, rateLimit: parsed ? formatRateLimit(parsed) : null } };
    },
    async removeRateLimit({ params }) {
      const queue = q(params);
      await ctx.admin.setRateLimit(queue, null);
      return { body: { queue, rateLimit: null } };
    },
    async listSchedules({ params }) {
      const queue = q(params);
      return { body: { queue, schedules: (await ctx.admin.schedules.list(queue)).map(scheduleJson) } };
    },
    async putSchedule({ params, body }) {
      const queue = q(params);
      const b = body as { every?: string; cron?: string; tz?: string; data?: unknown; attempts?: number };
      const schedule = await ctx.admin.schedules.add(queue, params.schedule!, {
        everyMs: b.every === undefined ? undefined : parseDuration(b.every, '"every"'),
        cron: b.cron,
        tz: b.tz,
        data: b.data,
        attempts: b.attempts,
      });
      return { body: { queue, ...scheduleJson(schedule) } };
    },
    async deleteSchedule({ params }) {
      const queue = q(params);
      const name = params.schedule!;
      const removed = await ctx.admin.schedules.remove(queue, name);
      if (!removed) throw new HttpError(404, `no schedule ${JSON.stringify(name)} on ${queue}`);
      return { body: { queue, name, removed } };
    },
    async retryDead({ params, body }) {
      const queue = q(params);
      const ids = (body as { ids?: string[] } | undefined)?.ids ?? [];
      return { body: { queue, retried: await ctx.admin.retryDead(queue, ids) } };
    },
    async purgeDead({ params }) {
      const queue = q(params);
      return { body: { queue, purged: await ctx.admin.purgeDead(queue) } };
    },
    async bulkCancel({ params, body }) {
      const queue = q(params);
      let cancelled = 0;
      for (const id of (body as { ids: string[] }).ids)
        if ((await ctx.admin.cancel(id, queue)).outcome === "cancelled") cancelled++;
      return { body: { queue, cancelled } };
    },
    async bulkDelete({ params, body }) {
      const queue = q(params);
      const ids = [...new Set((body as { ids: string[] }).ids)];
      const results = await ctx.admin.deleteJobs(queue, ids);
      const of = (outcome: string) => results.filter((r) => r.outcome === outcome);
      return {
        body: {
          queue,
          deleted: of("deleted").length,
          refused: of("refused").map(({ id, state }) => ({
            id,
            state,
            reason:
              state === "active"
                ? "running: cancel it first"
                : "its fan-out children are not all finished: cancel it first",
          })),
          notFound: of("notFound").map((r) => r.id),
        },
      };
    },
  };
}

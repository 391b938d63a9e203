// Job routes: a queue's jobs page by page, one job's status (the producer's status URL), its
// full detail for the dashboard, downloads of large payloads, logs, and the job actions.
import {
  eventsOfEntries,
  parseAttemptErrors,
  QueueKeys,
  readDeliveries,
  type Delivery,
  type JobInfo,
} from "../../queue/index.ts";
import type { ApiContext } from "../context.ts";
import { HttpError, parseStored } from "../http.ts";
import { parseDuration } from "../../lib/duration.ts";
import { LIVE_STATES, liveJobs } from "../liveJobs.ts";
import { joinStages, progressWhile, type StageView } from "../../records/index.ts";
import { jobTimeline, type RecordedExecution } from "../timeline.ts";
import type { Handlers } from "../router.ts";

/** Payloads above this are cut in the detail view; the full text is a download. */
const SHOWN_BYTES = 64 * 1024;
/** The job's timeline comes from the queue's recent events (its full history is in the records). */
const EVENTS_SCANNED = 1000;

function shown(text: string | null | undefined) {
  if (text === null || text === undefined || text === "") return null;
  const bytes = Buffer.byteLength(text);
  if (bytes <= SHOWN_BYTES) return { value: parseStored(text), bytes, truncated: false };
  return { text: text.slice(0, SHOWN_BYTES), bytes, truncated: true };
}

const iso = (ms: number | undefined) => (ms && ms > 0 ? new Date(ms).toISOString() : null);

/** A stage as GET /jobs/{id} gives it: optional fields absent, results as JSON. */
function stageBody(st: StageView) {
  return {
    queue: st.queue,
    state: st.state,
    attempts: st.attempts,
    ...(st.result !== undefined ? { result: parseStored(st.result) } : {}),
    ...(st.error !== undefined ? { error: parseStored(st.error) } : {}),
    ...(st.startedAt ? { startedAt: iso(st.startedAt) } : {}),
    ...(st.finishedAt ? { finishedAt: iso(st.finishedAt) } : {}),
  };
}

/** A notification delivery as GET /jobs/{id}/detail gives it: times as ISO text. */
function notificationBody(d: Delivery) {
  return {
    event: d.event,
    url: d.url,
    state: d.state,
    attempts: d.attempts,
    status: d.status,
    answer: d.answer,
    firstAt: iso(d.firstAt),
    lastAt: iso(d.lastAt),
    nextAt: d.state === "retrying" ? iso(d.nextAt) : null,
  };
}

/** The states a long poll answers at once. */
const ENDED = new Set(["completed", "dead", "cancelled"]);
export const LONG_POLL_MAX_MS = 60_000;

/** `?wait=` in ms (0 without one); more than a minute or not a duration is a 400 naming it. */
function longPoll(text: string | undefined): number {
  if (text === undefined || text === "") return 0;
  let ms: number;
  try {
    ms = parseDuration(text, "wait");
  } catch (err) {
    throw HttpError.field(400, "query.wait", (err as Error).message);
  }
  if (ms > LONG_POLL_MAX_MS)
    throw HttpError.field(
      400,
      "query.wait",
      `wait ${JSON.stringify(text)} is longer than the most a long poll waits, 60s`,
    );
  return ms;
}

export function jobHandlers(ctx: ApiContext): Handlers {
  /** The live record from Redis (the router refused a queue outside the allow-list). */
  async function live(id: string, queue?: string): Promise<JobInfo | null> {
    const info = await ctx.admin.job(id, queue);
    if (info && info.queue && !ctx.auth.queueAllowed(info.queue)) return null;
    return info;
  }

  function notFound(id: string): never {
    throw new HttpError(404, `job ${id} not found (never enqueued, or its record expired)`);
  }

  return {
    async listJobs({ params, query }) {
      const queue = params.queue!;
      const state = query.state as string;
      const limit = query.limit as number;
      const cursor = query.cursor as string | undefined;
      // Live states come from Redis (exact, now); history and `all` from the records.
      if ((LIVE_STATES as string[]).includes(state) && (!ctx.records || query.from === undefined)) {
        const page = await liveJobs(ctx.redis, queue, state as (typeof LIVE_STATES)[number], limit, cursor);
        return { body: { queue, state, source: "redis", ...page } };
      }
      if (!ctx.records)
        throw new HttpError(
          503,
          `listing ${state} jobs needs PostgreSQL (--database); live states work without it`,
        );
      const page = await ctx.records.listJobs({
        queue,
        state,
        cursor,
        limit,
        from: query.from as number | undefined,
        to: query.to as number | undefined,
      });
      return { body: { queue, state, source: "records", ...page } };
    },

    async jobStatus({ params, query }) {
      const id = params.id!;
      const waitMs = longPoll(query.wait as string | undefined);
      let info = await live(id, query.queue as string | undefined);
      if (!info) notFound(id);
      if (waitMs > 0 && !ENDED.has(info.state)) {
        // (one reader of the event streams for all the server's long polls: queue/waiter.ts)
        await ctx.producer.waitFor([{ id, queue: info.queue }], { timeoutMs: waitMs });
        info = (await live(id, info.queue)) ?? notFound(id);
      }
      const recorded = ctx.records ? await ctx.records.stages(info.queue.split("/")[0]!, id) : [];
      return {
        body: {
          id: info.id,
          queue: info.queue,
          state: info.state,
          progress: progressWhile(info.state, info.progress ?? null),
          progressMessage: progressWhile(info.state, info.progressMessage ?? null),
          attempts: info.attemptsMade,
          maxAttempts: info.attempts,
          result: parseStored(info.result),
          error: parseStored(info.error),
          deadReason: info.deadReason ?? null,
          task: info.task ?? null,
          previousErrors: parseAttemptErrors(info.errors),
          rejected: info.rejected ? parseStored(info.rejected) : null,
          stages: joinStages(info.stages, recorded, info.state).map(stageBody),
        },
      };
    },

    async jobDetail({ params, query }) {
      const id = params.id!;
      const queueParam = query.queue as string | undefined;
      const info = await live(id, queueParam);
      let row = null;
      if (ctx.records) {
        const pipeline = (info?.queue || queueParam)?.split("/")[0];
        if (pipeline) row = await ctx.records.job(pipeline, id);
        else row = (await ctx.records.byId(id, 1))[0] ?? null;
        if (row && !ctx.auth.queueAllowed(row.queue)) row = null;
        if (row && !("data" in row)) row = await ctx.records.job(row.pipeline, id);
      }
      if (!info && !row) notFound(id);
      const queue = info?.queue || row!.queue;
      const pipeline = queue.split("/")[0]!;
      const [executions, children, stages, recent, logs, deliveries] = await Promise.all([
        ctx.records ? ctx.records.executions(pipeline, id) : [],
        ctx.records ? ctx.records.children(pipeline, id) : [],
        ctx.records ? ctx.records.stages(pipeline, id) : [],
        ctx.redis.xrevrange(new QueueKeys(queue).events, "+", "-", "COUNT", EVENTS_SCANNED),
        jobLogs(ctx, id, queue),
        readDeliveries(ctx.redis, pipeline, id),
      ]);
      const oldest = recent.at(-1)?.[0];
      const timeline = jobTimeline({
        stream: eventsOfEntries(recent.reverse(), queue)
          .filter((e) => e.id === id)
          .map(({ eventId, type, fields: { token: _lease, ...f } }) => ({ eventId, type, ...f })),
        scannedFrom: oldest ? Number(oldest.split("-")[0]) : null,
        // The records' creation is the job's first enqueue; Redis's is the current stage's.
        createdAt: row?.createdAt ? new Date(row.createdAt).getTime() : info?.createdAt || null,
        executions: executions as unknown as RecordedExecution[],
      });
      const state = info?.state ?? (row!.state === "queued" ? "ready" : row!.state);
      const r = row as
        | (typeof row & {
            data?: string | null;
            result?: string | null;
            error?: string | null;
            flowId?: string | null;
            flowKey?: string | null;
          })
        | null;
      const flow = info?.flow
        ? { id: info.flow.id, key: info.flow.key }
        : r?.flowId
          ? { id: r.flowId, key: r.flowKey ?? "" }
          : null;
      return {
        body: {
          id,
          queue,
          pipeline,
          state,
          progress: progressWhile(state, info?.progress ?? row?.progress ?? null),
          progressMessage: progressWhile(state, info?.progressMessage ?? row?.progressMessage ?? null),
          // (the records count the current stage's attempts as Redis does: failed or completed)
          attempts:
            info?.attemptsMade ?? stages.findLast((st) => st.queue === queue)?.attempts ?? row?.attempts ?? 0,
          maxAttempts: info?.attempts ?? row?.maxAttempts ?? null,
          stalls: info?.stalls ?? row?.stalls ?? 0,
          priority: info?.priority ?? null,
          createdAt: iso(info?.createdAt) ?? row?.createdAt ?? null,
          startedAt: iso(info?.startedAt) ?? row?.startedAt ?? null,
          finishedAt: iso(info?.finishedAt) ?? row?.finishedAt ?? null,
          deadReason: info?.deadReason ?? row?.deadReason ?? null,
          worker: info?.worker ?? null,
          parentId: row?.parentId ?? null,
          idempotencyKey: info?.idempotencyKey ?? row?.idempotencyKey ?? null,
          task: info?.task ?? null,
          flow,
          data: shown(info?.data ?? r?.data),
          result: shown(info?.result ?? r?.result),
          error: shown(info?.error ?? r?.error),
          previousErrors: parseAttemptErrors(info?.errors),
          rejected: shown(info?.rejected),
          executions,
          events: timeline.events,
          eventsTrimmed: timeline.trimmed,
          stages: joinStages(info?.stages ?? null, stages, state).map((st) => ({
            ...stageBody(st),
            data: shown(st.data),
            result: shown(st.result),
            error: shown(st.error),
          })),
          children,
          logs,
          notifications: deliveries.map(notificationBody),
          sources: { redis: info !== null, records: row !== null },
          actions: {
            retry: state === "dead",
            cancel: ["ready", "delayed", "active"].includes(state),
            promote: state === "delayed",
          },
        },
      };
    },

    async jobPayload({ params, query, res }) {
      const id = params.id!;
      const part = query.part as "data" | "result" | "error";
      const info = await live(id, query.queue as string | undefined);
      let text = info?.[part];
      if (!text && ctx.records) {
        const row = info ? await ctx.records.job(info.queue.split("/")[0]!, id) : null;
        text = (row as Record<string, string | null> | null)?.[part] ?? undefined;
      }
      if (!info && !text) notFound(id);
      res.writeHead(200, {
        "content-type": "application/json; charset=utf-8",
        "content-disposition": `attachment; filename="${id}.${part}.json"`,
        "cache-control": "no-store",
      });
      res.end(text ?? "null");
      return undefined;
    },

    async jobLogs({ params, query }) {
      const id = params.id!;
      const info = await live(id, query.queue as string | undefined);
      if (!info) notFound(id);
      return { body: { id, queue: info.queue, logs: await jobLogs(ctx, id, info.queue) } };
    },

    async retryJob({ params, query }) {
      const id = params.id!;
      const queue = query.queue as string;
      const moved = await ctx.admin.retryDead(queue, [id]);
      if (moved === 0)
        throw new HttpError(409, `job ${id} is not dead in ${queue}: nothing to retry`, {}, null, "not_dead");
      return { body: { id, queue, retried: true } };
    },

    async cancelJob({ params, query }) {
      const id = params.id!;
      const info = await live(id, query.queue as string | undefined);
      if (!info) notFound(id);
      const r = await ctx.admin.cancel(id, query.queue as string | undefined);
      if (r.outcome === "notFound") notFound(id);
      if (r.outcome === "finished")
        throw new HttpError(
          409,
          `job ${id} is already ${r.state}: nothing to cancel`,
          {},
          null,
          "already_finished",
        );
      return { body: r };
    },

    async promoteJob({ params, query }) {
      const id = params.id!;
      const info = await live(id, query.queue as string | undefined);
      if (!info) notFound(id);
      const r = await ctx.admin.promote(id, info.queue);
      if (r.outcome === "notFound") notFound(id);
      if (r.outcome === "notDelayed")
        throw new HttpError(
          409,
          `job ${id} is ${r.state}, not delayed: nothing to run now`,
          {},
          null,
          "not_delayed",
        );
      return { body: { id, queue: info.queue, promoted: true } };
    },
  };
}

/** The lines the job's handlers logged (ctx.log), oldest first. */
async function jobLogs(
  ctx: ApiContext,
  id: string,
  queue: string,
): Promise<{ at: number; message: string }[]> {
  const lines = await ctx.admin.jobLogs(id, queue).catch((err: unknown) => {
    ctx.metrics.error("partial_read", err, { queue, id, read: "logs" });
    return [];
  });
  // The execution id is the lease token: it stays server-side, like in the events.
  return lines.map(({ at, message }) => ({ at, message }));
}

// Queue routes: the queue list with live counts, one queue's counts, stats, workers, the
// enqueue endpoint, and the queue-level actions (pause/resume, rate limit, dead letters).
import { QueueKeys, type QueueAdmin } from "../../queue/index.ts";
import { adminMethod, requireRecords, type ApiContext } from "../context.ts";
import type { Handlers } from "../router.ts";

export interface QueueSummary {
  queue: string;
  ready: number;
  delayed: number;
  inflight: number;
  completed: number;
  dead: number;
  cancelled: number;
  backlog: number;
  paused: boolean | null;
  rateLimit: { max: number; perMs: number } | null;
  /** Age (ms) of the job at the head of the ready line; null when none waits. */
  oldestWaitingMs: number | null;
  workers: number;
}

/** Optional reads the queue library may offer (pause state, rate limit); null when it does not yet. */
async function control(
  admin: QueueAdmin,
  queue: string,
): Promise<Pick<QueueSummary, "paused" | "rateLimit">> {
  const read = (admin as unknown as { control?: (q: string) => Promise<Partial<QueueSummary>> }).control;
  if (typeof read !== "function") return { paused: null, rateLimit: null };
  const c = await read.call(admin, queue);
  return { paused: c.paused ?? null, rateLimit: c.rateLimit ?? null };
}

export async function queueSummary(ctx: ApiContext, queue: string): Promise<QueueSummary> {
  const k = new QueueKeys(queue);
  const [counts, counters, workers, head, ctl] = await Promise.all([
    ctx.admin.counts(queue),
    ctx.admin.counters(queue),
    ctx.redis.hlen(k.workers),
    ctx.redis.zrange(k.ready, 0, 0),
    control(ctx.admin, queue),
  ]);
  let oldestWaitingMs: number | null = null;
  if (head[0]) {
    const created = Number(await ctx.redis.hget(k.job(head[0]), "createdAt").catch(() => null));
    if (created > 0) oldestWaitingMs = Math.max(0, Date.now() - created);
  }
  return {
    queue,
    ready: counts.ready,
    delayed: counts.delayed,
    inflight: counts.inflight,
    completed: counts.completed,
    dead: counts.dead,
    cancelled: counters.cancelled ?? 0,
    backlog: counts.backlog,
    ...ctl,
    oldestWaitingMs,
    workers,
  };
}

export function queueHandlers(ctx: ApiContext): Handlers {
  const q = (params: Record<string, string>) => {
    ctx.auth.assertQueue(params.queue!);
    return params.queue!;
  };
  return {
    async listQueues() {
      const queues = await ctx.directory.list();
      return { body: { queues: await Promise.all(queues.map((name) => queueSummary(ctx, name))) } };
    },
    async queueCounts({ params }) {
      const queue = q(params);
      return { body: { ...(await ctx.admin.counts(queue)), ...(await queueSummary(ctx, queue)) } };
    },
    async enqueue({ params, body }) {
      const queue = q(params);
      const { data, ...options } = body as { data: unknown } & Record<string, never>;
      const result = await ctx.producer.enqueue(queue, data, options);
      const status = `/jobs/${encodeURIComponent(result.id)}?queue=${encodeURIComponent(queue)}`;
      return {
        status: 202,
        body: { id: result.id, created: result.created, status },
        headers: { location: status },
      };
    },
    async queueStats({ params }) {
      const queue = q(params);
      if (!ctx.records) return { body: { queue, minutes: [], history: false } };
      return { body: { queue, minutes: await requireRecords(ctx).minuteStats(queue), history: true } };
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
      await adminMethod<[string], unknown>(ctx.admin, "pause")(queue);
      return { body: { queue, paused: true } };
    },
    async resume({ params }) {
      const queue = q(params);
      await adminMethod<[string], unknown>(ctx.admin, "resume")(queue);
      return { body: { queue, paused: false } };
    },
    async setRateLimit({ params, body }) {
      const queue = q(params);
      const { max, perMs } = body as { max: number; perMs: number };
      await adminMethod<[string, number, number], unknown>(ctx.admin, "setRateLimit")(queue, max, perMs);
      return { body: { queue, rateLimit: max === 0 ? null : { max, perMs } } };
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
      const cancel = adminMethod<[string, string?], unknown>(ctx.admin, "cancel");
      let cancelled = 0;
      for (const id of (body as { ids: string[] }).ids) if (await cancel(id, queue)) cancelled++;
      return { body: { queue, cancelled } };
    },
  };
}

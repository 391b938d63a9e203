// One search box: `field=value` (optionally `data:` or `result:` first) is a JSON containment
// query on the records' payload/result (GIN index); `task:<name>` the records' jobs of a task;
// `flow:<id>` the records' jobs of a flow;
// anything else is a job id and an
// idempotency key, looked up in PostgreSQL by index (keys too, after their Redis TTL) and in
// Redis directly (works without PG).
import { assertJobId, QueueKeys } from "../../queue/index.ts";
import type { ApiContext } from "../context.ts";
import { HttpError } from "../http.ts";
import { FIELD_QUERY } from "../records.ts";
import type { Handlers } from "../router.ts";
import { jobVisible } from "../access.ts";
import type { Principal } from "../tokens.ts";

/** `task:<name>` (a task name as the contracts spell it). */
const TASK_QUERY = /^task:([A-Za-z0-9][A-Za-z0-9._-]{0,99})$/;
/** `flow:<id>` (a flow id is a job id). */
const FLOW_QUERY = /^flow:([A-Za-z0-9][A-Za-z0-9._:-]{0,199})$/;

interface Hit {
  id: string;
  queue: string;
  state: string;
  matched: "id" | "idempotencyKey" | "task" | "flow" | "data" | "result" | "data or result";
  createdAt: string | null;
  updatedAt: string | null;
}

const validId = (s: string) => {
  try {
    assertJobId(s);
    return true;
  } catch {
    return false;
  }
};

export function searchHandlers(ctx: ApiContext): Handlers {
  async function byIdOrKey(q: string, limit: number): Promise<Hit[]> {
    const hits = new Map<string, Hit>();
    const add = (h: Hit) => {
      const key = `${h.queue}\u0000${h.id}`;
      if (!hits.has(key) && ctx.auth.queueAllowed(h.queue)) hits.set(key, h);
    };
    if (validId(q)) {
      const info = await ctx.admin.job(q);
      if (info && info.queue)
        add({
          id: info.id,
          queue: info.queue,
          state: info.state,
          matched: "id",
          createdAt: info.createdAt ? new Date(info.createdAt).toISOString() : null,
          updatedAt: null,
        });
      if (ctx.records)
        for (const r of await ctx.records.byId(q, limit))
          add({
            id: r.id,
            queue: r.queue,
            state: r.state,
            matched: "id",
            createdAt: r.createdAt,
            updatedAt: r.updatedAt,
          });
    }
    // Idempotency keys live per queue in Redis for the key's TTL: one GET per known queue, sent
    // together (each to its own node on Redis Cluster, where a pipeline may not cross slots).
    const queues = await ctx.directory.list();
    if (q.length <= 500) {
      const ids = await Promise.all(
        queues.map((queue) => ctx.redis.get(new QueueKeys(queue).idempotencyPrefix + q)),
      );
      for (let i = 0; i < queues.length; i++) {
        const id = ids[i];
        if (typeof id !== "string") continue;
        const info = await ctx.admin.job(id, queues[i]);
        add({
          id,
          queue: queues[i]!,
          state: info?.state ?? "expired",
          matched: "idempotencyKey",
          createdAt: info?.createdAt ? new Date(info.createdAt).toISOString() : null,
          updatedAt: null,
        });
      }
    }
    // The records keep the key after its Redis key expired (indexed, migration 5).
    if (ctx.records && q.length <= 500)
      for (const r of await ctx.records.byIdempotencyKey(q, limit))
        add({
          id: r.id,
          queue: r.queue,
          state: r.state,
          matched: "idempotencyKey",
          createdAt: r.createdAt,
          updatedAt: r.updatedAt,
        });
    return [...hits.values()].slice(0, limit);
  }

  /** The hits this principal may see (a named token's queues and groups). */
  async function visible<T extends { id: string; queue: string }>(who: Principal, hits: T[]): Promise<T[]> {
    if (!who.scope) return hits;
    const keep = await Promise.all(hits.map((h) => jobVisible(ctx, who, h.id, h.queue)));
    return hits.filter((_, i) => keep[i]);
  }

  return {
    async search({ query, principal }) {
      const q = (query.q as string).trim();
      const limit = query.limit as number;
      const field = FIELD_QUERY.exec(q);
      if (field) {
        if (!ctx.records)
          throw new HttpError(
            503,
            "searching payload/result fields needs PostgreSQL (--database); ids and keys work without it",
          );
        const part = field[1] as "data" | "result" | undefined;
        const page = await ctx.records.byField({
          part,
          path: field[2]!.split("."),
          value: field[3]!,
          cursor: query.cursor as string | undefined,
          limit,
          queues: ctx.auth.allowList,
          // (in the query: a page of other tenants' hits would come back empty)
          groups: principal.scope?.groups ?? null,
        });
        return {
          body: {
            q,
            kind: "field",
            items: (await visible(principal, page.items)).map((r) => ({
              id: r.id,
              queue: r.queue,
              state: r.state,
              matched: part ?? "data or result",
              createdAt: r.createdAt,
              updatedAt: r.updatedAt,
            })),
            next: page.next,
          },
        };
      }
      if (query.cursor !== undefined)
        throw HttpError.field(
          400,
          "query.cursor",
          'query parameter "cursor" only pages field=value searches',
          "invalid_field",
        );
      // `flow:<id>`: the records' jobs of that flow (indexed, migration 9), by key.
      const flow = FLOW_QUERY.exec(q);
      if (flow && ctx.records) {
        const hits: Hit[] = (await ctx.records.flowJobs(flow[1]!, limit))
          .filter((r) => ctx.auth.queueAllowed(r.queue))
          .map((r) => ({
            id: r.id,
            queue: r.queue,
            state: r.state,
            matched: "flow",
            createdAt: r.createdAt === null ? null : new Date(r.createdAt).toISOString(),
            updatedAt: null,
          }));
        return { body: { q, kind: "flow", items: hits, next: null } };
      }
      // `task:<name>`: the records' jobs of that task (indexed, migration 8), then what the text
      // finds as an id or a key (a job id may look the same).
      const task = TASK_QUERY.exec(q);
      if (task && ctx.records) {
        const hits: Hit[] = (await ctx.records.byTask(task[1]!, limit))
          .filter((r) => ctx.auth.queueAllowed(r.queue))
          .map((r) => ({
            id: r.id,
            queue: r.queue,
            state: r.state,
            matched: "task",
            createdAt: r.createdAt,
            updatedAt: r.updatedAt,
          }));
        const items = await visible(principal, [...hits, ...(await byIdOrKey(q, limit))]);
        return { body: { q, kind: "task", items: items.slice(0, limit), next: null } };
      }
      return {
        body: { q, kind: "id", items: await visible(principal, await byIdOrKey(q, limit)), next: null },
      };
    },
  };
}

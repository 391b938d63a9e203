// A named token's scope, checked once for every route from its declaration in definitions.ts
// (RouteAccess), before the handler runs. Another tenant's queue or job is answered as absent
// (404, the same words as a job that never existed), a missing verb is 403 naming it, and a
// route that shows a whole queue is refused to a token limited to groups.
import { PipelineKeys, pipelineOf } from "../queue/index.ts";
import type { ApiContext } from "./context.ts";
import { HttpError } from "./http.ts";
import type { RequestContext } from "./router.ts";
import { groupInScope, hasVerb, queueInScope, type Principal } from "./tokens.ts";

export const jobNotFound = (id: string) =>
  new HttpError(404, `job ${id} not found (never enqueued, or its record expired)`);
export const queueNotFound = (queue: string) => new HttpError(404, `queue ${queue} not found`);

/** Where a job is and its group (null: not in Redis nor the records). */
export async function jobWhere(
  ctx: ApiContext,
  id: string,
  queueHint?: string,
): Promise<{ queue: string; group: string | null } | null> {
  if (queueHint) {
    // The common case in one command: the job's hash in the hinted queue's pipeline.
    const [queue, group] = await ctx.redis
      .hmget(new PipelineKeys(pipelineOf(queueHint)).job(id), "queue", "group")
      .catch(() => [null, null]);
    if (queue) return { queue, group: group || null };
  }
  const info = await ctx.admin.job(id, queueHint);
  if (info?.queue) {
    const group = await ctx.redis.hget(new PipelineKeys(info.queue.split("/")[0]!).job(id), "group");
    return { queue: info.queue, group: group || null };
  }
  // A job Redis let go: its group as the records keep it (none for records older than migration 11).
  const rows = (await ctx.records?.byId(id)) ?? [];
  const row = queueHint ? rows.find((r) => r.queue === queueHint) : rows[0];
  return row ? { queue: row.queue, group: row.group ?? null } : null;
}

/** Whether this principal may see this job (its queue and group). */
export async function jobVisible(
  ctx: ApiContext,
  who: Principal,
  id: string,
  queue: string,
): Promise<boolean> {
  if (!who.scope) return true;
  if (!queueInScope(who.scope, queue)) return false;
  if (!who.scope.groups) return true;
  const where = await jobWhere(ctx, id, queue);
  return where !== null && groupInScope(who.scope, where.group);
}

function groupsOfBody(body: unknown): (string | undefined)[] {
  const b = body as { group?: string; jobs?: { group?: string }[] };
  return b.jobs ? b.jobs.map((j) => j.group) : [b.group];
}

export async function authorize(ctx: ApiContext, rc: RequestContext): Promise<void> {
  const who = rc.principal;
  const access = rc.route.access;
  if (!who.scope || !access) return;
  const scope = who.scope;
  const queue = rc.params.queue ?? (rc.query.queue as string | undefined);
  // Absent first: a token without the verb learns nothing about another tenant's objects.
  if (queue !== undefined && !queueInScope(scope, queue)) {
    if (access.target === "job") throw jobNotFound(rc.params.id!);
    throw queueNotFound(queue);
  }
  if (access.target === "job") {
    const where = await jobWhere(ctx, rc.params.id!, queue);
    if (where === null || !queueInScope(scope, where.queue) || !groupInScope(scope, where.group))
      throw jobNotFound(rc.params.id!);
  }
  if (access.groups === "path" && !groupInScope(scope, rc.params.group))
    throw new HttpError(404, `group ${rc.params.group} not found in queue ${queue}`);
  if (!hasVerb(scope, access.verb))
    throw new HttpError(
      403,
      `token ${who.name} may not ${access.verb} (its verbs: ${scope.verbs.join(", ")}): ${rc.route.summary.split(":")[0]}`,
      {},
      null,
      "missing_verb",
    );
  if (scope.groups && access.groups === "refuse")
    throw new HttpError(
      403,
      `token ${who.name} is limited to groups ${scope.groups.join(", ")}: this route shows or changes a whole queue`,
      {},
      null,
      "group_scoped",
    );
  if (scope.groups && access.groups === "ids") {
    const ids = (rc.body as { ids?: string[] } | undefined)?.ids ?? [];
    if (ids.length === 0)
      throw HttpError.field(
        403,
        "body.ids",
        `token ${who.name} is limited to groups ${scope.groups.join(", ")}: name the jobs (ids)`,
        "group_scoped",
      );
    const where = await Promise.all(ids.map((id) => jobWhere(ctx, id, queue)));
    const i = where.findIndex((w) => w === null || w.queue !== queue || !groupInScope(scope, w.group));
    if (i >= 0) throw jobNotFound(ids[i]!);
  }
  if (scope.groups && access.groups === "body") {
    const i = groupsOfBody(rc.body).findIndex((g) => !groupInScope(scope, g));
    if (i >= 0) {
      const field = (rc.body as { jobs?: unknown }).jobs ? `body.jobs.${i}.group` : "body.group";
      throw HttpError.field(
        403,
        field,
        `token ${who.name} enqueues only into groups ${scope.groups.join(", ")}: set "group" to one of them`,
        "group_scoped",
      );
    }
  }
}

// GET /flows/{id}: a flow's jobs and their states (docs/flows.md). Read from Redis as `conveyor
// flow <id>` reads it (queue/flows.ts); once Redis has let the flow go, from the records
// (records/flows.ts).
import { flowViewOf } from "../../queue/index.ts";
import type { ApiContext } from "../context.ts";
import { HttpError } from "../http.ts";
import { queueInScope } from "../tokens.ts";
import type { Handlers } from "../router.ts";

export function flowHandlers(ctx: ApiContext): Handlers {
  return {
    async flow({ params, query, principal }) {
      const id = params.id!;
      const pipeline = query.pipeline as string | undefined;
      let source: "redis" | "records" = "redis";
      let view = await ctx.admin.flow(id, pipeline);
      if (!view && ctx.records) {
        view = await ctx.records.flow(id, pipeline);
        source = "records";
      }
      // (a flow is one pipeline's; queues outside the allow-list or the token's scope are not shown)
      const shown =
        view?.jobs.filter(
          (j) => !j.queue || (ctx.auth.queueAllowed(j.queue) && queueInScope(principal.scope, j.queue)),
        ) ?? [];
      if (!view || shown.length === 0)
        throw new HttpError(
          404,
          `flow ${id} not found${pipeline ? ` in pipeline ${pipeline}` : ""} (never enqueued, or expired${
            ctx.records ? " from Redis and the records" : ""
          })`,
        );
      const v = flowViewOf(view.id, view.pipeline, view.createdAt, shown);
      return {
        body: {
          id: v.id,
          pipeline: v.pipeline,
          createdAt: v.createdAt > 0 ? new Date(v.createdAt).toISOString() : null,
          source,
          counts: v.counts,
          jobs: v.jobs,
        },
      };
    },
  };
}

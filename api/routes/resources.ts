// The Resources page's read: every resource of the pipelines this server shows (a pipeline is
// shown when the allow-list has one of its queues, or there is none), with its last hour of
// samples (api/resourceHistory.ts).
import { listResources, pipelineOf } from "../../queue/index.ts";
import type { ApiContext } from "../context.ts";
import type { Handlers } from "../router.ts";

export function resourceHandlers(ctx: ApiContext): Handlers {
  return {
    async listResources({ principal }) {
      const allowed = ctx.auth.allowList;
      const pipelines = allowed === null ? null : new Set(allowed.map((q) => pipelineOf(q)));
      const scoped = principal.scope?.pipelines;
      const states = (await listResources(ctx.redis)).filter(
        (r) => (!pipelines || pipelines.has(r.pipeline)) && (!scoped || scoped.includes(r.pipeline)),
      );
      const now = Date.now();
      const resources = await Promise.all(
        states.map(async (r) => ({
          ...r,
          history: ctx.resourceHistory ? await ctx.resourceHistory.read(r.pipeline, r.name, now) : [],
        })),
      );
      return { body: { resources } };
    },
  };
}

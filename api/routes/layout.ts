// The pipeline view's layout: the layout in force and its live readers (docs/protocol.md,
// "Layout versions"). A pipeline none of whose queues the allow-list has is not served here (404),
// nor one outside a named token's pipelines.
import { layoutStatus, pipelineOf } from "../../queue/index.ts";
import type { ApiContext } from "../context.ts";
import { HttpError } from "../http.ts";
import type { Handlers } from "../router.ts";

export function layoutHandlers(ctx: ApiContext): Handlers {
  return {
    async pipelineLayout({ params, principal }) {
      const pipeline = params.pipeline!;
      const allowed = ctx.auth.allowList;
      if (allowed !== null && !allowed.some((q) => pipelineOf(q) === pipeline))
        throw new HttpError(404, `pipeline ${pipeline} is not served here (allow-list)`);
      if (principal.scope?.pipelines && !principal.scope.pipelines.includes(pipeline))
        throw new HttpError(404, `pipeline ${pipeline} not found`);
      return { body: await layoutStatus(ctx.redis, pipeline) };
    },
  };
}

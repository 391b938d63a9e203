// The Pools page's reads: 404 with a reason when this server has no Kubernetes API.
import type { ApiContext, PoolSource } from "../context.ts";
import { HttpError } from "../http.ts";
import type { Handlers } from "../router.ts";
import { queueInScope, type Principal } from "../tokens.ts";

export function poolHandlers(ctx: ApiContext): Handlers {
  const reader = (): PoolSource => {
    if (!ctx.pools)
      throw new HttpError(404, "no Kubernetes API configured for this server (kubeconfig or in-cluster)");
    return ctx.pools;
  };
  const allowed = (who: Principal) => (q: string) => ctx.auth.queueAllowed(q) && queueInScope(who.scope, q);
  return {
    async listPools({ principal }) {
      return { body: { pools: await reader().list(allowed(principal)) } };
    },
    async poolDetail({ params, principal }) {
      const pool = (await reader().detail(params.namespace!, params.name!, allowed(principal))) as {
        queue: string;
        rollout: { canaryHash: string | null } | null;
      } | null;
      if (!pool) throw new HttpError(404, `WorkerPool ${params.namespace}/${params.name} not found`);
      const h = ctx.rolloutHistory;
      if (pool.rollout)
        Object.assign(pool.rollout, {
          sampleSeconds: h ? h.intervalMs / 1000 : null,
          history: h && pool.rollout.canaryHash ? await h.read(pool.queue, pool.rollout.canaryHash) : [],
        });
      return { body: pool };
    },
  };
}

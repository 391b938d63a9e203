// Group routes (docs/protocol.md, "Groups"): a queue's groups with their waiting and running jobs
// and limits, pause/resume of one group, a group's limits and the default for every group. The
// router has checked `{queue}` against the allow-list; the group name's bytes and the limits'
// ranges are checked by queue/groups.ts, whose messages name the rule.
import {
  groupJobs,
  InvalidGroupError,
  listGroups,
  topGroups,
  parseRateLimit,
  pauseGroup,
  RateLimitError,
  resumeGroup,
  setGroupLimit,
  type GroupLimit,
  type GroupOnDead,
  type GroupState,
  type RateLimit,
  type TopGroups,
} from "../../queue/index.ts";
import type { ApiContext } from "../context.ts";
import { HttpError } from "../http.ts";
import type { Handlers } from "../router.ts";
import { groupInScope, queueInScope } from "../tokens.ts";

interface LimitBody {
  concurrency?: number | null;
  rate?: string | null;
  weight?: number | null;
  onDead?: GroupOnDead | null;
}

/** The body's limits as setGroupLimit takes them; a 400 naming the field otherwise. */
function limits(body: LimitBody): GroupLimit {
  if (Object.values(body).every((v) => v === undefined))
    throw HttpError.field(
      400,
      "body",
      'body must set "concurrency", "rate", "weight" and/or "onDead" (null removes one)',
      "missing_field",
    );
  let rate: RateLimit | null | undefined;
  try {
    rate = body.rate === undefined || body.rate === null ? body.rate : parseRateLimit(body.rate);
  } catch (err) {
    if (err instanceof RateLimitError) throw HttpError.field(400, "body.rate", err.message, "invalid_field");
    throw err;
  }
  return { concurrency: body.concurrency, rate, weight: body.weight, onDead: body.onDead };
}

/** queue/groups.ts's input errors as 400s naming the field. */
async function checked<T>(run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (err) {
    if (err instanceof InvalidGroupError) {
      const field = /^(concurrency|weight|onDead)\b/.exec(err.message)?.[1];
      throw HttpError.field(400, field ? `body.${field}` : "path.group", err.message, "invalid_field");
    }
    if (err instanceof RateLimitError) throw HttpError.field(400, "body.rate", err.message, "invalid_field");
    throw err;
  }
}

/** How long a bounded listing is served from memory: one scan per queue and query per window, whoever asks. */
const TOP_CACHE_MS = 3000;

export function groupHandlers(ctx: ApiContext): Handlers {
  const topCache = new Map<string, { at: number; value: Promise<TopGroups> }>();
  function cachedTop(queue: string, top: number, search: string | undefined): Promise<TopGroups> {
    const key = `${queue}\u0000${top}\u0000${search ?? ""}`;
    const now = Date.now();
    const hit = topCache.get(key);
    if (hit && now - hit.at < TOP_CACHE_MS) return hit.value;
    for (const [k, v] of topCache) if (now - v.at >= TOP_CACHE_MS) topCache.delete(k);
    const value = checked(() => topGroups(ctx.redis, queue, { top, search }));
    value.catch(() => topCache.delete(key));
    topCache.set(key, { at: now, value });
    return value;
  }

  /** One group's state now (a group with nothing waiting or running and no setting: the defaults). */
  async function groupState(queue: string, group: string): Promise<GroupState> {
    const all = await listGroups(ctx.redis, queue);
    return (
      all.groups.find((g) => g.group === group) ?? {
        group,
        waiting: 0,
        running: 0,
        concurrency: all.defaultConcurrency,
        override: false,
        rate: all.defaultRate,
        paused: false,
        weight: 1,
        onDead: all.defaultOnDead,
        blockedBy: null,
      }
    );
  }

  return {
    // A tenant's page: only its groups, never a queue-wide number (those mix in other groups).
    async groupsOverview({ query, principal }) {
      const scope = principal.scope;
      const asked = (query.groups as string | undefined)?.split(",").filter((g) => g !== "");
      if (!scope?.groups && !asked?.length)
        throw HttpError.field(
          400,
          "query.groups",
          "name the groups (groups=a,b): a token not limited to groups has no groups of its own",
          "missing_field",
        );
      const groups = scope?.groups ? (asked ?? scope.groups).filter((g) => groupInScope(scope, g)) : asked!;
      const queues = (await ctx.directory.list()).filter((q) => queueInScope(scope, q));
      const [states, outcomes, recent] = await Promise.all([
        Promise.all(queues.map((q) => listGroups(ctx.redis, q))),
        ctx.records && groups.length ? ctx.records.groupOutcomes(queues, groups) : null,
        ctx.records && groups.length ? ctx.records.groupRecent(queues, groups, 50) : null,
      ]);
      const items = queues.flatMap((queue, i) =>
        groups.flatMap((group) => {
          const live = (states[i]!.groups as GroupState[]).find((g) => g.group === group);
          const done = outcomes?.find((o) => o.queue === queue && o.group === group);
          if (!live && !done) return [];
          return [
            {
              queue,
              ...(live ?? {
                group,
                waiting: 0,
                running: 0,
                concurrency: states[i]!.defaultConcurrency,
                override: false,
                rate: states[i]!.defaultRate,
                paused: false,
                weight: 1,
                onDead: states[i]!.defaultOnDead,
                blockedBy: null,
              }),
              completed: done ? done.completed : ctx.records ? 0 : null,
              dead: done ? done.dead : ctx.records ? 0 : null,
              cancelled: done ? done.cancelled : ctx.records ? 0 : null,
            },
          ];
        }),
      );
      return { body: { groups, items, recent } };
    },

    async listGroups({ params, query, principal }) {
      const queue = params.queue!;
      const search = query.search as string | undefined;
      const view =
        query.top !== undefined || search !== undefined
          ? await cachedTop(queue, Number(query.top ?? 50), search)
          : await listGroups(ctx.redis, queue);
      const scope = principal.scope;
      if (!scope?.groups) return { body: { queue, ...view } };
      // A group-scoped token: its groups only, and totals of those alone.
      const groups = (view.groups as GroupState[]).filter((g) => groupInScope(scope, g.group));
      const waiting = groups.reduce((n, g) => n + g.waiting, 0);
      return {
        body: {
          queue,
          ...view,
          groups,
          waiting,
          ...("groupsWaiting" in view ? { groupsWaiting: groups.filter((g) => g.waiting > 0).length } : {}),
        },
      };
    },
    async groupJobs({ params, query }) {
      const queue = params.queue!;
      return {
        body: {
          queue,
          ...(await checked(() => groupJobs(ctx.redis, queue, params.group!, Number(query.limit ?? 50)))),
        },
      };
    },
    async pauseGroup({ params }) {
      const queue = params.queue!;
      topCache.clear();
      await checked(() => pauseGroup(ctx.redis, queue, params.group!));
      return { body: { queue, ...(await groupState(queue, params.group!)) } };
    },
    async resumeGroup({ params }) {
      const queue = params.queue!;
      topCache.clear();
      await checked(() => resumeGroup(ctx.redis, queue, params.group!));
      return { body: { queue, ...(await groupState(queue, params.group!)) } };
    },
    async setGroupLimit({ params, body }) {
      const queue = params.queue!;
      await checked(() => setGroupLimit(ctx.redis, queue, params.group!, limits(body as LimitBody)));
      return { body: { queue, ...(await groupState(queue, params.group!)) } };
    },
    async setDefaultGroupLimit({ params, body }) {
      const queue = params.queue!;
      await checked(() => setGroupLimit(ctx.redis, queue, undefined, limits(body as LimitBody)));
      const all = await listGroups(ctx.redis, queue);
      return {
        body: {
          queue,
          defaultConcurrency: all.defaultConcurrency,
          defaultRate: all.defaultRate,
          defaultOnDead: all.defaultOnDead,
        },
      };
    },
  };
}

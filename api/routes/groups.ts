// Group routes (docs/protocol.md, "Groups"): a queue's groups with their waiting and running jobs
// and limits, pause/resume of one group, a group's limits and the default for every group. The
// router has checked `{queue}` against the allow-list; the group name's bytes and the limits'
// ranges are checked by queue/groups.ts, whose messages name the rule.
import {
  InvalidGroupError,
  listGroups,
  parseRateLimit,
  pauseGroup,
  RateLimitError,
  resumeGroup,
  setGroupLimit,
  type GroupLimit,
  type GroupOnDead,
  type GroupState,
  type RateLimit,
} from "../../queue/index.ts";
import type { ApiContext } from "../context.ts";
import { HttpError } from "../http.ts";
import type { Handlers } from "../router.ts";

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

export function groupHandlers(ctx: ApiContext): Handlers {
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
    async listGroups({ params }) {
      const queue = params.queue!;
      return { body: { queue, ...(await listGroups(ctx.redis, queue)) } };
    },
    async pauseGroup({ params }) {
      const queue = params.queue!;
      await checked(() => pauseGroup(ctx.redis, queue, params.group!));
      return { body: { queue, ...(await groupState(queue, params.group!)) } };
    },
    async resumeGroup({ params }) {
      const queue = params.queue!;
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

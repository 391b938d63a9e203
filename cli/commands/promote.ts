// `conveyor promote`: run a delayed job now.
import { QueueAdmin } from "../../queue/index.ts";
import { COMMON, defineCommand, print, UsageError, withRedis } from "../command.ts";
import { QUEUE_SETTING } from "./cancel.ts";

export default defineCommand({
  name: "promote",
  synopsis:
    "  promote <id> [--queue Q] [--json]       run a delayed job now (exit 1: not found or not delayed)",
  settings: { ...COMMON, queue: QUEUE_SETTING },
  async run(o) {
    const [id] = o.positionals;
    if (!id || o.positionals.length !== 1) throw new UsageError("promote <id> [--queue Q]");
    return withRedis(o.str("redis")!, async (redis) => {
      const admin = new QueueAdmin(redis);
      const queue = o.raw("queue") ?? (await admin.job(id))?.queue;
      const r = queue
        ? await admin.promote(id, queue)
        : { id, queue: "", outcome: "notFound" as const, state: "" };
      if (o.bool("json")) print(JSON.stringify(r));
      else if (r.outcome === "promoted")
        print(`promoted ${id}: ready in ${r.queue}, it runs next by priority`);
      else if (r.outcome === "notDelayed") print(`${id} is ${r.state}, not delayed: nothing to run now`);
      else print(`job ${id} not found (never enqueued, or its record expired)`);
      return r.outcome === "promoted" ? 0 : 1;
    });
  },
});

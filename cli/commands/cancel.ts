// `conveyor cancel`: stop a waiting, delayed or running job (a fan-out parent: its children too).
import { QueueAdmin } from "../../queue/index.ts";
import { COMMON, defineCommand, print, UsageError, withRedis } from "../command.ts";

export const QUEUE_SETTING = {
  kind: "string",
  arg: "Q",
  help: "the job's queue (default: looked up from the job)",
} as const;

export default defineCommand({
  name: "cancel",
  synopsis:
    "  cancel <id> [--queue Q] [--json]        cancel a waiting, delayed or running job (a fan-out parent: its children too)",
  settings: { ...COMMON, queue: QUEUE_SETTING },
  async run(o) {
    const [id] = o.positionals;
    if (!id || o.positionals.length !== 1) throw new UsageError("cancel <id> [--queue Q]");
    return withRedis(o.str("redis")!, async (redis) => {
      const r = await new QueueAdmin(redis).cancel(id, o.raw("queue"));
      if (o.bool("json")) print(JSON.stringify(r));
      else if (r.outcome === "cancelled")
        print(
          r.state === "active"
            ? `cancelled ${id} (running: its worker aborts it at the next heartbeat)`
            : r.jobsCancelled > 1 || r.state === "fannedOut" || r.state === "joined"
              ? `cancelled ${id} and ${r.jobsCancelled} unfinished job(s) of its fan-out; the join will not run`
              : `cancelled ${id} (was ${r.state})`,
        );
      else if (r.outcome === "finished") print(`${id} is already ${r.state}: nothing to cancel`);
      else print(`job ${id} not found (never enqueued, or its record expired)`);
      return r.outcome === "cancelled" ? 0 : 1;
    });
  },
});

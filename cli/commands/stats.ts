// `conveyor stats`: a queue's counts and controls.
import { NOT_SERVED_WARNING, QueueAdmin } from "../../queue/index.ts";
import { COMMON, defineCommand, print, UsageError, withRedis } from "../command.ts";

export default defineCommand({
  name: "stats",
  synopsis:
    "  stats <queue> [--json]                  ready, delayed, inflight, completed, dead; paused, rate limit, cancelled, schedules, served",
  settings: COMMON,
  async run(o) {
    const [queue] = o.positionals;
    if (!queue) throw new UsageError("stats needs a queue");
    await withRedis(o.str("redis")!, async (redis) => {
      const view = await new QueueAdmin(redis).stats(queue);
      if (o.bool("json")) return print(JSON.stringify(view));
      for (const [k, v] of Object.entries(view)) print(`${k.padEnd(10)} ${v ?? "none"}`);
      // (a typo in a queue name is otherwise silent: its jobs wait for a worker that never comes)
      if (!view.served) print(`warning: ${NOT_SERVED_WARNING}: is its name right, is its pool deployed?`);
    });
  },
});

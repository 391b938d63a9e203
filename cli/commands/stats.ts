// `conveyor stats`: a queue's counts and controls.
import { COMMON, defineCommand, print, UsageError, withRedis } from "../command.ts";

const admin = () => import("../../queue/admin.ts");

export default defineCommand({
  name: "stats",
  args: ["<queue>"],
  settings: COMMON,
  async run(o) {
    const [queue] = o.positionals;
    if (!queue) throw new UsageError("stats needs a queue");
    const { NOT_SERVED_WARNING, QueueAdmin } = await admin();
    await withRedis(o.str("redis")!, async (redis) => {
      const view = await new QueueAdmin(redis).stats(queue);
      if (o.bool("json")) return print(JSON.stringify(view));
      for (const [k, v] of Object.entries(view)) print(`${k.padEnd(10)} ${v ?? "none"}`);
      // (a typo in a queue name is otherwise silent: its jobs wait for a worker that never comes)
      if (!view.served) print(`warning: ${NOT_SERVED_WARNING}: is its name right, is its pool deployed?`);
    });
  },
});

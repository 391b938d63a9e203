// `conveyor delete`: remove jobs that are not running.
import { COMMON, defineCommand, print, UsageError, withRedis } from "../command.ts";

const admin = () => import("../../queue/admin.ts");

export default defineCommand({
  name: "delete",
  args: ["<queue> <id>…"],
  settings: COMMON,
  async run(o) {
    const [queue, ...ids] = o.positionals;
    if (!queue || ids.length === 0) throw new UsageError("delete <queue> <id>…");
    const { QueueAdmin } = await admin();
    return withRedis(o.str("redis")!, async (redis) => {
      const results = await new QueueAdmin(redis).deleteJobs(queue, [...new Set(ids)]);
      if (o.bool("json")) print(JSON.stringify(results));
      else
        for (const r of results)
          print(
            r.outcome === "deleted"
              ? `deleted ${r.id}${r.state ? ` (was ${r.state})` : ""}`
              : r.outcome === "refused"
                ? `${r.id} is ${r.state === "active" ? "running" : `${r.state} (children unfinished)`}: cancel it first, then delete it`
                : `job ${r.id} not found in ${queue}`,
          );
      return results.every((r) => r.outcome === "deleted") ? 0 : 1;
    });
  },
});

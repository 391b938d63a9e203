// `conveyor dlq`: list, retry or purge a queue's dead letters.
import { COMMON, defineCommand, print, UsageError, withRedis } from "../command.ts";

const admin = () => import("../../queue/admin.ts");

export const LIMIT_SETTING = { kind: "int", help: "at most this many" } as const;

export default defineCommand({
  name: "dlq",
  args: ["list|retry|purge <queue>"],
  settings: { ...COMMON, limit: { ...LIMIT_SETTING, default: 100 } },
  async run(o) {
    const [action, queue] = o.positionals;
    if (!action || !queue) throw new UsageError("dlq list|retry|purge <queue>");
    const asJson = o.bool("json");
    const { QueueAdmin } = await admin();
    await withRedis(o.str("redis")!, async (redis) => {
      const admin = new QueueAdmin(redis);
      if (action === "list") {
        const dead = await admin.deadJobs(queue, o.int("limit"));
        if (asJson) return print(JSON.stringify(dead));
        if (dead.length === 0) return print("no dead letters");
        for (const d of dead) print(`${d.id}  ${new Date(d.deadAt).toISOString()}  ${d.reason}`);
        return;
      }
      const n = action === "retry" ? await admin.retryDead(queue) : await admin.purgeDead(queue);
      const done = action === "retry" ? "retried" : "purged";
      print(asJson ? JSON.stringify({ [done]: n }) : `${done} ${n}`);
    });
  },
});

// `conveyor dlq`: list, retry or purge a queue's dead letters.
import { auditedCli, pipelineOfQueue } from "../audit.ts";
import { assertJobId } from "../../queue/keys.ts";
import { assertQueueNameForUsage, COMMON, defineCommand, print, UsageError, withRedis } from "../command.ts";

const admin = () => import("../../queue/admin.ts");

export const LIMIT_SETTING = { kind: "int", help: "at most this many" } as const;

export default defineCommand({
  name: "dlq",
  args: ["list|purge <queue>", "retry <queue> [<id>…]"],
  settings: { ...COMMON, limit: { ...LIMIT_SETTING, default: 100 } },
  async run(o) {
    const [action, queue, ...given] = o.positionals;
    if (!action || !queue) throw new UsageError("dlq list|retry|purge <queue>");
    assertQueueNameForUsage(queue);
    const ids = [...new Set(given)];
    for (const id of ids) {
      try {
        assertJobId(id);
      } catch (err) {
        throw new UsageError((err as Error).message);
      }
    }
    const asJson = o.bool("json");
    const { QueueAdmin } = await admin();
    return withRedis(o.str("redis")!, async (redis) => {
      const admin = new QueueAdmin(redis);
      if (action === "list") {
        const dead = await admin.deadJobs(queue, o.int("limit"));
        if (asJson) print(JSON.stringify(dead));
        else if (dead.length === 0) print("no dead letters");
        else for (const d of dead) print(`${d.id}  ${new Date(d.deadAt).toISOString()}  ${d.reason}`);
        return 0;
      }
      if (action === "retry" && ids.length > 0) {
        // One id per call, so the answer says which of them were dead letters of this queue.
        const moved = await auditedCli(
          redis,
          {
            pipeline: pipelineOfQueue(queue),
            verb: "operate",
            operation: "retryDead",
            target: queue,
            params: { ids },
          },
          () => Promise.all(ids.map((id) => admin.retryDead(queue, [id]))),
          (moved) => ({ jobs: moved.reduce((a, b) => a + b, 0) }),
        );
        const notDead = ids.filter((_, i) => moved[i] === 0);
        const retried = ids.length - notDead.length;
        if (asJson) print(JSON.stringify({ retried, notDead }));
        else {
          print(`retried ${retried}`);
          for (const id of notDead) print(`${id}: no such dead letter in ${queue}`);
        }
        return retried > 0 ? 0 : 1;
      }
      const n = await auditedCli(
        redis,
        {
          pipeline: pipelineOfQueue(queue),
          verb: action === "retry" ? "operate" : "admin",
          operation: action === "retry" ? "retryDead" : "purgeDead",
          target: queue,
          params: {},
        },
        () => (action === "retry" ? admin.retryDead(queue) : admin.purgeDead(queue)),
        (n) => ({ jobs: n }),
      );
      const done = action === "retry" ? "retried" : "purged";
      print(asJson ? JSON.stringify({ [done]: n }) : `${done} ${n}`);
      return 0;
    });
  },
});

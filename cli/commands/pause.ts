// `conveyor pause` and `conveyor resume`: stop and restart claiming from a queue.
import { auditedCli, pipelineOfQueue } from "../audit.ts";
import { assertQueueNameForUsage, COMMON, defineCommand, print, UsageError, withRedis } from "../command.ts";

const admin = () => import("../../queue/admin.ts");

const pauseOrResume = (pause: boolean) => {
  const name = pause ? "pause" : "resume";
  return defineCommand({
    name,
    args: ["<queue>"],
    settings: COMMON,
    async run(o) {
      const [queue] = o.positionals;
      if (!queue) throw new UsageError(`${name} <queue>`);
      assertQueueNameForUsage(queue);
      const { QueueAdmin } = await admin();
      await withRedis(o.str("redis")!, async (redis) => {
        const admin = new QueueAdmin(redis);
        await auditedCli(
          redis,
          { pipeline: pipelineOfQueue(queue), verb: "operate", operation: name, target: queue, params: {} },
          () => (pause ? admin.pause(queue) : admin.resume(queue)),
        );
        print(
          o.bool("json")
            ? JSON.stringify({ queue, paused: pause })
            : `${queue} ${pause ? "paused" : "resumed"}`,
        );
      });
    },
  });
};

export const pause = pauseOrResume(true);
export const resume = pauseOrResume(false);

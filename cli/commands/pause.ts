// `conveyor pause` and `conveyor resume`: stop and restart claiming from a queue.
import { QueueAdmin } from "../../queue/index.ts";
import { assertQueueNameForUsage, COMMON, defineCommand, print, UsageError, withRedis } from "../command.ts";

const pauseOrResume = (pause: boolean, synopsis: string) => {
  const name = pause ? "pause" : "resume";
  return defineCommand({
    name,
    synopsis,
    settings: COMMON,
    async run(o) {
      const [queue] = o.positionals;
      if (!queue || o.positionals.length !== 1) throw new UsageError(`${name} <queue>`);
      assertQueueNameForUsage(queue);
      await withRedis(o.str("redis")!, async (redis) => {
        const admin = new QueueAdmin(redis);
        await (pause ? admin.pause(queue) : admin.resume(queue));
        print(
          o.bool("json")
            ? JSON.stringify({ queue, paused: pause })
            : `${queue} ${pause ? "paused" : "resumed"}`,
        );
      });
    },
  });
};

export const pause = pauseOrResume(
  true,
  "  pause <queue>                           stop claiming from a queue (running jobs finish)",
);
export const resume = pauseOrResume(
  false,
  "  resume <queue>                          claim from a paused queue again",
);

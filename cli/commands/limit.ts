// `conveyor limit`: a queue's global rate limit.
import { auditedCli, pipelineOfQueue } from "../audit.ts";
import { formatRateLimit, parseRateLimit, type RateLimit } from "../../queue/control.ts";
import { assertQueueNameForUsage, COMMON, defineCommand, print, UsageError, withRedis } from "../command.ts";

const admin = () => import("../../queue/admin.ts");

export default defineCommand({
  name: "limit",
  args: ["<queue> <rate>"],
  settings: COMMON,
  async run(o) {
    const [queue, rate] = o.positionals;
    if (!queue || !rate) throw new UsageError("limit <queue> <N>/<s|m|h> | off");
    assertQueueNameForUsage(queue);
    let parsed: RateLimit | null = null;
    if (rate !== "off") {
      try {
        parsed = parseRateLimit(rate);
      } catch (err) {
        throw new UsageError((err as Error).message);
      }
    }
    const { QueueAdmin } = await admin();
    await withRedis(o.str("redis")!, async (redis) => {
      await auditedCli(
        redis,
        {
          pipeline: pipelineOfQueue(queue),
          verb: "operate",
          operation: "setRateLimit",
          target: queue,
          params: { limit: parsed ? formatRateLimit(parsed) : null },
        },
        () => new QueueAdmin(redis).setRateLimit(queue, parsed),
      );
      const text = parsed ? formatRateLimit(parsed) : null;
      print(
        o.bool("json") ? JSON.stringify({ queue, rateLimit: text }) : `${queue} rate limit ${text ?? "off"}`,
      );
    });
  },
});

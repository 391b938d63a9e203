// `conveyor limit`: a queue's global rate limit.
import { formatRateLimit, parseRateLimit, QueueAdmin, type RateLimit } from "../../queue/index.ts";
import { assertQueueNameForUsage, COMMON, defineCommand, print, UsageError, withRedis } from "../command.ts";

export default defineCommand({
  name: "limit",
  synopsis:
    "  limit <queue> <N>/<s|m|h> | off         a global rate limit: at most N job starts in any window",
  settings: COMMON,
  async run(o) {
    const [queue, rate] = o.positionals;
    if (!queue || !rate || o.positionals.length !== 2)
      throw new UsageError("limit <queue> <N>/<s|m|h> | off");
    assertQueueNameForUsage(queue);
    let parsed: RateLimit | null = null;
    if (rate !== "off") {
      try {
        parsed = parseRateLimit(rate);
      } catch (err) {
        throw new UsageError((err as Error).message);
      }
    }
    await withRedis(o.str("redis")!, async (redis) => {
      await new QueueAdmin(redis).setRateLimit(queue, parsed);
      const text = parsed ? formatRateLimit(parsed) : null;
      print(
        o.bool("json") ? JSON.stringify({ queue, rateLimit: text }) : `${queue} rate limit ${text ?? "off"}`,
      );
    });
  },
});

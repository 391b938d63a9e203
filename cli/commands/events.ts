// `conveyor events`: a queue's job transitions in order, optionally following new ones.
import type { QueueEvent } from "../../queue/events.ts";
import { COMMON, defineCommand, print, UsageError, withRedis } from "../command.ts";
import { LIMIT_SETTING } from "./dlq.ts";

const connection = () => import("../../queue/connection.ts");
const queueEvents = () => import("../../queue/events.ts");

export default defineCommand({
  name: "events",
  args: ["<queue>"],
  settings: {
    ...COMMON,
    follow: { short: "f", kind: "bool", default: false, help: "keep printing new events until interrupted" },
    limit: { ...LIMIT_SETTING, default: 20, help: "recent events shown first" },
  },
  async run(o) {
    const [queue] = o.positionals;
    if (!queue) throw new UsageError("events needs a queue");
    const asJson = o.bool("json");
    const follow = o.bool("follow");
    const count = o.int("limit");
    const show = (e: QueueEvent) => {
      if (asJson) return print(JSON.stringify({ eventId: e.eventId, ...e.fields }));
      const { type, id, queue: _q, at: _at, ...rest } = e.fields;
      const detail = Object.entries(rest)
        .map(([k, v]) => `${k}=${v.length > 80 ? `${v.slice(0, 77)}...` : v}`)
        .join(" ");
      print(`${new Date(e.at).toISOString()} ${type?.padEnd(10)} ${id} ${detail}`);
    };
    const redisUrl = o.str("redis")!;
    const [{ connectRedis }, { QueueEvents }] = await Promise.all([connection(), queueEvents()]);
    await withRedis(redisUrl, async (redis) => {
      const recent = await new QueueEvents(redis).recent(queue, count);
      recent.forEach(show);
      if (!follow) return;
      const blocking = connectRedis(redisUrl, { blocking: true, name: "conveyor-events" });
      const stop = new AbortController();
      process.once("SIGINT", () => stop.abort());
      process.once("SIGTERM", () => stop.abort());
      try {
        for await (const e of new QueueEvents(redis).follow(blocking, queue, {
          from: recent.at(-1)?.eventId ?? "$",
          signal: stop.signal,
        }))
          show(e);
      } finally {
        blocking.disconnect();
      }
    });
  },
});

// `conveyor schedule`: repeating jobs — add, list, remove.
import { auditedCli, pipelineOfQueue } from "../audit.ts";
import { OptionError } from "../../lib/options.ts";
import { makeSchedule, scheduleJson, type ScheduleSpec } from "../../queue/schedules.ts";
import {
  assertQueueNameForUsage,
  COMMON,
  defineCommand,
  parseJson,
  print,
  UsageError,
  when,
  withRedis,
} from "../command.ts";

const admin = () => import("../../queue/admin.ts");

const USAGE =
  "schedule add <queue> <name> (--every 5m | --cron '0 * * * *' [--tz Area/City]) ['<json>'] | list <queue> | remove <queue> <name>";

export default defineCommand({
  name: "schedule",
  args: ["add <queue> <name> [<json>]", "list <queue>", "remove <queue> <name>"],
  settings: {
    ...COMMON,
    every: { kind: "duration", help: "run every D" },
    cron: { kind: "string", arg: "EXPR", help: "run on a cron schedule (5 fields)" },
    tz: { kind: "string", arg: "Area/City", help: "the cron schedule's time zone (default UTC)" },
    attempts: { kind: "int", help: "tries of each job before dead-lettering" },
  },
  async run(o) {
    const [action, queue, name, json] = o.positionals;
    if (!action || !queue) throw new UsageError(USAGE);
    assertQueueNameForUsage(queue);
    const redisUrl = o.str("redis")!;
    const asJson = o.bool("json");
    const { QueueAdmin } = await admin();
    if (action === "add") {
      if (!name) throw new UsageError(USAGE);
      let spec: ScheduleSpec;
      try {
        spec = {
          everyMs: o.maybeDuration("every"),
          cron: o.raw("cron"),
          tz: o.raw("tz"),
          attempts: o.maybeInt("attempts"),
          data: json === undefined ? null : parseJson(json, "schedule data"),
        };
        makeSchedule(name, spec); // every problem named before connecting
      } catch (err) {
        if (err instanceof UsageError || err instanceof OptionError) throw err;
        throw new UsageError((err as Error).message);
      }
      return withRedis(redisUrl, async (redis) => {
        const s = await auditedCli(
          redis,
          {
            pipeline: pipelineOfQueue(queue),
            verb: "operate",
            operation: "putSchedule",
            target: `${queue} schedule:${name}`,
            params: { spec },
          },
          () => new QueueAdmin(redis).schedules.add(queue, name, spec),
        );
        print(
          asJson
            ? JSON.stringify(scheduleJson(s))
            : `schedule ${name} on ${queue}: next run ${when(s.nextRun)}`,
        );
        return 0;
      });
    }
    if (action === "list") {
      return withRedis(redisUrl, async (redis) => {
        const list = await new QueueAdmin(redis).schedules.list(queue);
        if (asJson) print(JSON.stringify(list.map(scheduleJson)));
        else if (list.length === 0) print(`no schedules on ${queue}`);
        else
          for (const s of list)
            print(
              `${s.name.padEnd(20)} ${(s.everyMs !== undefined ? `every ${s.everyMs / 1000}s` : `cron '${s.cron}' ${s.tz ?? "UTC"}`).padEnd(32)} next ${when(s.nextRun)}`,
            );
        return 0;
      });
    }
    if (action === "remove") {
      if (!name) throw new UsageError(USAGE);
      return withRedis(redisUrl, async (redis) => {
        const removed = await auditedCli(
          redis,
          {
            pipeline: pipelineOfQueue(queue),
            verb: "operate",
            operation: "deleteSchedule",
            target: `${queue} schedule:${name}`,
            params: {},
          },
          () => new QueueAdmin(redis).schedules.remove(queue, name),
          (removed) => ({ result: { removed } }),
        );
        print(
          asJson
            ? JSON.stringify({ queue, name, removed })
            : removed
              ? `removed schedule ${name}`
              : `no schedule ${name} on ${queue}`,
        );
        return removed ? 0 : 1;
      });
    }
    throw new UsageError(USAGE);
  },
});

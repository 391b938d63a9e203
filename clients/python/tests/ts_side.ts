// The TypeScript side of the Python suite's interop tests, one command per call:
//   node ts_side.ts enqueue <redis-url> <queue> '<jobs JSON array: {data,id,priority,…}>'
//   node ts_side.ts enqueue-flow <redis-url> <pipeline> '<jobs JSON array>' ['<options JSON>']  (Producer.enqueueFlow)
//   node ts_side.ts job <redis-url> <id>         (QueueAdmin.job + jobLogs, as JSON)
//   node ts_side.ts cancel <redis-url> <id>      (QueueAdmin.cancel)
//   node ts_side.ts cron <redis-url> '<[[expr, tz|null, afterMs], …]>'  (each schedule's next tick)
// prints the reply as JSON on stdout.
import {
  connectRedis,
  Producer,
  QueueAdmin,
  type FlowJob,
  type FlowOptions,
  type JobToEnqueue,
} from "../../../queue/index.ts";
import { nextTick } from "../../../queue/schedules.ts";

const [command, url, ...rest] = process.argv.slice(2);
const redis = connectRedis(url!);
try {
  if (command === "enqueue") {
    const [queue, jobs] = rest;
    const results = await new Producer(redis).enqueueMany(queue!, JSON.parse(jobs!) as JobToEnqueue[]);
    process.stdout.write(JSON.stringify(results));
  } else if (command === "enqueue-flow") {
    const [pipeline, jobs, options] = rest;
    const flow = await new Producer(redis).enqueueFlow(
      pipeline!,
      JSON.parse(jobs!) as FlowJob[],
      JSON.parse(options ?? "{}") as FlowOptions,
    );
    process.stdout.write(JSON.stringify(flow));
  } else if (command === "cancel") {
    process.stdout.write(JSON.stringify(await new QueueAdmin(redis).cancel(rest[0]!)));
  } else if (command === "cron") {
    const cases = JSON.parse(rest[0]!) as [string, string | null, number][];
    const next = cases.map(([cron, tz, after]) => nextTick({ cron, tz: tz ?? undefined, anchor: 0 }, after));
    process.stdout.write(JSON.stringify(next));
  } else if (command === "job") {
    const admin = new QueueAdmin(redis);
    const info = await admin.job(rest[0]!);
    process.stdout.write(JSON.stringify({ info, logs: await admin.jobLogs(rest[0]!) }));
  } else {
    throw new Error(`unknown command ${command}`);
  }
} finally {
  redis.disconnect();
}

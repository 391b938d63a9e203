// Groups: what a claim costs Redis with 1 group and with 100,000 active groups, next to the same
// jobs without a group (docs/protocol.md, "Groups"). Each scenario enqueues its jobs, then one
// consumer claims one job and completes it (settle_jobs, claiming nothing) `--claims` times; the
// figures are from INFO commandstats over the claim loop alone: Redis µs inside the script calls
// per job, and the commands the scripts ran per job. With 100,000 groups every group still has
// waiting work when the loop ends (2 jobs each), so every claim works on a ring of ~100,000.
//   node bench/groups.ts [--claims 5000] [--groups 100000]
// CONVEYOR_QUEUE_MODULE=<path to another checkout's queue/index.ts> measures that code instead
// (its "no group" row: the cost before groups existed).
import { pathToFileURL } from "node:url";
import {
  client,
  delta,
  SNAPSHOT_COMMANDS,
  scriptCostPerJob,
  snapshot,
  startBenchRedis,
} from "./lib/redis.ts";
import { intFlag, cliFlags, progress } from "./lib/util.ts";

type QueueModule = typeof import("../queue/index.ts");
const modulePath = process.env.CONVEYOR_QUEUE_MODULE;
const queueModule = (await import(
  modulePath ? pathToFileURL(modulePath).href : "../queue/index.ts"
)) as QueueModule;
const { Consumer, Producer, connectRedis } = queueModule;

interface Row {
  scenario: string;
  groups: number;
  waiting: number;
  usecPerJob: number;
  commandsPerJob: number;
  byCommand: Record<string, number>;
}

async function scenario(
  url: string,
  name: string,
  groups: number,
  jobs: number,
  claims: number,
): Promise<Row> {
  const driver = client(url);
  await driver.flushall();
  const redis = connectRedis(url);
  const producer = new Producer(redis);
  const q = `bench-${name.replace(/[^a-z0-9]/gi, "")}`;
  for (let start = 0; start < jobs; start += 500) {
    await producer.enqueueMany(
      q,
      Array.from({ length: Math.min(500, jobs - start) }, (_, i) => {
        const n = start + i;
        return groups > 0 ? { data: { n }, group: `tenant-${n % groups}` } : { data: { n } };
      }),
    );
  }
  const c = new Consumer(redis, q, { workerId: "bench", leaseMs: 60_000, retentionSeconds: 0 });
  // (warm: the script library is loaded and the first claim's one-time work is done)
  const warm = await c.claim(1);
  await c.complete(warm.jobs[0]!, null);
  const before = await snapshot(driver);
  for (let i = 0; i < claims; i++) {
    const { jobs: got } = await c.claim(1);
    if (got.length !== 1) throw new Error(`${name}: claim ${i} got ${got.length} jobs`);
    await c.complete(got[0]!, null);
  }
  const after = await snapshot(driver);
  const cost = scriptCostPerJob(delta(before, after, SNAPSHOT_COMMANDS), claims);
  redis.disconnect();
  driver.disconnect();
  return {
    scenario: name,
    groups,
    waiting: jobs,
    ...cost,
  };
}

const flags = cliFlags(["claims", "groups"]);
const claims = intFlag(flags, "claims", 5000);
const manyGroups = intFlag(flags, "groups", 100_000);
const server = await startBenchRedis();
try {
  const rows: Row[] = [];
  progress("no group");
  // (every scenario starts with the same number of waiting jobs: Redis' own cost grows with its
  // size — cache misses in a larger keyspace — whatever the jobs' groups)
  const waiting = Math.max(2 * manyGroups, claims + 1000);
  rows.push(await scenario(server.url, "no group", 0, waiting, claims));
  if (!modulePath) {
    progress("1 group");
    rows.push(await scenario(server.url, "1 group", 1, waiting, claims));
    progress("1,000 groups");
    rows.push(await scenario(server.url, "1,000 groups", 1000, waiting, claims));
    progress(`${manyGroups} groups`);
    rows.push(
      await scenario(server.url, `${manyGroups.toLocaleString("en")} groups`, manyGroups, waiting, claims),
    );
  }
  console.log("| scenario | waiting at start | Redis µs per job (claim + complete) | commands per job |");
  console.log("|---|---|---|---|");
  for (const r of rows)
    console.log(
      `| ${r.scenario} | ${r.waiting.toLocaleString("en")} | ${r.usecPerJob} | ${r.commandsPerJob} |`,
    );
  for (const r of rows) console.log(`${r.scenario}: ${JSON.stringify(r.byCommand)}`);
} finally {
  await server.stop();
}

// Resources: what a job costs Redis with `uses` (a resource of 3 keys limited in requests and
// tokens, docs/protocol.md "Resources") next to the same jobs without (docs/budgets.md, "Cost").
// Each scenario enqueues its jobs, then one consumer claims one job and completes it `--claims`
// times (claim_jobs + settle_jobs, claiming nothing); with `+ usage`, each job also reports its
// usage (resource_usage), as ctx.usage does. Figures from INFO commandstats over that loop alone:
// Redis µs inside the script calls per job, and the commands the scripts ran per job.
//   node bench/resources.ts [--claims 5000]
import {
  Consumer,
  Producer,
  connectRedis,
  correctResourceUsage,
  parseLimits,
  setResource,
} from "../queue/index.ts";
import {
  client,
  delta,
  SNAPSHOT_COMMANDS,
  scriptCostPerJob,
  snapshot,
  startBenchRedis,
} from "./lib/redis.ts";
import { intFlag, cliFlags, progress } from "./lib/util.ts";

interface Row {
  scenario: string;
  usecPerJob: number;
  commandsPerJob: number;
  byCommand: Record<string, number>;
}

async function scenario(
  url: string,
  name: string,
  uses: boolean,
  usage: boolean,
  claims: number,
): Promise<Row> {
  const driver = client(url);
  await driver.flushall();
  const redis = connectRedis(url);
  const producer = new Producer(redis);
  const q = "bench/res";
  // limits far above the loop's rate: every claim admits (the cost measured is the check's)
  await setResource(
    redis,
    q,
    "openai",
    ["k1", "k2", "k3"].map((id) => ({
      id,
      limits: parseLimits("requests=100000000/m,tokens=1000000000000/m"),
    })),
  );
  const jobs = claims + 1000;
  for (let start = 0; start < jobs; start += 500) {
    await producer.enqueueMany(
      q,
      Array.from({ length: Math.min(500, jobs - start) }, (_, i) =>
        uses ? { data: { n: start + i }, uses: { openai: { tokens: 1200 } } } : { data: { n: start + i } },
      ),
    );
  }
  const c = new Consumer(redis, q, { workerId: "bench", leaseMs: 60_000, retentionSeconds: 0 });
  const warm = await c.claim(1);
  await c.complete(warm.jobs[0]!, null);
  const before = await snapshot(driver);
  for (let i = 0; i < claims; i++) {
    const { jobs: got } = await c.claim(1);
    const job = got[0];
    if (!job) throw new Error(`${name}: claim ${i} got nothing`);
    if (usage) {
      const g = job.resources!.openai!;
      await correctResourceUsage(redis, q, "openai", g.key, g.at, { tokens: 980 - 1200 });
    }
    await c.complete(job, null);
  }
  const after = await snapshot(driver);
  const cost = scriptCostPerJob(delta(before, after, SNAPSHOT_COMMANDS), claims);
  redis.disconnect();
  driver.disconnect();
  return {
    scenario: name,
    ...cost,
  };
}

const flags = cliFlags(["claims"]);
const claims = intFlag(flags, "claims", 5000);
const server = await startBenchRedis();
try {
  const rows: Row[] = [];
  progress("no uses");
  rows.push(await scenario(server.url, "no uses", false, false, claims));
  progress("uses");
  rows.push(await scenario(server.url, "uses (1 resource, 3 keys, requests + tokens)", true, false, claims));
  progress("uses + usage");
  rows.push(await scenario(server.url, "uses + a usage report per job", true, true, claims));
  console.log("| scenario | Redis µs per job (claim + complete) | commands per job |");
  console.log("|---|---|---|");
  for (const r of rows) console.log(`| ${r.scenario} | ${r.usecPerJob} | ${r.commandsPerJob} |`);
  for (const r of rows) console.log(`${r.scenario}: ${JSON.stringify(r.byCommand)}`);
} finally {
  await server.stop();
}

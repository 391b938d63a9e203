// What a wait costs the client and Redis for 1 id against 10,000 (docs/flows.md, "Waiting for
// results"): the same traffic each time — N jobs enqueued, then claimed and completed in
// batches of 100 — once with no wait, once waiting on the last job, once on all N. The
// waiter's Redis commands are counted by it; client CPU is the process' CPU minus the run
// without a wait. `node bench/waits.ts [--jobs 10000]`
import { Consumer, JobWaiter, Producer } from "../queue/index.ts";
import { client, startBenchRedis } from "./lib/redis.ts";
import { intFlag, cliFlags } from "./lib/util.ts";

const flags = cliFlags(["jobs"]);
const N = intFlag(flags, "jobs", 10_000);
const server = await startBenchRedis();
const redis = client(server.url, "waits-bench");

async function run(label: string, waitOn: "none" | "one" | "all") {
  const queue = `wb${label}/w`;
  const producer = new Producer(redis);
  const ids: string[] = [];
  for (let i = 0; i < N; i += 1000)
    ids.push(
      ...(
        await producer.enqueueMany(
          queue,
          Array.from({ length: Math.min(1000, N - i) }, (_, k) => ({ data: i + k })),
        )
      ).map((r) => r.id),
    );
  const waiter = new JobWaiter(redis);
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const targets = waitOn === "none" ? [] : waitOn === "one" ? [ids[ids.length - 1]!] : ids;
  const waiting = waitOn === "none" ? Promise.resolve(null) : waiter.wait(targets, { timeoutMs: 300_000 });
  const c = new Consumer(redis, queue, { workerId: "b", leaseMs: 60_000, retentionSeconds: 600 });
  for (;;) {
    const { jobs } = await c.claim(100);
    if (jobs.length === 0) break;
    await c.settleMany(jobs.map((job) => ({ job, settlement: { result: job.rawData } })));
  }
  const r = await waiting;
  const cpu = process.cpuUsage(cpu0);
  if (r && r.open.length > 0) throw new Error(`${r.open.length} still open`);
  return {
    label,
    ids: targets.length,
    waiterCommands: waiter.commands,
    cpuMs: (cpu.user + cpu.system) / 1000,
    wallMs: performance.now() - t0,
  };
}

const rows = [];
for (const [label, w] of [
  ["0", "none"],
  ["1", "one"],
  ["n", "all"],
  ["0b", "none"],
  ["1b", "one"],
  ["nb", "all"],
] as const)
  rows.push(await run(label, w));
const base = (rows[0]!.cpuMs + rows[3]!.cpuMs) / 2;
for (const r of rows)
  console.log(
    `${r.label.padEnd(3)} ids ${String(r.ids).padStart(6)}  waiter commands ${String(r.waiterCommands).padStart(6)}  client CPU ${r.cpuMs.toFixed(0)} ms (wait's share ≈ ${(r.cpuMs - base).toFixed(0)} ms)  wall ${r.wallMs.toFixed(0)} ms`,
  );
redis.disconnect();
await server.stop();

// What durability "replicated" costs (docs/reliability.md): on a primary with one replica (both
// on this machine, no persistence), the same work with durability "primary" (nothing extra) and
// "replicated" (WAIT 1 after every enqueue and settle script):
//   - enqueue: one job per call, sequential (latency p50/p99) and 32 calls in flight (jobs/s);
//   - worker: a real `conveyor worker` draining no-op jobs (jobs/s, Redis commands per job).
// Modes alternate per repetition; medians are reported.
//   node bench/durability.ts [--jobs 20000] [--concurrency 32] [--enqueues 3000] [--reps 2] [--json]
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connectRedis, Producer, type Durability } from "../queue/index.ts";
import { client, RedisServer, startBenchRedis } from "./lib/redis.ts";
import { ConveyorSystem, makeSystem, SYSTEMS, type SystemName, type System } from "./lib/systems.ts";
import { describeRun, runThroughput, type BenchContext } from "./throughput.ts";
import { intFlag, nowMs, cliFlags, percentile, progress, round, runMain, summarize } from "./lib/util.ts";

export interface DurabilityRun {
  durability: Durability;
  enqueueP50Ms: number;
  enqueueP99Ms: number;
  enqueuePerSec: number;
  workerJobsPerSec: number;
  commandsPerJob: number;
}

async function enqueueLatency(
  url: string,
  durability: Durability,
  n: number,
): Promise<{ p50: number; p99: number }> {
  const redis = connectRedis(url, { name: "bench-durability" });
  const producer = new Producer(redis, { durability });
  const took: number[] = [];
  try {
    for (let i = 0; i < n; i++) {
      const t0 = nowMs();
      await producer.enqueue("bench/latency", { i });
      took.push(nowMs() - t0);
    }
  } finally {
    redis.disconnect();
  }
  return { p50: percentile(took, 50), p99: percentile(took, 99) };
}

async function enqueueRate(
  url: string,
  durability: Durability,
  n: number,
  inFlight: number,
): Promise<number> {
  const redis = connectRedis(url, { name: "bench-durability" });
  const producer = new Producer(redis, { durability });
  let next = 0;
  const t0 = nowMs();
  try {
    await Promise.all(
      Array.from({ length: inFlight }, async () => {
        while (next < n) {
          next++;
          await producer.enqueue("bench/rate", { next });
        }
      }),
    );
  } finally {
    redis.disconnect();
  }
  return n / ((nowMs() - t0) / 1000);
}

export async function runDurability(opts: {
  jobs: number;
  concurrency: number;
  enqueues: number;
  reps: number;
}): Promise<DurabilityRun[]> {
  const primary = await startBenchRedis();
  const replica = await RedisServer.start({
    args: ["--appendonly", "no", "--save", "", "--replicaof", "127.0.0.1", String(primary.port)],
  });
  const driver = client(primary.url);
  const tmp = mkdtempSync(join(tmpdir(), "cvy-bench-durability-"));
  const ctx: BenchContext = {
    url: primary.url,
    driver,
    tmp,
    systems: Object.fromEntries(SYSTEMS.map((s) => [s, makeSystem(s, primary.url, driver)])) as Record<
      SystemName,
      System
    >,
  };
  const systems: Record<Durability, ConveyorSystem> = {
    primary: new ConveyorSystem(primary.url, { name: "primary" }),
    replicated: new ConveyorSystem(primary.url, {
      name: "replicated",
      env: { CONVEYOR_DURABILITY: "replicated" },
    }),
  };
  const runs: DurabilityRun[] = [];
  try {
    for (let rep = 0; rep < opts.reps; rep++) {
      const order: Durability[] = rep % 2 === 0 ? ["primary", "replicated"] : ["replicated", "primary"];
      for (const durability of order) {
        const latency = await enqueueLatency(primary.url, durability, opts.enqueues);
        const rate = await enqueueRate(primary.url, durability, opts.enqueues * 4, 32);
        await driver.flushall();
        const t = await runThroughput(ctx, systems[durability], {
          jobs: opts.jobs,
          concurrency: opts.concurrency,
          rep,
        });
        progress(describeRun(t));
        const run: DurabilityRun = {
          durability,
          enqueueP50Ms: round(latency.p50, 3),
          enqueueP99Ms: round(latency.p99, 3),
          enqueuePerSec: round(rate),
          workerJobsPerSec: t.jobsPerSec,
          commandsPerJob: t.commandsPerJob,
        };
        progress(
          `${durability.padEnd(10)} rep ${rep}: enqueue p50 ${run.enqueueP50Ms} ms p99 ${run.enqueueP99Ms} ms, ${run.enqueuePerSec} enqueues/s (32 in flight); worker ${run.workerJobsPerSec} jobs/s, ${run.commandsPerJob} cmds/job`,
        );
        runs.push(run);
        await driver.flushall();
      }
    }
  } finally {
    for (const s of [...Object.values(systems), ...Object.values(ctx.systems)])
      await s.close().catch(() => {});
    driver.disconnect();
    await replica.stop();
    await primary.stop();
    rmSync(tmp, { recursive: true, force: true });
  }
  return runs;
}

/** Medians per mode, and the replicated mode's cost relative to primary. */
export function durabilitySummary(runs: DurabilityRun[]) {
  const med = (d: Durability, pick: (r: DurabilityRun) => number) =>
    summarize(runs.filter((r) => r.durability === d).map(pick)).median;
  const row = (d: Durability) => ({
    enqueue_p50_ms: round(
      med(d, (r) => r.enqueueP50Ms),
      3,
    ),
    enqueue_p99_ms: round(
      med(d, (r) => r.enqueueP99Ms),
      2,
    ),
    enqueues_per_s: med(d, (r) => r.enqueuePerSec),
    worker_jobs_per_s: med(d, (r) => r.workerJobsPerSec),
    commands_per_job: med(d, (r) => r.commandsPerJob),
  });
  const primary = row("primary");
  const replicated = row("replicated");
  return {
    primary,
    replicated,
    enqueue_rate_cost: round(1 - replicated.enqueues_per_s / primary.enqueues_per_s, 3),
    worker_throughput_cost: round(1 - replicated.worker_jobs_per_s / primary.worker_jobs_per_s, 3),
  };
}

async function main(): Promise<void> {
  const flags = cliFlags(["concurrency", "enqueues", "jobs", "json", "reps"]);
  const runs = await runDurability({
    jobs: intFlag(flags, "jobs", 20_000),
    concurrency: intFlag(flags, "concurrency", 32),
    enqueues: intFlag(flags, "enqueues", 3000),
    reps: intFlag(flags, "reps", 2),
  });
  const s = durabilitySummary(runs);
  if (flags.has("json")) process.stdout.write(`${JSON.stringify(s)}\n`);
  else
    process.stdout.write(
      `primary:    enqueue p50 ${s.primary.enqueue_p50_ms} ms p99 ${s.primary.enqueue_p99_ms} ms, ${s.primary.enqueues_per_s}/s; worker ${s.primary.worker_jobs_per_s} jobs/s, ${s.primary.commands_per_job} cmds/job\n` +
        `replicated: enqueue p50 ${s.replicated.enqueue_p50_ms} ms p99 ${s.replicated.enqueue_p99_ms} ms, ${s.replicated.enqueues_per_s}/s; worker ${s.replicated.worker_jobs_per_s} jobs/s, ${s.replicated.commands_per_job} cmds/job\n` +
        `cost: enqueue rate ${round(s.enqueue_rate_cost * 100, 1)} %, worker throughput ${round(s.worker_throughput_cost * 100, 1)} %\n`,
    );
}

if (import.meta.main) runMain("bench:durability", main);

// `make bench`: every benchmark, both systems side by side on one throwaway Redis, written to
// bench/results/<date>.json, <date>.md and <date>.svg (throughput chart), the tables
// printed at the end. See bench/README.md for what each number means.
//   node bench/run.ts [--reps 3] [--concurrency 1,8,32,128] [--jobs 100000] [--quick]
//                     [--skip-operator] [--skip-dashboard] [--pools 1000] [--backlog 1000000] [--out bench/results]
import { execFileSync } from "node:child_process";
import { join, resolve } from "node:path";
import { runEnqueue, type EnqueueRun } from "./enqueue.ts";
import { runLatency, type LatencyRun } from "./latency.ts";
import { PAYLOAD_SIZES, runMemory, type MemoryRun } from "./memory.ts";
import { runBacklog, type BacklogLevel } from "./backlog.ts";
import { runDurability, type DurabilityRun } from "./durability.ts";
import { runRetention, type RetentionResult } from "./retention.ts";
import { FAIRNESS_DEFAULTS, runFairness, type FairnessResult } from "./fairness.ts";
import { runOperatorBench, type OperatorBench } from "./operator.ts";
import { runDashboardBench, type DashboardBench } from "./dashboard.ts";
import { runRawMix, runRedisBenchmark, type RawMixResult, type RedisBenchmarkResult } from "./redislimit.ts";
import { countRoundTrips, type RoundTrips } from "./roundtrips.ts";
import { describeRun, openContext, runThroughput, type ThroughputRun } from "./throughput.ts";
import { writeResults, type BenchResults } from "./lib/report.ts";
import { orderFor, ProtoSystem, SYSTEMS, type SystemName } from "./lib/systems.ts";
import {
  intFlag,
  listFlag,
  loadAverage,
  machineInfo,
  cliFlags,
  progress,
  REPO,
  summarize,
} from "./lib/util.ts";
import type { ProtoMode } from "./proto/combined.ts";

/** Bench-only consumer variants (bench/proto/worker.ts); `pipelined` exists too but is left out for time. */
const PROTO_MODES: ProtoMode[] = ["separate", "hb-lean", "hb-worker", "combined"];

function dirtyFiles(): string[] {
  try {
    return execFileSync("git", ["status", "--porcelain", "--", "queue", "worker", "bin", "cli"], {
      cwd: REPO,
      encoding: "utf8",
      stdio: ["ignore", "pipe", "ignore"],
    })
      .split("\n")
      .filter(Boolean)
      .map((l) => l.slice(3));
  } catch {
    return [];
  }
}

/** Runs that failed twice (a crashed or killed process on a shared machine); the rest goes on. */
const failures: string[] = [];

/** One measurement, tried twice; undefined (and noted) when both attempts fail. */
async function attempt<T>(what: string, run: () => Promise<T>): Promise<T | undefined> {
  for (let i = 1; i <= 2; i++) {
    try {
      return await run();
    } catch (err) {
      progress(
        `  ${what} failed (attempt ${i}): ${(err as Error).message.split("\n").slice(0, 3).join(" | ")}`,
      );
    }
  }
  failures.push(what);
  return undefined;
}

async function main(): Promise<void> {
  const flags = cliFlags([
    "backlog",
    "concurrency",
    "jobs",
    "out",
    "pools",
    "quick",
    "reps",
    "skip-dashboard",
    "skip-operator",
  ]);
  const quick = flags.has("quick");
  const reps = intFlag(flags, "reps", quick ? 1 : 3);
  const concurrencies = listFlag(flags, "concurrency", [1, 8, 32, 128]);
  // Throughput runs are long enough to measure the steady state (a 20,000-job run is ~1 s at
  // c=32, where start-up and JIT warm-up still show); the other parts keep 20,000.
  const jobs = intFlag(flags, "jobs", quick ? 3000 : 100_000);
  const partJobs = Math.min(jobs, 20_000);
  const pools = intFlag(flags, "pools", quick ? 50 : 1000);
  const outDir = resolve(flags.get("out") ?? join(REPO, "bench/results"));
  const started = Date.now();
  const date = new Date().toISOString().slice(0, 10);
  const loadBefore = loadAverage();
  progress(
    `settings: ${reps} repetition(s), concurrency ${concurrencies.join(", ")}, ${jobs} jobs per throughput run; load ${loadBefore}`,
  );

  const ctx = await openContext();
  const throughput: ThroughputRun[] = [];
  const prototype: ThroughputRun[] = [];
  const enqueue: EnqueueRun[] = [];
  const latency: LatencyRun[] = [];
  const memory: MemoryRun[] = [];
  let backlog: BacklogLevel[] = [];
  let durability: DurabilityRun[] = [];
  let retention: RetentionResult | undefined;
  let fairness: FairnessResult | undefined;
  const roundTrips: RoundTrips[] = [];
  const rawMix: RawMixResult[] = [];
  let redisBenchmark: RedisBenchmarkResult[] = [];
  const latencyRates: Record<number, number> = {};
  try {
    progress("1/7 Redis limit: redis-benchmark");
    redisBenchmark = await runRedisBenchmark(ctx);
    for (const r of redisBenchmark) progress(`  ${r.test}: ${r.requestsPerSec} requests/s`);
    progress("2/7 Redis limit: Conveyor's script mix from a raw pipelined client");
    for (let rep = 0; rep < reps; rep++) {
      for (const mix of rep % 2 === 0
        ? (["claim+complete", "complete-and-claim"] as const)
        : (["complete-and-claim", "claim+complete"] as const)) {
        const r = await attempt(`raw mix ${mix} rep ${rep}`, () =>
          runRawMix(ctx, mix, { jobs: Math.max(partJobs, 10_000), batch: 100, rep }),
        );
        if (!r) continue;
        progress(
          `  ${mix} rep ${rep}: ${r.jobsPerSec} jobs/s, Redis ${r.redisCpuUsPerJob} µs/job (Redis-bound ${r.redisBoundJobsPerSec} jobs/s)`,
        );
        rawMix.push(r);
      }
    }

    progress("3/7 enqueue rates");
    for (let rep = 0; rep < reps; rep++) {
      for (const name of orderFor(rep)) {
        const r = await attempt(`enqueue ${name} rep ${rep}`, () =>
          runEnqueue(ctx, name, { single: quick ? 500 : 2000, windowed: partJobs, bulk: partJobs, rep }),
        );
        if (!r) continue;
        progress(
          `  ${name} rep ${rep}: single ${r.singlePerSec}/s, ${64} in flight ${r.windowedPerSec}/s, bulk ${r.bulkPerSec}/s`,
        );
        enqueue.push(r);
      }
    }

    progress("3b/7 Redis bytes per waiting job by payload size");
    for (const payloadBytes of PAYLOAD_SIZES) {
      for (const name of SYSTEMS) {
        const r = await attempt(`memory ${name} ${payloadBytes} B`, () =>
          runMemory(ctx, name, { jobs: partJobs, payloadBytes }),
        );
        if (!r) continue;
        progress(
          `  ${name} ${payloadBytes} B: ${r.bytesPerJob} B/job (overhead ${r.overheadPerJob})${r.breakdown ? ` ${JSON.stringify(r.breakdown)}` : ""}`,
        );
        memory.push(r);
      }
    }

    const deepest = intFlag(flags, "backlog", quick ? 100_000 : 1_000_000);
    progress(`3c/7 cost against backlog depth, up to ${deepest.toLocaleString("en")} waiting (Conveyor)`);
    backlog =
      (await attempt("backlog", () =>
        runBacklog(ctx, { backlog: deepest, sample: partJobs, concurrency: 32 }),
      )) ?? [];

    progress('3d/7 the cost of durability "replicated" (a primary and a replica of its own)');
    durability =
      (await attempt("durability", () =>
        runDurability({ jobs: partJobs, concurrency: 32, enqueues: quick ? 500 : 2000, reps: quick ? 1 : 2 }),
      )) ?? [];
    const finished = quick ? 200_000 : 1_000_000;
    progress(
      `3e/7 retention: ${finished.toLocaleString("en")} completed records reclaimed while a probe claims`,
    );
    // (a retention longer than the run, also on a loaded machine: the reclaim is measured alone)
    retention = await attempt("retention", () =>
      runRetention({ jobs: finished, retentionSeconds: quick ? 90 : 420 }),
    );

    progress(
      "3f/7 fairness: a heavy tenant and 200 light ones, with groups, FIFO and BullMQ (bench/fairness.ts)",
    );
    fairness = await attempt("fairness", () =>
      runFairness(ctx.url, FAIRNESS_DEFAULTS, quick ? 10_000 : 100_000),
    );

    progress("4/7 throughput, one worker process per system");
    for (const concurrency of concurrencies) {
      for (let rep = 0; rep < reps; rep++) {
        for (const name of orderFor(rep)) {
          const r = await attempt(`throughput ${name} c=${concurrency} rep ${rep}`, () =>
            runThroughput(ctx, name, { jobs, concurrency, rep }),
          );
          if (!r) continue;
          progress(`  ${describeRun(r)}`);
          throughput.push(r);
        }
      }
    }

    progress("5/7 requests per job (MONITOR, short runs)");
    for (const concurrency of concurrencies) {
      for (const name of SYSTEMS) {
        const r = await attempt(`requests ${name} c=${concurrency}`, () =>
          countRoundTrips(ctx, name, { jobs: quick ? 1000 : 3000, concurrency }),
        );
        if (!r) continue;
        progress(
          `  ${name} c=${concurrency}: ${r.requestsPerJob} requests/job ${JSON.stringify(r.byRequest)}`,
        );
        roundTrips.push(r);
      }
    }

    progress(
      "6/7 prototype: where the worker's time goes, and complete-and-claim-next (lean bench-only consumer)",
    );
    for (const concurrency of concurrencies) {
      for (let rep = 0; rep < reps; rep++) {
        const modes = rep % 2 === 0 ? PROTO_MODES : [...PROTO_MODES].reverse();
        for (const mode of modes) {
          const r = await attempt(`prototype ${mode} c=${concurrency} rep ${rep}`, () =>
            runThroughput(ctx, new ProtoSystem(ctx.url, mode), {
              jobs: Math.ceil(partJobs / 2),
              concurrency,
              rep,
            }),
          );
          if (!r) continue;
          progress(`  ${describeRun(r)}`);
          prototype.push(r);
        }
      }
    }

    progress("7/7 enqueue-to-start latency at half of the slower system's peak");
    for (const concurrency of concurrencies) {
      const peak = (s: SystemName) =>
        summarize(
          throughput.filter((r) => r.system === s && r.concurrency === concurrency).map((r) => r.jobsPerSec),
        ).median;
      const rate = Math.max(50, Math.round(Math.min(peak("conveyor"), peak("bullmq")) / 2));
      latencyRates[concurrency] = rate;
      for (let rep = 0; rep < reps; rep++) {
        for (const name of orderFor(rep)) {
          const r = await attempt(`latency ${name} c=${concurrency} rep ${rep}`, () =>
            runLatency(ctx, name, { concurrency, rate, seconds: quick ? 2 : 4, rep }),
          );
          if (!r) continue;
          progress(
            `  ${name} c=${concurrency} at ${rate}/s rep ${rep}: p50 ${r.p50Ms} ms, p99 ${r.p99Ms} ms (load ${r.load})`,
          );
          latency.push(r);
        }
      }
    }
  } finally {
    await ctx.stop();
  }

  // ─── Operator (stub when the operator or the test control plane is missing) ───
  let operator: OperatorBench;
  if (flags.has("skip-operator")) {
    operator = { skipped: "--skip-operator" };
  } else {
    progress(`operator: ${pools} idle WorkerPools and backlog-to-decision time`);
    try {
      operator = await runOperatorBench({ pools, idleSeconds: quick ? 20 : 60, decisions: 3 });
    } catch (err) {
      operator = { skipped: `failed: ${(err as Error).message.split("\n")[0]}` };
    }
    if ("skipped" in operator) progress(`operator part SKIPPED: ${operator.skipped}`);
  }

  // ─── Dashboard: page API p95 over 1M records + 100k waiting jobs, RSS with 20 SSE clients ───
  let dashboard: DashboardBench;
  if (flags.has("skip-dashboard")) dashboard = { skipped: "--skip-dashboard" };
  else {
    progress("dashboard: page API calls at scale and RSS with 20 SSE clients");
    dashboard = (await attempt("dashboard", () =>
      runDashboardBench({ records: quick ? 100_000 : 1_000_000, waiting: quick ? 10_000 : 100_000 }),
    )) ?? { skipped: "failed twice (see the log)" };
  }

  const results: BenchResults = {
    date: new Date().toISOString(),
    machine: machineInfo(),
    loadBefore,
    loadAfter: loadAverage(),
    durationSeconds: Math.round((Date.now() - started) / 1000),
    settings: { reps, concurrencies, jobs, quick },
    uncommittedChanges: dirtyFiles(),
    redisBenchmark,
    rawMix,
    enqueue,
    memory,
    backlog,
    durability,
    retention,
    fairness,
    throughput,
    roundTrips,
    prototype,
    latency,
    latencyRates,
    operator,
    dashboard,
    failures,
    summary: undefined,
  };

  const md = writeResults(results, outDir, date);
  process.stdout.write(`\n${md}\n`);
  progress(`wrote ${join(outDir, date)}.json, .md, .svg in ${results.durationSeconds} s`);
}

main().then(
  () => process.exit(0),
  (err: Error) => {
    process.stderr.write(`bench failed: ${err.stack ?? err.message}\n`);
    process.exit(1);
  },
);

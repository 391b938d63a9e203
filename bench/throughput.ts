// Throughput, one worker process per system on the same Redis:
//   npm run bench:throughput -- --jobs N --concurrency C [--reps R] [--json] [--cpu-prof DIR] [--otlp | --contract]
// Pre-enqueues N no-op jobs, starts one worker process and measures jobs/s from the first
// claim to the last completion (both seen by a 2 ms poller: one MULTI of two counts, taken
// out of the command counts). Repetitions alternate which system goes first. Progress goes to
// stderr; with --json the last stdout line is
//   {"jobs": N, "concurrency": C, "conveyor_jobs_per_s": x, "bullmq_jobs_per_s": y, "ratio": x/y}
// (medians over the repetitions).
// --otlp compares Conveyor with itself instead of BullMQ: without tracing (OTEL_SDK_DISABLED)
// and with OTLP export of every execution (parentbased_always_on unless the bench's own
// OTEL_TRACES_SAMPLER says otherwise) to a local sink that accepts and discards
// (bench/lib/otlpSink.ts); the bench's own OTEL_* variables (protocol, sampler, OTEL_BSP_*) go
// to the traced worker. The JSON line is then
//   {"jobs", "concurrency", "plain_jobs_per_s", "otlp_jobs_per_s", "throughput_cost": 1 - otlp/plain,
//    "plain_cpu_us_per_job", "otlp_cpu_us_per_job", "plain_main_cpu_us_per_job", "otlp_main_cpu_us_per_job"}
// --contract measures stage contracts: ~1 KiB documents of 30 fields echoed as results, Conveyor
// without and with the document's schema as data and result contract, and BullMQ (contractCost).
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import type { Redis } from "ioredis";
import { benchContract, benchDocument } from "./lib/document.ts";
import { startOtlpSink } from "./lib/otlpSink.ts";
import { client, delta, flush, perJob, snapshot, SNAPSHOT_COMMANDS, startBenchRedis } from "./lib/redis.ts";
import {
  BullmqSystem,
  ConveyorSystem,
  ECHO_HANDLER,
  makeSystem,
  orderFor,
  SYSTEMS,
  type System,
  type SystemName,
  type WorkerHandle,
} from "./lib/systems.ts";
import {
  intFlag,
  loadAverage,
  nowMs,
  cliFlags,
  type ProcSample,
  progress,
  round,
  runMain,
  sleep,
  summarize,
} from "./lib/util.ts";

export interface ThroughputRun {
  system: string;
  jobs: number;
  concurrency: number;
  rep: number;
  jobsPerSec: number;
  seconds: number;
  /** Every command Redis executed per job, calls from inside scripts included (INFO commandstats). */
  commandsPerJob: number;
  /** Script calls (EVALSHA/EVAL/FCALL) per job. */
  scriptCallsPerJob: number;
  /** Per command, per job (top 12). */
  breakdown: Record<string, number>;
  /** Redis CPU (user + system) per job, µs: 1e6 / this is what one Redis core could do at most. */
  redisCpuUsPerJob: number;
  /** Worker process CPU per job, µs (all threads), from its first claim on. */
  workerCpuUsPerJob: number;
  /** The worker's main thread (the event loop running the slots) alone, µs per job. */
  workerMainThreadCpuUsPerJob: number;
  workerRssMiB: number;
  workerPeakRssMiB: number;
  /** used_memory growth per pre-enqueued job. */
  redisBytesPerWaitingJob: number;
  /** The pre-enqueue (bulk) rate, jobs/s. */
  bulkEnqueuePerSec: number;
  load: string;
}

export interface BenchContext {
  url: string;
  driver: Redis;
  tmp: string;
  systems: Record<SystemName, System>;
}

const POLL_MS = 2;

interface Drain {
  t0: number;
  t1: number;
  polls: number;
  workerAtStart: ProcSample;
}

/** Poll until the first job is claimed (t0) and until nothing waits or runs any more (t1). */
export async function watchDrain(
  sys: System,
  total: number,
  worker: WorkerHandle,
  timeoutMs: number,
): Promise<Drain> {
  let polls = 0;
  let t0 = 0;
  let workerAtStart: ProcSample | undefined;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const s = await sys.state();
    polls++;
    const t = nowMs();
    if (!t0 && (s.waiting < total || s.active > 0)) {
      t0 = t;
      workerAtStart = worker.sample();
    }
    if (workerAtStart && s.waiting === 0 && s.active === 0) return { t0, t1: t, polls, workerAtStart };
    if (worker.exited()) throw new Error(`${sys.name} worker exited early:\n${worker.output()}`);
    if (Date.now() > deadline)
      throw new Error(
        `${sys.name}: ${s.waiting} waiting and ${s.active} active after ${timeoutMs} ms\n${worker.output()}`,
      );
    await sleep(POLL_MS);
  }
}

/** Poll until nothing waits or runs. */
export async function waitIdle(sys: System, worker: WorkerHandle, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const s = await sys.state();
    if (s.waiting === 0 && s.active === 0) return;
    if (worker.exited()) throw new Error(`${sys.name} worker exited early:\n${worker.output()}`);
    if (Date.now() > deadline)
      throw new Error(
        `${sys.name}: ${s.waiting} waiting and ${s.active} active after ${timeoutMs} ms\n${worker.output()}`,
      );
    await sleep(POLL_MS);
  }
}

export function ownCommands(sys: System, polls: number): Record<string, number> {
  const own: Record<string, number> = { ...SNAPSHOT_COMMANDS };
  for (const [cmd, n] of Object.entries(sys.stateCommands)) own[cmd] = (own[cmd] ?? 0) + n * polls;
  return own;
}

export function noopJobs(n: number): unknown[] {
  return Array.from({ length: n }, (_, i) => ({ i }));
}

/** The contract bench's jobs: ~1 KiB documents of 30 fields (bench/lib/document.ts). */
export function documentJobs(n: number): unknown[] {
  return Array.from({ length: n }, (_, i) => benchDocument(i));
}

export async function runThroughput(
  ctx: BenchContext,
  system: SystemName | System,
  opts: { jobs: number; concurrency: number; rep: number; cpuProfDir?: string; documents?: boolean },
): Promise<ThroughputRun> {
  const sys = typeof system === "string" ? ctx.systems[system] : system;
  const name = sys.name;
  await flush(ctx.driver);
  await sys.prepare?.();
  const empty = await snapshot(ctx.driver);
  const e0 = nowMs();
  await sys.enqueueBulk(opts.documents ? documentJobs(opts.jobs) : noopJobs(opts.jobs));
  const bulkEnqueuePerSec = opts.jobs / ((nowMs() - e0) / 1000);
  const before = await snapshot(ctx.driver);
  const worker = await sys.startWorker({
    concurrency: opts.concurrency,
    cpuProfDir: opts.cpuProfDir,
    logFile: join(ctx.tmp, `${name}-c${opts.concurrency}-r${opts.rep}.log`),
  });
  try {
    const d = await watchDrain(sys, opts.jobs, worker, 60_000 + opts.jobs * 5);
    const after = await snapshot(ctx.driver);
    const proc = worker.sample();
    const diff = delta(before, after, ownCommands(sys, d.polls));
    const calls = [...diff.commands.values()].reduce((a, s) => a + s.calls, 0);
    const scripts = ["evalsha", "eval", "fcall"].reduce((n, c) => n + (diff.commands.get(c)?.calls ?? 0), 0);
    const seconds = (d.t1 - d.t0) / 1000;
    const breakdown = Object.fromEntries(
      Object.entries(perJob(diff, opts.jobs))
        .slice(0, 12)
        .map(([k, v]) => [k, round(v, 3)]),
    );
    return {
      system: name,
      jobs: opts.jobs,
      concurrency: opts.concurrency,
      rep: opts.rep,
      jobsPerSec: round(opts.jobs / seconds),
      seconds: round(seconds, 3),
      commandsPerJob: round(calls / opts.jobs, 2),
      scriptCallsPerJob: round(scripts / opts.jobs, 3),
      breakdown,
      redisCpuUsPerJob: round((diff.cpuMs * 1000) / opts.jobs, 2),
      workerCpuUsPerJob: round(((proc.cpuMs - d.workerAtStart.cpuMs) * 1000) / opts.jobs, 1),
      workerMainThreadCpuUsPerJob: round(
        ((proc.mainThreadCpuMs - d.workerAtStart.mainThreadCpuMs) * 1000) / opts.jobs,
        1,
      ),
      workerRssMiB: round(proc.rssKb / 1024, 1),
      workerPeakRssMiB: round(proc.peakRssKb / 1024, 1),
      redisBytesPerWaitingJob: round((before.usedMemory - empty.usedMemory) / opts.jobs),
      bulkEnqueuePerSec: round(bulkEnqueuePerSec),
      load: loadAverage(),
    };
  } finally {
    await worker.stop();
  }
}

export async function openContext(): Promise<BenchContext & { stop(): Promise<void> }> {
  const server = await startBenchRedis();
  const driver = client(server.url);
  const tmp = mkdtempSync(join(tmpdir(), "cvy-bench-"));
  const systems = Object.fromEntries(SYSTEMS.map((s) => [s, makeSystem(s, server.url, driver)])) as Record<
    SystemName,
    System
  >;
  return {
    url: server.url,
    driver,
    tmp,
    systems,
    stop: async () => {
      for (const s of Object.values(systems)) await s.close().catch(() => {});
      driver.disconnect();
      await server.stop();
      rmSync(tmp, { recursive: true, force: true });
    },
  };
}

export function describeRun(r: ThroughputRun): string {
  return `${r.system.padEnd(8)} c=${r.concurrency} rep ${r.rep}: ${r.jobsPerSec} jobs/s, ${r.commandsPerJob} Redis cmds/job (${r.scriptCallsPerJob} scripts), Redis ${r.redisCpuUsPerJob} µs/job, worker ${r.workerCpuUsPerJob} µs/job (main thread ${r.workerMainThreadCpuUsPerJob}), RSS ${r.workerPeakRssMiB} MiB (load ${r.load})`;
}

async function main(): Promise<void> {
  const flags = cliFlags(["concurrency", "contract", "cpu-prof", "jobs", "json", "otlp", "reps"]);
  const jobs = intFlag(flags, "jobs", 20_000);
  const concurrency = intFlag(flags, "concurrency", 8);
  const reps = intFlag(flags, "reps", 1);
  const cpuProf = flags.get("cpu-prof");
  const cpuProfDir = cpuProf ? resolve(cpuProf === "true" ? "bench/profiles" : cpuProf) : undefined;
  if (cpuProfDir) mkdirSync(cpuProfDir, { recursive: true });
  if (flags.has("otlp")) return otlpCost({ jobs, concurrency, reps, cpuProfDir, json: flags.has("json") });
  if (flags.has("contract"))
    return contractCost({ jobs, concurrency, reps, cpuProfDir, json: flags.has("json") });
  const ctx = await openContext();
  const runs: ThroughputRun[] = [];
  try {
    for (let rep = 0; rep < reps; rep++) {
      for (const name of orderFor(rep)) {
        const run = await runThroughput(ctx, name, { jobs, concurrency, rep, cpuProfDir });
        progress(describeRun(run));
        runs.push(run);
      }
    }
  } finally {
    await ctx.stop();
  }
  const med = (s: SystemName) =>
    summarize(runs.filter((r) => r.system === s).map((r) => r.jobsPerSec)).median;
  const x = med("conveyor");
  const y = med("bullmq");
  const result = {
    jobs,
    concurrency,
    conveyor_jobs_per_s: round(x),
    bullmq_jobs_per_s: round(y),
    ratio: round(x / y, 3),
  };
  if (cpuProfDir) progress(`CPU profiles in ${cpuProfDir}`);
  if (flags.has("json")) process.stdout.write(`${JSON.stringify(result)}\n`);
  else
    process.stdout.write(
      `conveyor ${result.conveyor_jobs_per_s} jobs/s, bullmq ${result.bullmq_jobs_per_s} jobs/s, ratio ${result.ratio} (jobs ${jobs}, concurrency ${concurrency}, ${reps} rep(s), medians)\n`,
    );
}

/**
 * Conveyor without and with OTLP export, alternating which goes first, on one Redis: the cost
 * of tracing in throughput and in worker CPU per job (all threads, and the main thread alone).
 */
async function otlpCost(opts: {
  jobs: number;
  concurrency: number;
  reps: number;
  cpuProfDir?: string;
  json: boolean;
}): Promise<void> {
  const sink = await startOtlpSink();
  const ctx = await openContext();
  const plain = new ConveyorSystem(ctx.url, { name: "conveyor", env: { OTEL_SDK_DISABLED: "true" } });
  const traced = new ConveyorSystem(ctx.url, {
    name: "conveyor+otlp",
    env: {
      OTEL_EXPORTER_OTLP_ENDPOINT: sink.endpoint,
      OTEL_SERVICE_NAME: "bench-worker",
      OTEL_TRACES_SAMPLER: process.env.OTEL_TRACES_SAMPLER ?? "parentbased_always_on",
    },
  });
  const runs: ThroughputRun[] = [];
  try {
    for (let rep = 0; rep < opts.reps; rep++) {
      for (const sys of rep % 2 === 0 ? [plain, traced] : [traced, plain]) {
        const before = { requests: sink.requests, bytes: sink.bytes };
        const run = await runThroughput(ctx, sys, { ...opts, rep });
        const exported =
          sys === traced
            ? `, exported ${sink.requests - before.requests} requests, ${round((sink.bytes - before.bytes) / opts.jobs)} B/job so far`
            : "";
        progress(describeRun(run) + exported);
        runs.push(run);
      }
    }
  } finally {
    await plain.close();
    await traced.close();
    await ctx.stop();
    await sink.stop();
  }
  if (sink.requests === 0)
    progress("warning: the traced worker exported nothing to the OTLP sink (a sampler that drops all?)");
  const med = (sys: System, pick: (r: ThroughputRun) => number) =>
    summarize(runs.filter((r) => r.system === sys.name).map(pick)).median;
  const result = {
    jobs: opts.jobs,
    concurrency: opts.concurrency,
    plain_jobs_per_s: round(med(plain, (r) => r.jobsPerSec)),
    otlp_jobs_per_s: round(med(traced, (r) => r.jobsPerSec)),
    throughput_cost: round(1 - med(traced, (r) => r.jobsPerSec) / med(plain, (r) => r.jobsPerSec), 3),
    plain_cpu_us_per_job: med(plain, (r) => r.workerCpuUsPerJob),
    otlp_cpu_us_per_job: med(traced, (r) => r.workerCpuUsPerJob),
    plain_main_cpu_us_per_job: med(plain, (r) => r.workerMainThreadCpuUsPerJob),
    otlp_main_cpu_us_per_job: med(traced, (r) => r.workerMainThreadCpuUsPerJob),
    otlp_content_types: [...sink.contentTypes],
  };
  if (opts.cpuProfDir) progress(`CPU profiles in ${opts.cpuProfDir}`);
  if (opts.json) process.stdout.write(`${JSON.stringify(result)}\n`);
  else
    process.stdout.write(
      `plain ${result.plain_jobs_per_s} jobs/s, ${result.plain_cpu_us_per_job} µs/job (main ${result.plain_main_cpu_us_per_job}); ` +
        `otlp ${result.otlp_jobs_per_s} jobs/s, ${result.otlp_cpu_us_per_job} µs/job (main ${result.otlp_main_cpu_us_per_job}); ` +
        `throughput cost ${round(result.throughput_cost * 100, 1)} % (jobs ${opts.jobs}, concurrency ${opts.concurrency}, ${opts.reps} rep(s), medians)\n`,
    );
}

if (import.meta.main) runMain("bench:throughput", main);

/**
 * Stage contracts' cost: ~1 KiB documents of 30 fields that each handler echoes as its result,
 * Conveyor without a contract, Conveyor with the document's schema as the stage's data and result
 * contract (checked at enqueue and at settle), and BullMQ, on one Redis.
 */
async function contractCost(opts: {
  jobs: number;
  concurrency: number;
  reps: number;
  cpuProfDir?: string;
  json: boolean;
}): Promise<void> {
  const ctx = await openContext();
  const plain = new ConveyorSystem(ctx.url, { name: "conveyor", handler: ECHO_HANDLER });
  const checked = new ConveyorSystem(ctx.url, {
    name: "conveyor+contract",
    handler: ECHO_HANDLER,
    contract: benchContract(),
  });
  const bullmq = new BullmqSystem(ctx.url, ctx.driver, { echo: true });
  const runs: ThroughputRun[] = [];
  try {
    for (let rep = 0; rep < opts.reps; rep++) {
      const order = [plain, checked, bullmq];
      for (let k = 0; k < rep % order.length; k++) order.push(order.shift()!);
      for (const sys of order) {
        const run = await runThroughput(ctx, sys, { ...opts, rep, documents: true });
        progress(`${describeRun(run)}, bulk enqueue ${run.bulkEnqueuePerSec} jobs/s`);
        runs.push(run);
      }
    }
  } finally {
    for (const s of [plain, checked, bullmq]) await s.close().catch(() => {});
    await ctx.stop();
  }
  const med = (sys: System, pick: (r: ThroughputRun) => number) =>
    summarize(runs.filter((r) => r.system === sys.name).map(pick)).median;
  const result = {
    jobs: opts.jobs,
    concurrency: opts.concurrency,
    plain_jobs_per_s: round(med(plain, (r) => r.jobsPerSec)),
    contract_jobs_per_s: round(med(checked, (r) => r.jobsPerSec)),
    bullmq_jobs_per_s: round(med(bullmq, (r) => r.jobsPerSec)),
    contract_ratio_vs_bullmq: round(med(checked, (r) => r.jobsPerSec) / med(bullmq, (r) => r.jobsPerSec), 3),
    plain_worker_us_per_job: med(plain, (r) => r.workerCpuUsPerJob),
    contract_worker_us_per_job: med(checked, (r) => r.workerCpuUsPerJob),
    plain_bulk_enqueue_per_s: round(med(plain, (r) => r.bulkEnqueuePerSec)),
    contract_bulk_enqueue_per_s: round(med(checked, (r) => r.bulkEnqueuePerSec)),
  };
  if (opts.json) process.stdout.write(`${JSON.stringify(result)}\n`);
  else
    process.stdout.write(
      `no contract ${result.plain_jobs_per_s} jobs/s (worker ${result.plain_worker_us_per_job} µs/job), ` +
        `contract ${result.contract_jobs_per_s} jobs/s (worker ${result.contract_worker_us_per_job} µs/job), ` +
        `bullmq ${result.bullmq_jobs_per_s} jobs/s: contract ÷ bullmq ${result.contract_ratio_vs_bullmq} ` +
        `(jobs ${opts.jobs}, concurrency ${opts.concurrency}, ${opts.reps} rep(s), medians)\n`,
    );
}

// Throughput, one worker process per system on the same Redis:
//   npm run bench:throughput -- --jobs N --concurrency C [--reps R] [--json] [--cpu-prof DIR]
// Pre-enqueues N no-op jobs, starts one worker process and measures jobs/s from the first
// claim to the last completion (both seen by a 2 ms poller: one MULTI of two counts, taken
// out of the command counts). Repetitions alternate which system goes first. Progress goes to
// stderr; with --json the last stdout line is
//   {"jobs": N, "concurrency": C, "conveyor_jobs_per_s": x, "bullmq_jobs_per_s": y, "ratio": x/y}
// (medians over the repetitions).
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import type { Redis } from "ioredis";
import { client, delta, flush, perJob, snapshot, SNAPSHOT_COMMANDS, startBenchRedis } from "./lib/redis.ts";
import {
  makeSystem,
  orderFor,
  SYSTEMS,
  type System,
  type SystemName,
  type WorkerHandle,
} from "./lib/systems.ts";
import { intFlag, loadAverage, nowMs, parseFlags, progress, round, sleep, summarize } from "./lib/util.ts";

export interface ThroughputRun {
  system: string;
  jobs: number;
  concurrency: number;
  rep: number;
  jobsPerSec: number;
  seconds: number;
  /** Every command Redis executed per job, calls from inside scripts included (INFO commandstats). */
  commandsPerJob: number;
  /** Script calls (EVALSHA/EVAL) per job. */
  scriptCallsPerJob: number;
  /** Per command, per job (top 12). */
  breakdown: Record<string, number>;
  /** Redis CPU (user + system) per job, µs: 1e6 / this is what one Redis core could do at most. */
  redisCpuUsPerJob: number;
  /** Worker process CPU per job, µs (all threads), from its first claim on. */
  workerCpuUsPerJob: number;
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
  workerCpuAtStart: number;
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
  let workerCpuAtStart = 0;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const s = await sys.state();
    polls++;
    const t = nowMs();
    if (!t0 && (s.waiting < total || s.active > 0)) {
      t0 = t;
      workerCpuAtStart = worker.sample().cpuMs;
    }
    if (t0 && s.waiting === 0 && s.active === 0) return { t0, t1: t, polls, workerCpuAtStart };
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

export async function runThroughput(
  ctx: BenchContext,
  system: SystemName | System,
  opts: { jobs: number; concurrency: number; rep: number; cpuProfDir?: string },
): Promise<ThroughputRun> {
  const sys = typeof system === "string" ? ctx.systems[system] : system;
  const name = sys.name;
  await flush(ctx.driver);
  const empty = await snapshot(ctx.driver);
  const e0 = nowMs();
  await sys.enqueueBulk(noopJobs(opts.jobs));
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
    const scripts = (diff.commands.get("evalsha")?.calls ?? 0) + (diff.commands.get("eval")?.calls ?? 0);
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
      workerCpuUsPerJob: round(((proc.cpuMs - d.workerCpuAtStart) * 1000) / opts.jobs, 1),
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
  return `${r.system.padEnd(8)} c=${r.concurrency} rep ${r.rep}: ${r.jobsPerSec} jobs/s, ${r.commandsPerJob} Redis cmds/job (${r.scriptCallsPerJob} scripts), Redis ${r.redisCpuUsPerJob} µs/job, worker ${r.workerCpuUsPerJob} µs/job, RSS ${r.workerPeakRssMiB} MiB (load ${r.load})`;
}

async function main(): Promise<void> {
  const flags = parseFlags(process.argv.slice(2));
  const jobs = intFlag(flags, "jobs", 20_000);
  const concurrency = intFlag(flags, "concurrency", 8);
  const reps = intFlag(flags, "reps", 1);
  const cpuProf = flags.get("cpu-prof");
  const cpuProfDir = cpuProf ? resolve(cpuProf === "true" ? "bench/profiles" : cpuProf) : undefined;
  if (cpuProfDir) mkdirSync(cpuProfDir, { recursive: true });
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

if (import.meta.main) {
  main().then(
    () => process.exit(0),
    (err: Error) => {
      process.stderr.write(`bench:throughput failed: ${err.stack ?? err.message}\n`);
      process.exit(1);
    },
  );
}

// Fairness (issue 31): a heavy tenant enqueues 50,000 jobs, then 200 light tenants 20 each, on
// 4 workers × 32 slots running 5 ms jobs (started once the heavy backlog is in, so every system
// meets the same 50,000 waiting jobs whatever its enqueue speed). How long the light tenants' jobs wait (enqueue → start,
// p50/p95) with groups (each tenant its group: round-robin), with the same jobs without groups
// (Conveyor FIFO), and on BullMQ's open-source queue (FIFO; groups are BullMQ Pro); throughput
// (all jobs, first enqueue → last completion) and Redis time per job. Then the cost of groups at
// scale: the same workers on 100,000 jobs in 1 group and in 100,000 groups (Redis µs per job).
//   node bench/fairness.ts [--heavy 50000] [--tenants 200] [--per-tenant 20] [--workers 4]
//                          [--slots 32] [--job-ms 5] [--light-every-ms 10] [--many-groups 100000]
//                          [--reps 1] [--out bench/results]
// --reps: the three scenarios that many times, in alternating order (medians reported).
// --light-every-ms: the light tenants arrive one after another, each enqueueing its 20 jobs at
// once, this far apart (0: all 200 at once, a burst of 4,000).
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { Queue } from "bullmq";
import { connectRedis, Producer, QueueKeys, type RedisClient } from "../queue/index.ts";
import { pollUntil } from "../test/support/poll.ts";
import { client, delta, SNAPSHOT_COMMANDS, snapshot, startBenchRedis } from "./lib/redis.ts";
import { BullmqSystem, ConveyorSystem, QUEUE, type WorkerHandle } from "./lib/systems.ts";
import {
  intFlag,
  loadAverage,
  machineInfo,
  nowMs,
  cliFlags,
  percentile,
  progress,
  round,
  runMain,
  summarize,
  sleep,
} from "./lib/util.ts";

export interface FairnessOptions {
  heavy: number;
  tenants: number;
  perTenant: number;
  workers: number;
  slots: number;
  jobMs: number;
  lightEveryMs: number;
}

export interface FairnessRun {
  scenario: "groups" | "fifo" | "bullmq";
  lightP50Ms: number;
  lightP95Ms: number;
  lightMaxMs: number;
  jobs: number;
  seconds: number;
  jobsPerSec: number;
  /** Redis process CPU (user + system) per job, µs: enqueue, claim, settle, everything. */
  redisCpuUsPerJob: number;
  /** The worker processes' CPU (user + system, start-up included) per job, µs. */
  workerCpuUsPerJob: number;
  load: string;
}

export interface GroupCostRun {
  groups: number;
  jobs: number;
  jobsPerSec: number;
  redisCpuUsPerJob: number;
  /** Time inside Conveyor's script calls per job (INFO commandstats fcall/evalsha), µs. */
  scriptUsPerJob: number;
  load: string;
}

export const FAIRNESS_DEFAULTS: FairnessOptions = {
  heavy: 50_000,
  tenants: 200,
  perTenant: 20,
  workers: 4,
  slots: 32,
  jobMs: 5,
  lightEveryMs: 10,
};

interface Enqueuer {
  heavy(start: number, count: number): Promise<void>;
  light(tenant: number, count: number): Promise<void>;
  /** Jobs finished so far (of `total` enqueued). */
  doneCount(total: number): Promise<number>;
  close(): Promise<void>;
}

function conveyorEnqueuer(url: string, grouped: boolean): Enqueuer {
  const redis: RedisClient = connectRedis(url, { name: "bench-fairness-producer" });
  const producer = new Producer(redis);
  const counts = new QueueKeys(QUEUE).counts;
  return {
    heavy: (start, count) =>
      producer
        .enqueueMany(
          QUEUE,
          Array.from({ length: count }, (_, i) => ({
            data: { n: start + i },
            ...(grouped ? { group: "heavy" } : {}),
          })),
        )
        .then(() => undefined),
    light: (tenant, count) =>
      producer
        .enqueueMany(
          QUEUE,
          Array.from({ length: count }, () => ({
            data: { t: nowMs(), tenant },
            ...(grouped ? { group: `light-${tenant}` } : {}),
          })),
        )
        .then(() => undefined),
    doneCount: async () => Number((await redis.hget(counts, "completed")) ?? 0),
    close: async () => void (await redis.quit().catch(() => redis.disconnect())),
  };
}

function bullmqEnqueuer(url: string): Enqueuer {
  const u = new URL(url);
  const queue = new Queue(QUEUE, { connection: { host: u.hostname, port: Number(u.port) } });
  queue.on("error", () => {});
  const add = (items: unknown[]) =>
    queue
      .addBulk(items.map((data) => ({ name: "job", data, opts: { removeOnComplete: true } })))
      .then(() => undefined);
  return {
    heavy: (start, count) => add(Array.from({ length: count }, (_, i) => ({ n: start + i }))),
    light: (tenant, count) => add(Array.from({ length: count }, () => ({ t: nowMs(), tenant }))),
    doneCount: async (total) => {
      // (completed jobs are removed: what is neither waiting nor running is done)
      const c = await queue.getJobCounts("wait", "active", "prioritized", "delayed");
      return total - Object.values(c).reduce((a, n) => a + n, 0);
    },
    close: () => queue.close(),
  };
}

/** Starts the workers (the latency handler/processor, BENCH_JOB_MS per job); each writes its samples on stop. */
async function startWorkers(
  system: "conveyor" | "bullmq",
  url: string,
  opts: FairnessOptions,
  dir: string,
): Promise<{ workers: WorkerHandle[]; files: string[]; close: () => Promise<void> }> {
  process.env.BENCH_JOB_MS = String(opts.jobMs);
  const files: string[] = [];
  const workers: WorkerHandle[] = [];
  const closers: (() => Promise<void>)[] = [];
  for (let i = 0; i < opts.workers; i++) {
    const latencyFile = join(dir, `${system}-${i}.json`);
    files.push(latencyFile);
    const s =
      system === "conveyor"
        ? new ConveyorSystem(url, { env: { CONVEYOR_WORKER_ID: `fairness-${i}` } })
        : new BullmqSystem(url, client(url));
    closers.push(() => s.close());
    workers.push(
      await s.startWorker({ concurrency: opts.slots, latencyFile, logFile: join(dir, `${system}-${i}.log`) }),
    );
  }
  await Promise.all(workers.map((w) => w.ready()));
  return { workers, files, close: async () => void (await Promise.all(closers.map((c) => c()))) };
}

/**
 * One scenario on a flushed Redis: the heavy tenant's jobs enqueued, the workers started; once
 * all are up the light tenants arrive. Throughput counts the jobs finished from then to the drain
 * (the enqueue's speed is not in it; the Redis CPU per job is, enqueue to drain).
 */
export async function runFairnessScenario(
  url: string,
  scenario: FairnessRun["scenario"],
  opts: FairnessOptions,
): Promise<FairnessRun> {
  const driver = client(url);
  await driver.flushall();
  const dir = mkdtempSync(join(tmpdir(), "cvy-fairness-"));
  const system = scenario === "bullmq" ? "bullmq" : "conveyor";
  const enq = scenario === "bullmq" ? bullmqEnqueuer(url) : conveyorEnqueuer(url, scenario === "groups");
  const total = opts.heavy + opts.tenants * opts.perTenant;
  let started: Awaited<ReturnType<typeof startWorkers>> | undefined;
  try {
    const before = await snapshot(driver);
    for (let start = 0; start < opts.heavy; start += 500)
      await enq.heavy(start, Math.min(500, opts.heavy - start));
    started = await startWorkers(system, url, opts, dir);
    const { workers, files } = started;
    const t0 = nowMs();
    const doneAtStart = await enq.doneCount(total);
    const lightStart = nowMs();
    for (let tenant = 0; tenant < opts.tenants; tenant++) {
      const due = lightStart + tenant * opts.lightEveryMs;
      if (due > nowMs()) await sleep(due - nowMs());
      await enq.light(tenant, opts.perTenant);
    }
    await pollUntil(
      `${scenario}: all ${total} jobs done`,
      async () => (await enq.doneCount(total)) >= total,
      {
        timeoutMs: 20 * 60_000,
        intervalMs: 20,
      },
    );
    const seconds = (nowMs() - t0) / 1000;
    const after = await snapshot(driver);
    const d = delta(before, after, SNAPSHOT_COMMANDS);
    const workerCpuMs = workers.reduce((sum, w) => sum + w.sample().cpuMs, 0);
    await Promise.all(workers.map((w) => w.stop()));
    const waits = files.flatMap((f) => JSON.parse(readFileSync(f, "utf8")) as number[]);
    if (waits.length !== opts.tenants * opts.perTenant)
      throw new Error(
        `${scenario}: ${waits.length} light samples, expected ${opts.tenants * opts.perTenant}`,
      );
    return {
      scenario,
      lightP50Ms: round(percentile(waits, 50), 1),
      lightP95Ms: round(percentile(waits, 95), 1),
      lightMaxMs: round(Math.max(...waits), 1),
      jobs: total,
      seconds: round(seconds, 2),
      jobsPerSec: round((total - doneAtStart) / seconds),
      redisCpuUsPerJob: round((d.cpuMs * 1000) / total, 1),
      workerCpuUsPerJob: round((workerCpuMs * 1000) / total, 1),
      load: loadAverage(),
    };
  } finally {
    if (started) {
      await Promise.all(started.workers.map((w) => w.stop().catch(() => {})));
      await started.close();
    }
    await enq.close();
    driver.disconnect();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The cost of groups at scale: `jobs` jobs in `groups` groups (round-robin over them), drained by the same workers. */
export async function runGroupCost(
  url: string,
  groups: number,
  jobs: number,
  opts: FairnessOptions,
): Promise<GroupCostRun> {
  const driver = client(url);
  await driver.flushall();
  const redis = connectRedis(url, { name: "bench-fairness-producer" });
  const producer = new Producer(redis);
  for (let start = 0; start < jobs; start += 500)
    await producer.enqueueMany(
      QUEUE,
      Array.from({ length: Math.min(500, jobs - start) }, (_, i) => ({
        data: {},
        group: `tenant-${(start + i) % groups}`,
      })),
    );
  const dir = mkdtempSync(join(tmpdir(), "cvy-groupcost-"));
  const counts = new QueueKeys(QUEUE).counts;
  let started: Awaited<ReturnType<typeof startWorkers>> | undefined;
  try {
    const before = await snapshot(driver);
    const t0 = nowMs();
    started = await startWorkers("conveyor", url, opts, dir);
    await pollUntil(
      `${groups} groups: ${jobs} jobs done`,
      async () => Number((await redis.hget(counts, "completed")) ?? 0) >= jobs,
      { timeoutMs: 20 * 60_000, intervalMs: 20 },
    );
    const seconds = (nowMs() - t0) / 1000;
    const after = await snapshot(driver);
    const d = delta(before, after, SNAPSHOT_COMMANDS);
    let scriptUs = 0;
    for (const [cmd, s] of d.commands) if (cmd === "fcall" || cmd === "evalsha") scriptUs += s.usec;
    return {
      groups,
      jobs,
      jobsPerSec: round(jobs / seconds),
      redisCpuUsPerJob: round((d.cpuMs * 1000) / jobs, 1),
      scriptUsPerJob: round(scriptUs / jobs, 1),
      load: loadAverage(),
    };
  } finally {
    if (started) {
      await Promise.all(started.workers.map((w) => w.stop().catch(() => {})));
      await started.close();
    }
    await redis.quit().catch(() => redis.disconnect());
    driver.disconnect();
    rmSync(dir, { recursive: true, force: true });
  }
}

export interface FairnessResult {
  options: FairnessOptions;
  runs: FairnessRun[];
  cost: GroupCostRun[];
  /**
   * Medians over the repetitions: light p95 with groups ÷ FIFO's (goal ≤ 1/20), throughput with
   * groups ÷ FIFO's (goal ≥ 0.9; each repetition's ratio, then their median).
   */
  lightP95Ratio: number;
  throughputRatio: number;
  /** Each repetition's throughput ratio (groups ÷ FIFO), for the spread. */
  throughputRatios: number[];
}

export async function runFairness(
  url: string,
  opts: FairnessOptions,
  manyGroups: number,
  reps = 1,
): Promise<FairnessResult> {
  const runs: FairnessRun[] = [];
  const ratios: number[] = [];
  const p95Ratios: number[] = [];
  for (let rep = 0; rep < reps; rep++) {
    // (the order alternates, so a machine getting busier or quieter does not favour one scenario)
    const order = ["groups", "fifo", "bullmq"] as const;
    const here: FairnessRun[] = [];
    for (const scenario of rep % 2 === 0 ? order : [...order].reverse()) {
      progress(`fairness: ${scenario} (repetition ${rep + 1} of ${reps})`);
      const r = await runFairnessScenario(url, scenario, opts);
      progress(
        `  ${scenario}: light p50 ${r.lightP50Ms} ms, p95 ${r.lightP95Ms} ms; ${r.jobsPerSec} jobs/s; Redis ${r.redisCpuUsPerJob} µs/job, workers ${r.workerCpuUsPerJob} µs/job (load ${r.load})`,
      );
      here.push(r);
    }
    const of = (s: FairnessRun["scenario"]) => here.find((r) => r.scenario === s)!;
    ratios.push(round(of("groups").jobsPerSec / of("fifo").jobsPerSec, 3));
    p95Ratios.push(of("groups").lightP95Ms / of("fifo").lightP95Ms);
    runs.push(...here);
  }
  const cost: GroupCostRun[] = [];
  const costJobs = Math.max(manyGroups, 20_000);
  for (const groups of [1, manyGroups]) {
    progress(`fairness: cost, ${costJobs} jobs in ${groups} group(s)`);
    const c = await runGroupCost(url, groups, costJobs, opts);
    progress(
      `  ${groups} group(s): ${c.jobsPerSec} jobs/s, Redis CPU ${c.redisCpuUsPerJob} µs/job, scripts ${c.scriptUsPerJob} µs/job (load ${c.load})`,
    );
    cost.push(c);
  }
  return {
    options: opts,
    runs,
    cost,
    lightP95Ratio: round(summarize(p95Ratios).median, 4),
    throughputRatio: round(summarize(ratios).median, 3),
    throughputRatios: ratios,
  };
}

export function fairnessMarkdown(r: FairnessResult): string {
  const o = r.options;
  const lines = [
    `Heavy tenant ${o.heavy.toLocaleString("en")} jobs, then ${o.tenants} light tenants × ${o.perTenant} (one every ${o.lightEveryMs} ms); ${o.workers} workers × ${o.slots} slots, ${o.jobMs} ms jobs.`,
    "",
    "| scenario | light p50 wait (ms) | light p95 wait (ms) | light max (ms) | jobs/s | Redis CPU µs/job | workers' CPU µs/job | load |",
    "|---|---|---|---|---|---|---|---|",
    ...r.runs.map(
      (x) =>
        `| ${x.scenario} | ${x.lightP50Ms} | ${x.lightP95Ms} | ${x.lightMaxMs} | ${x.jobsPerSec} | ${x.redisCpuUsPerJob} | ${x.workerCpuUsPerJob ?? "—"} | ${x.load} |`,
    ),
    "",
    `Light p95 with groups ÷ FIFO (median of ${r.throughputRatios?.length ?? 1}): ${r.lightP95Ratio} (goal ≤ 0.05); throughput with groups ÷ without: ${r.throughputRatio} (goal ≥ 0.9; each repetition: ${(r.throughputRatios ?? [r.throughputRatio]).join(", ")}).`,
    "",
    "| groups | jobs | jobs/s | Redis CPU µs/job | script µs/job | load |",
    "|---|---|---|---|---|---|",
    ...r.cost.map(
      (c) =>
        `| ${c.groups.toLocaleString("en")} | ${c.jobs.toLocaleString("en")} | ${c.jobsPerSec} | ${c.redisCpuUsPerJob} | ${c.scriptUsPerJob} | ${c.load} |`,
    ),
  ];
  return lines.join("\n");
}

async function main(): Promise<void> {
  const flags = cliFlags([
    "heavy",
    "job-ms",
    "light-every-ms",
    "many-groups",
    "out",
    "per-tenant",
    "reps",
    "slots",
    "tenants",
    "workers",
  ]);
  const opts: FairnessOptions = {
    heavy: intFlag(flags, "heavy", FAIRNESS_DEFAULTS.heavy),
    tenants: intFlag(flags, "tenants", FAIRNESS_DEFAULTS.tenants),
    perTenant: intFlag(flags, "per-tenant", FAIRNESS_DEFAULTS.perTenant),
    workers: intFlag(flags, "workers", FAIRNESS_DEFAULTS.workers),
    slots: intFlag(flags, "slots", FAIRNESS_DEFAULTS.slots),
    jobMs: intFlag(flags, "job-ms", FAIRNESS_DEFAULTS.jobMs),
    lightEveryMs: flags.get("light-every-ms") === "0" ? 0 : intFlag(flags, "light-every-ms", 10),
  };
  const manyGroups = intFlag(flags, "many-groups", 100_000);
  const loadBefore = loadAverage();
  const server = await startBenchRedis();
  let result: FairnessResult;
  try {
    result = await runFairness(server.url, opts, manyGroups, intFlag(flags, "reps", 1));
  } finally {
    await server.stop();
  }
  const md = fairnessMarkdown(result);
  console.log(md);
  const out = flags.get("out");
  if (out) {
    mkdirSync(resolve(out), { recursive: true });
    const base = join(resolve(out), `${new Date().toISOString().slice(0, 10)}-fairness`);
    const machine = machineInfo();
    writeFileSync(
      `${base}.json`,
      `${JSON.stringify({ ...result, machine, loadBefore, loadAfter: loadAverage() }, null, 2)}\n`,
    );
    writeFileSync(
      `${base}.md`,
      `# Fairness (bench/fairness.ts)\n\n${machine.cpu}, ${machine.cores} cores, Redis ${machine.redis}, BullMQ ${machine.bullmq}, commit ${machine.commit}; load before ${loadBefore}, after ${loadAverage()} (the load says whether other work shared the machine).\n\n${md}\n`,
    );
    progress(`wrote ${base}.json and .md`);
  }
}

if (import.meta.main) runMain("fairness", main);

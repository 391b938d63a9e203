// Cost against backlog depth (issue 30), Conveyor alone:
//   npm run bench:backlog -- [--backlog 1000000] [--sample 20000] [--concurrency 32] [--json]
// Grows one queue's waiting backlog through 10^4, 10^5, … up to --backlog (bulk enqueue, a
// progress line with jobs/s every 100,000), and at each depth (and on an empty queue first):
// Redis bytes per waiting job, the p95 of `backlog_counts` (the operator's and `conveyor stats`'
// read) over 200 calls, and a worker draining a sample of --sample jobs enqueued at priority 1
// (claimed ahead of the backlog, so the backlog stays deep): jobs/s and Redis CPU µs per job.
import { join } from "node:path";
import { QueueAdmin, QueueKeys, connectRedis, Producer } from "../queue/index.ts";
import { snapshot } from "./lib/redis.ts";
import { QUEUE } from "./lib/systems.ts";
import { intFlag, nowMs, parseFlags, percentile, progress, round, sleep } from "./lib/util.ts";
import { openContext, type BenchContext } from "./throughput.ts";

export interface BacklogLevel {
  backlog: number;
  enqueuePerSec: number;
  bytesPerWaitingJob: number;
  countsP95Ms: number;
  sampleJobsPerSec: number;
  redisCpuUsPerJob: number;
}

const CHUNK = 100_000;

async function measure(
  ctx: BenchContext,
  backlog: number,
  opts: { sample: number; concurrency: number },
  base: { usedMemory: number; enqueuePerSec: number },
): Promise<BacklogLevel> {
  const redis = connectRedis(ctx.url, { name: "bench-backlog" });
  try {
    const admin = new QueueAdmin(redis);
    const keys = new QueueKeys(QUEUE);
    const reads: number[] = [];
    for (let i = 0; i < 200; i++) {
      const t = nowMs();
      await admin.counts(QUEUE);
      reads.push(nowMs() - t);
    }
    const bytesPerWaitingJob = backlog
      ? ((await snapshot(ctx.driver)).usedMemory - base.usedMemory) / backlog
      : 0;
    const done0 = Number((await redis.hget(keys.counts, "completed")) ?? 0);
    await new Producer(redis).enqueueMany(
      QUEUE,
      Array.from({ length: opts.sample }, (_, i) => ({ data: { s: i }, priority: 1 })),
    );
    const before = await snapshot(ctx.driver);
    const worker = await ctx.systems.conveyor.startWorker({
      concurrency: opts.concurrency,
      logFile: join(ctx.tmp, `backlog-${backlog}.log`),
    });
    let t0 = 0;
    let t1 = 0;
    let after = before;
    try {
      for (const deadline = Date.now() + 120_000 + opts.sample * 5; ;) {
        const done = Number((await redis.hget(keys.counts, "completed")) ?? 0) - done0;
        if (!t0 && done > 0) t0 = nowMs();
        if (done >= opts.sample) {
          t1 = nowMs();
          after = await snapshot(ctx.driver);
          break;
        }
        if (worker.exited()) throw new Error(`worker exited:\n${worker.output()}`);
        if (Date.now() > deadline) throw new Error(`${done} of ${opts.sample} done in time`);
        await sleep(2);
      }
    } finally {
      await worker.stop();
    }
    return {
      backlog,
      enqueuePerSec: round(base.enqueuePerSec),
      bytesPerWaitingJob: round(bytesPerWaitingJob),
      countsP95Ms: round(percentile(reads, 95), 3),
      sampleJobsPerSec: round(opts.sample / ((t1 - t0) / 1000)),
      redisCpuUsPerJob: round(((after.cpuMs - before.cpuMs) * 1000) / opts.sample, 2),
    };
  } finally {
    redis.disconnect();
  }
}

export async function runBacklog(
  ctx: BenchContext,
  opts: { backlog: number; sample: number; concurrency: number },
): Promise<BacklogLevel[]> {
  const redis = connectRedis(ctx.url, { name: "bench-backlog-producer" });
  const producer = new Producer(redis);
  const levels: BacklogLevel[] = [];
  try {
    await ctx.driver.flushall();
    const empty = await snapshot(ctx.driver);
    levels.push(await measure(ctx, 0, opts, { usedMemory: empty.usedMemory, enqueuePerSec: NaN }));
    progress(`  empty queue: ${JSON.stringify(levels[0])}`);
    // the sample's records stay (completed, kept for retention); the backlog is measured from here
    const base = await snapshot(ctx.driver);
    let have = 0;
    for (let level = 10_000; level <= opts.backlog; level *= 10) {
      const t = nowMs();
      const from = have;
      while (have < level) {
        const n = Math.min(CHUNK, level - have);
        await producer.enqueueMany(
          QUEUE,
          Array.from({ length: n }, (_, i) => ({ data: { i: have + i } })),
        );
        have += n;
        progress(
          `  enqueued ${have.toLocaleString("en")} of ${opts.backlog.toLocaleString("en")} (${round((have - from) / ((nowMs() - t) / 1000))} jobs/s)`,
        );
      }
      const rate = (level - from) / ((nowMs() - t) / 1000);
      const r = await measure(ctx, level, opts, { usedMemory: base.usedMemory, enqueuePerSec: rate });
      // the worker may have run into the backlog after the sample: count it again
      have = Number(await redis.zcard(new QueueKeys(QUEUE).ready));
      progress(`  backlog ${level.toLocaleString("en")}: ${JSON.stringify(r)}`);
      levels.push(r);
    }
  } finally {
    redis.disconnect();
  }
  return levels;
}

async function main(): Promise<void> {
  const flags = parseFlags(process.argv.slice(2));
  const ctx = await openContext();
  try {
    const levels = await runBacklog(ctx, {
      backlog: intFlag(flags, "backlog", 1_000_000),
      sample: intFlag(flags, "sample", 20_000),
      concurrency: intFlag(flags, "concurrency", 32),
    });
    if (flags.has("json")) process.stdout.write(`${JSON.stringify(levels)}\n`);
  } finally {
    await ctx.stop();
  }
}

if (import.meta.main) {
  main().then(
    () => process.exit(0),
    (err: Error) => {
      process.stderr.write(`bench:backlog failed: ${err.stack ?? err.message}\n`);
      process.exit(1);
    },
  );
}

// The physical limit: how much this Redis can do on this machine, with nothing in the way.
//   redis-benchmark: unpipelined requests/s (50 connections), a no-op script call (EVALSHA of
//   `return 1`) and pipelined requests/s — the cost of a round trip versus the cost of work.
//   Conveyor's own script mix from a raw pipelined client (100 calls per pipeline, no worker
//   logic): claim(1) + complete per job as the worker does it today, and the prototype
//   "complete and claim next" script (bench/proto/combined.ts), one call per job. Redis CPU per
//   job bounds what any single worker fleet can reach on one Redis: 1e6 / µs-per-job.
import { execFileSync } from "node:child_process";
import type { Redis } from "ioredis";
import { client, flush, snapshot } from "./lib/redis.ts";
import { ProtoConsumer } from "./proto/combined.ts";
import { noopJobs, type BenchContext } from "./throughput.ts";
import { QUEUE } from "./lib/systems.ts";
import { loadAverage, nowMs, round } from "./lib/util.ts";

export interface RedisBenchmarkResult {
  test: string;
  requestsPerSec: number;
}

export interface RawMixResult {
  mix: "claim+complete" | "complete-and-claim";
  rep: number;
  jobsPerSec: number;
  /** Script calls per job. */
  scriptCallsPerJob: number;
  redisCpuUsPerJob: number;
  /** 1e6 / redisCpuUsPerJob: jobs/s if Redis' one core did nothing else. */
  redisBoundJobsPerSec: number;
  load: string;
}

const TRIVIAL_SCRIPT = "return 1";

export async function runRedisBenchmark(
  ctx: BenchContext,
  requests = 200_000,
): Promise<RedisBenchmarkResult[]> {
  const port = new URL(ctx.url).port;
  await flush(ctx.driver);
  const sha = (await ctx.driver.script("LOAD", TRIVIAL_SCRIPT)) as string;
  const runs: [string, string[]][] = [
    ["PING, 50 connections, no pipelining", ["-c", "50", "-P", "1", "-t", "ping_mbulk"]],
    ["EVALSHA of `return 1`, 50 connections, no pipelining", ["-c", "50", "-P", "1", "EVALSHA", sha, "0"]],
    ["PING, 50 connections, pipelines of 32", ["-c", "50", "-P", "32", "-t", "ping_mbulk"]],
  ];
  const out: RedisBenchmarkResult[] = [];
  for (const [test, args] of runs) {
    const csv = execFileSync("redis-benchmark", ["-p", port, "-n", String(requests), "--csv", ...args], {
      encoding: "utf8",
    });
    // "test","rps",...  then one line per test
    const line = csv.trim().split("\n").pop()!;
    const rps = Number(/^"[^"]*","([\d.]+)"/.exec(line)?.[1] ?? NaN);
    out.push({ test, requestsPerSec: round(rps) });
  }
  return out;
}

export async function runRawMix(
  ctx: BenchContext,
  mix: RawMixResult["mix"],
  opts: { jobs: number; batch: number; rep: number },
): Promise<RawMixResult> {
  await flush(ctx.driver);
  await ctx.systems.conveyor.enqueueBulk(noopJobs(opts.jobs));
  const redis: Redis = client(ctx.url, "bench-raw-mix");
  try {
    const consumer = new ProtoConsumer(redis, QUEUE, {
      workerId: "raw-mix",
      leaseMs: 30_000,
      retentionSeconds: 0,
    });
    await redis.ping();
    const before = await snapshot(ctx.driver);
    const t0 = nowMs();
    let done = 0;
    if (mix === "claim+complete") {
      for (;;) {
        const jobs = await consumer.claimBatch(opts.batch);
        if (jobs.length === 0) break;
        await consumer.completeBatch(jobs, false);
        done += jobs.length;
      }
    } else {
      let jobs = await consumer.claimBatch(opts.batch);
      while (jobs.length > 0) {
        const next = await consumer.completeBatch(jobs, true);
        done += jobs.length;
        jobs = next;
      }
    }
    const seconds = (nowMs() - t0) / 1000;
    const after = await snapshot(ctx.driver);
    if (done !== opts.jobs) throw new Error(`raw mix ${mix}: completed ${done} of ${opts.jobs}`);
    const scripts =
      (after.commands.get("evalsha")?.calls ?? 0) - (before.commands.get("evalsha")?.calls ?? 0);
    const cpuUs = ((after.cpuMs - before.cpuMs) * 1000) / opts.jobs;
    return {
      mix,
      rep: opts.rep,
      jobsPerSec: round(opts.jobs / seconds),
      scriptCallsPerJob: round(scripts / opts.jobs, 3),
      redisCpuUsPerJob: round(cpuUs, 2),
      redisBoundJobsPerSec: round(1e6 / cpuUs),
      load: loadAverage(),
    };
  } finally {
    redis.disconnect();
  }
}

// Enqueue-to-start latency under a steady load: the driver enqueues single jobs at a fixed
// rate (open loop: the schedule does not wait for the worker) for a few seconds; each job
// carries its enqueue time and the handler notes how long it waited before it started. Both
// systems get the same rate — half of the slower system's median peak at that concurrency —
// so each runs at or below half of its own peak. The first 10% of samples (warm-up) are
// dropped.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { flush } from "./lib/redis.ts";
import type { SystemName } from "./lib/systems.ts";
import { waitIdle, type BenchContext } from "./throughput.ts";
import { loadAverage, nowMs, percentile, round, sleep } from "./lib/util.ts";

export interface LatencyRun {
  system: SystemName;
  concurrency: number;
  rep: number;
  /** Offered rate, jobs/s. */
  rate: number;
  samples: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  load: string;
}

/** Most enqueue calls in flight before the producer stops adding more (it is behind, not the worker). */
const MAX_IN_FLIGHT = 5000;

export async function runLatency(
  ctx: BenchContext,
  name: SystemName,
  opts: { concurrency: number; rate: number; seconds: number; rep: number },
): Promise<LatencyRun> {
  const sys = ctx.systems[name];
  await flush(ctx.driver);
  const latencyFile = join(ctx.tmp, `latency-${name}-c${opts.concurrency}-r${opts.rep}.json`);
  const worker = await sys.startWorker({
    concurrency: opts.concurrency,
    latencyFile,
    logFile: join(ctx.tmp, `${name}-latency-c${opts.concurrency}-r${opts.rep}.log`),
  });
  try {
    await worker.ready();
    await sleep(300);
    const total = Math.round(opts.rate * opts.seconds);
    const start = nowMs();
    let sent = 0;
    let inFlight = 0;
    let failed: Error | undefined;
    while (sent < total) {
      const due = Math.min(total, Math.floor(((nowMs() - start) / 1000) * opts.rate));
      while (sent < due && inFlight < MAX_IN_FLIGHT) {
        inFlight++;
        sent++;
        sys.enqueueOne({ t: nowMs() }).then(
          () => inFlight--,
          (err: Error) => (failed = err),
        );
      }
      if (failed) throw failed;
      await sleep(1);
    }
    while (inFlight > 0) await sleep(5);
    await waitIdle(sys, worker, 120_000);
  } finally {
    await worker.stop();
  }
  const all = JSON.parse(readFileSync(latencyFile, "utf8")) as number[];
  const samples = all.slice(Math.floor(all.length / 10));
  return {
    system: name,
    concurrency: opts.concurrency,
    rep: opts.rep,
    rate: round(opts.rate),
    samples: samples.length,
    p50Ms: round(percentile(samples, 50), 2),
    p99Ms: round(percentile(samples, 99), 2),
    maxMs: round(Math.max(...samples), 2),
    load: loadAverage(),
  };
}

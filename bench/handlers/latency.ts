// Conveyor handler for the latency runs: each job carries `t`, the producer's clock when it was
// enqueued (performance.timeOrigin + performance.now(), comparable across processes on one
// machine); the handler notes how long the job waited until it started. The samples are
// written to BENCH_LATENCY_FILE when the worker stops (the module's `close`). BENCH_JOB_MS: each
// job then takes that long (the fairness bench's 5 ms jobs).
import { writeFileSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";

const samples: number[] = [];
const jobMs = Number(process.env.BENCH_JOB_MS ?? 0);

export default async function latency(job: { data: unknown }): Promise<null> {
  const started = performance.timeOrigin + performance.now();
  const t = (job.data as { t?: number } | null)?.t;
  if (typeof t === "number") samples.push(started - t);
  if (jobMs > 0) await sleep(jobMs);
  return null;
}

export async function close(): Promise<void> {
  const file = process.env.BENCH_LATENCY_FILE;
  if (file) writeFileSync(file, JSON.stringify(samples));
}

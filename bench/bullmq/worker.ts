// A BullMQ worker process, the counterpart of one `conveyor worker`: one `Worker` with the
// given concurrency and BullMQ's default lock settings (lockDuration 30 s, renewed every
// 15 s; stalled check every 30 s), a no-op processor (or, for latency runs, one that notes
// how long each job waited). Prints `ready` on stdout once connected; SIGTERM closes it
// gracefully (waits for running jobs), like the Conveyor worker's warm shutdown. BENCH_JOB_MS:
// each job then takes that long (the fairness bench's 5 ms jobs). BENCH_ECHO=1: each job's data is
// its result (the contract bench's documents).
import { writeFileSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";
import { Worker } from "bullmq";

const url = new URL(process.env.REDIS_URL ?? "redis://127.0.0.1:6379");
const queue = process.env.BENCH_QUEUE ?? "bench";
const concurrency = Number(process.env.BENCH_CONCURRENCY ?? 1);
const latencyFile = process.env.BENCH_LATENCY_FILE;
const samples: number[] = [];
const jobMs = Number(process.env.BENCH_JOB_MS ?? 0);

const processor = latencyFile
  ? async (job: { data: { t?: number } }) => {
      const started = performance.timeOrigin + performance.now();
      if (typeof job.data?.t === "number") samples.push(started - job.data.t);
      if (jobMs > 0) await sleep(jobMs);
      return null;
    }
  : process.env.BENCH_ECHO === "1"
    ? async (job: { data: unknown }) => job.data
    : async () => null;

const worker = new Worker(queue, processor, {
  connection: { host: url.hostname, port: Number(url.port || 6379), maxRetriesPerRequest: null },
  concurrency,
});
worker.on("error", (err) => process.stderr.write(`bullmq worker error: ${err.message}\n`));
await worker.waitUntilReady();
process.stdout.write("ready\n");

let closing = false;
process.on("SIGTERM", () => {
  if (closing) return;
  closing = true;
  void worker.close().then(() => {
    if (latencyFile) writeFileSync(latencyFile, JSON.stringify(samples));
    process.exit(0);
  });
});

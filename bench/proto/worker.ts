// A lean consumer process for the round-trip experiment (bench only): the worker's slot
// logic — claim only for free slots, run the no-op handler, complete — without its heartbeat
// thread, metrics, logs and health server, so that the modes differ in one thing only:
//   separate   complete, then the claim loop claims for the freed slot (today's worker)
//   pipelined  complete + claim(1) for the freed slot in one pipeline (one round trip)
//   combined   one script that completes and claims for the freed slot (one round trip)
// and, to attribute the real worker's own cost, `separate` plus the worker's lease heartbeat
// (worker/leaseHeartbeat.ts, used as is) driven two ways:
//   hb-worker  the messages worker.ts sends today: hold + status when a job starts, drop +
//              status when it ends, and a renew-now `beat` after every claim
//   hb-lean    hold when a job starts and drop when it ends, nothing else
// Env: REDIS_URL, BENCH_QUEUE, BENCH_CONCURRENCY, BENCH_MODE (separate | pipelined | combined
// | hb-worker | hb-lean). Stays up after the queue is drained until SIGTERM, so the driver can
// read its CPU and memory.
import { Redis } from "ioredis";
import type { ClaimedJob } from "../../queue/index.ts";
import { LeaseHeartbeat, type HeldLease } from "../../worker/leaseHeartbeat.ts";
import { ProtoConsumer, type ProtoMode } from "./combined.ts";

const queue = process.env.BENCH_QUEUE ?? "bench";
const concurrency = Number(process.env.BENCH_CONCURRENCY ?? 1);
const mode = (process.env.BENCH_MODE ?? "separate") as ProtoMode;
if (!["separate", "pipelined", "combined", "hb-worker", "hb-lean"].includes(mode))
  throw new Error(`BENCH_MODE: unknown mode ${mode}`);
const redisUrl = process.env.REDIS_URL ?? "redis://127.0.0.1:6379";
const leaseMs = 30_000;
const workerId = `proto-${process.pid}`;

const redis = new Redis(redisUrl, { connectionName: `bench-proto-${mode}`, maxRetriesPerRequest: null });
const consumer = new ProtoConsumer(redis, queue, { workerId, leaseMs, retentionSeconds: 0 });
const handler = async (_data: unknown): Promise<null> => null;

const heartbeat = mode.startsWith("hb-")
  ? new LeaseHeartbeat(
      {
        redisUrl,
        queue,
        workerId,
        pod: workerId,
        slots: concurrency,
        leaseMs,
        intervalMs: leaseMs / 3,
        sweepIntervalMs: leaseMs / 2,
        maxStalls: 2,
      },
      {
        onRenewed: () => {},
        onLost: () => {},
        onSwept: () => {},
        onReclaimed: () => {},
        onCordon: () => {},
        onError: (m) => process.stderr.write(`${m}\n`),
      },
    )
  : undefined;
const workerMessages = mode === "hb-worker";
const started = (job: ClaimedJob): HeldLease | undefined => {
  const held = heartbeat?.hold(job.id, job.token, Date.now() + 300_000);
  if (workerMessages) heartbeat?.status(running, concurrency, false);
  return held;
};
const ended = (job: ClaimedJob, held: HeldLease | undefined) => {
  if (held !== undefined) heartbeat?.drop(job.id, held);
  if (workerMessages) heartbeat?.status(running, concurrency, false);
};

let running = 0;
let wake: (() => void) | undefined;
const slotFreed = () => {
  wake?.();
  wake = undefined;
};

async function runSlot(first: ClaimedJob, firstHeld: HeldLease | undefined): Promise<void> {
  let job: ClaimedJob | undefined = first;
  let held = firstHeld;
  while (job) {
    const result = await handler(JSON.parse(job.rawData));
    if (mode === "pipelined" || mode === "combined") {
      const next: ClaimedJob | undefined = (await consumer.completeAndClaim(job, result, mode)).next;
      ended(job, held);
      if (next) held = started(next);
      job = next;
    } else {
      await consumer.complete(job, result);
      ended(job, held);
      job = undefined;
    }
  }
  running--;
  slotFreed();
}

async function loop(): Promise<void> {
  for (;;) {
    const free = concurrency - running;
    if (free <= 0) {
      await new Promise<void>((resolve) => (wake = resolve));
      continue;
    }
    const jobs = await consumer.claim(free);
    for (const job of jobs) {
      running++;
      void runSlot(job, started(job));
    }
    if (jobs.length > 0 && workerMessages) heartbeat?.beat();
    if (jobs.length === 0) {
      if (running === 0) return; // drained
      await new Promise<void>((resolve) => (wake = resolve));
    }
  }
}

await loop();
process.on("SIGTERM", () => {
  redis.disconnect();
  void (heartbeat?.stop() ?? Promise.resolve()).finally(() => process.exit(0));
});
setInterval(() => {}, 60_000);

// A rate limit measured where it matters: when handlers start. Real `conveyor worker` processes
// on one limited queue (or one limited group), each recording its handler starts in its own
// log; one worker may run with its wall clock off (test/fixtures/clockOffset.js), and every
// claim may be held once in Redis (CLIENT PAUSE WRITE) just before the second window opens.
// Shared by test/worker/rateClock.test.ts and bench/rateWindow.ts.
import { join } from "node:path";
import { setGroupLimit, setRateLimit, type RateLimit } from "../../queue/index.ts";
import { stopProcess, waitFor } from "./processes.ts";
import type { WorkerTestBed } from "./testbed.ts";
import { readExecutions, REPO } from "./workers.ts";

export const CLOCK_OFFSET_FIXTURE = join(REPO, "test/fixtures/clockOffset.js");

export interface RateScenario {
  jobs: number;
  workers: number;
  concurrency: number;
  limit: RateLimit;
  /** How long each handler runs. */
  sleepMs: number;
  /** The last worker's wall clock is off by this much (ms; 0 = all share the machine's clock). */
  offsetMs?: number;
  /** Hold every script write this long, once, from 100 ms before the second window opens (0 = never). */
  pauseMs?: number;
  /** The jobs carry this group and the limit is the group's; else the limit is the queue's. */
  group?: string;
}

export interface RateScenarioResult {
  /** Handler starts on the machine's clock, ms after the first, sorted. */
  starts: number[];
  /** The most starts in any window of the limit's length (half-open, anchored at each start). */
  maxInWindow: number;
  /** Where that window begins (ms after the first start). */
  maxWindowAt: number;
  /** Jobs a worker handed back unstarted: their claim came back too late for their window. */
  handedBackLate: number;
  /** From the first handler start to the last (ms). */
  spanMs: number;
}

/** Most starts in any window of `windowMs` (sorted starts), and where the fullest begins. */
export function fullestWindow(starts: number[], windowMs: number): { max: number; at: number } {
  let max = 0;
  let at = 0;
  let j = 0;
  for (let i = 0; i < starts.length; i++) {
    while (j < starts.length && starts[j]! < starts[i]! + windowMs) j++;
    if (j - i > max) [max, at] = [j - i, starts[i]!];
  }
  return { max, at };
}

export async function runRateScenario(
  bed: WorkerTestBed,
  q: string,
  s: RateScenario,
): Promise<RateScenarioResult> {
  const data = { sleepMs: s.sleepMs };
  await bed.producer.enqueueMany(
    q,
    Array.from({ length: s.jobs }, (_, i) => ({ id: `j${i}`, data, ...(s.group ? { group: s.group } : {}) })),
  );
  if (s.group) await setGroupLimit(bed.redis, q, s.group, { rate: s.limit });
  else await setRateLimit(bed.redis, q, s.limit);
  const logs: { file: string; offset: number }[] = [];
  const workers = [];
  for (let i = 0; i < s.workers; i++) {
    const offset = i === s.workers - 1 ? (s.offsetMs ?? 0) : 0;
    const file = `${bed.execLog(q)}.${i}`;
    logs.push({ file, offset });
    const env: Record<string, string> = { CONVEYOR_CONCURRENCY: String(s.concurrency), EXEC_LOG: file };
    if (offset) {
      env.NODE_OPTIONS = `${process.env.NODE_OPTIONS ?? ""} --import=${CLOCK_OFFSET_FIXTURE}`.trim();
      env.CLOCK_OFFSET_MS = String(offset);
    }
    workers.push(bed.worker(q, env, { waitReady: false }));
  }
  const started = await Promise.all(workers);
  // Handler starts on the machine's clock: a worker's own records are taken back by its offset.
  const starts = () => logs.flatMap((l) => readExecutions(l.file).map((e) => e.t - l.offset));
  if (s.pauseMs) {
    const first = await waitFor(
      "the first handler start",
      async () => {
        const t = starts();
        return t.length > 0 ? Math.min(...t) : undefined;
      },
      60_000,
      5,
    );
    const at = first + s.limit.perMs - 100;
    await waitFor("100 ms before the second window", async () => Date.now() >= at, 60_000, 5);
    await bed.redis.call("CLIENT", "PAUSE", s.pauseMs, "WRITE");
  }
  await waitFor(
    `${s.jobs} handler starts`,
    async () => starts().length >= s.jobs,
    120_000 + s.jobs * s.limit.perMs,
    50,
  );
  await Promise.all(started.map((w) => stopProcess(w, 5000)));
  const sorted = starts().sort((a, b) => a - b);
  const rel = sorted.map((t) => t - sorted[0]!);
  const { max, at } = fullestWindow(rel, s.limit.perMs);
  const handedBackLate = (await bed.admin.counters(q)).rateLimited ?? 0;
  return { starts: rel, maxInWindow: max, maxWindowAt: at, handedBackLate, spanMs: rel.at(-1) ?? 0 };
}

/**
 * From claim to handler for a worker's first batch: `n` jobs wait, one worker of `n` slots starts;
 * per job, the handler's first line minus the `startedAt` its claim recorded (the worker's clock,
 * taken when it sent the claim). Sorted, ms.
 */
export async function firstBatchLatency(bed: WorkerTestBed, q: string, n: number): Promise<number[]> {
  await bed.producer.enqueueMany(
    q,
    Array.from({ length: n }, (_, i) => ({ id: `f${i}`, data: { sleepMs: 5 } })),
  );
  const file = `${bed.execLog(q)}.first`;
  const w = await bed.worker(q, { CONVEYOR_CONCURRENCY: String(n), EXEC_LOG: file }, { waitReady: false });
  await waitFor(`${n} handler starts`, async () => readExecutions(file).length >= n, 60_000, 20);
  await stopProcess(w, 5000);
  const out: number[] = [];
  for (const e of readExecutions(file)) {
    const job = await bed.admin.job(e.id, q);
    out.push(e.t - job!.startedAt!);
  }
  return out.sort((a, b) => a - b);
}

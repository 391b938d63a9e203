// Enqueue rates from one producer process (the bench driver) with one connection:
//   single     one job per call, each call awaited before the next (latency-bound)
//   windowed   one job per call, 64 calls in flight (what a busy web server does)
//   bulk       Conveyor Producer.enqueueMany (one script call per 500 jobs) and BullMQ
//              Queue.addBulk in chunks of 500 (one MULTI of 500 script calls)
import { flush } from "./lib/redis.ts";
import type { SystemName } from "./lib/systems.ts";
import { noopJobs, type BenchContext } from "./throughput.ts";
import { loadAverage, nowMs, round } from "./lib/util.ts";

export interface EnqueueRun {
  system: SystemName;
  rep: number;
  singlePerSec: number;
  windowedPerSec: number;
  bulkPerSec: number;
  load: string;
}

export const ENQUEUE_WINDOW = 64;

export async function runEnqueue(
  ctx: BenchContext,
  name: SystemName,
  opts: { single: number; windowed: number; bulk: number; rep: number },
): Promise<EnqueueRun> {
  const sys = ctx.systems[name];

  await flush(ctx.driver);
  await sys.enqueueOne({ warm: true });
  let t = nowMs();
  for (let i = 0; i < opts.single; i++) await sys.enqueueOne({ i });
  const singlePerSec = opts.single / ((nowMs() - t) / 1000);

  await flush(ctx.driver);
  t = nowMs();
  let next = 0;
  const lane = async () => {
    while (next < opts.windowed) await sys.enqueueOne({ i: next++ });
  };
  await Promise.all(Array.from({ length: ENQUEUE_WINDOW }, lane));
  const windowedPerSec = opts.windowed / ((nowMs() - t) / 1000);

  await flush(ctx.driver);
  const items = noopJobs(opts.bulk);
  t = nowMs();
  await sys.enqueueBulk(items);
  const bulkPerSec = opts.bulk / ((nowMs() - t) / 1000);

  return {
    system: name,
    rep: opts.rep,
    singlePerSec: round(singlePerSec),
    windowedPerSec: round(windowedPerSec),
    bulkPerSec: round(bulkPerSec),
    load: loadAverage(),
  };
}

// Redis bytes per waiting job, by payload size, both systems on the same Redis: N jobs whose
// data is JSON text of exactly `size` bytes are enqueued in bulk on an empty Redis, and the
// `used_memory` growth is divided by N. "overhead" is that minus the payload itself. For
// Conveyor it also reports where the bytes go: MEMORY USAGE of one job record (with its
// encoding), and of the ready set, the ready line and the events stream per job.
import { flush, snapshot } from "./lib/redis.ts";
import { SYSTEMS, type SystemName } from "./lib/systems.ts";
import { intFlag, cliFlags, progress, runMain } from "./lib/util.ts";
import { openContext, type BenchContext } from "./throughput.ts";

export const PAYLOAD_SIZES = [20, 1024, 16384];

export interface MemoryRun {
  system: SystemName;
  payloadBytes: number;
  jobs: number;
  bytesPerJob: number;
  overheadPerJob: number;
  /** Conveyor only: MEMORY USAGE per job of each kind of key, and the job record's encoding. */
  breakdown?: Record<string, number | string>;
}

/** `n` distinct job payloads whose JSON text is exactly `size` bytes: `{"i":<n>,"p":"xxx…"}`. */
export function payloads(n: number, size: number): unknown[] {
  return Array.from({ length: n }, (_, i) => {
    const head = `{"i":${i},"p":""}`.length;
    return { i, p: "x".repeat(Math.max(0, size - head)) };
  });
}

const usedMemory = async (ctx: BenchContext) => (await snapshot(ctx.driver)).usedMemory;

async function conveyorBreakdown(ctx: BenchContext, jobs: number): Promise<Record<string, number | string>> {
  const r = ctx.driver;
  const perJob = async (key: string) =>
    Math.round(Number((await r.call("MEMORY", "USAGE", key, "SAMPLES", "0")) ?? 0) / jobs);
  const [, [sample]] = (await r.scan("0", "MATCH", "cvy:{bench}:job:*", "COUNT", 1000)) as [string, string[]];
  const out: Record<string, number | string> = {
    // (the prioritised sorted set and the line of priority-0 jobs: docs/protocol.md, "Ready jobs")
    ready: await perJob("cvy:{bench}:q:bench:ready"),
    line: await perJob("cvy:{bench}:q:bench:line"),
    events: await perJob("cvy:{bench}:q:bench:events"),
  };
  if (sample) {
    out.record = Number(await r.call("MEMORY", "USAGE", sample, "SAMPLES", "0"));
    out.recordEncoding = String(await r.object("ENCODING", sample));
  }
  return out;
}

export async function runMemory(
  ctx: BenchContext,
  name: SystemName,
  opts: { jobs: number; payloadBytes: number },
): Promise<MemoryRun> {
  const sys = ctx.systems[name];
  const items = payloads(opts.jobs, opts.payloadBytes);
  // (one job first: loading the scripts is not a waiting job's cost; FLUSHALL keeps them)
  await sys.enqueueBulk(payloads(1, opts.payloadBytes));
  await flush(ctx.driver);
  const before = await usedMemory(ctx);
  await sys.enqueueBulk(items);
  const bytesPerJob = Math.round((await usedMemory(ctx)) - before) / opts.jobs;
  const run: MemoryRun = {
    system: name,
    payloadBytes: opts.payloadBytes,
    jobs: opts.jobs,
    bytesPerJob: Math.round(bytesPerJob),
    overheadPerJob: Math.round(bytesPerJob - opts.payloadBytes),
  };
  if (name === "conveyor") run.breakdown = await conveyorBreakdown(ctx, opts.jobs);
  await flush(ctx.driver);
  return run;
}

// `npm run bench:memory -- [--jobs 20000] [--json]`: this section alone.
async function main(): Promise<void> {
  const flags = cliFlags(["jobs", "json"]);
  const jobs = intFlag(flags, "jobs", 20_000);
  const ctx = await openContext();
  const runs: MemoryRun[] = [];
  try {
    for (const payloadBytes of PAYLOAD_SIZES)
      for (const name of SYSTEMS) {
        const r = await runMemory(ctx, name, { jobs, payloadBytes });
        progress(
          `${name} ${payloadBytes} B: ${r.bytesPerJob} B/job (overhead ${r.overheadPerJob}) ${JSON.stringify(r.breakdown ?? {})}`,
        );
        runs.push(r);
      }
  } finally {
    await ctx.stop();
  }
  if (flags.has("json")) process.stdout.write(`${JSON.stringify(runs)}\n`);
}

if (import.meta.main) runMain("bench:memory", main);

// Redis' own cost per job with nothing else in the way: a raw client runs the worker's two
// script calls back to back (claim B, then settle those B and claim B more), with no handler,
// heartbeat or metrics, on a fresh Redis. Redis CPU per job (INFO cpu) and the time inside the
// script calls and each command they make (INFO commandstats) are what a protocol change moves;
// jobs/s here is client-bound. Blocks of the same size alternate nothing: run it before and
// after a change, on the same machine, and compare the medians.
// With --layout 2 the pipeline is finalized to layout 2 first (every queue fenced against 0.1.0).
// With --next, each settle hands its jobs to a next stage (`raw/next`) instead of completing them.
// With --notify pool every completion is asked for by the queue's pool (`notify:<queue>` in meta,
// as `conveyor worker --notify` sets it), with --notify job by each job's own notify: each settle
// then appends the jobs to the notify stream (docs/notifications.md; nothing sends them here).
//   node bench/rawLoop.ts [--jobs 20000] [--batch 32] [--reps 5] [--next] [--notify pool|job] [--layout 1|2] [--json]
import { Consumer, PipelineKeys, Producer, writeLayoutInForce, type ClaimedJob } from "../queue/index.ts";
import { client, snapshot, startBenchRedis, type RedisSnapshot } from "./lib/redis.ts";
import { intFlag, loadAverage, nowMs, cliFlags, progress, round, summarize } from "./lib/util.ts";

const QUEUE = "raw/work";
const NEXT = "raw/next";

interface RawRep {
  jobsPerSec: number;
  redisCpuUsPerJob: number;
  callUsPerJob: number;
  commandsPerJob: number;
  /** µs per job inside each command the scripts made (fcall/evalsha excluded). */
  byCommand: Record<string, number>;
}

function diff(a: RedisSnapshot, b: RedisSnapshot, jobs: number): RawRep & { wallMs: number } {
  const byCommand: Record<string, number> = {};
  let callUs = 0;
  let commands = 0;
  for (const [name, s] of b.commands) {
    const d = s.usec - (a.commands.get(name)?.usec ?? 0);
    const calls = s.calls - (a.commands.get(name)?.calls ?? 0);
    if (calls <= 0 || name === "info") continue;
    if (name === "fcall" || name === "evalsha") callUs += d;
    else {
      byCommand[name] = round(d / jobs, 2);
      commands += calls;
    }
  }
  return {
    jobsPerSec: 0,
    wallMs: b.at - a.at,
    redisCpuUsPerJob: round(((b.cpuMs - a.cpuMs) * 1000) / jobs, 1),
    callUsPerJob: round(callUs / jobs, 1),
    commandsPerJob: round(commands / jobs, 2),
    byCommand,
  };
}

async function oneRep(
  url: string,
  jobs: number,
  batch: number,
  next: boolean,
  notify?: string,
  layout = 1,
): Promise<RawRep> {
  const redis = client(url, "raw-loop");
  try {
    await redis.flushall();
    if (layout > 1) await writeLayoutInForce(redis, "raw", layout, { firstVersion: "bench", by: "rawLoop" });
    const producer = new Producer(redis);
    const own =
      notify === "job"
        ? { notify: { url: "https://hooks.example.com/done", events: ["completed" as const] } }
        : {};
    for (let i = 0; i < jobs; i += 500)
      await producer.enqueueMany(
        QUEUE,
        Array.from({ length: Math.min(500, jobs - i) }, (_, k) => ({ data: { i: i + k }, ...own })),
      );
    if (notify === "pool") await redis.hset(new PipelineKeys("raw").meta, `notify:${QUEUE}`, "completed");
    const consumer = new Consumer(redis, QUEUE, { workerId: "raw", leaseMs: 30_000, retentionSeconds: 0 });
    // Warm the script cache (and the Function library) outside the measured block.
    let held: ClaimedJob[] = (await consumer.claim(batch)).jobs;
    const before = await snapshot(redis);
    const t0 = nowMs();
    let done = 0;
    while (held.length > 0) {
      const r = await consumer.settleMany(
        held.map((job) => ({
          job,
          settlement: { result: null, ...(next ? { next: { queue: NEXT } } : {}) },
        })),
        batch,
      );
      done += held.length;
      held = r.jobs;
    }
    const wall = nowMs() - t0;
    const after = await snapshot(redis);
    return { ...diff(before, after, done), jobsPerSec: round(done / (wall / 1000)) };
  } finally {
    redis.disconnect();
  }
}

const flags = cliFlags(["batch", "jobs", "json", "next", "notify", "reps"]);
const jobs = intFlag(flags, "jobs", 20_000);
const batch = intFlag(flags, "batch", 32);
const reps = intFlag(flags, "reps", 5);
const notify = flags.get("notify");
const layout = intFlag(flags, "layout", 1);
if (layout !== 1 && layout !== 2) throw new Error(`--layout: expected 1 or 2, got ${layout}`);
if (notify !== undefined && notify !== "pool" && notify !== "job")
  throw new Error(`--notify: expected pool or job, got ${JSON.stringify(notify)}`);
const server = await startBenchRedis();
try {
  const runs: RawRep[] = [];
  const load = loadAverage();
  for (let rep = 0; rep < reps; rep++) {
    runs.push(await oneRep(server.url, jobs, batch, flags.has("next"), notify, layout));
    progress(`raw loop B=${batch} rep ${rep + 1}/${reps}: ${JSON.stringify(runs.at(-1))}`);
  }
  const median = (f: (r: RawRep) => number) => summarize(runs.map(f)).median;
  const out = {
    batch,
    jobs,
    reps,
    next: flags.has("next"),
    notify: notify ?? "none",
    layout,
    load: `${load} → ${loadAverage()}`,
    redisCpuUsPerJob: median((r) => r.redisCpuUsPerJob),
    callUsPerJob: median((r) => r.callUsPerJob),
    commandsPerJob: median((r) => r.commandsPerJob),
    jobsPerSec: median((r) => r.jobsPerSec),
    byCommand: Object.fromEntries(
      Object.keys(runs[0]!.byCommand).map((c) => [c, median((r) => r.byCommand[c] ?? 0)]),
    ),
  };
  console.log(flags.has("json") ? JSON.stringify(out) : JSON.stringify(out, null, 2));
} finally {
  await server.stop();
}

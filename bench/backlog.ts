// Cost against backlog depth (issue 30), Conveyor alone:
//   npm run bench:backlog -- [--backlog 1000000] [--sample 20000] [--concurrency 32] [--json]
//                            [--out bench/results]   (writes <date>-backlog.json, .md, .svg)
// Grows one queue's waiting backlog through 10^4, 10^5, … up to --backlog (bulk enqueue, a
// progress line with jobs/s every 100,000), and at each depth (and on an empty queue first):
// Redis bytes per waiting job and RSS, the p95 of `backlog_counts` (the operator's read) over
// 200 calls, of `conveyor stats` (QueueAdmin.stats) and of the dashboard's queue page (the first
// page of ready jobs, api/liveJobs) over 100 calls each, and a worker (c=32) draining --sample
// jobs from the head of the backlog after as many joined its tail: jobs/s and Redis CPU µs per job.
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { liveJobs } from "../api/liveJobs.ts";
import { QueueAdmin, QueueKeys, connectRedis, Producer } from "../queue/index.ts";
import { renderPanels } from "./lib/chart.ts";
import { snapshot } from "./lib/redis.ts";
import { QUEUE } from "./lib/systems.ts";
import { intFlag, nowMs, cliFlags, percentile, progress, round, runMain, sleep } from "./lib/util.ts";
import { openContext, type BenchContext } from "./throughput.ts";

export interface BacklogLevel {
  backlog: number;
  enqueuePerSec: number;
  bytesPerWaitingJob: number;
  countsP95Ms: number;
  /** `conveyor stats` (QueueAdmin.stats) p95; absent in results written before it was measured. */
  statsP95Ms?: number;
  /** The dashboard queue page's first page of ready jobs (api/liveJobs, 50 jobs) p95. */
  pageP95Ms?: number;
  /** Redis RSS at this depth (MiB). */
  redisRssMiB?: number;
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
    const timed = async (calls: number, read: () => Promise<unknown>) => {
      const ms: number[] = [];
      for (let i = 0; i < calls; i++) {
        const t = nowMs();
        await read();
        ms.push(nowMs() - t);
      }
      return round(percentile(ms, 95), 3);
    };
    const countsP95Ms = await timed(200, () => admin.counts(QUEUE));
    const statsP95Ms = await timed(100, () => admin.stats(QUEUE));
    const pageP95Ms = await timed(100, () => liveJobs(redis, QUEUE, "ready", 50));
    const mem = await snapshot(ctx.driver);
    const bytesPerWaitingJob = backlog ? (mem.usedMemory - base.usedMemory) / backlog : 0;
    const done0 = Number((await redis.hget(keys.counts, "completed")) ?? 0);
    // The sample joins the tail (priority 0, the line) and the worker drains as many from the
    // head: the backlog is back at its depth when the sample is done.
    await new Producer(redis).enqueueMany(
      QUEUE,
      Array.from({ length: opts.sample }, (_, i) => ({ data: { s: i } })),
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
      redisRssMiB: round(mem.rssBytes / 2 ** 20),
      countsP95Ms,
      statsP95Ms,
      pageP95Ms,
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
      // the worker may have run on past the sample: count the backlog again
      have = (await new QueueAdmin(redis).counts(QUEUE)).ready;
      progress(`  backlog ${level.toLocaleString("en")}: ${JSON.stringify(r)}`);
      levels.push(r);
    }
  } finally {
    redis.disconnect();
  }
  return levels;
}

/** The backlog-scale table (Markdown). */
export function backlogTable(levels: BacklogLevel[]): string {
  const f = (v: number | undefined, digits = 0) =>
    v === undefined || !Number.isFinite(v)
      ? "–"
      : v.toLocaleString("en", { minimumFractionDigits: digits, maximumFractionDigits: digits });
  const rows = [
    "| waiting | bulk enqueue jobs/s | Redis B/waiting job | Redis RSS MiB | backlog_counts p95 ms | conveyor stats p95 ms | queue page p95 ms | claim jobs/s | Redis µs/job |",
    "|---|---|---|---|---|---|---|---|---|",
  ];
  for (const l of levels)
    rows.push(
      `| ${f(l.backlog)} | ${f(l.enqueuePerSec)} | ${f(l.bytesPerWaitingJob)} | ${f(l.redisRssMiB)} | ${f(l.countsP95Ms, 3)} | ${f(l.statsP95Ms, 3)} | ${f(l.pageP95Ms, 3)} | ${f(l.sampleJobsPerSec)} | ${f(l.redisCpuUsPerJob, 2)} |`,
    );
  return rows.join("\n");
}

/** Write <dir>/<date>-backlog.json, .md (the table) and .svg (jobs/s, µs/job, bytes/job by depth). */
export function writeBacklogResults(levels: BacklogLevel[], dir: string): string {
  mkdirSync(dir, { recursive: true });
  const base = join(dir, `${new Date().toISOString().slice(0, 10)}-backlog`);
  writeFileSync(`${base}.json`, `${JSON.stringify(levels, null, 2)}\n`);
  const name = base.split("/").at(-1)!;
  const md = [
    "# Cost against backlog depth",
    "",
    "`npm run bench:backlog` (bench/backlog.ts): one queue's backlog grown in bulk; at each depth a worker (c=32) drains a sample from the head of the backlog. Row 0 is the empty queue.",
    "",
    backlogTable(levels),
    "",
    `![jobs/s, Redis µs per job and bytes per waiting job by backlog depth](${name}.svg)`,
    "",
  ].join("\n");
  writeFileSync(`${base}.md`, md);
  const deep = levels.filter((l) => l.backlog > 0);
  const cats = deep.map((l) => (l.backlog >= 1e6 ? `${l.backlog / 1e6}M` : `${l.backlog / 1e3}K`));
  const panel = (title: string, yLabel: string, color: string, v: (l: BacklogLevel) => number) => ({
    title,
    subtitle: "one queue, backlog waiting (priority 0); claim at c=32",
    xLabel: "jobs waiting",
    yLabel,
    categories: cats,
    series: [{ name: "Conveyor", color, points: deep.map((l) => ({ median: v(l), min: NaN, max: NaN })) }],
  });
  writeFileSync(
    `${base}.svg`,
    renderPanels([
      panel("Claim throughput by backlog depth", "jobs/s", "#2b6cb0", (l) => l.sampleJobsPerSec),
      panel("Redis CPU per job by backlog depth", "µs/job", "#c05621", (l) => l.redisCpuUsPerJob),
      panel("Redis bytes per waiting job by backlog depth", "bytes", "#2f855a", (l) => l.bytesPerWaitingJob),
    ]),
  );
  return base;
}

async function main(): Promise<void> {
  const flags = cliFlags(["backlog", "concurrency", "json", "out", "sample"]);
  const ctx = await openContext();
  try {
    const levels = await runBacklog(ctx, {
      backlog: intFlag(flags, "backlog", 1_000_000),
      sample: intFlag(flags, "sample", 20_000),
      concurrency: intFlag(flags, "concurrency", 32),
    });
    if (flags.has("json")) process.stdout.write(`${JSON.stringify(levels)}\n`);
    const out = flags.get("out");
    if (typeof out === "string") progress(`wrote ${writeBacklogResults(levels, out)}.json, .md, .svg`);
  } finally {
    await ctx.stop();
  }
}

if (import.meta.main) runMain("bench:backlog", main);

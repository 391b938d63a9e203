// Retention at volume (issue 30): a completed job's record stays for the worker's --retention
// and is then reclaimed by the queue's workers in batches (reclaim_finished.lua; before that
// change, by Redis' own key expiry). What does reclaiming millions of them cost a queue that is
// working meanwhile?
//   npm run bench:retention -- [--jobs 1000000] [--retention 120] [--hz 10] [--due-together] [--json] [--out bench/results]
// 1. --jobs no-op jobs are enqueued in bulk and a worker (c=32, retention --retention s) runs them:
//    every completed record stays --retention s, then is reclaimed. The worker keeps running
//    (idle) until the records are gone: reclaiming is its heartbeat thread's work.
// 2. The whole time a probe on another pipeline enqueues, claims and completes one job every
//    5 ms and times the claim (one claim_jobs round trip); DBSIZE is sampled every 250 ms.
// 3. The probe's samples are split by phase: baseline (5 s before anything), enqueue, running,
//    kept (all done, none reclaimed yet), expiring (from the first reclaim after the run until
//    the records are gone), after. A --retention longer than the run keeps every record until the run
//    is over, so the expiry is measured alone (with a shorter one it overlaps the run).
// --due-together [S] (default 150): S seconds after the run every kept record is made due at one moment (its TTL moved
//    earlier by how much later than that moment it was due; `<Q>finished`, where there is one,
//    rescored to it) — a million records due at once, whichever mechanism reclaims them; the
//    rewrite is its own phase, "retime".
// Reports p50/p99/max claim ms per phase, keys reclaimed per second, Redis memory before, at the
// peak and after (and the finished-jobs index's share per job), and Redis commands and CPU per
// job while the worker ran them.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Redis } from "ioredis";
import { Consumer, Producer, QueueKeys, connectRedis } from "../queue/index.ts";
import { delta, perJob, snapshot, SNAPSHOT_COMMANDS } from "./lib/redis.ts";
import { ConveyorSystem, QUEUE } from "./lib/systems.ts";
import { intFlag, nowMs, cliFlags, percentile, progress, round, runMain, sleep } from "./lib/util.ts";
import { openContext } from "./throughput.ts";

const PROBE_QUEUE = "retention-probe";
const CHUNK = 100_000;
const PHASES = ["baseline", "enqueue", "running", "retime", "kept", "expiring", "after"] as const;
type Phase = (typeof PHASES)[number];

export interface RetentionPhase {
  phase: Phase;
  seconds: number;
  claims: number;
  claimP50Ms: number;
  claimP99Ms: number;
  claimMaxMs: number;
}

export interface RetentionResult {
  jobs: number;
  retentionSeconds: number;
  /** Redis' hz during the run. */
  hz?: number;
  /** Every kept record was made due at one moment, this many seconds after the run (--due-together S). */
  dueTogetherSeconds?: number;
  /** Records reclaimed per second while they expired (DBSIZE drop / expiring time). */
  reclaimedPerSec: number;
  usedMemoryMiB: { before: number; peak: number; after: number };
  /** used_memory growth per kept record at the peak, and the `<Q>finished` index's part of it (MEMORY USAGE). */
  bytesPerFinishedJob?: number;
  indexBytesPerFinishedJob?: number;
  /** While the worker ran the jobs (the probe's few hundred calls/s included): Redis commands and CPU per job. */
  running?: { commandsPerJob: number; redisCpuUsPerJob: number; perCommand: Record<string, number> };
  phases: RetentionPhase[];
}

export async function runRetention(opts: {
  jobs: number;
  retentionSeconds: number;
  /** Redis' `hz` (default 10): active expiry runs in slices of at most 25 % of 1/hz. */
  hz?: number;
  dueTogetherSeconds?: number;
}): Promise<RetentionResult> {
  const ctx = await openContext();
  if (opts.hz) await ctx.driver.config("SET", "hz", String(opts.hz));
  const redis = connectRedis(ctx.url, { name: "bench-retention" });
  const probeRedis = connectRedis(ctx.url, { name: "bench-retention-probe" });
  const conveyor = new ConveyorSystem(ctx.url, {
    name: "conveyor-retention",
    // (the name the worker reads first: ConveyorSystem's own CONVEYOR_RETENTION=0 must give way)
    env: { CONVEYOR_RETENTION: `${opts.retentionSeconds}s` },
  });
  const samples: { at: number; ms: number }[] = [];
  const sizes: { at: number; keys: number }[] = [];
  let probing = true;
  const probe = (async () => {
    const producer = new Producer(probeRedis);
    // (retention 0: the probe's own records go at once, so DBSIZE tells the bench's records)
    const consumer = new Consumer(probeRedis, PROBE_QUEUE, {
      workerId: "probe",
      leaseMs: 30_000,
      retentionSeconds: 0,
    });
    while (probing) {
      await producer.enqueue(PROBE_QUEUE, 1);
      const t = nowMs();
      const { jobs } = await consumer.claim(1);
      samples.push({ at: t, ms: nowMs() - t });
      for (const job of jobs) await consumer.complete(job, null);
      await sleep(5);
    }
  })();
  const sizer = (async () => {
    while (probing) {
      sizes.push({ at: nowMs(), keys: Number(await ctx.driver.dbsize()) });
      await sleep(250);
    }
  })();
  try {
    const before = await snapshot(ctx.driver);
    await sleep(5_000);
    const tEnqueue = nowMs();
    const producer = new Producer(redis);
    for (let have = 0; have < opts.jobs;) {
      const n = Math.min(CHUNK, opts.jobs - have);
      await producer.enqueueMany(
        QUEUE,
        Array.from({ length: n }, (_, i) => ({ data: { i: have + i } })),
      );
      have += n;
      progress(`  enqueued ${have.toLocaleString("en")} of ${opts.jobs.toLocaleString("en")}`);
    }
    const keys = new QueueKeys(QUEUE);
    const tRun = nowMs();
    const runStart = await snapshot(ctx.driver);
    const worker = await conveyor.startWorker({
      concurrency: 32,
      logFile: join(ctx.tmp, "retention-worker.log"),
    });
    let tDone = 0;
    let tRetimed = 0;
    let tFirstExpiry = 0;
    let tGone = 0;
    let runEnd = runStart;
    let peak = runStart;
    let peakKeys = 0;
    let indexBytes = 0;
    try {
      for (;;) {
        const done = Number((await redis.hget(keys.counts, "completed")) ?? 0);
        if (done >= opts.jobs) break;
        if (worker.exited()) throw new Error(`worker exited:\n${worker.output()}`);
        await sleep(200);
      }
      tDone = nowMs();
      progress(`  ${opts.jobs.toLocaleString("en")} jobs completed in ${round((tDone - tRun) / 1000)} s`);
      runEnd = await snapshot(ctx.driver);
      peak = runEnd;
      peakKeys = Number(await ctx.driver.dbsize());
      if (peakKeys < opts.jobs)
        throw new Error(
          `--retention ${opts.retentionSeconds} is shorter than the run (${round((tDone - tRun) / 1000)} s): records went while it ran; give a longer one`,
        );
      // (MEMORY USAGE of the index: every member, SAMPLES 0; absent before the index existed)
      indexBytes = Number((await ctx.driver.call("MEMORY", "USAGE", keys.finished, "SAMPLES", "0")) ?? 0);
      if (opts.dueTogetherSeconds) {
        const at = Date.now() + opts.dueTogetherSeconds * 1000;
        const n = await retimeDueAt(ctx.driver, keys, opts.retentionSeconds * 1000, at);
        progress(
          `  ${n.toLocaleString("en")} records made due at once, in ${round((at - Date.now()) / 1000)} s`,
        );
        if (Date.now() >= at) throw new Error("--due-together: the rewrite outlasted its margin");
      }
      tRetimed = nowMs();
      // The records are gone when DBSIZE is back near where it was before the run; the worker
      // stays up meanwhile (it reclaims them).
      const baseKeys = sizes[0]?.keys ?? 0;
      for (const deadline = Date.now() + (opts.retentionSeconds + 600) * 1000; Date.now() < deadline;) {
        const n = Number(await ctx.driver.dbsize());
        if (!tFirstExpiry && n < peakKeys - 1_000) tFirstExpiry = nowMs();
        if (n <= baseKeys + 100) {
          tGone = nowMs();
          break;
        }
        if (worker.exited()) throw new Error(`worker exited:\n${worker.output()}`);
        await sleep(100);
      }
      if (!tGone) throw new Error("the records were not reclaimed in time");
      progress(`  records reclaimed in ${round((tGone - tFirstExpiry) / 1000, 1)} s`);
    } finally {
      await worker.stop();
    }
    const baseKeys = sizes[0]?.keys ?? 0;
    await sleep(5_000);
    const after = await snapshot(ctx.driver);
    probing = false;
    await Promise.all([probe, sizer]);
    const edges: [Phase, number, number][] = [
      ["baseline", samples[0]?.at ?? 0, tEnqueue],
      ["enqueue", tEnqueue, tRun],
      ["running", tRun, tDone],
      ["retime", tDone, tRetimed],
      ["kept", tRetimed, tFirstExpiry],
      ["expiring", tFirstExpiry, tGone],
      ["after", tGone, Infinity],
    ];
    const phases = edges
      .filter(([phase, from, to]) => phase !== "retime" || to > from + 100)
      .map(([phase, from, to]): RetentionPhase => {
        const ms = samples.filter((s) => s.at >= from && s.at < to).map((s) => s.ms);
        const end = to === Infinity ? (samples.at(-1)?.at ?? from) : to;
        return {
          phase,
          seconds: round((end - from) / 1000, 1),
          claims: ms.length,
          claimP50Ms: round(percentile(ms, 50), 3),
          claimP99Ms: round(percentile(ms, 99), 3),
          claimMaxMs: round(Math.max(0, ...ms), 3),
        };
      });
    const mib = (b: number) => round(b / 2 ** 20);
    const ran = delta(runStart, runEnd, SNAPSHOT_COMMANDS);
    return {
      jobs: opts.jobs,
      retentionSeconds: opts.retentionSeconds,
      hz: Number(((await ctx.driver.config("GET", "hz")) as string[])[1]),
      ...(opts.dueTogetherSeconds ? { dueTogetherSeconds: opts.dueTogetherSeconds } : {}),
      reclaimedPerSec: round((peakKeys - baseKeys) / ((tGone - tFirstExpiry) / 1000)),
      usedMemoryMiB: {
        before: mib(before.usedMemory),
        peak: mib(peak.usedMemory),
        after: mib(after.usedMemory),
      },
      bytesPerFinishedJob: Math.round((peak.usedMemory - before.usedMemory) / opts.jobs),
      indexBytesPerFinishedJob: round(indexBytes / opts.jobs, 1),
      running: {
        commandsPerJob: round(ran.totalCommands / opts.jobs, 2),
        redisCpuUsPerJob: round((ran.cpuMs * 1000) / opts.jobs, 1),
        perCommand: Object.fromEntries(
          Object.entries(perJob(ran, opts.jobs))
            .filter(([, n]) => n >= 0.01)
            .map(([name, n]) => [name, round(n, 2)]),
        ),
      },
      phases,
    };
  } finally {
    probing = false;
    // (the probe and sizer finish their calls first: a disconnect under them would reject unhandled)
    await Promise.allSettled([probe, sizer]);
    redis.disconnect();
    probeRedis.disconnect();
    await conveyor.close().catch(() => {});
    await ctx.stop();
  }
}

/**
 * Make every kept record of the bench queue due at `at` (ms): its TTL moved earlier by how much
 * later than `at` it was due (`finishedAt` + retention), and every `<Q>finished` member rescored to
 * `at`. Works on either layout (a TTL of the retention, or of the retention plus the reclaim
 * margin). Returns the records moved.
 */
async function retimeDueAt(redis: Redis, k: QueueKeys, retentionMs: number, at: number): Promise<number> {
  let moved = 0;
  let cursor = "0";
  do {
    const [next, found] = await redis.scan(cursor, "MATCH", `${k.jobPrefix}*`, "COUNT", 2000);
    cursor = next;
    if (found.length === 0) continue;
    const read = redis.pipeline();
    for (const key of found) read.pttl(key).hget(key, "finishedAt");
    const r = (await read.exec()) ?? [];
    const write = redis.pipeline();
    found.forEach((key, i) => {
      const pttl = Number(r[2 * i]?.[1]);
      const finishedAt = Number(r[2 * i + 1]?.[1]);
      if (!(pttl > 0) || !finishedAt) return;
      write.pexpire(key, Math.max(1, Math.round(pttl - (finishedAt + retentionMs - at))));
      moved++;
    });
    await write.exec();
  } while (cursor !== "0");
  const members = await redis.zrange(k.finished, 0, -1);
  for (let i = 0; i < members.length; i += 1000)
    await redis.zadd(k.finished, ...members.slice(i, i + 1000).flatMap((m) => [at, m]));
  return moved;
}

/** The result as Markdown. */
export function retentionMarkdown(r: RetentionResult): string {
  return [
    "# Retention at volume",
    "",
    `\`npm run bench:retention -- --jobs ${r.jobs} --retention ${r.retentionSeconds}${r.hz && r.hz !== 10 ? ` --hz ${r.hz}` : ""}${r.dueTogetherSeconds ? ` --due-together ${r.dueTogetherSeconds}` : ""}\` (bench/retention.ts): ${r.jobs.toLocaleString("en")} no-op jobs run by one worker (c=32) whose completed records are kept ${r.retentionSeconds} s and then reclaimed${r.dueTogetherSeconds ? ` — made due all at once ${r.dueTogetherSeconds} s after the run` : ""}; a probe on another pipeline claims one job every 5 ms throughout. ${r.reclaimedPerSec.toLocaleString("en")} records reclaimed per second; Redis used memory ${r.usedMemoryMiB.before} MiB before, ${r.usedMemoryMiB.peak} at the peak, ${r.usedMemoryMiB.after} after${r.bytesPerFinishedJob ? ` (${r.bytesPerFinishedJob} B per kept record, of which the finished-jobs index ${r.indexBytesPerFinishedJob} B)` : ""}.${r.running ? ` While the worker ran them: ${r.running.commandsPerJob} Redis commands and ${r.running.redisCpuUsPerJob} µs of Redis CPU per job.` : ""}`,
    "",
    "| phase | seconds | claims | claim p50 ms | claim p99 ms | claim max ms |",
    "|---|---|---|---|---|---|",
    ...r.phases.map(
      (p) =>
        `| ${p.phase} | ${p.seconds} | ${p.claims} | ${p.claimP50Ms} | ${p.claimP99Ms} | ${p.claimMaxMs} |`,
    ),
    "",
  ].join("\n");
}

async function main(): Promise<void> {
  const flags = cliFlags(["due-together", "hz", "jobs", "json", "out", "retention"]);
  const result = await runRetention({
    jobs: intFlag(flags, "jobs", 1_000_000),
    retentionSeconds: intFlag(flags, "retention", 120),
    hz: intFlag(flags, "hz", 0) || undefined,
    dueTogetherSeconds: !flags.has("due-together")
      ? undefined
      : flags.get("due-together") === "true"
        ? 150
        : intFlag(flags, "due-together", 150),
  });
  const md = retentionMarkdown(result);
  process.stderr.write(`${md}\n`);
  const out = flags.get("out");
  if (out) {
    const hz =
      (result.hz && result.hz !== 10 ? `-hz${result.hz}` : "") +
      (result.dueTogetherSeconds ? "-together" : "");
    const base = join(out, `${new Date().toISOString().slice(0, 10)}-retention${hz}`);
    writeFileSync(`${base}.json`, `${JSON.stringify(result, null, 2)}\n`);
    writeFileSync(`${base}.md`, md);
    progress(`wrote ${base}.json, .md`);
  }
  if (flags.has("json")) process.stdout.write(`${JSON.stringify(result)}\n`);
}

if (import.meta.main) runMain("bench:retention", main);

// Medians over repetitions and the Markdown report of a `make bench` run.
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { renderChart } from "./chart.ts";
import type { EnqueueRun } from "../enqueue.ts";
import type { LatencyRun } from "../latency.ts";
import type { MemoryRun } from "../memory.ts";
import { backlogTable, type BacklogLevel } from "../backlog.ts";
import { durabilitySummary, type DurabilityRun } from "../durability.ts";
import type { RetentionResult } from "../retention.ts";
import { fairnessMarkdown, type FairnessResult } from "../fairness.ts";
import type { OperatorBench } from "../operator.ts";
import { renderDashboard, type DashboardBench } from "../dashboard.ts";
import type { RawMixResult, RedisBenchmarkResult } from "../redislimit.ts";
import type { RoundTrips } from "../roundtrips.ts";
import type { ThroughputRun } from "../throughput.ts";
import { SYSTEMS, type SystemName } from "./systems.ts";
import { round, summarize, type MachineInfo, type Summary } from "./util.ts";

export interface BenchResults {
  date: string;
  machine: MachineInfo;
  loadBefore: string;
  loadAfter: string;
  durationSeconds: number;
  settings: { reps: number; concurrencies: number[]; jobs: number; quick: boolean };
  /** Files under queue/, worker/, bin/, cli/ that differed from the commit when this ran. */
  uncommittedChanges: string[];
  redisBenchmark: RedisBenchmarkResult[];
  rawMix: RawMixResult[];
  enqueue: EnqueueRun[];
  /** Absent in results written before the payload-size memory section existed. */
  memory?: MemoryRun[];
  /** Absent in results written before the backlog-depth section existed. */
  backlog?: BacklogLevel[];
  /** Absent in results written before the durability section existed. */
  durability?: DurabilityRun[];
  /** Absent in results written before the retention section existed. */
  retention?: RetentionResult;
  /** Absent in results written before the fairness section existed. */
  fairness?: FairnessResult;
  throughput: ThroughputRun[];
  roundTrips: RoundTrips[];
  prototype: ThroughputRun[];
  latency: LatencyRun[];
  latencyRates: Record<number, number>;
  operator: OperatorBench;
  /** Absent in results written before the dashboard section existed. */
  dashboard?: DashboardBench;
  /** Measurements that failed twice and are missing from the medians. */
  failures?: string[];
  summary: ReturnType<typeof summarizeResults> | undefined;
}

type Field =
  | "jobsPerSec"
  | "commandsPerJob"
  | "scriptCallsPerJob"
  | "redisCpuUsPerJob"
  | "workerCpuUsPerJob"
  | "workerPeakRssMiB"
  | "redisBytesPerWaitingJob";

function med(runs: ThroughputRun[], field: Field): Summary {
  return summarize(runs.map((r) => r[field]));
}

function costOf(runs: ThroughputRun[]) {
  return {
    jobsPerSec: med(runs, "jobsPerSec"),
    commandsPerJob: med(runs, "commandsPerJob").median,
    scriptCallsPerJob: med(runs, "scriptCallsPerJob").median,
    redisCpuUsPerJob: med(runs, "redisCpuUsPerJob").median,
    workerCpuUsPerJob: med(runs, "workerCpuUsPerJob").median,
    workerPeakRssMiB: med(runs, "workerPeakRssMiB").median,
  };
}

export function summarizeResults(r: BenchResults) {
  const cs = r.settings.concurrencies;
  const throughput = cs.map((c) => {
    const of = (s: string) => r.throughput.filter((t) => t.system === s && t.concurrency === c);
    const conveyor = costOf(of("conveyor"));
    const bullmq = costOf(of("bullmq"));
    // Each repetition runs both systems back to back: its ratio cancels load that drifts slowly.
    const paired = [...new Set(of("conveyor").map((t) => t.rep))].flatMap((rep) => {
      const a = of("conveyor").find((t) => t.rep === rep);
      const b = of("bullmq").find((t) => t.rep === rep);
      return a && b ? [a.jobsPerSec / b.jobsPerSec] : [];
    });
    return {
      concurrency: c,
      conveyor,
      bullmq,
      ratio: round(conveyor.jobsPerSec.median / bullmq.jobsPerSec.median, 3),
      pairedRatio: summarize(paired),
    };
  });
  const prototype = cs.map((c) => {
    const of = (s: string) => costOf(r.prototype.filter((t) => t.system === s && t.concurrency === c));
    return {
      concurrency: c,
      separate: of("proto-separate"),
      hbLean: of("proto-hb-lean"),
      hbWorker: of("proto-hb-worker"),
      pipelined: of("proto-pipelined"),
      combined: of("proto-combined"),
    };
  });
  const enqueue = Object.fromEntries(
    SYSTEMS.map((s) => {
      const runs = r.enqueue.filter((e) => e.system === s);
      return [
        s,
        {
          single: summarize(runs.map((e) => e.singlePerSec)),
          windowed: summarize(runs.map((e) => e.windowedPerSec)),
          bulk: summarize(runs.map((e) => e.bulkPerSec)),
        },
      ];
    }),
  ) as Record<SystemName, { single: Summary; windowed: Summary; bulk: Summary }>;
  const latency = cs.map((c) => {
    const of = (s: SystemName) => {
      const runs = r.latency.filter((l) => l.system === s && l.concurrency === c);
      return { p50: summarize(runs.map((l) => l.p50Ms)), p99: summarize(runs.map((l) => l.p99Ms)) };
    };
    return { concurrency: c, rate: r.latencyRates[c] ?? NaN, conveyor: of("conveyor"), bullmq: of("bullmq") };
  });
  const memory = Object.fromEntries(
    SYSTEMS.map((s) => [
      s,
      {
        redisBytesPerWaitingJob: summarize(
          r.throughput.filter((t) => t.system === s).map((t) => t.redisBytesPerWaitingJob),
        ).median,
      },
    ]),
  ) as Record<SystemName, { redisBytesPerWaitingJob: number }>;
  const rawMix = (["claim+complete", "complete-and-claim"] as const).map((mix) => {
    const runs = r.rawMix.filter((m) => m.mix === mix);
    return {
      mix,
      jobsPerSec: summarize(runs.map((m) => m.jobsPerSec)),
      redisCpuUsPerJob: summarize(runs.map((m) => m.redisCpuUsPerJob)).median,
      redisBoundJobsPerSec: summarize(runs.map((m) => m.redisBoundJobsPerSec)).median,
    };
  });
  return { throughput, prototype, enqueue, latency, memory, rawMix };
}

/** Write <base>.json, .md and .svg; returns the Markdown. */
export function writeResults(r: BenchResults, outDir: string, name: string): string {
  r.summary = summarizeResults(r);
  mkdirSync(outDir, { recursive: true });
  const base = join(outDir, name);
  const cs = r.settings.concurrencies;
  const chart = renderChart({
    title: "Throughput by concurrency: Conveyor vs BullMQ",
    subtitle: `One worker process, no-op jobs, same Redis; median of ${r.settings.reps}, whiskers min–max. ${r.machine.cores} cores, load ${r.loadBefore} / ${r.loadAfter}`,
    xLabel: "Concurrency (slots in the one worker process)",
    yLabel: "jobs/s",
    categories: cs.map(String),
    series: SYSTEMS.map((sys) => ({
      name: sys === "conveyor" ? "Conveyor" : `BullMQ ${r.machine.bullmq}`,
      color: sys === "conveyor" ? "#2f6db5" : "#e08a2c",
      points: cs.map((c) =>
        summarize(
          r.throughput.filter((t) => t.system === sys && t.concurrency === c).map((t) => t.jobsPerSec),
        ),
      ),
    })),
  });
  writeFileSync(`${base}.json`, `${JSON.stringify(r, null, 2)}\n`);
  writeFileSync(`${base}.svg`, chart);
  const md = renderMarkdown(r, `${name}.svg`);
  writeFileSync(`${base}.md`, md);
  return md;
}

// ---- Markdown ---------------------------------------------------------------------------------

const n = (v: number, digits = 0) =>
  Number.isFinite(v)
    ? v.toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits })
    : "–";
const range = (s: Summary, digits = 0) =>
  s.n === 0
    ? "–"
    : s.n === 1
      ? n(s.median, digits)
      : `${n(s.median, digits)} (${n(s.min, digits)}–${n(s.max, digits)})`;

function table(head: string[], rows: string[][]): string {
  return [
    `| ${head.join(" | ")} |`,
    `|${head.map(() => "---").join("|")}|`,
    ...rows.map((r) => `| ${r.join(" | ")} |`),
  ].join("\n");
}

export function renderMarkdown(r: BenchResults, chartFile: string): string {
  const s = r.summary ?? summarizeResults(r);
  const m = r.machine;
  const out: string[] = [];
  out.push(`# Conveyor vs BullMQ — ${r.date.slice(0, 16).replace("T", " ")} UTC`);
  out.push("");
  out.push(
    `Machine: ${m.cpu}, ${m.cores} cores, ${m.memoryGiB} GiB, Linux ${m.kernel}; Node ${m.node}, Redis ${m.redis}, BullMQ ${m.bullmq} (ioredis ${m.ioredis}); Conveyor at ${m.commit}${r.uncommittedChanges.length > 0 ? ` plus uncommitted changes in ${r.uncommittedChanges.length} file(s) of queue/worker` : ""}.`,
  );
  out.push(
    `Load average (1/5/15 min) before: ${r.loadBefore}, after: ${r.loadAfter} — the machine is shared, so medians of ${r.settings.reps} repetition(s) with min–max; repetitions alternate which system goes first. ${r.settings.jobs.toLocaleString("en-US")} jobs per throughput run; the whole run took ${Math.round(r.durationSeconds / 60)} min.`,
  );
  if (r.failures && r.failures.length > 0) out.push(`\nFailed twice and left out: ${r.failures.join("; ")}.`);
  out.push("");
  out.push(`![throughput by concurrency](${chartFile})`);
  out.push("");
  out.push("## Throughput (jobs/s)");
  out.push("");
  out.push(
    "One worker process per system, N no-op jobs enqueued beforehand, measured from the first claim to the last completion. Conveyor: the real `conveyor worker` (lease heartbeat thread and sweeper running, retention 0). BullMQ: one `Worker`, default lock settings, jobs added with `removeOnComplete: true`.",
  );
  out.push("");
  out.push(
    table(
      ["concurrency", "Conveyor", "BullMQ", "ratio of medians", "ratio per repetition (median, min–max)"],
      s.throughput.map((t) => [
        String(t.concurrency),
        range(t.conveyor.jobsPerSec),
        range(t.bullmq.jobsPerSec),
        n(t.ratio, 2),
        range(t.pairedRatio, 2),
      ]),
    ),
  );
  out.push("");
  out.push("## Cost per job (medians)");
  out.push("");
  out.push(
    "Commands: every command Redis ran per job, those inside scripts included (`INFO commandstats`). Requests: what the worker process sent (MONITOR on a 3,000-job run; a MULTI block counts once; without client pipelining a request is a round trip). Redis CPU: Redis' user+system CPU per job; 1e6 / that is the most jobs/s this Redis core could serve that worker. Worker CPU: all threads of the worker process, from its first claim on.",
  );
  out.push("");
  const rt = (sys: SystemName, c: number) =>
    r.roundTrips.find((x) => x.system === sys && x.concurrency === c);
  const costRows: string[][] = [];
  for (const t of s.throughput) {
    for (const sys of ["conveyor", "bullmq"] as const) {
      const c = t[sys];
      const req = rt(sys, t.concurrency);
      costRows.push([
        String(t.concurrency),
        sys === "conveyor" ? "Conveyor" : "BullMQ",
        n(c.commandsPerJob, 1),
        req ? n(req.requestsPerJob, 2) : "–",
        req
          ? Object.entries(req.byRequest)
              .filter(([, v]) => v >= 0.005)
              .map(([k, v]) => `${k.replace(/^(conveyor|bullmq):/, "")} ${n(v, 2)}`)
              .join(", ")
          : "–",
        n(c.redisCpuUsPerJob, 1),
        n(1e6 / c.redisCpuUsPerJob),
        n(c.workerCpuUsPerJob),
        n(c.workerPeakRssMiB),
      ]);
    }
  }
  out.push(
    table(
      [
        "concurrency",
        "system",
        "Redis commands/job",
        "requests/job",
        "requests by kind, per job",
        "Redis CPU µs/job",
        "Redis-bound jobs/s",
        "worker CPU µs/job",
        "worker peak RSS MiB",
      ],
      costRows,
    ),
  );
  out.push("");
  out.push("## Enqueue rate (jobs/s, one producer connection)");
  out.push("");
  out.push(
    table(
      ["system", "single, each awaited", "single, 64 in flight", "bulk, 500 per call"],
      SYSTEMS.map((sys) => [
        sys === "conveyor" ? "Conveyor `enqueue` / `enqueueMany`" : "BullMQ `add` / `addBulk`",
        range(s.enqueue[sys].single),
        range(s.enqueue[sys].windowed),
        range(s.enqueue[sys].bulk),
      ]),
    ),
  );
  out.push("");
  out.push("## Enqueue-to-start latency (ms)");
  out.push("");
  out.push(
    "Single jobs enqueued at a steady rate (half of the slower system's median peak at that concurrency, the same rate for both) for a few seconds; the time from `enqueue` to the handler starting. First 10% dropped as warm-up. Median of the per-run percentiles (min–max).",
  );
  out.push("");
  out.push(
    table(
      ["concurrency", "rate (jobs/s)", "Conveyor p50", "Conveyor p99", "BullMQ p50", "BullMQ p99"],
      s.latency.map((l) => [
        String(l.concurrency),
        n(l.rate),
        range(l.conveyor.p50, 2),
        range(l.conveyor.p99, 2),
        range(l.bullmq.p50, 2),
        range(l.bullmq.p99, 2),
      ]),
    ),
  );
  out.push("");
  out.push("## Memory");
  out.push("");
  out.push(
    table(
      [
        "system",
        "Redis bytes per waiting job",
        ...r.settings.concurrencies.map((c) => `worker peak RSS MiB, c=${c}`),
      ],
      SYSTEMS.map((sys) => [
        sys === "conveyor" ? "Conveyor" : "BullMQ",
        n(s.memory[sys].redisBytesPerWaitingJob),
        ...s.throughput.map((t) => n(t[sys].workerPeakRssMiB)),
      ]),
    ),
  );
  out.push("");
  if (r.memory?.length) {
    out.push(
      "Redis bytes per waiting job by payload size (`used_memory` growth / N after a bulk enqueue; overhead = beyond the payload):",
    );
    out.push("");
    const of = (sys: SystemName, size: number) =>
      r.memory!.find((m) => m.system === sys && m.payloadBytes === size);
    out.push(
      table(
        [
          "payload B",
          "Conveyor B/job",
          "Conveyor overhead",
          "BullMQ B/job",
          "BullMQ overhead",
          "Conveyor record (encoding)",
        ],
        [...new Set(r.memory.map((m) => m.payloadBytes))].map((size) => {
          const c = of("conveyor", size);
          const b = of("bullmq", size);
          return [
            n(size),
            n(c?.bytesPerJob ?? NaN),
            n(c?.overheadPerJob ?? NaN),
            n(b?.bytesPerJob ?? NaN),
            n(b?.overheadPerJob ?? NaN),
            c?.breakdown ? `${c.breakdown.record} (${c.breakdown.recordEncoding})` : "",
          ];
        }),
      ),
    );
    out.push("");
  }
  if (r.backlog?.length) {
    out.push("## Backlog depth");
    out.push("");
    out.push(
      "Conveyor, one queue: the waiting backlog grown in bulk; at each depth a worker (c=32) drains a sample from the head of the backlog after as many joined its tail. `backlog_counts` p95 is the operator's read (200 calls); `conveyor stats` and the queue page's first page of ready jobs 100 calls each.",
    );
    out.push("");
    out.push(backlogTable(r.backlog));
    out.push("");
  }
  if (r.fairness) {
    out.push("## Fairness between tenants (groups)");
    out.push("");
    out.push(fairnessMarkdown(r.fairness));
    out.push("");
  }
  if (r.retention) {
    const t = r.retention;
    out.push("## Retention at volume");
    out.push("");
    out.push(
      `${n(t.jobs)} completed records kept ${t.retentionSeconds} s, then reclaimed by the queue's worker in batches (${n(t.reclaimedPerSec)}/s; results before that change: expired by Redis); a probe on another pipeline claims one job every 5 ms throughout. Redis used memory ${n(t.usedMemoryMiB.before)} → ${n(t.usedMemoryMiB.peak)} → ${n(t.usedMemoryMiB.after)} MiB${t.bytesPerFinishedJob ? ` (${n(t.bytesPerFinishedJob)} B per kept record, the finished-jobs index ${n(t.indexBytesPerFinishedJob ?? 0, 1)} B of it)` : ""}.${t.running ? ` While the worker ran them: ${n(t.running.commandsPerJob, 2)} Redis commands, ${n(t.running.redisCpuUsPerJob, 1)} µs of Redis CPU per job.` : ""}`,
    );
    out.push("");
    out.push(
      table(
        ["phase", "seconds", "claims", "claim p50 ms", "claim p99 ms", "claim max ms"],
        t.phases.map((p) => [
          p.phase,
          n(p.seconds, 1),
          n(p.claims),
          n(p.claimP50Ms, 3),
          n(p.claimP99Ms, 3),
          n(p.claimMaxMs, 3),
        ]),
      ),
    );
    out.push("");
  }
  if (r.durability?.length) {
    const s = durabilitySummary(r.durability);
    out.push("## Durability");
    out.push("");
    out.push(
      'Conveyor on a primary with one replica: durability "primary" (nothing extra) against "replicated" (`WAIT 1` after every enqueue and settle script). Enqueue: one job per call, sequential (latency) and 32 in flight (rate); worker: c=32 draining no-op jobs. Medians.',
    );
    out.push("");
    out.push(
      table(
        ["durability", "enqueue p50 ms", "enqueue p99 ms", "enqueues/s", "worker jobs/s", "Redis cmds/job"],
        (["primary", "replicated"] as const).map((d) => [
          d,
          n(s[d].enqueue_p50_ms, 3),
          n(s[d].enqueue_p99_ms, 2),
          n(s[d].enqueues_per_s),
          n(s[d].worker_jobs_per_s),
          n(s[d].commands_per_job, 2),
        ]),
      ),
    );
    out.push("");
  }
  out.push("## The Redis limit");
  out.push("");
  out.push(
    table(
      ["redis-benchmark", "requests/s"],
      r.redisBenchmark.map((b) => [b.test, n(b.requestsPerSec)]),
    ),
  );
  out.push("");
  out.push(
    "Conveyor's scripts from a raw client, 100 calls per pipeline, no worker logic — what Redis itself can do with this protocol:",
  );
  out.push("");
  out.push(
    table(
      ["script mix", "jobs/s (client-bound)", "Redis CPU µs/job", "Redis-bound jobs/s"],
      s.rawMix.map((x) => [
        x.mix === "claim+complete"
          ? "claim(1) + complete per job (today)"
          : "complete-and-claim-next per job (prototype)",
        range(x.jobsPerSec),
        n(x.redisCpuUsPerJob, 1),
        n(x.redisBoundJobsPerSec),
      ]),
    ),
  );
  out.push("");
  out.push("## Where the worker's time goes, and complete-and-claim-next (prototype)");
  out.push("");
  out.push(
    "A lean bench-only consumer (bench/proto/worker.ts: the worker's slot logic — claim only for free slots, run, complete — without its heartbeat thread, metrics, logs or timers) runs Conveyor's real scripts. *lean* = complete, then the claim loop claims for the freed slot (today's protocol); *+ heartbeat hold/drop* = the same plus the worker's real lease heartbeat thread (worker/leaseHeartbeat.ts) told about each job start and end; *+ heartbeat as the worker drives it* = hold + status at start, drop + status at end, and a renew-now beat after every claim, as worker.ts does; *combined* = lean, but one script (built from complete_job.lua and claim_jobs.lua) completes a job and claims the next for the freed slot. Jobs/s, median (min–max); worker CPU µs/job in brackets.",
  );
  out.push("");
  const cell = (x: ReturnType<typeof costOf>) =>
    x.jobsPerSec.n === 0 ? "–" : `${range(x.jobsPerSec)} [${n(x.workerCpuUsPerJob)}]`;
  out.push(
    table(
      [
        "concurrency",
        "real worker",
        "lean",
        "lean + heartbeat hold/drop",
        "lean + heartbeat as the worker drives it",
        "lean, combined script",
        "requests/job lean → combined",
        "Redis CPU µs/job lean → combined",
      ],
      s.prototype.map((p, i) => {
        const real = s.throughput[i]?.conveyor;
        return [
          String(p.concurrency),
          real ? `${range(real.jobsPerSec)} [${n(real.workerCpuUsPerJob)}]` : "–",
          cell(p.separate),
          cell(p.hbLean),
          cell(p.hbWorker),
          cell(p.combined),
          `${n(p.separate.scriptCallsPerJob, 2)} → ${n(p.combined.scriptCallsPerJob, 2)}`,
          `${n(p.separate.redisCpuUsPerJob, 1)} → ${n(p.combined.redisCpuUsPerJob, 1)}`,
        ];
      }),
    ),
  );
  out.push("");
  out.push("## Operator");
  out.push("");
  const op = r.operator;
  if ("skipped" in op) {
    out.push(`Skipped: ${op.skipped}.`);
  } else {
    out.push(
      table(
        ["measure", "value"],
        [
          ["idle WorkerPools", n(op.pools)],
          ["all pools reconciled after creation", `${n(op.reconcileAllSeconds, 1)} s`],
          [
            `operator CPU, idle (window ${n(op.idleWindowSeconds)} s)`,
            `${n(op.cpuPercentOfCore, 2)} % of one core`,
          ],
          ["operator RSS", `${n(op.rssMiB)} MiB`],
          [
            "Kubernetes API requests/min by verb (operator's counter)",
            Object.entries(op.apiRequestsPerMinute)
              .map(([k, v]) => `${k} ${n(v, 1)}`)
              .join(", ") || "0",
          ],
          [
            "API writes/min, lease renewals apart (operator's counter / audit log)",
            `${n(op.apiWritesPerMinute, 1)} / ${n(op.auditWritesPerMinute, 1)}`,
          ],
          ["leader lease writes/min", n(op.leaseWritesPerMinute, 1)],
          ["Redis commands/min (backlog polls)", n(op.redisCommandsPerMinute)],
          ["backlog → 0→1 decision (mode hpa, pollSeconds 5)", `${range(op.activationSeconds, 2)} s`],
          ["backlog → 1→N decision (mode direct, pollSeconds 5)", `${range(op.directScaleUpSeconds, 2)} s`],
          ["KEDA for comparison", "pollingInterval 30 s by default: 15 s on average before it looks"],
        ],
      ),
    );
  }
  out.push("");
  out.push(...renderDashboard(r.dashboard));
  return out.join("\n");
}

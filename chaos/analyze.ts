// Attribution of every re-execution in a chaos run, from three independent records: the
// handler's own execution log (queue, job id, execution id = lease token, pid, start time), the
// injector's fault log (kind, pid, when) and the workers' logs (how each execution ended).
//
// For a job that ran more than once at one stage, the executions are ordered by their lease
// token (the pipeline's fencing counter: claim order). A later execution whose attempt number
// is higher follows a failed attempt: a retry, not a duplicate. Otherwise it is a duplicate —
// a redelivery — and its cause is looked up for the execution before it:
//   sigkill        that execution's worker was SIGKILLed after the execution started
//   sigstop        that execution's worker was SIGSTOPped after it started and before the re-run
//   redis_restart  Redis was down at some point between that execution's start and the re-run
//                  (a lease renewal lost to the outage lets the lease lapse)
//   failover       the primary was killed and a replica promoted in that time (a claim, settle or
//                  renewal not yet replicated was lost: docs/reliability.md)
//   sigterm        that execution's worker was SIGTERMed after it started (warm shutdown failed)
//   upgrade        that execution's worker was replaced by one of the other release after it
//                  started (a warm shutdown too: failed)
//   other          nothing explains it
// in that order: a killed or frozen worker explains a re-run whatever else happened.

import type { Execution } from "../test/support/workers.ts";
export type { Execution };

export interface FaultRecord {
  n: number;
  kind: string;
  /** When the signal was sent / the server stopped (ms since epoch). */
  at: number;
  /** SIGCONT sent / server back / replacement started (ms since epoch). */
  end?: number;
  /** The worker slot and process hit (worker faults). */
  slot?: string;
  worker?: string;
  pid?: number;
  detail?: string;
  /**
   * Redis restarts: the leases held when Redis went down, read just before (`<queue> <id>` → the
   * lease's token and deadline, ms since epoch); absent when that read failed.
   */
  leases?: Record<string, { token: string; deadline: number }>;
}

/** The key of a job's lease in FaultRecord.leases. */
export const leaseKey = (queue: string, id: string) => `${queue} ${id}`;

export type Cause = "sigkill" | "sigstop" | "redis_restart" | "failover" | "sigterm" | "upgrade" | "other";

export interface Duplicate {
  queue: string;
  id: string;
  /** The earlier execution (on the worker that lost the job) and the re-run. */
  earlier: { exec: string; pid: number; t: number; worker?: string; outcome?: string };
  rerun: { exec: string; pid: number; t: number; worker?: string };
  cause: Cause;
  fault?: number;
}

export interface Attribution {
  executions: number;
  /** Re-runs after a failed attempt (planned failures of the handler). */
  retries: number;
  /** Of those, retries of a job that was not planned to fail there. */
  unplannedRetries: number;
  duplicates: Duplicate[];
  byCause: Record<Cause, number>;
}

export interface EndOfExecution {
  outcome: string;
  t: number;
}

export function attribute(
  executions: Execution[],
  faults: FaultRecord[],
  opts: {
    plannedFailure: (queue: string, id: string, attempt: number) => boolean;
    ends?: Map<string, EndOfExecution>;
    workerOfPid?: Map<number, string>;
    /**
     * When each execution's lease was taken (the claim; from the job records). A worker frozen
     * between its claim and running the handler logs the execution only after it resumes.
     */
    claimedAt?: Map<string, number>;
  },
): Attribution {
  const byPid = new Map<number, FaultRecord[]>();
  for (const f of faults) {
    if (f.pid === undefined) continue;
    const list = byPid.get(f.pid) ?? [];
    list.push(f);
    byPid.set(f.pid, list);
  }
  const outages = faults.filter((f) => f.kind === "redis_restart" || f.kind === "failover");
  const groups = new Map<string, Execution[]>();
  for (const e of executions) {
    const key = `${e.q}\u0000${e.id}`;
    const g = groups.get(key) ?? [];
    g.push(e);
    groups.set(key, g);
  }
  const result: Attribution = {
    executions: executions.length,
    retries: 0,
    unplannedRetries: 0,
    duplicates: [],
    byCause: { sigkill: 0, sigstop: 0, redis_restart: 0, failover: 0, sigterm: 0, upgrade: 0, other: 0 },
  };
  for (const g of groups.values()) {
    if (g.length < 2) continue;
    g.sort((x, y) => Number(BigInt(x.exec) - BigInt(y.exec)));
    for (let i = 1; i < g.length; i++) {
      const prev = g[i - 1]!;
      const e = g[i]!;
      if (e.attempt > prev.attempt) {
        result.retries++;
        if (!opts.plannedFailure(prev.q, prev.id, prev.attempt)) result.unplannedRetries++;
        continue;
      }
      const mine = byPid.get(prev.pid) ?? [];
      const start = Math.min(prev.t, opts.claimedAt?.get(prev.exec) ?? prev.t);
      const hit = (kind: string, f: FaultRecord) => f.kind === kind && f.at >= start && f.at <= e.t;
      let cause: Cause = "other";
      let fault: FaultRecord | undefined;
      if ((fault = mine.find((f) => hit("sigkill", f)))) cause = "sigkill";
      else if ((fault = mine.find((f) => hit("sigstop", f)))) cause = "sigstop";
      else if ((fault = outages.find((f) => f.at <= e.t && (f.end ?? Infinity) >= start)))
        cause = fault.kind === "failover" ? "failover" : "redis_restart";
      else if ((fault = mine.find((f) => hit("sigterm", f)))) cause = "sigterm";
      else if ((fault = mine.find((f) => hit("upgrade", f)))) cause = "upgrade";
      result.byCause[cause]++;
      result.duplicates.push({
        queue: e.q,
        id: e.id,
        earlier: {
          exec: prev.exec,
          pid: prev.pid,
          t: prev.t,
          worker: opts.workerOfPid?.get(prev.pid),
          outcome: opts.ends?.get(prev.exec)?.outcome,
        },
        rerun: { exec: e.exec, pid: e.pid, t: e.t, worker: opts.workerOfPid?.get(e.pid) },
        cause,
        fault: fault?.n,
      });
    }
  }
  return result;
}

/** How each execution ended, from the workers' JSON logs (`executionId` + `outcome`). */
export function executionEnds(
  logText: string,
  into = new Map<string, EndOfExecution>(),
): Map<string, EndOfExecution> {
  for (const line of logText.split("\n")) {
    if (!line.includes('"executionId"') || !line.includes('"outcome"')) continue;
    try {
      const rec = JSON.parse(line) as {
        executionId?: string | number;
        outcome?: string;
        time?: number | string;
      };
      if (rec.executionId === undefined || !rec.outcome) continue;
      const t = typeof rec.time === "number" ? rec.time : Date.parse(String(rec.time));
      // A job handed back (or fenced) may log more than once; the first word is the outcome.
      if (!into.has(String(rec.executionId))) into.set(String(rec.executionId), { outcome: rec.outcome, t });
    } catch {
      // not a JSON line
    }
  }
  return into;
}

/** When each execution's handler returned or threw, by execution id (the handler's EXEC_END_LOG lines). */
export function readExecutionEnds(text: string, into = new Map<string, number>()): Map<string, number> {
  for (const line of text.split("\n")) {
    if (!line) continue;
    try {
      const rec = JSON.parse(line) as { exec?: string | number; t?: number };
      if (rec.exec !== undefined && typeof rec.t === "number") into.set(String(rec.exec), rec.t);
    } catch {
      // a line cut short by a SIGKILL
    }
  }
  return into;
}

export interface GroupPeak {
  queue: string;
  group: string;
  limit: number;
  /** The most executions of the group that ran at once. */
  peak: number;
  /** When the peak was first reached (ms since epoch). */
  at: number;
}

export interface GroupAudit {
  /** Executions of limited groups looked at. */
  checked: number;
  /** Of those, cut short at a SIGKILL or SIGSTOP of their worker (their lease may have lapsed), or when a Redis outage lapsed their lease. */
  cut: number;
  /** Without an end record and not cut by a fault: counted as ending when they started. */
  unended: number;
  /** Per queue and limited group, the most that ran at once. */
  peaks: GroupPeak[];
  /** The peaks above their limit. */
  breaches: GroupPeak[];
}

/**
 * How many executions of each concurrency-limited group ran at once, from the handler's own
 * start and end records. A group's limit counts leases; a worker SIGKILLed or frozen (SIGSTOP,
 * past its lease) loses its lease to the sweeper while its handler is dead or asleep, so such an
 * execution counts only until that fault (from its claim on: a worker frozen between claim and
 * handler is cut before it started). Executions that ran inside their lease overlap no more
 * than the limit unless the limit failed. An end at the same millisecond as a start comes first.
 */
export function auditGroupLimits(
  executions: Execution[],
  endsAt: Map<string, number>,
  faults: FaultRecord[],
  opts: {
    groupOf: (queue: string, id: string) => string | undefined;
    limitOf: (queue: string, group: string) => number | undefined;
    claimedAt?: Map<string, number>;
    /** Executions whose lease lapsed in a Redis outage (auditRestartReruns), cut when Redis answered again. */
    lapsedAt?: Map<string, number>;
  },
): GroupAudit {
  const stops = new Map<number, number[]>();
  for (const f of faults)
    if ((f.kind === "sigkill" || f.kind === "sigstop") && f.pid !== undefined)
      stops.set(f.pid, [...(stops.get(f.pid) ?? []), f.at]);
  const events = new Map<string, { t: number; d: number }[]>();
  const audit: GroupAudit = { checked: 0, cut: 0, unended: 0, peaks: [], breaches: [] };
  for (const e of executions) {
    const group = opts.groupOf(e.q, e.id);
    if (group === undefined || opts.limitOf(e.q, group) === undefined) continue;
    audit.checked++;
    const from = Math.min(e.t, opts.claimedAt?.get(e.exec) ?? e.t);
    let end = endsAt.get(e.exec);
    const lapsed = opts.lapsedAt?.get(e.exec);
    const fault = [...(stops.get(e.pid) ?? []), ...(lapsed !== undefined ? [lapsed] : [])].filter(
      (at) => at >= from && (end === undefined || at < end),
    );
    if (fault.length > 0) {
      end = Math.min(...fault);
      audit.cut++;
    } else if (end === undefined) {
      end = e.t;
      audit.unended++;
    }
    if (end <= e.t) continue;
    const key = `${e.q}\u0000${group}`;
    const list = events.get(key) ?? [];
    list.push({ t: e.t, d: 1 }, { t: end, d: -1 });
    events.set(key, list);
  }
  for (const [key, list] of events) {
    const [queue, group] = key.split("\u0000") as [string, string];
    list.sort((a, b) => a.t - b.t || a.d - b.d);
    let running = 0;
    const peak: GroupPeak = { queue, group, limit: opts.limitOf(queue, group)!, peak: 0, at: 0 };
    for (const ev of list) {
      running += ev.d;
      if (running > peak.peak) Object.assign(peak, { peak: running, at: ev.t });
    }
    audit.peaks.push(peak);
    if (peak.peak > peak.limit) audit.breaches.push(peak);
  }
  audit.peaks.sort((a, b) => (a.queue + a.group < b.queue + b.group ? -1 : 1));
  return audit;
}

/**
 * A sequence (a group of concurrency 1) starts its jobs in the order they were enqueued: the
 * first execution of each job at `queue`, by start time, against `order` (the job ids as
 * enqueued). Returns the jobs that started before one enqueued ahead of them had started.
 */
export function sequenceInversions(executions: Execution[], queue: string, order: string[]): string[] {
  const first = new Map<string, number>();
  for (const e of executions)
    if (e.q === queue && (!first.has(e.id) || e.t < first.get(e.id)!)) first.set(e.id, e.t);
  const out: string[] = [];
  let latest = -Infinity;
  for (const id of order) {
    const t = first.get(id);
    if (t === undefined) continue;
    if (t < latest) out.push(id);
    latest = Math.max(latest, t);
  }
  return out;
}

export interface RestartRerunAudit {
  /** Each Redis outage's length (ms, from going down to answering again), in fault order. */
  outagesMs: number[];
  /** Re-runs after a restart whose earlier execution's lease ran out while Redis was down, its late result refused. */
  justified: number;
  /** The other re-runs attributed to a restart, each with why it is not. */
  unjustified: { queue: string; id: string; exec: string; why: string }[];
  /** The justified re-runs' earlier executions, and when Redis, answering again, held them lapsed. */
  lapsed: { exec: string; at: number }[];
}

/**
 * What a Redis restart may cost, checked against each outage as measured: while Redis is down no
 * lease can be renewed, so an outage that outlasts a lease's remaining time lapses it and the job
 * may run again — but only then, and the earlier execution's late result must be refused by its
 * fencing token (`fenced`, or `leaseLost` when the worker learned first). A re-run attributed to a
 * restart is justified when some restart between the earlier execution's start and the re-run
 * began with that execution's lease (its token) due before Redis answered again. Without a lease
 * reading for an outage, or for a lease taken while the reading ran, its leases are taken as due
 * `leaseMs` after it began (the longest a lease can have left), so only an outage longer than a
 * whole lease justifies the re-run.
 */
export function auditRestartReruns(
  duplicates: Duplicate[],
  faults: FaultRecord[],
  leaseMs: number,
): RestartRerunAudit {
  const restarts = faults.filter((f) => f.kind === "redis_restart");
  const audit: RestartRerunAudit = {
    outagesMs: restarts.filter((f) => f.end !== undefined).map((f) => f.end! - f.at),
    justified: 0,
    unjustified: [],
    lapsed: [],
  };
  for (const d of duplicates) {
    if (d.cause !== "redis_restart") continue;
    const miss = (why: string) =>
      audit.unjustified.push({ queue: d.queue, id: d.id, exec: d.earlier.exec, why });
    const outages = restarts.filter((f) => f.at <= d.rerun.t && (f.end ?? Infinity) >= d.earlier.t - leaseMs);
    const lapsed = outages.find((f) => {
      // (a lease held at the kill ends at most a lease after it: an outage longer than a lease
      // outlasts every one — those taken after the reading, before the kill, too)
      const outlastsAnyLease = (f.end ?? Infinity) - f.at > leaseMs;
      const lease = f.leases?.[leaseKey(d.queue, d.id)];
      if (lease === undefined || lease.token !== d.earlier.exec) return outlastsAnyLease;
      return lease.deadline < (f.end ?? Infinity);
    });
    if (!lapsed) {
      const seen = outages.map((f) => {
        const lease = f.leases?.[leaseKey(d.queue, d.id)];
        const held =
          lease?.token === d.earlier.exec
            ? `lease due ${lease.deadline - f.at} ms after it began`
            : "not its lease";
        return `outage ${f.n} of ${(f.end ?? Infinity) - f.at} ms (${f.leases ? held : "no lease reading"})`;
      });
      miss(`its lease did not run out while Redis was down: ${seen.join(", ") || "no outage"}`);
    } else if (d.earlier.outcome !== "fenced" && d.earlier.outcome !== "leaseLost")
      miss(`the earlier execution's result was not refused (outcome ${d.earlier.outcome ?? "none logged"})`);
    else {
      audit.justified++;
      audit.lapsed.push({ exec: d.earlier.exec, at: lapsed.end ?? d.rerun.t });
    }
  }
  return audit;
}

/** A flow's edge: `child` waits for `parent` (job ids). */
export interface FlowEdge {
  parent: string;
  child: string;
}

export interface FlowOrderAudit {
  /** Edges whose dependent ran (and so were checked). */
  checked: number;
  /** Dependents started before that parent completed (or when it never completed). */
  early: { child: string; parent: string; startedAt: number; parentCompletedAt?: number }[];
}

/**
 * A flow job is released only when its last parent completes (at its last stage), so each
 * dependent's first execution, at any stage, must start after every parent's completing
 * execution ended. Both are stamped by the processes on the two ends of that causal chain
 * (`firstStart`: the dependent's handler after its claim returned; `completedAt`: the parent's
 * handler before its worker sent the completion), so no clock skew between a claim's and a
 * completion's own timestamps can hide or fake an early start. A dependent that ran although a
 * parent never completed started early too (the chaos flows use the `fail` policy: such a
 * dependent is cancelled, never run).
 */
export function flowOrderViolations(
  edges: FlowEdge[],
  firstStart: Map<string, number>,
  completedAt: Map<string, number>,
): FlowOrderAudit {
  const audit: FlowOrderAudit = { checked: 0, early: [] };
  for (const { parent, child } of edges) {
    const startedAt = firstStart.get(child);
    if (startedAt === undefined) continue;
    audit.checked++;
    const done = completedAt.get(parent);
    if (done === undefined || startedAt < done)
      audit.early.push({
        child,
        parent,
        startedAt,
        ...(done === undefined ? {} : { parentCompletedAt: done }),
      });
  }
  return audit;
}

/** When each job's first execution (at any stage) started, ms since epoch. */
export function firstStarts(executions: Execution[]): Map<string, number> {
  const out = new Map<string, number>();
  for (const e of executions) if (!out.has(e.id) || e.t < out.get(e.id)!) out.set(e.id, e.t);
  return out;
}

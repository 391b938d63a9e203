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
}

export type Cause = "sigkill" | "sigstop" | "redis_restart" | "failover" | "sigterm" | "other";

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
    byCause: { sigkill: 0, sigstop: 0, redis_restart: 0, failover: 0, sigterm: 0, other: 0 },
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

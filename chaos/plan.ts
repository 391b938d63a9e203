// The seeded part of a chaos run: the jobs' shapes and the fault schedule.
// Everything here is a pure function of the seed and the options, so the same seed gives the
// same jobs and the same schedule of faults (when, which kind, which worker slot, how long);
// what the faults then hit depends on timing, which is the point of the exercise.
import { rng } from "../test/support/random.ts";

export type FaultKind =
  "sigterm" | "sigkill" | "sigstop" | "redis_restart" | "failover" | "postgres_restart" | "upgrade";
/** The kinds of a run on one Redis node. */
export const FAULT_KINDS: readonly FaultKind[] = [
  "sigterm",
  "sigkill",
  "sigstop",
  "redis_restart",
  "postgres_restart",
];
/** The kinds of a run on Redis that fails over (Sentinel, Cluster): the primary is killed, not restarted. */
export const FAILOVER_FAULT_KINDS: readonly FaultKind[] = FAULT_KINDS.map((k) =>
  k === "redis_restart" ? "failover" : k,
);
/** The kinds of a run with --upgrade: a worker also replaced by one of the other release. */
export const withUpgrade = (kinds: readonly FaultKind[]): readonly FaultKind[] => [...kinds, "upgrade"];
/** Which release an upgrade fault's replacement runs: "this" one, or the "previous" one (a rollback). */
export type ReleaseSide = "this" | "previous";
const WEIGHTS: Record<FaultKind, number> = {
  sigterm: 0.27,
  sigkill: 0.23,
  sigstop: 0.2,
  redis_restart: 0.15,
  failover: 0.15,
  postgres_restart: 0.15,
  upgrade: 0.15,
};

export interface PlannedFault {
  /** Sequence number in the schedule. */
  n: number;
  /** Milliseconds after the start of the chaos window. */
  at: number;
  kind: FaultKind;
  /** Worker faults: a slot index (mod the number of slots); the next live slot is taken if that one is busy. */
  slot: number;
  /** How long the fault lasts: SIGSTOP → SIGCONT, server down time, or the restart delay after SIGKILL. */
  durationMs: number;
  /** Redis: SIGKILL (crash) or SIGTERM (shutdown); PostgreSQL: SIGKILL (crash) or a fast shutdown. */
  hard: boolean;
  /** Upgrade faults: the release of the replacement; they alternate, the first one to "this". */
  to?: ReleaseSide;
}

export interface ScheduleOptions {
  /** Length of the window in which faults are injected (ms). */
  windowMs: number;
  /** Mean gap between faults (ms). */
  meanGapMs: number;
  /** The lease: a SIGSTOP lasts past it. */
  leaseMs: number;
  /** The kinds to draw from (default FAULT_KINDS; same length and weights keep a seed's schedule). */
  kinds?: readonly FaultKind[];
}

/**
 * The fault schedule: exponential gaps (at least 400 ms) over the window; the first five faults
 * are one of each kind in a seeded order (so even a short run injects every kind), the rest
 * are drawn by weight (over the kinds in the run). Upgrade faults alternate their direction: the
 * first replaces a worker of the previous release by one of this release, the next one of this
 * release by one of the previous, and so on.
 */
export function faultSchedule(seed: number, o: ScheduleOptions): PlannedFault[] {
  const r = rng(seed ^ 0x5eed);
  const kinds = o.kinds ?? FAULT_KINDS;
  const firstRound = [...kinds];
  for (let i = firstRound.length - 1; i > 0; i--) {
    const j = Math.floor(r() * (i + 1));
    [firstRound[i], firstRound[j]] = [firstRound[j]!, firstRound[i]!];
  }
  const out: PlannedFault[] = [];
  const total = kinds.reduce((a, k) => a + WEIGHTS[k], 0);
  let upgrades = 0;
  let t = Math.min(2000, o.windowMs / 10);
  for (let n = 0; ; n++) {
    t += Math.max(400, -Math.log(1 - r()) * o.meanGapMs);
    if (t >= o.windowMs) break;
    let kind: FaultKind;
    if (n < firstRound.length) kind = firstRound[n]!;
    else {
      let x = r() * total;
      kind = "postgres_restart";
      for (const k of kinds) {
        if ((x -= WEIGHTS[k]) < 0) {
          kind = k;
          break;
        }
      }
    }
    const slot = Math.floor(r() * 1_000_000);
    const hard = r() < 0.5;
    let durationMs: number;
    switch (kind) {
      case "sigstop":
        durationMs = Math.round(o.leaseMs * 1.5 + 500 + r() * 2500); // well past the lease
        break;
      case "sigkill":
        durationMs = Math.round(300 + r() * 1200); // a container restart's delay
        break;
      case "redis_restart":
        durationMs = Math.round(300 + r() * 2700);
        break;
      case "failover":
        // how long the killed primary stays down after its replica took over (then it rejoins as one)
        durationMs = Math.round(500 + r() * 2500);
        break;
      case "postgres_restart":
        durationMs = Math.round(1000 + r() * 7000);
        break;
      default:
        durationMs = 0;
    }
    out.push({
      n,
      at: Math.round(t),
      kind,
      slot,
      durationMs,
      hard,
      ...(kind === "upgrade" ? { to: upgrades++ % 2 === 0 ? ("this" as const) : ("previous" as const) } : {}),
    });
  }
  return out;
}

/** A job's data: one level per stage, each `{sleepMs, result: <next stage's data>}` (the recording handler returns `result`). */
export interface JobPlan {
  id: string;
  data: Record<string, unknown>;
  /** Stage index whose first attempt is made to fail on purpose (a retry), or -1. */
  failsAt: number;
}

export function jobPlans(seed: number, count: number, stages: number): JobPlan[] {
  const r = rng(seed ^ 0x10b5);
  const jobs: JobPlan[] = [];
  for (let i = 0; i < count; i++) {
    const failsAt = r() < 0.02 ? Math.floor(r() * stages) : -1;
    let data: Record<string, unknown> = { done: i };
    for (let s = stages - 1; s >= 0; s--) {
      // Mostly short jobs (0–200 ms); one in twelve runs 0.5–2 s, so kills and freezes hit running work.
      const sleepMs = r() < 0.08 ? Math.round(500 + r() * 1500) : Math.round(r() * 200);
      data = { sleepMs, ...(s === failsAt ? { failTimes: 1 } : {}), result: data };
    }
    jobs.push({ id: `j${i}`, data, failsAt });
  }
  return jobs;
}

/** The sequenced group of a grouped run: concurrency 1, so its jobs run one at a time, in order. */
export const SEQUENCE_GROUP = "seq";
/** Every other group's concurrency limit in a grouped run. */
export const GROUP_CONCURRENCY = 2;

/**
 * Job i's group in a run with `groups` groups (0: none): every 20th job is in the sequence
 * (SEQUENCE_GROUP), the other even ones spread over g1..g<groups−1>, the odd ones have no group
 * (so a grouped run keeps exercising ungrouped jobs beside grouped ones).
 */
export function jobGroup(i: number, groups: number): string | undefined {
  if (groups <= 0) return undefined;
  if (i % 20 === 0) return SEQUENCE_GROUP;
  if (i % 2 === 1 || groups < 2) return undefined;
  return `g${1 + ((i / 2) % (groups - 1))}`;
}

/** A job of a chaos flow: its key, its parents' keys, and its data as a plain job's (jobPlans). */
export interface FlowJobPlan {
  key: string;
  parents: string[];
  data: Record<string, unknown>;
  failsAt: number;
}

/**
 * The flows of a run with `--flows N`: flow i is a root, 2 + i % 3 middles that wait for it and a
 * sink that waits for all the middles (a diamond, or wider), every job through every stage.
 */
export function flowPlans(seed: number, count: number, stages: number): FlowJobPlan[][] {
  const shapes = jobPlans(seed ^ 0xf10f, count * 6, stages);
  let k = 0;
  const take = (key: string, parents: string[]): FlowJobPlan => {
    const { data, failsAt } = shapes[k++]!;
    return { key, parents, data, failsAt };
  };
  return Array.from({ length: count }, (_, i) => {
    const mids = Array.from({ length: 2 + (i % 3) }, (_, m) => `m${m}`);
    return [take("root", []), ...mids.map((m) => take(m, ["root"])), take("sink", mids)];
  });
}

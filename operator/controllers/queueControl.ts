// Queue control seen from the operator (issue 13): spec.paused and spec.rateLimit are written
// into Redis (the spec wins while set), a paused pool scales to what its running jobs need and
// then to its minimum, a rate-limited pool is capped at the replicas the rate can feed, and a
// pool whose waiting jobs belong to groups at their limit at the replicas its groups can use
// (issue 31); the lowest cap binds.
// Pure functions; the reconcile step that uses them is in workerpoolReconciler.ts.
import {
  formatRateLimit,
  parseRateLimit,
  type GroupAdmission,
  type QueueControlState,
  type QueueCounts,
  type RateLimit,
  type WorkerReport,
} from "../../queue/index.ts";
import type { WorkerPoolSpec } from "../apis/v1alpha1/types.ts";

/** A worker report older than this says nothing about job durations any more. */
const REPORT_STALE_MS = 60_000;

/** What the spec manages: undefined fields are left as the CLI or API set them. */
export interface SpecControl {
  paused?: boolean;
  rateLimit?: RateLimit;
}

export function specControl(spec: WorkerPoolSpec): SpecControl {
  return {
    ...(spec.paused !== undefined ? { paused: spec.paused } : {}),
    ...(spec.rateLimit !== undefined ? { rateLimit: parseRateLimit(spec.rateLimit) } : {}),
  };
}

/** The writes that make Redis say what the spec says (empty: nothing to write). */
export function controlChanges(
  want: SpecControl,
  have: QueueControlState,
): { paused?: boolean; rateLimit?: RateLimit } {
  const out: { paused?: boolean; rateLimit?: RateLimit } = {};
  if (want.paused !== undefined && want.paused !== have.paused) out.paused = want.paused;
  if (
    want.rateLimit &&
    (have.rateLimit?.max !== want.rateLimit.max || have.rateLimit?.perMs !== want.rateLimit.perMs)
  )
    out.rateLimit = want.rateLimit;
  return out;
}

/** A paused pool's replicas: enough warm pods for the jobs still running, never below the minimum. */
export function pausedReplicas(inflight: number, concurrency: number, minReplicas: number): number {
  return Math.max(minReplicas, Math.ceil(inflight / Math.max(1, concurrency)));
}

/** The median of the workers' reported median job durations (fresh reports only); undefined when none. */
export function medianJobMs(reports: WorkerReport[], now: number): number | undefined {
  const ms = reports
    .filter((r) => now - r.seen <= REPORT_STALE_MS && (r.jobP50Ms ?? 0) > 0)
    .map((r) => r.jobP50Ms!)
    .sort((a, b) => a - b);
  return ms.length > 0 ? ms[Math.floor((ms.length - 1) / 2)] : undefined;
}

export interface ReplicaCap {
  cap: number;
  reason: string;
  /** What caps: the queue's rate limit, or its groups' limits (status.control.capBy). */
  by: "rateLimit" | "groups";
}

/**
 * The replicas a rate limit can feed: ceil(starts per second × median job seconds /
 * concurrency) + 1 (a spare for uneven jobs), within [max(1, minReplicas), maxReplicas].
 * Without measured durations the pool is not capped (maxReplicas), and the reason says so.
 */
export function rateLimitCap(
  limit: RateLimit,
  jobMs: number | undefined,
  spec: Pick<WorkerPoolSpec, "concurrency"> & { scaling: { minReplicas: number; maxReplicas: number } },
): ReplicaCap {
  const { minReplicas, maxReplicas } = spec.scaling;
  const rate = formatRateLimit(limit);
  if (jobMs === undefined)
    return {
      cap: maxReplicas,
      reason: `rate limit ${rate}: no job durations measured yet, not capped`,
      by: "rateLimit",
    };
  const perSecond = (limit.max * 1000) / limit.perMs;
  const needed = Math.ceil((perSecond * jobMs) / 1000 / Math.max(1, spec.concurrency)) + 1;
  const cap = Math.min(maxReplicas, Math.max(1, minReplicas, needed));
  return {
    cap,
    reason: `rate limit ${rate} × median job ${Math.round(jobMs)}ms / concurrency ${spec.concurrency} → ${needed} replica(s)${cap < needed ? `, maxReplicas ${maxReplicas}` : ""}`,
    by: "rateLimit",
  };
}

/**
 * The replicas a queue's groups can use: the jobs that could run at once — running + ungrouped
 * ready + due-delayed + the grouped waiting jobs their groups admit now (Σ min(waiting, room);
 * groups at their limit or paused add none: GroupAdmission) — over concurrency, within
 * [max(1, minReplicas), maxReplicas]. Undefined when no job waits in a group or the cap would
 * not bind (≥ maxReplicas). Due-delayed jobs count whole (some may join a blocked group).
 */
export function groupAdmissionCap(
  counts: Pick<QueueCounts, "ready" | "dueDelayed" | "inflight">,
  groups: GroupAdmission | undefined,
  spec: Pick<WorkerPoolSpec, "concurrency"> & { scaling: { minReplicas: number; maxReplicas: number } },
): ReplicaCap | undefined {
  if (!groups || groups.waiting <= 0) return undefined;
  const { minReplicas, maxReplicas } = spec.scaling;
  const ungrouped = Math.max(0, counts.ready - groups.waiting);
  const admissible = Math.min(groups.waiting, groups.admissible);
  const slots = counts.inflight + counts.dueDelayed + ungrouped + admissible;
  const concurrency = Math.max(1, spec.concurrency);
  const needed = Math.ceil(slots / concurrency);
  if (needed >= maxReplicas) return undefined;
  const cap = Math.min(maxReplicas, Math.max(1, minReplicas, needed));
  const blocked = groups.waiting - admissible;
  const estimate = groups.complete ? "" : ` (estimated from ${groups.scanned} of ${groups.ring} groups)`;
  return {
    cap,
    reason:
      `groups: ${admissible} of ${groups.waiting} grouped waiting job(s) can start${estimate}, ${blocked} wait for groups at their limit or paused; ` +
      `${counts.inflight} running + ${ungrouped + counts.dueDelayed} other ready + ${admissible} = ${slots} slot(s) / concurrency ${concurrency} → ${needed} replica(s)${cap > needed ? `, minimum ${cap}` : ""}`,
    by: "groups",
  };
}

/** The cap that binds: the lowest (the first of equals); undefined when there is none. */
export function bindingCap(caps: (ReplicaCap | undefined)[]): ReplicaCap | undefined {
  let low: ReplicaCap | undefined;
  for (const c of caps) if (c && (!low || c.cap < low.cap)) low = c;
  return low;
}

/** `kubectl get wp` column text. */
export function controlSummary(
  paused: boolean,
  rateLimit: RateLimit | null,
  cap: number | undefined,
  capBy: ReplicaCap["by"] = "rateLimit",
): string {
  if (paused) return "paused";
  const groups = cap !== undefined && capBy === "groups" ? `groups (cap ${cap})` : "";
  if (rateLimit)
    return `limited ${formatRateLimit(rateLimit)}${groups ? `, ${groups}` : cap !== undefined ? ` (cap ${cap})` : ""}`;
  return groups;
}

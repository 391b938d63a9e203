// Queue control seen from the operator (issue 13): spec.paused and spec.rateLimit are written
// into Redis (the spec wins while set), a paused pool scales to what its running jobs need and
// then to its minimum, and a rate-limited pool is capped at the replicas the rate can feed.
// Pure functions; the reconcile step that uses them is in workerpoolReconciler.ts.
import {
  formatRateLimit,
  parseRateLimit,
  type QueueControlState,
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
    return { cap: maxReplicas, reason: `rate limit ${rate}: no job durations measured yet, not capped` };
  const perSecond = (limit.max * 1000) / limit.perMs;
  const needed = Math.ceil((perSecond * jobMs) / 1000 / Math.max(1, spec.concurrency)) + 1;
  const cap = Math.min(maxReplicas, Math.max(1, minReplicas, needed));
  return {
    cap,
    reason: `rate limit ${rate} × median job ${Math.round(jobMs)}ms / concurrency ${spec.concurrency} → ${needed} replica(s)${cap < needed ? `, maxReplicas ${maxReplicas}` : ""}`,
  };
}

/** `kubectl get wp` column text. */
export function controlSummary(
  paused: boolean,
  rateLimit: RateLimit | null,
  cap: number | undefined,
): string {
  if (paused) return "paused";
  if (rateLimit) return `limited ${formatRateLimit(rateLimit)}${cap !== undefined ? ` (cap ${cap})` : ""}`;
  return "";
}

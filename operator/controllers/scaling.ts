// Scaling decisions the operator makes itself:
//   - 0 → 1 when the backlog exceeds activationBacklog (the HPA cannot scale from zero);
//   - N → 0 after cooldownSeconds with no backlog and nothing in flight (minReplicas = 0);
//   - 0 → minReplicas when the pool sits below its minimum at zero;
//   - spec.replicas, when set, pins the count;
//   - in `direct` mode, everything between 1 and maxReplicas, by the HPA algorithm.
// No decision is made without a fresh backlog reading: an unreachable Redis never scales a
// pool down (nor up).
import type { WorkerPoolSpec } from "../apis/v1alpha1/types.ts";
import type { QueueCounts, WorkerReport } from "../../queue/index.ts";
import { HpaAlgorithm, type Behavior } from "../scaling/hpa-algorithm.ts";

export interface PoolScaler {
  /** Last time the queue had backlog or jobs in flight (starts at creation: a new leader waits a full cooldown). */
  lastActiveAt: number;
  hpa: HpaAlgorithm;
}

export function newPoolScaler(now: number): PoolScaler {
  return { lastActiveAt: now, hpa: new HpaAlgorithm() };
}

export interface ScaleDecision {
  replicas: number;
  from: number;
  /** Activated, CooledDown, BelowMinimum, ManualReplicas, DirectScaleUp, DirectScaleDown. */
  reason: string;
  message: string;
}

export interface DecideInput {
  now: number;
  spec: WorkerPoolSpec;
  /** The Deployment's spec.replicas. */
  current: number;
  /** Pods that exist (status.replicas): what the metric is spread over. */
  statusReplicas: number;
  /** Fresh counts, or undefined when the backlog could not be read recently. */
  counts: QueueCounts | undefined;
}

/** The replica change to make now, or undefined. Updates the scaler's activity and HPA state. */
export function decideScale(s: PoolScaler, i: DecideInput): ScaleDecision | undefined {
  const spec = i.spec;
  const sc = spec.scaling;
  if (spec.replicas !== undefined) {
    if (i.current === spec.replicas) return undefined;
    return { replicas: spec.replicas, from: i.current, reason: "ManualReplicas", message: `spec.replicas is ${spec.replicas}` };
  }
  if (sc.paused || !i.counts) return undefined;
  const { backlog, inflight } = i.counts;
  if (backlog > 0 || inflight > 0) s.lastActiveAt = i.now;

  if (i.current === 0) {
    s.hpa.reset();
    if (sc.minReplicas > 0) {
      return { replicas: sc.minReplicas, from: 0, reason: "BelowMinimum", message: `minReplicas is ${sc.minReplicas}` };
    }
    if (backlog > sc.activationBacklog) {
      return { replicas: 1, from: 0, reason: "Activated", message: `backlog ${backlog} > activationBacklog ${sc.activationBacklog}: starting a worker` };
    }
    return undefined;
  }

  if (sc.minReplicas === 0 && backlog === 0 && inflight === 0 && i.now - s.lastActiveAt >= sc.cooldownSeconds * 1000) {
    return {
      replicas: 0,
      from: i.current,
      reason: "CooledDown",
      message: `no backlog and nothing in flight for ${sc.cooldownSeconds}s: scaling to zero`,
    };
  }

  if (sc.mode !== "direct") return undefined;
  const d = s.hpa.decide({
    now: i.now,
    total: backlog,
    targetPerReplica: sc.targetBacklogPerReplica,
    currentReplicas: i.current,
    statusReplicas: i.statusReplicas > 0 ? i.statusReplicas : i.current,
    minReplicas: sc.minReplicas,
    maxReplicas: sc.maxReplicas,
    behavior: sc.behavior as Behavior | undefined,
  });
  if (d.replicas === i.current) return undefined;
  return {
    replicas: d.replicas,
    from: i.current,
    reason: d.replicas > i.current ? "DirectScaleUp" : "DirectScaleDown",
    message: `backlog ${backlog} at target ${sc.targetBacklogPerReplica}/replica wants ${d.metricReplicas}; ${d.reason}: ${d.message}`,
  };
}

/** After a decision was applied: feed the HPA algorithm's rate limits. */
export function recordScale(s: PoolScaler, spec: WorkerPoolSpec, d: ScaleDecision, now: number): void {
  if (d.reason === "DirectScaleUp" || d.reason === "DirectScaleDown") s.hpa.record(now, d.from, d.replicas, spec.scaling.behavior as Behavior | undefined);
  if (d.replicas === 0) s.hpa.reset();
}

export const IDLE_COST = "-100";
export const BUSY_COST = "100";
/** A report older than this says nothing about the pod any more. */
export const REPORT_STALE_MS = 60_000;

/**
 * The pod-deletion-cost each pod should carry, from the workers' busy/idle reports: idle pods
 * lowest (deleted first on scale-in), busy pods high. A pod without a recent report (starting,
 * or hung) is left as it is (undefined).
 */
export function deletionCosts(pods: string[], reports: WorkerReport[], now: number): Map<string, string | undefined> {
  const byPod = new Map<string, WorkerReport>();
  for (const r of reports) {
    if (now - r.seen > REPORT_STALE_MS) continue;
    const prev = byPod.get(r.pod);
    if (!prev || prev.seen < r.seen) byPod.set(r.pod, r);
  }
  const out = new Map<string, string | undefined>();
  for (const pod of pods) {
    const r = byPod.get(pod);
    out.set(pod, r ? (r.busy > 0 ? BUSY_COST : IDLE_COST) : undefined);
  }
  return out;
}

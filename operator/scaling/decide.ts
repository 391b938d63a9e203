// Scaling decisions the operator makes itself:
//   - 0 → 1 when the backlog exceeds activationBacklog (the HPA cannot scale from zero);
//   - N → 0 after cooldownSeconds with no backlog and nothing in flight (minReplicas = 0);
//   - 0 → minReplicas when the pool sits below its minimum at zero;
//   - spec.replicas, when set, pins the count;
//   - in `direct` mode, everything between 1 and maxReplicas, by the HPA algorithm — on the
//     backlog per replica, or with scaling.targetWaitSeconds on the slots a wait target needs
//     (operator/scaling/latency.ts).
// A scale-in never goes below the pods running jobs while their jobs may outlast the drain
// (holdForBusyPods): it steps down as they go idle.
// No decision is made without a fresh backlog reading: an unreachable Redis never scales a
import type { WorkerPoolSpec } from "../apis/v1alpha1/types.ts";
import type { QueueCounts } from "../../queue/index.ts";
import { drainSeconds } from "../controllers/deployment.ts";
import { wantsHPA } from "../controllers/hpa.ts";
import { DEFAULT_TOLERANCE, HpaAlgorithm, type Behavior } from "./hpaAlgorithm.ts";
import {
  LATENCY_SCALE_UP,
  latencyNeed,
  lowerMedian,
  observeArrivals,
  observeService,
  surgeWaiting,
  type LatencyInput,
  type LatencyNeed,
} from "./latency.ts";
import type { PoolScaler, PoolState } from "../controllers/context.ts";
import { pausedReplicas, replicaSlots, slotsLabel, type JobTime } from "../controllers/queueControl.ts";
import type { Deployment, Pod } from "../controllers/objects.ts";
import { Reason, type ScaleReason } from "../controllers/reasons.ts";

export function newPoolScaler(now: number): PoolScaler {
  return { lastActiveAt: now, hpa: new HpaAlgorithm() };
}

export interface ScaleDecision {
  replicas: number;
  from: number;
  reason: ScaleReason;
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
  /** The queue is paused (spec.paused or `conveyor pause`): drain to the running jobs, then the minimum. */
  queuePaused?: boolean;
  /** The counts were read with the pause already in force (no claim can follow them). */
  pauseSeenByPoll?: boolean;
  /** When the counts were read (ms): latency mode's arrival rate is the enqueue counter's growth between reads. */
  countsAt?: number;
  /** The workers' median job duration (ms) from fresh reports, when any (latency mode). */
  jobMs?: number;
  /** The pool's pods' median start-up, creation → Ready (ms), when any is Ready (latency mode). */
  podStartMs?: number;
  /** Pods (not terminating) whose fresh report says they run jobs (busyPods); undefined when not read. */
  busyPods?: number;
  /** The most replicas: spec.scaling.maxReplicas, or the binding queue-control cap below it. */
  maxReplicas?: number;
}

/** The behavior latency mode scales with: the spec's, with an unlimited scale-up unless it sets one. */
export function scalingBehavior(spec: WorkerPoolSpec): Behavior | undefined {
  const b = spec.scaling.behavior as Behavior | undefined;
  if (spec.scaling.targetWaitSeconds === undefined) return b;
  return { ...b, scaleUp: b?.scaleUp ?? LATENCY_SCALE_UP };
}

/** Jobs ready to start now (ready + due delayed): the backlog less the running ones. */
const waitingJobs = (counts: QueueCounts) => Math.max(0, counts.backlog - counts.inflight);

/**
 * How long a job holds a slot, as latency mode and the start-rate caps size by it: the measured
 * mean once any attempt has ended, else the workers' median (`reportedMs`, fresh reports; in
 * latency mode the last one seen is remembered).
 */
export function jobTimeOf(s: PoolScaler, reportedMs = s.jobMs): JobTime {
  const mean = s.service?.meanMs;
  if (mean !== undefined)
    return { jobMs: mean, jobMsFrom: s.service!.over > 0 ? `mean of ${s.service!.over}` : "last mean" };
  return reportedMs !== undefined ? { jobMs: reportedMs, jobMsFrom: "workers' median" } : {};
}

/** latencyNeed's input from the pool's counts and the scaler's arrival, duration and start-up memory. */
function latencyInputOf(s: PoolScaler, spec: WorkerPoolSpec, counts: QueueCounts, now: number): LatencyInput {
  const waiting = waitingJobs(counts);
  return {
    targetWaitSeconds: spec.scaling.targetWaitSeconds ?? 0,
    concurrency: replicaSlots(spec),
    arrivalPerSecond: s.arrivals?.perSecond,
    ...jobTimeOf(s),
    waiting,
    oldestWaitSeconds:
      waiting > 0 && counts.oldestReadyAt !== undefined ? Math.max(0, now - counts.oldestReadyAt) / 1000 : 0,
    pollSeconds: spec.scaling.pollSeconds,
    startSeconds: (s.podStartMs ?? 0) / 1000,
  };
}

/** What latency mode needs now, from the pool's counts and the scaler's arrival and duration memory. */
export function latencyNeedOf(
  s: PoolScaler,
  spec: WorkerPoolSpec,
  counts: QueueCounts,
  now: number,
): LatencyNeed {
  return latencyNeed(latencyInputOf(s, spec, counts, now));
}

/**
 * A running latency-mode pool's surge bell: how many waiting jobs should poll it at once
 * (surgeWaiting). None at zero (the doorbell's), at its maximum (nothing to scale to), pinned by
 * spec.replicas, paused, or outside latency mode.
 */
export function surgeBellOf(
  s: PoolScaler,
  spec: WorkerPoolSpec,
  counts: QueueCounts,
  now: number,
  replicas: number,
  queuePaused: boolean,
  maxReplicas = spec.scaling.maxReplicas,
): number | undefined {
  const sc = spec.scaling;
  if (sc.targetWaitSeconds === undefined || sc.mode !== "direct" || spec.replicas !== undefined)
    return undefined;
  if (sc.paused || queuePaused || replicas === 0 || replicas >= maxReplicas) return undefined;
  return surgeWaiting(latencyInputOf(s, spec, counts, now), replicas, DEFAULT_TOLERANCE);
}

/**
 * The replica change to make now, or undefined. Updates the scaler's activity and HPA state; a
 * scale-in is held at the pods running jobs (holdForBusyPods, s.scaleInHold says so).
 */
export function decideScale(s: PoolScaler, i: DecideInput): ScaleDecision | undefined {
  const d = decideWanted(s, i);
  // Pinned by spec.replicas: the user's count. To zero: nothing is in flight (Redis says so).
  if (!d || d.replicas >= d.from || d.reason === Reason.ManualReplicas || d.reason === Reason.CooledDown) {
    // (while the HPA scales the pool, its floor is the HPA's minReplicas: hpaMinReplicasFloor)
    if (d || !wantsHPA(i.spec, i.queuePaused)) s.scaleInHold = undefined;
    return d;
  }
  const floor = holdForBusyPods(s, {
    now: i.now,
    spec: i.spec,
    current: d.from,
    wanted: d.replicas,
    busyPods: i.busyPods,
  });
  if (floor.replicas === d.replicas) return d;
  if (floor.replicas >= d.from) return undefined;
  return {
    replicas: floor.replicas,
    from: d.from,
    reason: Reason.ScaleInHeld,
    message: `${floor.message} (${d.reason}: ${d.message})`,
  };
}

export interface ScaleInFloor {
  /** What the scale-in may go down to: `wanted`, or the busy pods when they hold it. */
  replicas: number;
  /** Why it is held (empty when it is not). */
  message: string;
}

/**
 * A scale-in below the pods running jobs deletes a busy one, whose worker then hands its jobs
 * back after drainSeconds. So while jobs may outlast the drain (drainSeconds < maxJobSeconds),
 * a scale-in goes no lower than the busy pods and steps down as they go idle (the idle ones
 * are deleted first: pod-deletion-cost). The hold lasts at most maxJobSeconds − drainSeconds:
 * by then every job running when it began has ended or would end within the drain; pods still
 * busy run newer jobs (a steady load spread over all pods), and holding on would keep the pool
 * large for as long as that load lasts. Sets or clears s.scaleInHold.
 */
export function holdForBusyPods(
  s: PoolScaler,
  i: { now: number; spec: WorkerPoolSpec; current: number; wanted: number; busyPods: number | undefined },
): ScaleInFloor {
  const drain = drainSeconds(i.spec);
  const floor = Math.min(i.current, i.busyPods ?? 0);
  if (i.wanted >= floor || drain >= i.spec.maxJobSeconds) {
    s.scaleInHold = undefined;
    return { replicas: i.wanted, message: "" };
  }
  // Wanting fewer pods than this hold has yet cordons more, and a pod kept until now may have
  // just claimed a job of up to maxJobSeconds: the time limit starts again then (not when it
  // wants more: a backlog that comes and goes would hold for ever).
  const prev = s.scaleInHold;
  const fewest = Math.min(prev?.fewest ?? i.wanted, i.wanted);
  const since = prev && i.wanted >= prev.fewest ? prev.since : i.now;
  const limitSeconds = i.spec.maxJobSeconds - drain;
  if (i.now - since >= limitSeconds * 1000) {
    s.scaleInHold = { since, fewest, replicas: i.wanted, wanted: i.wanted, busyPods: floor, message: "" };
    return { replicas: i.wanted, message: "" };
  }
  const message = `scale-in to ${i.wanted} held at ${floor}: ${floor} pod(s) running jobs that may outlast drainSeconds ${drain} (maxJobSeconds ${i.spec.maxJobSeconds}); stepping down as they go idle, for at most ${limitSeconds}s`;
  s.scaleInHold = { since, fewest, replicas: floor, wanted: i.wanted, busyPods: floor, message };
  return { replicas: floor, message };
}

/**
 * In hpa mode the HPA scales in, on its own clock: its minReplicas is the busy pods whenever jobs
 * may outlast the drain — not only once the backlog wants fewer, as the HPA may sync between the
 * poll that reads the lower backlog and the write that would raise it. `wanted` (what the HPA
 * computes from the metric: backlog / target, clamped; its stabilization only keeps it higher)
 * says whether a scale-in is held (s.scaleInHold, for status) and starts the hold's time limit.
 * Undefined: the spec's minReplicas.
 */
export function hpaMinReplicasFloor(
  s: PoolScaler,
  i: {
    now: number;
    spec: WorkerPoolSpec;
    current: number;
    backlog: number;
    busyPods: number | undefined;
    maxReplicas?: number;
  },
): number | undefined {
  const sc = i.spec.scaling;
  const wanted = Math.min(
    i.maxReplicas ?? sc.maxReplicas,
    Math.max(1, sc.minReplicas, Math.ceil(i.backlog / sc.targetBacklogPerReplica)),
  );
  const floor = holdForBusyPods(s, { ...i, wanted: Math.min(wanted, i.current) });
  if (floor.replicas > wanted) return floor.replicas;
  // (a hold that ran out of time: s.scaleInHold stays, at what was wanted)
  if (s.scaleInHold || drainSeconds(i.spec) >= i.spec.maxJobSeconds) return undefined;
  const busy = Math.min(i.current, i.busyPods ?? 0);
  return busy > Math.max(1, sc.minReplicas) ? busy : undefined;
}

/** decideScale before the busy pods' floor. */
function decideWanted(s: PoolScaler, i: DecideInput): ScaleDecision | undefined {
  const spec = i.spec;
  const sc = spec.scaling;
  if (spec.replicas !== undefined) {
    if (i.current === spec.replicas) return undefined;
    return {
      replicas: spec.replicas,
      from: i.current,
      reason: Reason.ManualReplicas,
      message: `spec.replicas is ${spec.replicas}`,
    };
  }
  if (sc.paused || !i.counts) return undefined;
  const counts = i.counts;
  if (i.queuePaused) return decidePaused(s, i, counts);
  observeCounts(s, i, counts);
  if (i.current === 0) return decideFromZero(s, i, counts);
  if (
    sc.minReplicas === 0 &&
    counts.backlog === 0 &&
    counts.inflight === 0 &&
    i.now - s.lastActiveAt >= sc.cooldownSeconds * 1000
  ) {
    return {
      replicas: 0,
      from: i.current,
      reason: Reason.CooledDown,
      message: `no backlog and nothing in flight for ${sc.cooldownSeconds}s: scaling to zero`,
    };
  }
  if (sc.mode !== "direct") return undefined;
  if (isLatencyMode(spec)) {
    const d = decideLatency(s, i, counts);
    // (null: no job duration measured yet — a new pool, a new leader: the backlog target sizes it)
    if (d !== null) return d;
  }
  return decideOnBacklog(s, i, counts);
}

const isLatencyMode = (spec: WorkerPoolSpec) =>
  spec.scaling.targetWaitSeconds !== undefined && spec.scaling.mode === "direct";

/** A paused queue: the operator alone lowers the count (no HPA meanwhile); never up, except to the minimum. */
function decidePaused(s: PoolScaler, i: DecideInput, counts: QueueCounts): ScaleDecision | undefined {
  const spec = i.spec;
  const sc = spec.scaling;
  s.hpa.reset();
  // Counts read before the pause may miss jobs claimed since: hold until a poll sees the pause.
  if (!i.pauseSeenByPoll) return undefined;
  const { inflight } = counts;
  const target = pausedReplicas(inflight, replicaSlots(spec), sc.minReplicas);
  if (target < i.current || (i.current < sc.minReplicas && target > i.current))
    return {
      replicas: target,
      from: i.current,
      reason: Reason.QueuePaused,
      message: `queue paused: ${inflight} running job(s) need ${target} replica(s) (${slotsLabel(spec)}, minReplicas ${sc.minReplicas})`,
    };
  return undefined;
}

/** The scaler's memory from fresh counts: last activity, job service times, and latency mode's arrivals, durations and start-ups. */
function observeCounts(s: PoolScaler, i: DecideInput, counts: QueueCounts): void {
  if (counts.backlog > 0 || counts.inflight > 0) s.lastActiveAt = i.now;
  // (every mode: the rate limit's and the resources' caps size by it too)
  const ended = counts.attemptsEnded;
  if (ended && i.countsAt !== undefined)
    s.service = observeService(s.service, ended.count, ended.runMs, i.countsAt);
  if (!isLatencyMode(i.spec)) return;
  if (counts.enqueued !== undefined && i.countsAt !== undefined)
    s.arrivals = observeArrivals(s.arrivals, counts.enqueued, i.countsAt);
  if (i.jobMs !== undefined && i.jobMs > 0) s.jobMs = i.jobMs;
  if (i.podStartMs !== undefined && i.podStartMs >= 0) s.podStartMs = i.podStartMs;
}

/** A pool at zero: up to minReplicas, or activated by a backlog over activationBacklog. */
function decideFromZero(s: PoolScaler, i: DecideInput, counts: QueueCounts): ScaleDecision | undefined {
  const sc = i.spec.scaling;
  const { backlog } = counts;
  s.hpa.reset();
  if (sc.minReplicas > 0) {
    return {
      replicas: sc.minReplicas,
      from: 0,
      reason: Reason.BelowMinimum,
      message: `minReplicas is ${sc.minReplicas}`,
    };
  }
  if (backlog <= sc.activationBacklog) return undefined;
  if (isLatencyMode(i.spec)) {
    // Straight to what the target needs (when durations are known), not 1 and then more.
    const need = latencyNeedOf(s, i.spec, counts, i.now);
    const replicas = Math.min(i.maxReplicas ?? sc.maxReplicas, Math.max(1, need.replicas ?? 1));
    return {
      replicas,
      from: 0,
      reason: Reason.Activated,
      message: `backlog ${backlog} > activationBacklog ${sc.activationBacklog}: ${need.message}${replicas !== need.replicas ? ` (starting ${replicas})` : ""}`,
    };
  }
  return {
    replicas: 1,
    from: 0,
    reason: Reason.Activated,
    message: `backlog ${backlog} > activationBacklog ${sc.activationBacklog}: starting a worker`,
  };
}

/** Latency mode, running: the HPA algorithm on the slots the wait target needs; null before any job duration is known. */
function decideLatency(s: PoolScaler, i: DecideInput, counts: QueueCounts): ScaleDecision | undefined | null {
  const spec = i.spec;
  const sc = spec.scaling;
  const need = latencyNeedOf(s, spec, counts, i.now);
  if (need.slots === undefined) return null;
  const d = s.hpa.decide({
    now: i.now,
    total: need.slots,
    heldTotal: need.heldSlots,
    // A burst's slots are released once its jobs have all started. Those still running keep
    // their pods: a scale-in is held at the busy pods and the rest are cordoned (holdForBusyPods),
    // or (drain ≥ maxJobSeconds) the deleted pods finish their jobs as they drain.
    releaseTransient: waitingJobs(counts) === 0,
    targetPerReplica: replicaSlots(spec),
    currentReplicas: i.current,
    statusReplicas: i.statusReplicas > 0 ? i.statusReplicas : i.current,
    minReplicas: sc.minReplicas,
    maxReplicas: i.maxReplicas ?? sc.maxReplicas,
    behavior: scalingBehavior(spec),
  });
  if (d.replicas === i.current) return undefined;
  // Until the counter has been read for a whole window (a new pool, a new leader), the rate
  // is partly assumed: never scale down on it.
  if (d.replicas < i.current && !s.arrivals?.settled) return undefined;
  return {
    replicas: d.replicas,
    from: i.current,
    reason: d.replicas > i.current ? Reason.LatencyScaleUp : Reason.LatencyScaleDown,
    message: `${need.message}; ${d.reason}: ${d.message}`,
  };
}

/** Direct mode, running: the HPA algorithm on the backlog per replica. */
function decideOnBacklog(s: PoolScaler, i: DecideInput, counts: QueueCounts): ScaleDecision | undefined {
  const sc = i.spec.scaling;
  const latency = isLatencyMode(i.spec);
  const { backlog } = counts;
  const d = s.hpa.decide({
    now: i.now,
    total: backlog,
    // Latency mode: a count the backlog sized (before any duration was measured: a new pool's
    // first burst) is all transient — its running jobs are the burst's too; what stays is what
    // the later, measured decisions say the arrivals need.
    ...(latency ? { heldTotal: 0 } : {}),
    targetPerReplica: sc.targetBacklogPerReplica,
    currentReplicas: i.current,
    statusReplicas: i.statusReplicas > 0 ? i.statusReplicas : i.current,
    minReplicas: sc.minReplicas,
    maxReplicas: i.maxReplicas ?? sc.maxReplicas,
    behavior: scalingBehavior(i.spec),
  });
  if (d.replicas === i.current) return undefined;
  return {
    replicas: d.replicas,
    from: i.current,
    reason: d.replicas > i.current ? Reason.DirectScaleUp : Reason.DirectScaleDown,
    message: `${latency ? "no job durations measured yet: " : ""}backlog ${backlog} at target ${sc.targetBacklogPerReplica}/replica wants ${d.metricReplicas}; ${d.reason}: ${d.message}`,
  };
}

/** After a decision was applied: feed the HPA algorithm's rate limits. */
export function recordScale(s: PoolScaler, spec: WorkerPoolSpec, d: ScaleDecision, now: number): void {
  if (
    d.reason === Reason.DirectScaleUp ||
    d.reason === Reason.DirectScaleDown ||
    d.reason === Reason.LatencyScaleUp ||
    d.reason === Reason.LatencyScaleDown ||
    d.reason === Reason.ScaleInHeld
  )
    s.hpa.record(now, d.from, d.replicas, scalingBehavior(spec));
  if (d.replicas === 0) s.hpa.reset();
}

/**
 * The replica count to start from: the Deployment's, or our own scale write while the cache
 * has not shown it yet (for at most 30 s).
 */
export function currentReplicas(state: PoolState, deployment: Deployment, now: number): number {
  const live = deployment.spec?.replicas ?? 0;
  if (state.expect && (state.expect.replicas === live || now > state.expect.until)) state.expect = undefined;
  return state.expect?.replicas ?? live;
}

/**
 * The pods' median start-up: creation → Ready (ms), over the pods that are Ready; undefined when
 * none is. Latency mode leaves it out of a waiting job's budget (a new slot takes jobs only then).
 */
export function medianPodStartMs(pods: Pod[]): number | undefined {
  return lowerMedian(
    pods
      .map((p) => {
        const ready = p.status?.conditions?.find((c) => c.type === "Ready" && c.status === "True");
        return Date.parse(ready?.lastTransitionTime ?? "") - Date.parse(p.metadata.creationTimestamp ?? "");
      })
      .filter((v) => Number.isFinite(v) && v >= 0),
  );
}

// The scaling half of a reconcile (the reconciler applies the structure: Deployment, HPA,
// status). Given one ScaleInput per pass it reads the workers' reports and floors the HPA at the
// busy pods (observe, before the HPA is applied), then makes the operator's own replica change:
// the decision, the cordons, the pod-deletion-costs, the scale write, the doorbell and the
// replica metrics (scale, after it).
import type { QueueCounts, WorkerReport } from "../../queue/index.ts";
import type { WorkerPool, WorkerPoolSpec } from "../apis/v1alpha1/types.ts";
import { rfc3339 } from "../../lib/time.ts";
import type { PoolState, ReconcileContext } from "../controllers/context.ts";
import { hpaScaleDecision, wantsHPA } from "../controllers/hpa.ts";
import type { Deployment, HPA } from "../controllers/objects.ts";
import type { OperatorMetrics } from "../metrics.ts";
import type { BacklogPoller } from "./backlog.ts";
import {
  currentReplicas,
  decideScale,
  hpaMinReplicasFloor,
  jobTimeOf,
  latencyNeedOf,
  medianPodStartMs,
  surgeBellOf,
  type ScaleDecision,
} from "./decide.ts";
import { busyPods, podsToCordon, updateDeletionCosts } from "./pods.ts";
import { applyScale } from "./scaleWrite.ts";

/** What scaling reads of one pass: built once, after the pool's Deployment was applied. */
export interface ScaleInput {
  key: string;
  pool: WorkerPool;
  /** The spec with defaults, as the user wrote it. */
  spec: WorkerPoolSpec;
  /** The most replicas: spec.scaling.maxReplicas, or the binding queue-control cap below it. */
  maxReplicas: number;
  state: PoolState;
  /** Our Deployment as applied this pass. */
  deployment: Deployment;
  /** The replica count decisions start from (currentReplicas). */
  replicas: number;
  /** The clock of every decision in this pass. */
  now: number;
  /** Fresh counts and when they were read; undefined when the backlog is not fresh. */
  counts?: QueueCounts;
  countsAt?: number;
  /** The workers' median job duration (ms) from the poll's reports, when any. */
  jobMs?: number;
  queuePaused: boolean;
  /** The counts were read with the pause in force (BacklogSample.pausedWhenCounted). */
  pauseSeenByPoll: boolean;
  /**
   * During a rollout scaling decides the pool's total; this is the stable Deployment's share of
   * it, so a scaling write never starts stable pods the split would stop a moment later.
   */
  stableShare?: (total: number) => number;
}

/** What observe found: the workers' reports, the pool's pods and how many run jobs (when read). */
export interface ScaleObservation {
  reports?: WorkerReport[];
  podNames?: string[];
  busyPods?: number;
}

/** Replicas held above what scaling wants for pods running jobs (0 when none). */
export function scaleInHeldReplicas(state: PoolState): number {
  const hold = state.scaler.scaleInHold;
  return hold ? Math.max(0, hold.replicas - hold.wanted) : 0;
}

/** The held scale-in's reason for status, with the pods cordoned meanwhile; undefined when none is held. */
export function scaleInHeldMessage(state: PoolState): string | undefined {
  if (scaleInHeldReplicas(state) === 0) return undefined;
  const cordoned = state.cordon?.pods ?? [];
  return `${state.scaler.scaleInHold!.message}${cordoned.length > 0 ? `; cordoned (claiming no new jobs): ${cordoned.join(", ")}` : ""}`;
}

export class Scaler {
  private readonly ctx: ReconcileContext;
  private readonly poller: BacklogPoller;
  private readonly metrics: OperatorMetrics;

  constructor(ctx: ReconcileContext, poller: BacklogPoller, metrics: OperatorMetrics) {
    this.ctx = ctx;
    this.poller = poller;
    this.metrics = metrics;
  }

  /**
   * Whenever the pool could shrink, the workers' busy/idle reports (one read, for the busy pods'
   * floor and the pod-deletion-costs). Unreadable: no floor, and our own scale-in waits
   * (markIdlePodsCheapest requires them).
   */
  async observe(input: ScaleInput): Promise<ScaleObservation> {
    const { spec } = input;
    if (spec.replicas !== undefined || spec.scaling.paused) return {};
    if (input.replicas <= Math.max(1, spec.scaling.minReplicas)) return {};
    let reports: WorkerReport[];
    try {
      reports = await this.ctx.workerReports(input.key);
    } catch (err) {
      this.ctx.log.debug({ pool: input.key, err: String(err) }, "cannot read worker reports");
      return {};
    }
    const podNames = this.ctx.podsOf(input.pool).map((p) => p.metadata.name ?? "");
    return { reports, podNames, busyPods: busyPods(podNames, reports, Date.now()) };
  }

  /**
   * The HPA's minReplicas in hpa mode: at least the busy pods while a scale-in is held; undefined
   * for the spec's. `hpa` is the HPA as it is now.
   */
  async hpaFloor(
    input: ScaleInput,
    seen: ScaleObservation,
    hpa: HPA | undefined,
  ): Promise<number | undefined> {
    const { spec, counts } = input;
    const hpaScales = wantsHPA(spec, input.queuePaused);
    let floor =
      hpaScales && counts !== undefined
        ? hpaMinReplicasFloor(input.state.scaler, {
            now: input.now,
            spec,
            current: input.deployment.spec?.replicas ?? 0,
            backlog: counts.backlog,
            busyPods: seen.busyPods,
            maxReplicas: input.maxReplicas,
          })
        : undefined;
    // Lowering a raised minReplicas lets the HPA scale in at its next sync: the pod that went idle
    // must be the cheapest by then, so when costs had to change the floor drops one reconcile later.
    const raised = hpa?.spec?.minReplicas ?? 0;
    if (hpaScales && seen.reports && raised > Math.max(1, spec.scaling.minReplicas, floor ?? 0)) {
      const patched = await updateDeletionCosts(
        this.ctx,
        input.key,
        input.pool,
        input.state,
        false,
        seen.reports,
      );
      if (patched > 0) floor = raised;
    }
    return floor;
  }

  /**
   * The operator's own replica change (0↔1, cooldown to zero, spec.replicas, direct mode) with
   * the cordons and deletion costs it needs, written; then the doorbell and the replica metrics.
   * Returns the Deployment as it is after, and when to look again (a cooldown to zero ending).
   */
  async scale(
    input: ScaleInput,
    seen: ScaleObservation,
    hpa: HPA | undefined,
  ): Promise<{ deployment: Deployment; requeueAfterMs?: number }> {
    this.observeHPAScale(input, hpa);
    let decision = this.decide(input, seen);
    await this.cordonSurplusPods(input, seen);
    if (!(await this.markIdlePodsCheapest(input, seen, decision))) decision = undefined;
    let deployment = input.deployment;
    if (decision) {
      const { key, pool, spec, state } = input;
      deployment = await applyScale(
        this.ctx,
        key,
        pool,
        spec,
        deployment,
        state,
        decision,
        input.stableShare,
      );
      if (input.counts) state.lastDecision = { ...state.lastDecision!, backlog: input.counts.backlog };
    }
    return { deployment, requeueAfterMs: this.afterScale(input, deployment) };
  }

  /**
   * A replica change since the last pass that the operator did not write — the HPA's, in hpa
   * mode — recorded as a decision (status.lastDecision and recentDecisions), so "Why it scaled"
   * lists every change the pool went through, not only the operator's 0 ↔ 1.
   */
  private observeHPAScale(input: ScaleInput, hpa: HPA | undefined): void {
    const { spec, state, replicas, now } = input;
    const seen = state.seenReplicas;
    state.seenReplicas = replicas;
    // (a first sight, after a start, is no change; the HPA neither scales from nor to zero)
    if (seen === undefined || seen === replicas || seen === 0 || replicas === 0) return;
    if (!wantsHPA(spec, input.queuePaused) || !hpa) return;
    const backlog = input.counts?.backlog;
    const { reason, message } = hpaScaleDecision(hpa, spec, seen, replicas, backlog);
    // When the HPA scaled, if its status already says so; else when the operator saw it.
    const scaledAt = Date.parse(hpa.status?.lastScaleTime ?? "");
    const previous = Date.parse(state.lastDecision?.at ?? "");
    const at = scaledAt > (Number.isFinite(previous) ? previous : 0) ? scaledAt : now;
    state.lastDecision = {
      replicas,
      from: seen,
      reason,
      message,
      at: rfc3339(at),
      ...(backlog !== undefined ? { backlog } : {}),
    };
    this.ctx.log.info(
      { pool: input.key, from: seen, to: replicas, reason, message },
      "the HPA scaled the worker Deployment",
    );
  }

  /** The replica change to make now (decideScale), and latency mode's gauges. */
  private decide(input: ScaleInput, seen: ScaleObservation): ScaleDecision | undefined {
    const { spec, replicas } = input;
    const decision = decideScale(input.state.scaler, {
      now: input.now,
      spec,
      current: replicas,
      statusReplicas: input.deployment.status?.replicas ?? replicas,
      counts: input.counts,
      queuePaused: input.queuePaused,
      pauseSeenByPoll: input.pauseSeenByPoll,
      countsAt: input.countsAt,
      jobMs: input.jobMs,
      podStartMs:
        spec.scaling.targetWaitSeconds !== undefined
          ? medianPodStartMs(this.ctx.podsOf(input.pool))
          : undefined,
      busyPods: seen.busyPods,
      maxReplicas: input.maxReplicas,
    });
    this.latencyGauges(input);
    return decision;
  }

  /** Latency mode's inputs as metrics: the arrival rate and the slots the wait target needs. */
  private latencyGauges(input: ScaleInput): void {
    const { spec, counts } = input;
    const labels = { namespace: input.pool.metadata.namespace, workerpool: input.pool.metadata.name };
    const m = this.metrics;
    const scaler = input.state.scaler;
    if (spec.scaling.targetWaitSeconds === undefined || spec.scaling.mode !== "direct") {
      m.arrivalRate.remove(labels);
      m.jobSeconds.remove(labels);
      m.neededSlots.remove(labels);
      return;
    }
    if (scaler.arrivals) m.arrivalRate.set(labels, scaler.arrivals.perSecond);
    const { jobMs } = jobTimeOf(scaler);
    if (jobMs !== undefined) m.jobSeconds.set(labels, jobMs / 1000);
    const need = counts ? latencyNeedOf(scaler, spec, counts, input.now) : undefined;
    if (need?.slots !== undefined) m.neededSlots.set(labels, need.slots);
  }

  /**
   * While a scale-in is held at the busy pods, the pods beyond what scaling wants claim nothing
   * new (podsToCordon), so they go idle and the scale-in can remove them. Written when the set
   * changes and refreshed before it lapses (the key expires: a cordon the operator stops
   * writing — a lost leader — lifts by itself); lifted when the hold ends.
   */
  private async cordonSurplusPods(input: ScaleInput, seen: ScaleObservation): Promise<void> {
    const { spec, state, now, key } = input;
    const last = state.cordon;
    const hold = state.scaler.scaleInHold;
    // (reports unreadable this pass: a held scale-in keeps the cordon it had)
    const want = !hold?.message
      ? []
      : seen.reports && seen.podNames
        ? podsToCordon(hold, seen.podNames, seen.reports, now, last?.pods)
        : (last?.pods ?? []);
    const lastingMs = Math.max(30, 3 * spec.scaling.pollSeconds) * 1000;
    const same = (last?.pods ?? []).join() === want.join();
    if (same && (want.length === 0 || last!.until - now > lastingMs / 2)) return;
    const until = now + lastingMs;
    try {
      await this.poller.cordon(key, want, until);
    } catch (err) {
      this.ctx.log.warn({ pool: key, err: String(err) }, "cannot write the pool's cordon");
      return;
    }
    state.cordon = want.length > 0 ? { pods: want, until } : undefined;
    if (same) return;
    if (want.length > 0)
      this.ctx.log.info(
        { pool: key, pods: want },
        "cordoned pods: they claim nothing new while the scale-in waits for their running jobs",
      );
    else this.ctx.log.info({ pool: key }, "cordon lifted: every pod claims jobs");
  }

  /**
   * Keeps idle pods the cheapest to delete before a scale-in. With no decision, best effort
   * whenever the pool could shrink (the HPA's next sync may scale it in at any time). Before our
   * own scale-in the costs are required, and if any had to change the scale-in waits for the
   * next reconcile, so the ReplicaSet controller's cache has seen them when it picks pods.
   * Returns whether the decision may be applied now.
   */
  private async markIdlePodsCheapest(
    input: ScaleInput,
    seen: ScaleObservation,
    decision: ScaleDecision | undefined,
  ): Promise<boolean> {
    const { spec, key, pool, state } = input;
    if (!decision) {
      if (
        spec.replicas === undefined &&
        !spec.scaling.paused &&
        input.replicas > Math.max(1, spec.scaling.minReplicas)
      ) {
        await updateDeletionCosts(this.ctx, key, pool, state, false, seen.reports);
      }
      return false;
    }
    if (decision.replicas < decision.from && decision.replicas > 0) {
      const patched = await updateDeletionCosts(this.ctx, key, pool, state, true, seen.reports);
      if (patched > 0) {
        this.ctx.log.debug(
          { pool: key, patched },
          "deletion costs updated; scaling in at the next reconcile",
        );
        return false;
      }
    }
    return true;
  }

  /** The doorbell and the replica metrics after the write; when a cooldown to zero ends (ms), if it is running. */
  private afterScale(input: ScaleInput, deployment: Deployment): number | undefined {
    const { spec, state, now, pool } = input;
    // (our own scale write counts before the cache shows it: a pass right after a scale-up must not
    // leave a bell for a pool that is starting)
    const replicas = currentReplicas(state, deployment, now);
    // (our own change is not the HPA's at the next pass)
    state.seenReplicas = replicas;
    // At zero, a job's arrival polls the pool at once (its doorbell) when the operator would act on
    // it; running in latency mode, a surge the pool's slots cannot start within the target does.
    this.poller.bell(
      input.key,
      replicas === 0 && spec.replicas === undefined && !spec.scaling.paused
        ? "asleep"
        : input.counts &&
            surgeBellOf(
              state.scaler,
              spec,
              input.counts,
              now,
              replicas,
              input.queuePaused,
              input.maxReplicas,
            ),
    );
    const labels = { namespace: pool.metadata.namespace, workerpool: pool.metadata.name };
    this.metrics.desiredReplicas.set(labels, replicas);
    this.metrics.currentReplicas.set(labels, deployment.status?.replicas ?? 0);
    this.metrics.readyReplicas.set(labels, deployment.status?.readyReplicas ?? 0);
    this.metrics.maxReplicas.set(labels, input.maxReplicas);
    this.metrics.scaleInHeld.set(labels, scaleInHeldReplicas(state));
    this.metrics.cordonedPods.set(labels, state.cordon?.pods.length ?? 0);
    const cooldownLeft = state.scaler.lastActiveAt + spec.scaling.cooldownSeconds * 1000 - now;
    if (replicas > 0 && cooldownLeft > 0 && spec.scaling.minReplicas === 0) return cooldownLeft + 50;
    return undefined;
  }
}

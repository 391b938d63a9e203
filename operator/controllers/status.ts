// The WorkerPool's status, computed from what the operator observed, and written only when it
// differs from what is stored (status of an idle pool is stable: no poll times, no counters
// that move by themselves). Conditions keep their lastTransitionTime while their status holds.
import { RESOURCES, apiVersionOf, resourcePath } from "../apis/coordinates.ts";
import {
  CONDITION_ROLLED_BACK,
  type Condition,
  type WorkerPool,
  type WorkerPoolSpec,
  type WorkerPoolStatus,
} from "../apis/v1alpha1/types.ts";
import { rfc3339 } from "../../lib/time.ts";
import {
  CONDITION_DEGRADED,
  CONDITION_PAUSED,
  CONDITION_READY,
  CONDITION_SCALING_ACTIVE,
} from "../apis/v1alpha1/types.ts";
import { RECENT_DECISIONS } from "../apis/v1alpha1/schema.ts";
import type { BacklogSample } from "../scaling/backlog.ts";
import type { LastDecision, PoolState, ReconcileContext } from "./context.ts";
import { deepEqual, subsetDiff } from "./diff.ts";
import { selectorString } from "./names.ts";
import type { Deployment, HPA } from "./objects.ts";
import { Reason, type ConditionReason, type Problem } from "./reasons.ts";

export interface StatusInput {
  pool: WorkerPool;
  spec: WorkerPoolSpec | undefined;
  deployment: Deployment | undefined;
  hpa: HPA | undefined;
  sample: BacklogSample | undefined;
  /** Whether the sample is recent enough to act on. */
  sampleUsable: boolean;
  problems: Problem[];
  lastDecision: LastDecision | undefined;
  now: Date;
  /** Queue control in force (the reconcile's queue-control step, queueControlStep.ts); undefined before the first read. */
  control?: NonNullable<WorkerPoolStatus["control"]>;
  /** Why a scale-in is held at the pods running jobs (holdForBusyPods); undefined when none is. */
  scaleInHeld?: string;
  /** The most replicas scaling goes to: spec.scaling.maxReplicas, or the binding cap below it. */
  maxReplicas?: number;
  /** The contract this pool published (publishContract step): null when none, undefined keeps the stored one. */
  contract?: WorkerPoolStatus["contract"] | null;
  /** The rollout (spec.rollout): null none, undefined keeps the stored one. */
  rollout?: WorkerPoolStatus["rollout"] | null;
}

type ConditionStatus = "True" | "False" | "Unknown";

function condition(
  type: string,
  status: ConditionStatus,
  reason: ConditionReason,
  message: string,
): Omit<Condition, "lastTransitionTime" | "observedGeneration"> {
  return { type, status, reason, message };
}

export function computeStatus(i: StatusInput): WorkerPoolStatus {
  const prev = i.pool.status ?? {};
  const dep = i.deployment;
  const desired = dep?.spec?.replicas ?? 0;
  const ready = dep?.status?.readyReplicas ?? 0;
  const replicas = dep?.status?.replicas ?? 0;
  const counts = i.sample?.lastGood?.counts;
  const generation = i.pool.metadata.generation;
  const control = i.control ?? prev.control;
  const conditions = [
    readyCondition(i, desired, ready),
    scalingCondition(i, desired),
    degradedCondition(i.problems),
    pausedCondition(control),
    ...rolledBackCondition(i.rollout === undefined ? prev.rollout : (i.rollout ?? undefined)),
  ].map((c) => {
    const old = prev.conditions?.find((p) => p.type === c.type);
    return {
      ...c,
      ...(generation !== undefined ? { observedGeneration: generation } : {}),
      lastTransitionTime: old && old.status === c.status ? old.lastTransitionTime : rfc3339(i.now),
    } as Condition;
  });

  const status: WorkerPoolStatus = {
    ...(generation !== undefined ? { observedGeneration: generation } : {}),
    conditions,
    replicas,
    readyReplicas: ready,
    desiredReplicas: desired,
    readyOfDesired: `${ready}/${desired}`,
    selector: selectorString(i.pool),
  };
  if (counts) {
    status.backlog = counts.backlog;
    status.inflight = counts.inflight;
    // A time, not an age: it changes only when the oldest waiting job does (no write per poll).
    if (counts.oldestReadyAt !== undefined) status.oldestReadySince = rfc3339(counts.oldestReadyAt);
  } else {
    if (prev.backlog !== undefined) status.backlog = prev.backlog;
    if (prev.inflight !== undefined) status.inflight = prev.inflight;
    if (prev.oldestReadySince !== undefined) status.oldestReadySince = prev.oldestReadySince;
  }
  if (control) status.control = control;
  const contract = i.contract === undefined ? prev.contract : (i.contract ?? undefined);
  if (contract) status.contract = contract;
  const rollout = i.rollout === undefined ? prev.rollout : (i.rollout ?? undefined);
  if (rollout) status.rollout = rollout;
  const decision = i.lastDecision ?? prev.lastDecision;
  if (decision) status.lastDecision = decision;
  const history = withDecision(prev.recentDecisions ?? [], i.lastDecision);
  if (history.length > 0) status.recentDecisions = history;
  const scaleTime = i.lastDecision?.at ?? prev.lastScaleTime;
  if (scaleTime) status.lastScaleTime = scaleTime;
  return status;
}

type NewCondition = ReturnType<typeof condition>;

/** RolledBack, while the pool has a rollout: True once its canary was rolled back or aborted. */
function rolledBackCondition(rollout: WorkerPoolStatus["rollout"]): NewCondition[] {
  if (!rollout?.phase) return [];
  const back = rollout.phase === "RolledBack" || rollout.phase === "Aborted";
  return [
    {
      type: CONDITION_ROLLED_BACK,
      status: back ? "True" : "False",
      reason: back
        ? rollout.phase === "Aborted"
          ? "RolloutAborted"
          : "RolledBack"
        : (rollout.phase ?? "Progressing"),
      message: back ? (rollout.message ?? "") : `rollout ${rollout.phase}`,
    } as NewCondition,
  ];
}

function degradedCondition(problems: Problem[]): NewCondition {
  return problems.length > 0
    ? condition(CONDITION_DEGRADED, "True", problems[0]!.reason, problems.map((p) => p.message).join("; "))
    : condition(CONDITION_DEGRADED, "False", Reason.AsExpected, "");
}

function readyCondition(i: StatusInput, desired: number, ready: number): NewCondition {
  if (i.problems.length > 0)
    return condition(CONDITION_READY, "False", i.problems[0]!.reason, i.problems[0]!.message);
  if (!i.deployment)
    return condition(
      CONDITION_READY,
      "False",
      Reason.DeploymentMissing,
      "the worker Deployment does not exist yet",
    );
  if (desired === 0)
    return condition(
      CONDITION_READY,
      "True",
      Reason.ScaledToZero,
      "no backlog: the pool is scaled to zero and starts a worker when jobs arrive",
    );
  if (ready > 0)
    return condition(CONDITION_READY, "True", Reason.Available, `${ready}/${desired} worker pods ready`);
  return condition(CONDITION_READY, "False", Reason.PodsNotReady, `0/${desired} worker pods ready`);
}

/** ScalingActive: why the pool is not scaling, or how it is. */
function scalingCondition(i: StatusInput, desired: number): NewCondition {
  const spec = i.spec;
  const off = (status: ConditionStatus, reason: ConditionReason, message: string) =>
    condition(CONDITION_SCALING_ACTIVE, status, reason, message);
  if (!spec) return off("False", Reason.InvalidSpec, "the spec is invalid");
  if (spec.replicas !== undefined)
    return off(
      "False",
      Reason.ManualReplicas,
      `spec.replicas pins the pool at ${spec.replicas}; autoscaling is off`,
    );
  if (spec.scaling.paused)
    return off("False", Reason.Paused, "spec.scaling.paused: the replica count is frozen");
  if (!i.sample) return off("Unknown", Reason.Polling, "the backlog has not been read yet");
  if (!i.sampleUsable)
    return off(
      "False",
      Reason.BacklogUnavailable,
      "the backlog could not be read recently: no scaling decisions until it can",
    );
  if (desired === 0)
    return off(
      "False",
      Reason.ScaledToZero,
      `waiting for backlog > ${spec.scaling.activationBacklog} to start a worker`,
    );
  const hpaActive = i.hpa?.status?.conditions?.find((c) => c.type === "ScalingActive");
  if (spec.scaling.mode === "hpa" && hpaActive?.status === "False" && hpaActive.reason !== "ScalingDisabled")
    return off(
      "False",
      Reason.HPAMetricFailed,
      `the HPA cannot scale: ${hpaActive.reason}: ${hpaActive.message ?? ""}`.slice(0, 1000),
    );
  if (i.scaleInHeld) return off("True", Reason.ScaleInHeld, i.scaleInHeld);
  const s = spec.scaling;
  const maxReplicas = i.maxReplicas ?? s.maxReplicas;
  return off(
    "True",
    s.mode === "hpa" ? Reason.HPA : Reason.Direct,
    s.targetWaitSeconds !== undefined && s.mode === "direct"
      ? `the operator keeps ${Math.max(1, s.minReplicas)}..${maxReplicas} replicas for jobs to start within ${s.targetWaitSeconds}s (latency mode)`
      : `${s.mode === "hpa" ? "the HPA" : "the operator"} keeps ${Math.max(1, s.minReplicas)}..${maxReplicas} replicas at ${s.targetBacklogPerReplica} backlog per replica`,
  );
}

function pausedCondition(control: WorkerPoolStatus["control"]): NewCondition {
  return control?.paused
    ? condition(
        CONDITION_PAUSED,
        "True",
        Reason.QueuePaused,
        `the queue is paused (${control.source === "spec" ? "spec.paused" : "conveyor pause"}): no claims; the pool drains to its running jobs, then minReplicas`,
      )
    : condition(CONDITION_PAUSED, "False", Reason.QueueRunning, "");
}

/** The history with `decision` appended (once: a decision is its time), the oldest dropped past RECENT_DECISIONS. */
export function withDecision(
  history: NonNullable<WorkerPoolStatus["recentDecisions"]>,
  decision: LastDecision | undefined,
): NonNullable<WorkerPoolStatus["recentDecisions"]> {
  if (!decision || history.some((d) => d.at === decision.at && d.replicas === decision.replicas))
    return history;
  return [...history, decision].slice(-RECENT_DECISIONS);
}

/** The status concern: write (server-side apply on /status) only when it differs from the stored one. */
export async function reconcileStatus(
  ctx: ReconcileContext,
  key: string,
  pool: WorkerPool,
  status: WorkerPoolStatus,
): Promise<void> {
  if (deepEqual(status, pool.status ?? {})) return;
  ctx.log.debug(
    {
      pool: key,
      changed: [
        ...new Set([...subsetDiff(status, pool.status ?? {}), ...subsetDiff(pool.status ?? {}, status)]),
      ],
    },
    "writing status",
  );
  const path = resourcePath(RESOURCES.workerPools, {
    namespace: pool.metadata.namespace,
    name: pool.metadata.name,
    subresource: "status",
  });
  const res = await ctx.client.apply<WorkerPool>(path, {
    apiVersion: apiVersionOf(RESOURCES.workerPools),
    kind: RESOURCES.workerPools.kind,
    metadata: { name: pool.metadata.name, namespace: pool.metadata.namespace },
    status,
  });
  ctx.poolOverlay.set(key, res);
}

/** Events for problems that just appeared (Warning, with the reason) and once when all are gone. */
export async function announceProblems(
  ctx: ReconcileContext,
  pool: WorkerPool,
  state: PoolState,
  problems: Problem[],
): Promise<void> {
  if (!state.announced) {
    // After a restart or failover: what the status already shows was announced before.
    const degraded = pool.status?.conditions?.find(
      (c) => c.type === CONDITION_DEGRADED && c.status === "True",
    );
    state.announced = new Set(degraded ? [degraded.reason] : []);
  }
  const current = new Set(problems.map((p) => p.reason));
  const key = `${pool.metadata.namespace}/${pool.metadata.name}`;
  for (const p of problems) {
    if (state.announced.has(p.reason)) continue;
    ctx.log.warn({ pool: key, reason: p.reason, message: p.message }, "pool degraded");
    await ctx.events.record(pool, "Warning", p.reason, p.message);
  }
  if (state.announced.size > 0 && current.size === 0) {
    ctx.log.info({ pool: key }, "pool recovered");
    await ctx.events.record(
      pool,
      "Normal",
      Reason.Recovered,
      `no longer degraded (was: ${[...state.announced].join(", ")})`,
    );
  }
  state.announced = current;
}

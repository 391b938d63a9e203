// The rollout step of the WorkerPool reconcile (spec.rollout, docs/rollouts.md): a template change
// runs as a canary Deployment `<pool>-canary` beside the stable one, judged step by step on both
// versions' jobs (judge.ts), then promoted (the stable Deployment gets the new template) or rolled
// back (the canary scaled to zero: its pods drain as at any scale-in). Everything the rollout
// needs to resume — the step, when it started, both versions' hashes and the counters at the
// step's start — lives in status.rollout: an operator restart or a new leader carries on.
import { rfc3339 } from "../../lib/time.ts";
import {
  countersFromFields,
  countersSince,
  countersToFields,
  emptyCounters,
  type VersionCounters,
} from "../../queue/versions.ts";
import { RESOURCES, resourcePath } from "../apis/coordinates.ts";
import type { WorkerPool, WorkerPoolSpec, WorkerPoolStatus } from "../apis/v1alpha1/types.ts";
import type { ObjectCache } from "../kube/controller.ts";
import { Result } from "../kube/result.ts";
import type { ReconcileContext } from "../controllers/context.ts";
import {
  canaryName,
  deploymentOptions,
  reconcileDeployment,
  TEMPLATE_VERSION_ANNOTATION,
  templateVersion,
} from "../controllers/deployment.ts";
import { isControlledBy } from "../controllers/names.ts";
import type { Deployment } from "../controllers/objects.ts";
import type { PoolPass } from "../controllers/poolPass.ts";
import { Reason, type EventReason } from "../controllers/reasons.ts";
import type { BacklogPoller } from "../scaling/backlog.ts";
import { judge, type Judgement } from "./judge.ts";

export type RolloutStatus = NonNullable<WorkerPoolStatus["rollout"]>;

/** The annotation `conveyor rollout promote|abort` writes: `<action>:<canary hash>`. */
export const ROLLOUT_ACTION_ANNOTATION = "conveyor.dev/rollout-action";

/** How often a step in progress is looked at (its counters read, its judgement made). */
const JUDGE_EVERY_MS = 2_000;

/**
 * hpa mode (the HPA sizes the stable Deployment): the canary's pods beside `stable` pods, so that
 * its share of all pods is w% (at least one while the pool has any).
 */
export function canaryReplicas(stable: number, weight: number): number {
  if (stable <= 0) return 0;
  return Math.max(1, Math.round((stable * weight) / (100 - weight)));
}

/**
 * The pool's replicas split at weight w%: the canary gets w% of them, at least one while the pool
 * has any, and the stable version keeps at least one (it is the yardstick), so a pool of one
 * replica runs two pods during a rollout.
 */
export function splitReplicas(total: number, weight: number): { stable: number; canary: number } {
  if (total <= 0) return { stable: 0, canary: 0 };
  const canary = Math.max(1, Math.round((total * weight) / 100));
  return { stable: Math.max(1, total - canary), canary };
}

/** Whether the HPA sizes the stable Deployment (the canary then follows it instead of splitting the total). */
function hpaSized(spec: WorkerPoolSpec): boolean {
  return spec.replicas === undefined && spec.scaling.mode === "hpa";
}

/** What the reconcile does with the stable Deployment this pass. */
export interface RolloutPlan {
  /** Apply the spec's template to the stable Deployment (false while a canary or a rolled-back version differs from it). */
  applyStable: boolean;
  /** The version the stable Deployment's workers count under (when applied). */
  stableVersion?: string;
  /** The spec's template version. */
  desired: string;
  status: RolloutStatus | null;
  /** Events to record once the pass has acted. */
  started?: string;
}

export class RolloutStep {
  private readonly ctx: ReconcileContext;
  private readonly poller: BacklogPoller;
  private readonly deployments: ObjectCache<Deployment>;

  constructor(ctx: ReconcileContext, poller: BacklogPoller, deployments: ObjectCache<Deployment>) {
    this.ctx = ctx;
    this.poller = poller;
    this.deployments = deployments;
  }

  /** Where the rollout stands before the Deployments are applied: a new one starts here. */
  plan(pass: PoolPass, stable: Deployment | undefined): RolloutPlan | undefined {
    const spec = pass.spec!;
    if (!spec.rollout) return undefined;
    const desired = templateVersion(pass.pool, spec, deploymentOptions(this.ctx));
    const prev = pass.pool.status?.rollout;
    const stableHash =
      prev?.stableHash ??
      stable?.metadata.annotations?.[TEMPLATE_VERSION_ANNOTATION] ??
      (stable ? undefined : desired);
    const now = rfc3339(pass.now);
    // First sight of a pool with a rollout: its Deployment's template is taken as stable.
    if (stableHash === undefined || stableHash === desired) {
      const status: RolloutStatus = {
        ...(prev ?? {}),
        stableHash: desired,
        phase: prev?.phase === "Progressing" ? "Aborted" : (prev?.phase ?? "Promoted"),
        summary: prev?.phase === "Progressing" ? "aborted" : (prev?.summary ?? "stable"),
      };
      if (prev?.phase === "Progressing") status.message = "the template went back to the stable version";
      return { applyStable: true, stableVersion: desired, desired, status };
    }
    if (prev?.canaryHash === desired && prev.phase !== "Promoted")
      return { applyStable: false, desired, status: prev };
    // A new version (again, during a rollout: it starts over from the stable version).
    const status: RolloutStatus = {
      phase: "Progressing",
      step: 0,
      weight: spec.rollout.canary.steps[0]!.weight,
      stableHash,
      canaryHash: desired,
      startedAt: now,
      stepStartedAt: now,
      verdict: "wait",
      message: "starting",
      summary: summaryOf(spec, 0),
    };
    return {
      applyStable: false,
      desired,
      status,
      started: `template ${stableHash} → ${desired}: canary at ${status.weight}% (step 1/${spec.rollout.canary.steps.length})${prev?.phase === "Progressing" ? `; the rollout of ${prev.canaryHash} starts over` : ""}`,
    };
  }

  /**
   * The canary once the stable Deployment is applied: judged, its step advanced, promoted or
   * rolled back, and its Deployment sized to the step's weight (or removed).
   */
  async run(pass: PoolPass, plan: RolloutPlan | undefined): Promise<void> {
    const { pool } = pass;
    const key = canaryKey(pass.key);
    const live = this.ctx.deploymentOverlay.get(
      key,
      this.deployments.get(pool.metadata.namespace, canaryName(pool)),
    );
    if (!plan) {
      // (no spec.rollout: a canary left from one goes)
      if (live && isControlledBy(live, pool)) await this.deleteCanary(pass, live);
      if (pool.status?.rollout) pass.rollout = null;
      return;
    }
    let status = plan.status;
    if (plan.started) announce(pass, "Normal", Reason.RolloutStarted, plan.started);
    if (status?.phase === "Progressing") status = await this.judgeStep(pass, status);
    pass.rollout = status;
    const labels = { namespace: pool.metadata.namespace, workerpool: pool.metadata.name };
    this.ctx.metrics.rolloutWeight.set(labels, status?.phase === "Progressing" ? (status.weight ?? 0) : 0);
    if (status?.phase !== "Progressing")
      for (const version of ["stable", "canary"])
        this.ctx.metrics.rolloutFailureRate.remove({ ...labels, version });
    if (status?.phase === "Progressing") {
      const stableReplicas = pass.deployment?.spec?.replicas ?? 0;
      const weight = status.weight ?? 0;
      const hpa = hpaSized(pass.spec!);
      // Otherwise a new canary starts at 0 and split() sizes it this same pass, from the pool's
      // total: created with its share while the stable still held the whole total, the pool read
      // as one pod more, split that way (a second canary pod) and was cut back a pass later.
      const want = hpa ? canaryReplicas(stableReplicas, weight) : 0;
      const d = await reconcileDeployment(this.ctx, pass.key, pool, pass.spec!, live, undefined, {
        canary: true,
        version: status.canaryHash,
        replicas: want,
        overlayKey: key,
      });
      // (otherwise split() sizes it, once scaling has decided the pool's total)
      if (hpa) await this.scaleCanary(pass, d, want);
      pass.canary = this.ctx.deploymentOverlay.get(key, d);
      pass.result = Result.sooner(pass.result, Result.requeueAfter(JUDGE_EVERY_MS));
    } else if (live && isControlledBy(live, pool)) {
      if (status?.phase === "RolledBack" || status?.phase === "Aborted")
        await this.scaleCanary(pass, live, 0);
      else await this.deleteCanary(pass, live);
    }
  }

  /**
   * What scaling sees during a rollout it sizes: the stable Deployment carrying both Deployments'
   * replicas and pods, so it decides the pool's total (undefined: the stable Deployment as it is).
   */
  scalingView(pass: PoolPass): Deployment | undefined {
    const stable = pass.deployment;
    if (!stable || !pass.canary || pass.rollout?.phase !== "Progressing" || hpaSized(pass.spec!))
      return undefined;
    const c = pass.canary;
    return {
      ...stable,
      spec: { ...stable.spec, replicas: (stable.spec?.replicas ?? 0) + (c.spec?.replicas ?? 0) },
      status: {
        ...stable.status,
        replicas: (stable.status?.replicas ?? 0) + (c.status?.replicas ?? 0),
        readyReplicas: (stable.status?.readyReplicas ?? 0) + (c.status?.readyReplicas ?? 0),
      },
    } as Deployment;
  }

  /**
   * After scaling: the total it decided (the view's replicas, or its write) split between the
   * two Deployments by the step's weight. `scaled` is the view as scaling left it.
   */
  async split(pass: PoolPass, scaled: Deployment): Promise<Deployment> {
    const view = pass.scaleView;
    const stable = pass.deployment;
    if (!view || !stable || !pass.canary) return scaled;
    const total = scaled.spec?.replicas ?? 0;
    const { stable: s, canary: c } = splitReplicas(total, pass.rollout?.weight ?? 0);
    await this.scaleCanary(pass, pass.canary, c);
    // (a scaling decision wrote the stable share of its total already: stableShare)
    const written = total !== view.spec?.replicas ? this.stableShare(pass, total) : stable.spec?.replicas;
    const real: Deployment = {
      ...stable,
      metadata: scaled.metadata,
      spec: { ...stable.spec, replicas: s },
    };
    if (written !== s) {
      const path = resourcePath(RESOURCES.deployments, {
        namespace: pass.pool.metadata.namespace,
        name: pass.pool.metadata.name,
        subresource: "scale",
      });
      await this.ctx.client.mergePatch(path, { spec: { replicas: s } });
      this.ctx.deploymentOverlay.set(pass.key, real);
      this.ctx.log.info(
        { pool: pass.key, stable: s, canary: c },
        "split the pool's replicas with the canary",
      );
    }
    return real;
  }

  /** The stable Deployment's share of the pool's total at the step's weight. */
  stableShare(pass: PoolPass, total: number): number {
    return splitReplicas(total, pass.rollout?.weight ?? 0).stable;
  }

  /** Judge the step on the counters since it began; a promotion, a rollback, or the figures so far. */
  private async judgeStep(pass: PoolPass, status: RolloutStatus): Promise<RolloutStatus> {
    const spec = pass.spec!;
    const canary = spec.rollout!.canary;
    let all: Map<string, VersionCounters> | undefined;
    try {
      all = await this.poller.versionCounters(pass.key);
    } catch (err) {
      this.ctx.log.warn({ pool: pass.key, err: String(err) }, "cannot read the versions' counters");
    }
    if (!all) return status;
    const stableNow = all.get(status.stableHash!) ?? emptyCounters();
    const canaryNow = all.get(status.canaryHash!) ?? emptyCounters();
    if (!status.baseline)
      return {
        ...status,
        baseline: { stable: countersToFields(stableNow), canary: countersToFields(canaryNow) },
        stepStartedAt: rfc3339(pass.now),
      };
    const action = pass.pool.metadata.annotations?.[ROLLOUT_ACTION_ANNOTATION];
    const labels = { namespace: pass.pool.metadata.namespace, workerpool: pass.pool.metadata.name };
    const step = canary.steps[status.step ?? 0]!;
    const j = judge({
      stable: countersSince(stableNow, countersFromFields(status.baseline.stable)),
      canary: countersSince(canaryNow, countersFromFields(status.baseline.canary)),
      analysis: canary.analysis as Parameters<typeof judge>[0]["analysis"],
      elapsedMs: pass.now - Date.parse(status.stepStartedAt ?? rfc3339(pass.now)),
      holdMs: (step.holdSeconds ?? 0) * 1000,
      stableIdle: (pass.deployment?.spec?.replicas ?? 0) === 0,
    });
    this.ctx.metrics.rolloutFailureRate.set({ ...labels, version: "stable" }, j.stable.failureRate);
    this.ctx.metrics.rolloutFailureRate.set({ ...labels, version: "canary" }, j.canary.failureRate);
    if (action === `abort:${status.canaryHash}`) return this.rollBack(pass, status, j, "Aborted");
    if (action === `promote:${status.canaryHash}`)
      return this.promote(pass, status, j, "by conveyor rollout promote");
    if (j.verdict === "rollback") return this.rollBack(pass, status, j, "RolledBack");
    if (j.verdict === "wait") return { ...status, verdict: j.verdict, message: j.message };
    const next = (status.step ?? 0) + 1;
    if (next >= canary.steps.length)
      return this.promote(pass, status, j, `after ${canary.steps.length} step(s)`);
    const weight = canary.steps[next]!.weight;
    announce(
      pass,
      "Normal",
      Reason.RolloutStepPassed,
      `step ${next}/${canary.steps.length} passed, canary at ${weight}%: ${j.message}`,
    );
    return {
      ...status,
      step: next,
      weight,
      stepStartedAt: rfc3339(pass.now),
      baseline: { stable: countersToFields(stableNow), canary: countersToFields(canaryNow) },
      verdict: j.verdict,
      message: j.message,
      summary: summaryOf(spec, next),
    };
  }

  /** The canary's template becomes the stable Deployment's (applied now); the canary goes. */
  private async promote(
    pass: PoolPass,
    status: RolloutStatus,
    j: Judgement,
    how: string,
  ): Promise<RolloutStatus> {
    const message = `${status.canaryHash} promoted ${how}: ${j.message}`;
    pass.deployment = await reconcileDeployment(
      this.ctx,
      pass.key,
      pass.pool,
      pass.spec!,
      pass.deployment,
      undefined,
      {
        version: status.canaryHash,
      },
    );
    announce(pass, "Normal", Reason.RolloutPromoted, message);
    this.ctx.log.info({ pool: pass.key, version: status.canaryHash }, "rollout promoted");
    await this.audit(
      pass,
      "rolloutPromote",
      { version: status.canaryHash, how, step: status.step ?? 0 },
      message,
    );
    return {
      phase: "Promoted",
      stableHash: status.canaryHash,
      canaryHash: status.canaryHash,
      startedAt: status.startedAt,
      verdict: "promote",
      message,
      summary: "promoted",
    };
  }

  /** The canary scaled to zero (its pods drain); the pool stays on the stable template. */
  private async rollBack(
    pass: PoolPass,
    status: RolloutStatus,
    j: Judgement,
    phase: "RolledBack" | "Aborted",
  ): Promise<RolloutStatus> {
    const message =
      phase === "Aborted"
        ? `${status.canaryHash} aborted by conveyor rollout abort at step ${(status.step ?? 0) + 1}: ${j.message}`
        : `${status.canaryHash} rolled back at step ${(status.step ?? 0) + 1} (${status.weight}%): ${j.message}`;
    announce(pass, "Warning", phase === "Aborted" ? Reason.RolloutAborted : Reason.RolledBack, message);
    this.ctx.log.warn(
      { pool: pass.key, version: status.canaryHash, reason: j.reason },
      "rollout rolled back",
    );
    await this.audit(
      pass,
      phase === "Aborted" ? "rolloutAbort" : "rolloutRollback",
      {
        version: status.canaryHash,
        step: status.step ?? 0,
        weight: status.weight ?? null,
        reason: j.reason ?? null,
      },
      message,
    );
    return {
      ...status,
      phase,
      verdict: phase === "Aborted" ? "abort" : "rollback",
      message,
      summary: phase === "Aborted" ? "aborted" : "rolled back",
    };
  }

  /**
   * The decision in the pipeline's audit trail. Best effort: a rollback that waited for the audit
   * stream would leave a failing canary running; a lost entry is logged.
   */
  private async audit(
    pass: PoolPass,
    operation: string,
    params: Record<string, unknown>,
    message: string,
  ): Promise<void> {
    const pool = `${pass.pool.metadata.namespace}/${pass.pool.metadata.name}`;
    await this.poller
      .audit(
        pass.key,
        { verb: "admin", operation, target: `${pass.spec!.queue} pool:${pool}`, params },
        { status: 200, jobs: null, result: { message } },
      )
      .catch((err: unknown) =>
        this.ctx.log.warn(
          { pool: pass.key, operation, err: String(err) },
          "audit: the decision was not written",
        ),
      );
  }

  private async scaleCanary(pass: PoolPass, d: Deployment, replicas: number): Promise<void> {
    if ((d.spec?.replicas ?? 0) === replicas) return;
    const path = resourcePath(RESOURCES.deployments, {
      namespace: pass.pool.metadata.namespace,
      name: canaryName(pass.pool),
      subresource: "scale",
    });
    await this.ctx.client.mergePatch(path, { spec: { replicas } });
    this.ctx.deploymentOverlay.set(canaryKey(pass.key), { ...d, spec: { ...d.spec, replicas } });
    this.ctx.log.info({ pool: pass.key, from: d.spec?.replicas, to: replicas }, "scaled canary Deployment");
  }

  private async deleteCanary(pass: PoolPass, d: Deployment): Promise<void> {
    const path = resourcePath(RESOURCES.deployments, {
      namespace: pass.pool.metadata.namespace,
      name: canaryName(pass.pool),
    });
    await this.ctx.client.delete(path);
    this.ctx.deploymentOverlay.delete(canaryKey(pass.key));
    this.ctx.log.info({ pool: pass.key, replicas: d.spec?.replicas }, "deleted canary Deployment");
  }
}

/**
 * A rollout's Event, recorded once the pass has written the status that says it happened
 * (flushRolloutEvents): a pass that fails before is made again, and would announce it twice.
 */
function announce(pass: PoolPass, type: "Normal" | "Warning", reason: EventReason, message: string): void {
  (pass.rolloutEvents ??= []).push({ type, reason, message });
}

/** The rollout's Events of a pass, after its status write. */
export async function flushRolloutEvents(ctx: ReconcileContext, pass: PoolPass): Promise<void> {
  for (const e of pass.rolloutEvents ?? []) await ctx.events.record(pass.pool, e.type, e.reason, e.message);
  pass.rolloutEvents = undefined;
}

function canaryKey(poolKey: string): string {
  return `${poolKey}-canary`;
}

function summaryOf(spec: WorkerPoolSpec, step: number): string {
  const steps = spec.rollout!.canary.steps;
  return `step ${step + 1}/${steps.length} ${steps[step]!.weight}%`;
}

export type { WorkerPool };

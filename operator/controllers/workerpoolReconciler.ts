// The WorkerPool reconcile: one level-triggered, idempotent pass per key that brings the worker
// Deployment, the HPA, the replica count and the status to what the spec and the backlog say —
// with no API call at all when they already are. `reconcile` is the list of steps; each step
// reads and adds to the pass (the problems found, the result) and skips itself when what it
// needs is missing. A new concern is a new step in that list. The pass is poolPass.ts; the steps
// that are not structure (queue control, records, the contract) are modules of their own beside
// this one (queueControlStep.ts, recordsStep.ts, contractStep.ts, layoutStep.ts).
//
// Every replica observes (credentials, the backlog poll); only the leader acts.
import { describeRedisUrl, type QueueCounts, type ResourceState } from "../../queue/index.ts";
import { CONDITION_DEGRADED, withDefaults, type WorkerPool } from "../apis/v1alpha1/types.ts";
import { apiMessage, isUserError } from "../kube/client.ts";
import type { ObjectCache, Reconciler } from "../kube/controller.ts";
import { splitKey } from "../kube/keys.ts";
import { Result } from "../kube/result.ts";
import type { OperatorMetrics } from "../metrics.ts";
import type { BacklogPoller } from "../scaling/backlog.ts";
import { currentReplicas, newPoolScaler } from "../scaling/decide.ts";
import { Scaler, scaleInHeldMessage } from "../scaling/scaler.ts";
import { poolAttributes, withSpan } from "../tracing.ts";
import { isFresh } from "./backlogMetric.ts";
import type { ConfigMapWatch } from "./contractSource.ts";
import { publishContract } from "./contractStep.ts";
import type { PoolState, ReconcileContext } from "./context.ts";
import { effectiveRedisUrl, reconcileDeployment } from "./deployment.ts";
import { reconcileHPA } from "./hpa.ts";
import { finalizeLayoutStep } from "./layoutStep.ts";
import { isControlledBy } from "./names.ts";
import type { Deployment, HPA } from "./objects.ts";
import { PoolGauges } from "./poolGauges.ts";
import { maxReplicasOf, type PoolPass, type StepDeps } from "./poolPass.ts";
import { medianJobMs, replicaSlots } from "./queueControl.ts";
import { applyQueueControl } from "./queueControlStep.ts";
import { Reason } from "./reasons.ts";
import { switchRecordsOn } from "./recordsStep.ts";
import { SecretReader } from "./secretReader.ts";
import { flushRolloutEvents, RolloutStep } from "../rollout/step.ts";
import { announceProblems, computeStatus, reconcileStatus } from "./status.ts";
import { validateSpec as specProblems } from "./validate.ts";

/** Consecutive failed polls before a pool is Degraded/RedisUnreachable (a blip is not). */
const UNREACHABLE_AFTER_FAILURES = 3;
/** Re-check a pool whose Secrets are missing or unreadable this often (they may be created). */
const SECRET_PROBLEM_RECHECK_MS = 15_000;
/** Re-check a pool whose Deployment or HPA the API server refused (the user must change something). */
const APPLY_FAILED_RECHECK_MS = 60_000;

export interface WorkerPoolCaches {
  pools: ObjectCache<WorkerPool>;
  deployments: ObjectCache<Deployment>;
  hpas: ObjectCache<HPA>;
}

export class WorkerPoolReconciler implements Reconciler {
  private readonly states = new Map<string, PoolState>();
  private readonly ctx: ReconcileContext;
  private readonly caches: WorkerPoolCaches;
  private readonly poller: BacklogPoller;
  private readonly secrets: SecretReader;
  private readonly configMaps: ConfigMapWatch;
  private readonly metrics: OperatorMetrics;
  private readonly isLeader: () => boolean;
  private readonly scaler: Scaler;
  private readonly gauges: PoolGauges;
  /** What the steps in their own modules (queue control, records, the contract) use. */
  private readonly steps: StepDeps;
  private readonly rollout: RolloutStep;

  constructor(deps: {
    ctx: ReconcileContext;
    caches: WorkerPoolCaches;
    poller: BacklogPoller;
    secrets: SecretReader;
    configMaps: ConfigMapWatch;
    metrics: OperatorMetrics;
    isLeader: () => boolean;
  }) {
    this.ctx = deps.ctx;
    this.caches = deps.caches;
    this.poller = deps.poller;
    this.secrets = deps.secrets;
    this.configMaps = deps.configMaps;
    this.metrics = deps.metrics;
    this.isLeader = deps.isLeader;
    this.scaler = new Scaler(deps.ctx, deps.poller, deps.metrics);
    this.gauges = new PoolGauges(deps.metrics);
    this.steps = { ctx: deps.ctx, poller: deps.poller, gauges: this.gauges, configMaps: deps.configMaps };
    this.rollout = new RolloutStep(deps.ctx, deps.poller, deps.caches.deployments);
  }

  /** One reconcile of a pool, inside a `reconcile WorkerPool` span while tracing. */
  async reconcile(key: string): Promise<Result> {
    const { namespace, name } = splitKey(key);
    return withSpan("reconcile WorkerPool", poolAttributes(namespace, name), () => this.reconcilePool(key));
  }

  private async reconcilePool(key: string): Promise<Result> {
    const pool = this.currentPool(key);
    // Owned objects go with the pool (garbage collector, owner references).
    if (!pool) return this.forget(key);
    const pass = this.begin(key, pool);
    // observe (every replica)
    this.validateSpec(pass);
    await this.resolveSecrets(pass);
    if (!this.isLeader()) return pass.result;
    // act (the leader)
    this.readBacklog(pass);
    await applyQueueControl(this.steps, pass);
    await switchRecordsOn(this.steps, pass);
    await publishContract(this.steps, pass);
    await this.ensureDeployment(pass);
    await this.observeScaling(pass);
    await this.ensureHPA(pass);
    await this.scale(pass);
    await finalizeLayoutStep({ ...this.steps, pools: this.caches.pools }, pass);
    await this.announceProblems(pass);
    await this.updateStatus(pass);
    await flushRolloutEvents(this.ctx, pass);
    return pass.result;
  }

  /** The pool as this replica last wrote or saw it; undefined once it is gone or going. */
  private currentPool(key: string): WorkerPool | undefined {
    const { namespace, name } = splitKey(key);
    const pool = this.ctx.poolOverlay.get(key, this.caches.pools.get(namespace, name));
    return pool && !pool.metadata.deletionTimestamp ? pool : undefined;
  }

  private begin(key: string, pool: WorkerPool): PoolPass {
    return {
      key,
      pool,
      state: this.state(key),
      problems: [],
      result: Result.done(),
      now: Date.now(),
      backlogFresh: false,
      ownsDeployment: false,
      queuePaused: false,
      pauseSeenByPoll: false,
    };
  }

  /** The spec with its defaults, checked for what the CRD schema cannot say. */
  private validateSpec(pass: PoolPass): void {
    try {
      const spec = withDefaults(pass.pool.spec);
      const invalid = specProblems(spec);
      if (invalid.length === 0) pass.spec = spec;
      else pass.problems.push({ reason: Reason.InvalidSpec, message: invalid.join("; ") });
    } catch (err) {
      pass.problems.push({ reason: Reason.InvalidSpec, message: `spec: ${(err as Error).message}` });
    }
  }

  /**
   * The Redis password and PostgreSQL URL Secrets; the backlog poll follows the pool's Redis
   * with them (and stops when they, or the spec, are unusable).
   */
  private async resolveSecrets(pass: PoolPass): Promise<void> {
    const { spec, key } = pass;
    if (!spec) return this.poller.remove(key);
    const namespace = pass.pool.metadata.namespace;
    let password: string | undefined;
    let redisReadable = true;
    if (spec.redis.secretRef) {
      const r = await this.secrets.value(namespace, spec.redis.secretRef, "Redis password", true);
      if (r.problem) {
        pass.problems.push(r.problem);
        redisReadable = false;
      } else password = r.value;
    }
    if (spec.database) {
      const r = await this.secrets.value(namespace, spec.database.secretRef, "PostgreSQL URL");
      if (r.problem) pass.problems.push(r.problem);
    }
    if (redisReadable) {
      this.poller.upsert({
        key,
        queue: spec.queue,
        url: effectiveRedisUrl(spec),
        password,
        pollSeconds: spec.scaling.pollSeconds,
        // Latency mode sizes by the workers' median job duration: their reports with each poll.
        reports: spec.scaling.targetWaitSeconds !== undefined,
        maxSlots: spec.scaling.maxReplicas * replicaSlots(spec),
        resources: (spec.resources?.length ?? 0) > 0,
      });
    } else {
      this.poller.remove(key);
    }
    if (pass.problems.length > 0)
      pass.result = Result.sooner(pass.result, Result.requeueAfter(SECRET_PROBLEM_RECHECK_MS));
  }

  /** The latest backlog sample, whether it is fresh, and RedisUnreachable after repeated failures. */
  private readBacklog(pass: PoolPass): void {
    pass.now = Date.now();
    const sample = this.poller.sample(pass.key);
    pass.sample = sample;
    pass.backlogFresh = isFresh(sample, pass.spec, pass.now);
    if (pass.backlogFresh) {
      pass.counts = sample!.lastGood!.counts;
      pass.countsAt = sample!.lastGood!.at;
    }
    if (sample?.reports) pass.jobMs = medianJobMs(sample.reports, pass.now);
    const spec = pass.spec;
    if (!spec || !sample?.error || sample.failures < UNREACHABLE_AFTER_FAILURES) return;
    // The message names the first error of the outage: error texts vary from poll to poll
    // and a status that changes with them would be written every poll.
    const shown = pass.pool.status?.conditions?.find(
      (c) => c.type === CONDITION_DEGRADED && c.status === "True" && c.reason === Reason.RedisUnreachable,
    );
    pass.problems.push({
      reason: Reason.RedisUnreachable,
      message:
        shown?.message.split("; ").find((m) => m.startsWith("cannot read queue")) ??
        `cannot read queue ${spec.queue} at ${describeRedisUrl(effectiveRedisUrl(spec))}: ${sample.error} (replicas held at the last decision until it can be read)`,
    });
  }

  /** Apply the worker Deployment when it changed or drifted; never touch one that is not ours. */
  private async ensureDeployment(pass: PoolPass): Promise<void> {
    const { key, pool } = pass;
    const { namespace, name } = pool.metadata;
    pass.deployment = this.ctx.deploymentOverlay.get(key, this.caches.deployments.get(namespace, name));
    pass.hpa = this.ctx.hpaOverlay.get(key, this.caches.hpas.get(namespace, name));
    if (!pass.spec) return;
    if (pass.deployment && !isControlledBy(pass.deployment, pool)) {
      pass.problems.push({
        reason: Reason.DeploymentConflict,
        message: `Deployment ${name} exists and is not controlled by this WorkerPool; rename one of them`,
      });
      return;
    }
    // (with spec.rollout, a new template goes to a canary first: the stable Deployment keeps its own)
    const plan = this.rollout.plan(pass, pass.deployment);
    await this.reportingUserErrors(pass, "Deployment", async () => {
      const backlog = pass.counts?.backlog;
      if (!plan || plan.applyStable || !pass.deployment)
        pass.deployment = await reconcileDeployment(
          this.ctx,
          key,
          pool,
          pass.spec!,
          pass.deployment,
          backlog,
          {
            version: plan?.stableVersion ?? plan?.status?.stableHash,
          },
        );
      pass.ownsDeployment = true;
    });
    if (pass.ownsDeployment)
      await this.reportingUserErrors(pass, "canary Deployment", () => this.rollout.run(pass, plan));
  }

  /** Scaling's input for this pass, once our Deployment is applied, and the workers' reports. */
  private async observeScaling(pass: PoolPass): Promise<void> {
    const { spec } = pass;
    if (!spec || !pass.ownsDeployment || !pass.deployment) return;
    // (during a rollout scaling decides the pool's total: both Deployments' replicas)
    pass.scaleView = this.rollout.scalingView(pass);
    const deployment = pass.scaleView ?? pass.deployment;
    pass.scale = {
      key: pass.key,
      pool: pass.pool,
      spec,
      maxReplicas: maxReplicasOf(pass),
      state: pass.state,
      deployment,
      replicas: currentReplicas(pass.state, deployment, pass.now),
      now: pass.now,
      counts: pass.counts,
      countsAt: pass.countsAt,
      jobMs: pass.jobMs,
      queuePaused: pass.queuePaused,
      pauseSeenByPoll: pass.pauseSeenByPoll,
      stableShare: pass.scaleView ? (total) => this.rollout.stableShare(pass, total) : undefined,
    };
    pass.seen = await this.scaler.observe(pass.scale);
  }

  /** In hpa mode, apply the HPA (its minReplicas at least the busy pods while a scale-in is held); otherwise delete ours. */
  private async ensureHPA(pass: PoolPass): Promise<void> {
    if (!pass.spec || !pass.ownsDeployment) return;
    const floor = pass.scale ? await this.scaler.hpaFloor(pass.scale, pass.seen!, pass.hpa) : undefined;
    await this.reportingUserErrors(pass, "HorizontalPodAutoscaler", async () => {
      pass.hpa = await reconcileHPA(
        this.ctx,
        pass.key,
        pass.pool,
        pass.spec!,
        pass.hpa,
        pass.problems,
        pass.queuePaused,
        floor,
        maxReplicasOf(pass),
      );
    });
  }

  /** The operator's own replica change, written (the scaler); re-check when a cooldown to zero ends. */
  private async scale(pass: PoolPass): Promise<void> {
    if (!pass.scale) return;
    const { deployment, requeueAfterMs } = await this.scaler.scale(pass.scale, pass.seen!, pass.hpa);
    pass.deployment = pass.scaleView ? await this.rollout.split(pass, deployment) : deployment;
    if (requeueAfterMs !== undefined)
      pass.result = Result.sooner(pass.result, Result.requeueAfter(requeueAfterMs));
  }

  /** A Warning Event for each problem that just appeared, a Recovered one when all are gone. */
  private async announceProblems(pass: PoolPass): Promise<void> {
    this.metrics.degraded.set(
      { namespace: pass.pool.metadata.namespace, workerpool: pass.pool.metadata.name },
      pass.problems.length > 0 ? 1 : 0,
    );
    await announceProblems(this.ctx, pass.pool, pass.state, pass.problems);
  }

  /** Write the status when it differs from the stored one. */
  private async updateStatus(pass: PoolPass): Promise<void> {
    const status = computeStatus({
      pool: pass.pool,
      spec: pass.spec,
      deployment: pass.deployment,
      hpa: pass.hpa,
      sample: pass.sample,
      sampleUsable: pass.backlogFresh,
      problems: pass.problems,
      lastDecision: pass.state.lastDecision,
      now: new Date(pass.now),
      control: pass.control,
      scaleInHeld: scaleInHeldMessage(pass.state),
      ...(pass.spec ? { maxReplicas: maxReplicasOf(pass) } : {}),
      contract: pass.contract,
      rollout: pass.rollout,
    });
    await reconcileStatus(this.ctx, pass.key, pass.pool, status);
  }

  /** Runs an apply; an error the user must fix becomes an ApplyFailed problem and a slow re-check. */
  private async reportingUserErrors(pass: PoolPass, what: string, apply: () => Promise<void>): Promise<void> {
    try {
      await apply();
    } catch (err) {
      if (!isUserError(err)) throw err;
      pass.problems.push({ reason: Reason.ApplyFailed, message: `${what}: ${apiMessage(err)}` });
      pass.result = Result.sooner(pass.result, Result.requeueAfter(APPLY_FAILED_RECHECK_MS));
    }
  }

  /** The pool's in-memory state, created on first sight. */
  state(key: string): PoolState {
    let s = this.states.get(key);
    if (!s) {
      s = { scaler: newPoolScaler(Date.now()), costsWritten: new Map() };
      this.states.set(key, s);
    }
    return s;
  }

  /** The pool is gone: drop its state, its poll and its metric series. */
  private forget(key: string): Result {
    this.states.delete(key);
    this.poller.remove(key);
    this.configMaps.forget(key);
    this.gauges.forget(key);
    return Result.done();
  }

  /** Per-queue gauges of a pool at a poll. */
  queueGauges(key: string, queue: string, counts: QueueCounts, at: number): void {
    this.gauges.queue(key, queue, counts, at);
  }

  /** The pipeline's resources at a poll. */
  resourceGauges(key: string, resources: ResourceState[], now = Date.now()): void {
    this.gauges.resources(key, resources, now);
  }
}

// The WorkerPool reconcile: one level-triggered, idempotent pass per key that brings the worker
// Deployment, the HPA, the replica count and the status to what the spec and the backlog say —
// with no API call at all when they already are. `reconcile` is the list of steps; each step
// reads and adds to the pass (the problems found, the result) and skips itself when what it
// needs is missing. A new concern is a new step in that list.
//
// Every replica observes (credentials, the backlog poll); only the leader acts.
import {
  compileContract,
  contractHash,
  describeRedisUrl,
  formatRateLimit,
  pipelineOf,
  type Contract,
  type QueueCounts,
  type ResourceState,
} from "../../queue/index.ts";
import {
  CONDITION_DEGRADED,
  withDefaults,
  type WorkerPool,
  type WorkerPoolSpec,
  type WorkerPoolStatus,
} from "../apis/v1alpha1/types.ts";
import { apiMessage, isUserError } from "../kube/client.ts";
import type { ObjectCache, Reconciler } from "../kube/controller.ts";
import { splitKey } from "../kube/keys.ts";
import { Result } from "../kube/result.ts";
import type { OperatorMetrics } from "../metrics.ts";
import type { BacklogPoller, BacklogSample } from "../scaling/backlog.ts";
import { rfc3339 } from "../../lib/time.ts";
import { isFresh } from "./backlogMetric.ts";
import { resolveContract, type ConfigMapWatch } from "./contractSource.ts";
import type { PoolState, ReconcileContext } from "./context.ts";
import { effectiveRedisUrl, reconcileDeployment } from "./deployment.ts";
import { reconcileHPA, wantsHPA } from "./hpa.ts";
import { isControlledBy } from "./names.ts";
import type { Deployment, HPA } from "./objects.ts";
import { Reason, type Problem } from "./reasons.ts";
import { currentReplicas, jobTimeOf, newPoolScaler } from "../scaling/decide.ts";
import { Scaler, scaleInHeldMessage, type ScaleInput, type ScaleObservation } from "../scaling/scaler.ts";
import {
  bindingCap,
  controlChanges,
  controlSummary,
  groupAdmissionCap,
  medianJobMs,
  rateLimitCap,
  replicaSlots,
  resourceCap,
  resourceChanges,
  specControl,
  specResources,
  type ReplicaCap,
} from "./queueControl.ts";
import { PoolGauges } from "./poolGauges.ts";
import { SecretReader } from "./secretReader.ts";
import { announceProblems, computeStatus, reconcileStatus } from "./status.ts";
import { validateSpec as specProblems } from "./validate.ts";
import { poolAttributes, withSpan } from "../tracing.ts";

/** Consecutive failed polls before a pool is Degraded/RedisUnreachable (a blip is not). */
const UNREACHABLE_AFTER_FAILURES = 3;
/** Re-check a pool whose Secrets are missing or unreadable this often (they may be created). */
const SECRET_PROBLEM_RECHECK_MS = 15_000;
/** Re-check a pool whose Deployment or HPA the API server refused (the user must change something). */
const APPLY_FAILED_RECHECK_MS = 60_000;
/** Try again this soon when job records could not be switched on. */
const RECORDS_RETRY_MS = 5_000;
/** Re-check a pool whose contract could not be resolved, read or published (besides the ConfigMap's watch). */
const CONTRACT_RETRY_MS = 15_000;

/** What one reconcile of one pool has found so far. */
export interface PoolPass {
  key: string;
  pool: WorkerPool;
  state: PoolState;
  /** The spec with defaults; undefined when invalid (an InvalidSpec problem says why). */
  spec?: WorkerPoolSpec;
  problems: Problem[];
  result: Result;
  /** When the backlog was looked at: the clock of every decision in this pass. */
  now: number;
  sample?: BacklogSample;
  /** The sample's last good reading is recent enough to act on. */
  backlogFresh: boolean;
  /** That reading's counts and when they were read, when fresh. */
  counts?: QueueCounts;
  countsAt?: number;
  /** The workers' median job duration (ms) from the sample's reports, when any. */
  jobMs?: number;
  deployment?: Deployment;
  hpa?: HPA;
  /** The Deployment is ours and was applied: the HPA and the scale may follow. */
  ownsDeployment: boolean;
  /** The binding queue-control cap below spec.scaling.maxReplicas, when one binds. */
  replicaCap?: number;
  /** Queue control in force (status.control); `queuePaused` drives scaling. */
  control?: NonNullable<WorkerPoolStatus["control"]>;
  queuePaused: boolean;
  /** The counts were read with the pause in force (BacklogSample.pausedWhenCounted). */
  pauseSeenByPoll: boolean;
  /** status.contract as this pass leaves it: null none, undefined as stored. */
  contract?: WorkerPoolStatus["contract"] | null;
  /** What scaling reads of this pass (our Deployment applied), and what it observed of the pods. */
  scale?: ScaleInput;
  seen?: ScaleObservation;
}

/** The most replicas scaling goes to this pass (a valid spec): the spec's, or the binding cap below it. */
function maxReplicasOf(pass: PoolPass): number {
  return pass.replicaCap ?? pass.spec!.scaling.maxReplicas;
}

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
    await this.queueControl(pass);
    await this.switchRecordsOn(pass);
    await this.publishContract(pass);
    await this.ensureDeployment(pass);
    await this.observeScaling(pass);
    await this.ensureHPA(pass);
    await this.scale(pass);
    await this.announceProblems(pass);
    await this.updateStatus(pass);
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

  /**
   * spec.paused / spec.rateLimit / spec.resources into Redis (the spec wins while set); then
   * what is in force shapes scaling: a paused queue drains the pool (no HPA meanwhile), a rate
   * limit or the resources cap maxReplicas at the replicas they can feed, the lower binding (HPA
   * and direct mode alike). Events on changes.
   */
  private async queueControl(pass: PoolPass): Promise<void> {
    const { spec, sample, pool } = pass;
    if (!spec || !pass.backlogFresh || !sample?.control) return;
    const want = specControl(spec);
    const change = controlChanges(want, sample.control);
    if (change.paused !== undefined || change.rateLimit) await this.poller.applyControl(pass.key, change);
    const have = { ...sample.control, ...change };
    // spec.resources into the pipeline's Redis, only what differs (ids and limits, no secret).
    const budgets = specResources(spec);
    const budgetChanges = sample.resources ? resourceChanges(budgets, sample.resources) : [];
    if (budgetChanges.length > 0) await this.poller.applyResources(pass.key, budgetChanges);
    const managed = want.paused !== undefined || want.rateLimit !== undefined;
    pass.queuePaused = have.paused;
    pass.pauseSeenByPoll = sample.pausedWhenCounted === true;
    // The lowest cap binds: the rate limit's, the resources', the groups'.
    // (the job time as of the last poll's decision: this poll's is observed in decideReplicas)
    const job = jobTimeOf(pass.state.scaler, pass.jobMs);
    const cap: ReplicaCap | undefined = bindingCap([
      have.rateLimit ? rateLimitCap(have.rateLimit, job, spec) : undefined,
      budgets.length > 0 ? resourceCap(budgets, job, spec) : undefined,
      groupAdmissionCap(pass.counts!, sample.groups, spec),
    ]);
    if (cap && cap.cap < spec.scaling.maxReplicas) pass.replicaCap = cap.cap;
    pass.control = {
      paused: have.paused,
      ...(have.rateLimit ? { rateLimit: formatRateLimit(have.rateLimit) } : {}),
      source: managed ? "spec" : "redis",
      ...(cap ? { replicaCap: cap.cap, capReason: cap.reason, capBy: cap.by } : {}),
      summary: controlSummary(
        have.paused,
        have.rateLimit,
        cap?.cap,
        cap?.by,
        budgets.map((b) => b.name),
      ),
    };
    this.gauges.cap(pass.key, cap);
    // An Event when what is in force changes (not on every pass).
    const before = pool.status?.control;
    if (before && before.paused !== have.paused)
      await this.ctx.events.record(
        pool,
        "Normal",
        have.paused ? Reason.QueuePaused : Reason.QueueRunning,
        have.paused
          ? `queue ${spec.queue} paused: scaling down to the running jobs, then minReplicas ${spec.scaling.minReplicas}`
          : `queue ${spec.queue} resumed: scaling on the backlog again`,
      );
    // (the groups' cap follows the running jobs from poll to poll: an Event when it starts to
    // bind, not at every move; status.control has the current one)
    const capReason = {
      rateLimit: Reason.RateLimited,
      resources: Reason.BudgetLimited,
      groups: Reason.GroupLimited,
    };
    if (
      cap &&
      (cap.by === "groups"
        ? before?.capBy !== "groups"
        : before?.replicaCap !== cap.cap || (before?.capBy ?? "rateLimit") !== cap.by)
    )
      await this.ctx.events.record(
        pool,
        "Normal",
        capReason[cap.by],
        `replicas capped at ${cap.cap}: ${cap.reason}`,
      );
  }

  /**
   * A pool with spec.database records its pipeline from the first job on, whoever enqueues it:
   * job records are switched on in its Redis before the Deployment (so before any pod starts).
   * Asked once per pipeline and operator process; a log line and an Event when this switched them.
   */
  private async switchRecordsOn(pass: PoolPass): Promise<void> {
    const { spec, state, pool } = pass;
    if (!spec?.database) return;
    const pipeline = pipelineOf(spec.queue);
    // (Redis unreachable at the last poll: the next good poll re-checks the pool)
    if (state.recordsOn === pipeline || pass.sample?.error) return;
    let switched: boolean | undefined;
    try {
      switched = await this.poller.enableRecords(pass.key);
    } catch (err) {
      this.ctx.log.warn({ pool: pass.key, pipeline, err: String(err) }, "cannot switch job records on yet");
      pass.result = Result.sooner(pass.result, Result.requeueAfter(RECORDS_RETRY_MS));
      return;
    }
    if (switched === undefined) return; // not polled: its Redis Secret is the problem reported
    state.recordsOn = pipeline;
    if (!switched) return;
    this.ctx.log.info({ pool: pass.key, pipeline }, "job records switched on for the pool's pipeline");
    await this.ctx.events.record(
      pool,
      "Normal",
      Reason.RecordsOn,
      `job records switched on for pipeline ${pipeline}: every job is recorded from its enqueue (spec.database)`,
    );
  }

  /**
   * spec.contract into the queue's Redis: resolved (inline, or its ConfigMap, watched), compiled,
   * and published when the hash in force differs or another source set it; an invalid or missing
   * one is a problem and leaves the one in force. spec.contract removed: the contract this pool
   * published is deleted. Before the Deployment, so the first pod finds it.
   */
  private async publishContract(pass: PoolPass): Promise<void> {
    const { spec, pool, state, key } = pass;
    if (!spec) return;
    const { namespace, name } = pool.metadata;
    const ref = spec.contract?.configMapRef;
    this.configMaps.reference(key, ref ? { namespace, name: ref.name } : undefined);
    const published = pool.status?.contract;
    if (!spec.contract && !published) return;
    // (Redis unreachable: RedisUnreachable says so; the next good poll re-checks)
    if (pass.sample?.error) return;
    const owner = `operator:${namespace}/${name}`;
    try {
      if (!spec.contract) {
        const deleted = await this.poller.deleteContractOf(key, owner);
        if (deleted === undefined) return; // not polled: its Redis Secret is the problem reported
        pass.contract = null;
        state.contractChecked = undefined;
        if (!deleted) return;
        this.metrics.contractPublishes.inc({ namespace, workerpool: name, action: "deleted" });
        this.ctx.log.info({ pool: key, queue: spec.queue, hash: published!.hash }, "contract deleted");
        await this.ctx.events.record(
          pool,
          "Normal",
          Reason.ContractDeleted,
          `contract ${published!.hash} deleted from queue ${spec.queue} (spec.contract removed)`,
        );
        return;
      }
      const resolved = resolveContract(spec, namespace, this.configMaps);
      if (!resolved || resolved.pending) return;
      if (resolved.problem) {
        pass.problems.push(resolved.problem);
        pass.result = Result.sooner(pass.result, Result.requeueAfter(CONTRACT_RETRY_MS));
        return;
      }
      const hash = contractHash(resolved.contract as Contract);
      if (state.contractChecked?.hash !== hash) {
        let error: string | undefined;
        try {
          compileContract(resolved.contract, hash);
        } catch (err) {
          error = (err as Error).message;
        }
        state.contractChecked = { hash, error };
      }
      const invalid = state.contractChecked.error;
      if (invalid !== undefined) {
        pass.problems.push({
          reason: Reason.ContractInvalid,
          message: `spec.contract (${resolved.source}): ${invalid}; the queue's contract in force is unchanged`,
        });
        return;
      }
      const inForce = await this.poller.contractInForce(key);
      if (inForce === undefined) return; // not polled: its Redis Secret is the problem reported
      const status = { hash, source: resolved.source };
      if (inForce?.hash === hash && inForce.source === owner) {
        if (published?.hash !== hash || published.source !== resolved.source)
          pass.contract = { ...status, publishedAt: published?.publishedAt ?? rfc3339(pass.now) };
        return;
      }
      await this.poller.publishContract(key, resolved.contract as Contract, owner);
      pass.contract = { ...status, publishedAt: rfc3339(Date.now()) };
      this.metrics.contractPublishes.inc({ namespace, workerpool: name, action: "published" });
      const replaced = inForce ? ` (replacing ${inForce.hash} set by ${inForce.source || "unknown"})` : "";
      this.ctx.log.info(
        { pool: key, queue: spec.queue, hash, source: resolved.source, replaced: inForce?.hash },
        "contract published",
      );
      await this.ctx.events.record(
        pool,
        "Normal",
        Reason.ContractPublished,
        `contract ${hash} (${resolved.source}) published to queue ${spec.queue}${replaced}`,
      );
    } catch (err) {
      this.ctx.log.warn(
        { pool: key, queue: spec.queue, err: String(err) },
        "cannot publish the contract yet",
      );
      pass.result = Result.sooner(pass.result, Result.requeueAfter(CONTRACT_RETRY_MS));
    }
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
    await this.reportingUserErrors(pass, "Deployment", async () => {
      const backlog = pass.counts?.backlog;
      pass.deployment = await reconcileDeployment(this.ctx, key, pool, pass.spec!, pass.deployment, backlog);
      pass.ownsDeployment = true;
    });
  }

  /** Scaling's input for this pass, once our Deployment is applied, and the workers' reports. */
  private async observeScaling(pass: PoolPass): Promise<void> {
    const { spec, deployment } = pass;
    if (!spec || !pass.ownsDeployment || !deployment) return;
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
    pass.deployment = deployment;
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

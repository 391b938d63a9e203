// The WorkerPool controller: informers on WorkerPools and on the Deployments, HPAs and pods it
// owns feed a de-duplicating, rate-limited work queue; one level-triggered, idempotent
// reconcile per key brings the Deployment, the HPA, the replica count and the status to what
// the spec and the backlog say — with no API call at all when they already are.
//
// Every replica observes (informers, backlog polls, the external metric); only the leader
// writes (the client's write gate refuses otherwise).
import type { Logger } from "pino";
import { describeRedisUrl, type QueueCounts } from "../../queue/index.ts";
import { GROUP, PLURAL, VERSION } from "../apis/v1alpha1/schema.ts";
import { withDefaults, type WorkerPool, type WorkerPoolSpec } from "../apis/v1alpha1/types.ts";
import {
  NotLeaderError,
  apiCode,
  apiMessage,
  apiPath,
  type KubeClient,
  type KubeObject,
} from "../kube/client.ts";
import { Informer } from "../kube/informer.ts";
import { WorkQueue, runWorkers } from "../kube/workqueue.ts";
import type { OperatorMetrics } from "../metrics.ts";
import type { MetricLookup } from "../metricsapi/server.ts";
import { BacklogPoller, RedisConnections, type BacklogSample } from "../scaling/backlog.ts";
import type { Pod, PoolState, ReconcileContext } from "./context.ts";
import { effectiveRedisUrl, reconcileDeployment, type Deployment } from "./deployment.ts";
import { deepEqual } from "./diff.ts";
import { EventRecorder } from "./events.ts";
import { reconcileHPA, type HPA } from "./hpa.ts";
import { MANAGED_BY, POOL_LABEL, isControlledBy, ownerKey, poolKey, splitKey } from "./names.ts";
import { WriteOverlay } from "./overlay.ts";
import { newPoolScaler, reconcileScale } from "./scaling.ts";
import { announceProblems, computeStatus, reconcileStatus, type Problem } from "./status.ts";
import { validateSpec } from "./validate.ts";
import { poolAttributes, withSpan } from "../tracing.ts";

export interface ControllerOptions {
  /** Client whose writes are gated on leadership. */
  client: KubeClient;
  /** Namespaces to watch; undefined or empty = all. */
  namespaces?: string[];
  defaultImage: string;
  identity: string;
  isLeader: () => boolean;
  log: Logger;
  metrics: OperatorMetrics;
  /** Concurrent reconciles (different keys). Default 4. */
  workers?: number;
  /** Informer relist period. Default 10 min. */
  relistMs?: number;
  /** How long a read Secret is trusted. Default 60 s (10 s when missing). */
  secretTtlMs?: number;
}

interface SecretEntry {
  at: number;
  data: Record<string, string> | null;
  error?: string;
}

const WORKERPOOLS = { group: GROUP, version: VERSION, plural: PLURAL };
const DEPLOYMENTS = { group: "apps", version: "v1", plural: "deployments" };
const HPAS = { group: "autoscaling", version: "v2", plural: "horizontalpodautoscalers" };
const PODS = { group: "", version: "v1", plural: "pods" };
const SECRETS = { group: "", version: "v1", plural: "secrets" };

/** Backlog readings older than this are not acted on (and not served to the HPA). */
export function freshnessMs(spec: WorkerPoolSpec | undefined): number {
  return Math.max(3 * (spec?.scaling.pollSeconds ?? 5) * 1000, 15_000);
}

/** Consecutive failed polls before a pool is Degraded/RedisUnreachable (a blip is not). */
const UNREACHABLE_AFTER_FAILURES = 3;

export class WorkerPoolController {
  private readonly o: ControllerOptions;
  private readonly log: Logger;
  private readonly client: KubeClient;
  private readonly queue: WorkQueue;
  private readonly pools: Informer<WorkerPool>[] = [];
  private readonly deployments: Informer<Deployment>[] = [];
  private readonly hpas: Informer<HPA>[] = [];
  private readonly pods: Informer<Pod>[] = [];
  private readonly states = new Map<string, PoolState>();
  private readonly secrets = new Map<string, SecretEntry>();
  private readonly ctx: ReconcileContext;
  readonly conns: RedisConnections;
  readonly poller: BacklogPoller;
  private running: Promise<void> | undefined;

  constructor(o: ControllerOptions) {
    this.o = o;
    this.log = o.log.child({ controller: "workerpool" });
    this.client = o.client;
    this.queue = new WorkQueue({
      onDepth: (d) => o.metrics.queueDepth.set(d),
      onAdd: () => o.metrics.queueAdds.inc(),
    });
    this.conns = new RedisConnections(this.log);
    this.poller = new BacklogPoller(
      this.conns,
      { onSample: (key, s) => this.onSample(key, s), shouldSweep: () => o.isLeader() },
      { log: this.log },
    );
    this.ctx = {
      client: o.client,
      log: this.log,
      metrics: o.metrics,
      events: new EventRecorder(o.client, o.identity, this.log),
      defaultImage: o.defaultImage,
      poolOverlay: new WriteOverlay<WorkerPool>(),
      deploymentOverlay: new WriteOverlay<Deployment>(),
      hpaOverlay: new WriteOverlay<HPA>(),
      deletedHPAs: new Map(),
      podsOf: (pool) =>
        this.pods
          .flatMap((i) => i.list(pool.metadata.namespace))
          .filter(
            (p) => p.metadata.labels?.[POOL_LABEL] === pool.metadata.name && !p.metadata.deletionTimestamp,
          ),
      workerReports: (key) => this.poller.workers(key),
    };

    const namespaces = o.namespaces && o.namespaces.length > 0 ? o.namespaces : [undefined];
    const managed = `app.kubernetes.io/managed-by=${MANAGED_BY}`;
    const common = { log: this.log, metrics: o.metrics, relistMs: o.relistMs };
    for (const ns of namespaces) {
      const poolInf = new Informer<WorkerPool>(this.client, {
        ...common,
        path: apiPath({ ...WORKERPOOLS, namespace: ns }),
      });
      poolInf.on({
        add: (p) => this.enqueue(poolKey(p)),
        update: (p, old) => {
          // Status-only updates (our own writes) change no generation: nothing to do for them.
          if (
            p.metadata.generation !== old.metadata.generation ||
            !deepEqual(p.metadata.labels, old.metadata.labels) ||
            p.metadata.deletionTimestamp
          ) {
            this.enqueue(poolKey(p));
          }
        },
        delete: (p) => this.enqueue(poolKey(p)),
        synced: () => this.enqueueAll(),
      });
      this.pools.push(poolInf);
      const owned = <T extends KubeObject>(inf: Informer<T>) => {
        const onOwned = (obj: T) => {
          const k = ownerKey(obj);
          if (k) this.enqueue(k);
        };
        inf.on({ add: onOwned, update: onOwned, delete: onOwned });
        return inf;
      };
      this.deployments.push(
        owned(
          new Informer<Deployment>(this.client, {
            ...common,
            path: apiPath({ ...DEPLOYMENTS, namespace: ns }),
            labelSelector: managed,
          }),
        ),
      );
      this.hpas.push(
        owned(
          new Informer<HPA>(this.client, {
            ...common,
            path: apiPath({ ...HPAS, namespace: ns }),
            labelSelector: managed,
          }),
        ),
      );
      this.pods.push(
        new Informer<Pod>(this.client, {
          ...common,
          path: apiPath({ ...PODS, namespace: ns }),
          labelSelector: managed,
        }),
      );
    }
  }

  private all(): Informer<KubeObject>[] {
    return [
      ...this.pools,
      ...this.deployments,
      ...this.hpas,
      ...this.pods,
    ] as unknown as Informer<KubeObject>[];
  }

  async start(): Promise<void> {
    for (const inf of this.all()) inf.start();
    await Promise.all(this.all().map((i) => i.waitForSync()));
    this.log.info({ pools: this.listPools().length }, "caches synced");
    this.running = runWorkers(
      this.queue,
      this.o.workers ?? 4,
      (key) => this.reconcileKey(key),
      (key, err, retryInMs) => {
        this.o.metrics.queueRetries.inc();
        this.log.warn(
          { pool: key, err: apiMessage(err), code: apiCode(err), retryInMs },
          "reconcile failed; retrying",
        );
      },
    );
  }

  async stop(): Promise<void> {
    this.queue.shutDown();
    await Promise.all(this.all().map((i) => i.stop()));
    this.poller.stop();
    this.conns.closeAll();
    await this.running;
  }

  /** Leadership gained: re-check every pool now (a standby observed, it never acted). */
  onStartedLeading(): void {
    this.enqueueAll();
  }

  enqueue(key: string): void {
    this.queue.add(key);
  }

  private enqueueAll(): void {
    for (const p of this.listPools()) this.enqueue(poolKey(p));
  }

  listPools(): WorkerPool[] {
    return this.pools.flatMap((i) => i.list());
  }

  private pick<T extends KubeObject>(infs: Informer<T>[], namespace: string, name: string): T | undefined {
    for (const inf of infs) {
      const o = inf.get(namespace, name);
      if (o) return o;
    }
    return undefined;
  }

  getPool(namespace: string, name: string): WorkerPool | undefined {
    return this.pick(this.pools, namespace, name);
  }

  private onSample(key: string, sample: BacklogSample): void {
    const { namespace, name } = splitKey(key);
    const labels = { namespace, workerpool: name };
    // Every replica tracks when a pool last had work, so a new leader knows the cooldown's start.
    if (sample.counts && (sample.counts.backlog > 0 || sample.counts.inflight > 0))
      this.state(key).scaler.lastActiveAt = sample.at;
    if (sample.counts) {
      this.o.metrics.pollErrors.inc(labels, 0); // the series exists (at 0) before the first failure
      this.o.metrics.backlog.set(labels, sample.counts.backlog);
      this.o.metrics.inflight.set(labels, sample.counts.inflight);
      if (sample.queue) this.queueGauges(key, labels, sample.queue, sample.counts, sample.at);
    } else {
      this.o.metrics.pollErrors.inc(labels);
    }
    // Only the leader acts on samples; standbys just keep serving the metric.
    if (this.o.isLeader()) this.enqueue(key);
  }

  /** The external metric for one pool: its backlog, if read recently. */
  metricLookup(namespace: string, name: string): MetricLookup {
    const pool = this.getPool(namespace, name);
    if (!pool) return { kind: "not-found", message: `no WorkerPool ${namespace}/${name}` };
    const sample = this.poller.sample(`${namespace}/${name}`);
    let spec: WorkerPoolSpec | undefined;
    try {
      spec = withDefaults(pool.spec);
    } catch {
      spec = undefined;
    }
    const good = sample?.lastGood;
    if (!good)
      return {
        kind: "unavailable",
        message: sample?.error
          ? `backlog of ${namespace}/${name} unavailable: ${sample.error}`
          : `backlog of ${namespace}/${name} not read yet`,
      };
    if (Date.now() - good.at > freshnessMs(spec))
      return {
        kind: "unavailable",
        message: `backlog of ${namespace}/${name} is stale: ${sample?.error ?? "no recent poll"}`,
      };
    return { kind: "ok", value: good.counts.backlog, at: good.at };
  }

  /** Per-queue gauges of a pool (the queue can change with the spec: the old series goes). */
  private queueGauges(
    key: string,
    labels: { namespace: string; workerpool: string },
    queue: string,
    counts: QueueCounts,
    at: number,
  ): void {
    const m = this.o.metrics;
    const prev = this.gaugeQueues.get(key);
    if (prev !== undefined && prev !== queue) {
      m.oldestReadyAge.remove({ ...labels, queue: prev });
      m.deadLetters.remove({ ...labels, queue: prev });
    }
    this.gaugeQueues.set(key, queue);
    const age = counts.oldestReadyAt !== undefined ? Math.max(0, at - counts.oldestReadyAt) / 1000 : 0;
    m.oldestReadyAge.set({ ...labels, queue }, age);
    m.deadLetters.set({ ...labels, queue }, counts.dead);
  }
  private readonly gaugeQueues = new Map<string, string>();

  private state(key: string): PoolState {
    let s = this.states.get(key);
    if (!s) {
      s = { scaler: newPoolScaler(Date.now()), costsWritten: new Map() };
      this.states.set(key, s);
    }
    return s;
  }

  private forget(key: string): void {
    this.states.delete(key);
    this.poller.remove(key);
    const { namespace, name } = splitKey(key);
    const m = this.o.metrics;
    for (const g of [
      m.backlog,
      m.inflight,
      m.desiredReplicas,
      m.readyReplicas,
      m.currentReplicas,
      m.maxReplicas,
      m.degraded,
      m.pollErrors,
    ])
      g.remove({ namespace, workerpool: name });
    const queue = this.gaugeQueues.get(key);
    this.gaugeQueues.delete(key);
    if (queue !== undefined)
      for (const g of [m.oldestReadyAge, m.deadLetters]) g.remove({ namespace, workerpool: name, queue });
  }

  private async reconcileKey(key: string): Promise<number | undefined> {
    const end = this.o.metrics.reconcileDuration.startTimer();
    const { namespace, name } = splitKey(key);
    try {
      const after = await withSpan("reconcile WorkerPool", poolAttributes(namespace, name), async (span) => {
        const requeue = await this.reconcile(key);
        span?.setAttribute("conveyor.requeue_ms", requeue ?? 0);
        return requeue;
      });
      this.o.metrics.reconciles.inc({ result: after === undefined ? "success" : "requeue" });
      return after;
    } catch (err) {
      if (err instanceof NotLeaderError) {
        this.o.metrics.reconciles.inc({ result: "not-leader" });
        return undefined;
      }
      this.o.metrics.reconciles.inc({ result: "error" });
      this.o.metrics.reconcileErrors.inc({ concern: "reconcile", reason: String(apiCode(err) ?? "error") });
      throw err;
    } finally {
      end();
    }
  }

  /** A value from a Secret (cached); a problem when it cannot be read. */
  private async secretValue(
    namespace: string,
    ref: { name: string; key: string },
    what: string,
  ): Promise<{ value?: string; problem?: Problem }> {
    const ttl = this.o.secretTtlMs ?? 60_000;
    const id = `${namespace}/${ref.name}`;
    if (this.secrets.size > 256) {
      for (const [k, v] of this.secrets) if (Date.now() - v.at > ttl) this.secrets.delete(k);
    }
    let e = this.secrets.get(id);
    if (!e || Date.now() - e.at > (e.data ? ttl : Math.min(ttl, 10_000))) {
      try {
        const s = await this.client.get<{ data?: Record<string, string> }>(
          apiPath({ ...SECRETS, namespace, name: ref.name }),
        );
        e = { at: Date.now(), data: s ? (s.data ?? {}) : null };
      } catch (err) {
        e = { at: Date.now(), data: null, error: apiMessage(err) };
      }
      this.secrets.set(id, e);
    }
    if (e.error)
      return {
        problem: {
          reason: "SecretUnreadable",
          message: `cannot read Secret ${ref.name} (${what}): ${e.error}`,
        },
      };
    if (!e.data)
      return {
        problem: {
          reason: "SecretNotFound",
          message: `Secret ${ref.name} (${what}) not found in namespace ${namespace}`,
        },
      };
    const b64 = e.data[ref.key];
    if (b64 === undefined)
      return {
        problem: {
          reason: "SecretKeyNotFound",
          message: `Secret ${ref.name} has no key ${JSON.stringify(ref.key)} (${what})`,
        },
      };
    return { value: Buffer.from(b64, "base64").toString("utf8") };
  }

  private async reconcile(key: string): Promise<number | undefined> {
    const { namespace, name } = splitKey(key);
    const pool = this.ctx.poolOverlay.get(key, this.getPool(namespace, name));
    if (!pool || pool.metadata.deletionTimestamp) {
      // Owned objects go with the pool (garbage collector, owner references).
      this.forget(key);
      return undefined;
    }
    const state = this.state(key);
    const problems: Problem[] = [];
    let requeue: number | undefined;

    // ---- the spec
    let spec: WorkerPoolSpec | undefined;
    try {
      spec = withDefaults(pool.spec);
      const invalid = validateSpec(spec);
      if (invalid.length > 0) {
        problems.push({ reason: "InvalidSpec", message: invalid.join("; ") });
        spec = undefined;
      }
    } catch (err) {
      problems.push({ reason: "InvalidSpec", message: `spec: ${(err as Error).message}` });
      spec = undefined;
    }

    // ---- observe (every replica): credentials and the backlog poll
    if (spec) {
      let password: string | undefined;
      let redisOk = true;
      if (spec.redis.secretRef) {
        const r = await this.secretValue(namespace, spec.redis.secretRef, "Redis password");
        if (r.problem) {
          problems.push(r.problem);
          redisOk = false;
        } else password = r.value;
      }
      if (spec.database) {
        const r = await this.secretValue(namespace, spec.database.secretRef, "PostgreSQL URL");
        if (r.problem) problems.push(r.problem);
      }
      if (redisOk) {
        this.poller.upsert({
          key,
          queue: spec.queue,
          url: effectiveRedisUrl(spec),
          password,
          pollSeconds: spec.scaling.pollSeconds,
        });
      } else {
        this.poller.remove(key);
      }
      if (problems.length > 0) requeue = 15_000;
    } else {
      this.poller.remove(key);
    }

    if (!this.o.isLeader()) return requeue;

    // ---- the backlog
    const now = Date.now();
    const sample = this.poller.sample(key);
    const usable = !!sample?.lastGood && now - sample.lastGood.at <= freshnessMs(spec);
    if (spec && sample?.error && sample.failures >= UNREACHABLE_AFTER_FAILURES) {
      // The message names the first error of the outage: error texts vary from poll to poll
      // and a status that changes with them would be written every poll.
      const shown = pool.status?.conditions?.find(
        (c) => c.type === "Degraded" && c.status === "True" && c.reason === "RedisUnreachable",
      );
      problems.push({
        reason: "RedisUnreachable",
        message:
          shown?.message.split("; ").find((m) => m.startsWith("cannot read queue")) ??
          `cannot read queue ${spec.queue} at ${describeRedisUrl(effectiveRedisUrl(spec))}: ${sample.error}`,
      });
    }

    let deployment = this.ctx.deploymentOverlay.get(key, this.pick(this.deployments, namespace, name));
    let hpa = this.ctx.hpaOverlay.get(key, this.pick(this.hpas, namespace, name));
    let owned = false;
    if (spec) {
      // ---- Deployment
      if (deployment && !isControlledBy(deployment, pool)) {
        problems.push({
          reason: "DeploymentConflict",
          message: `Deployment ${name} exists and is not controlled by this WorkerPool; rename one of them`,
        });
      } else {
        try {
          deployment = await reconcileDeployment(
            this.ctx,
            key,
            pool,
            spec,
            deployment,
            usable ? sample!.lastGood!.counts.backlog : undefined,
          );
          owned = true;
        } catch (err) {
          if (!isUserError(err)) throw err;
          problems.push({ reason: "ApplyFailed", message: `Deployment: ${apiMessage(err)}` });
          requeue = 60_000;
        }
      }
      // ---- HPA
      if (owned) {
        try {
          hpa = await reconcileHPA(this.ctx, key, pool, spec, hpa, problems);
        } catch (err) {
          if (!isUserError(err)) throw err;
          problems.push({ reason: "ApplyFailed", message: `HorizontalPodAutoscaler: ${apiMessage(err)}` });
          requeue = 60_000;
        }
      }
      // ---- replicas
      if (owned && deployment) {
        deployment = await reconcileScale(
          this.ctx,
          key,
          pool,
          spec,
          deployment,
          state,
          usable ? sample!.lastGood!.counts : undefined,
          now,
        );
        const labels = { namespace, workerpool: name };
        this.o.metrics.desiredReplicas.set(labels, deployment.spec?.replicas ?? 0);
        this.o.metrics.currentReplicas.set(labels, deployment.status?.replicas ?? 0);
        this.o.metrics.readyReplicas.set(labels, deployment.status?.readyReplicas ?? 0);
        this.o.metrics.maxReplicas.set(labels, spec.scaling.maxReplicas);
        const cooldownLeft = state.scaler.lastActiveAt + spec.scaling.cooldownSeconds * 1000 - now;
        if ((deployment.spec?.replicas ?? 0) > 0 && cooldownLeft > 0 && spec.scaling.minReplicas === 0) {
          requeue = Math.min(requeue ?? Infinity, cooldownLeft + 50);
        }
      }
    }

    this.o.metrics.degraded.set({ namespace, workerpool: name }, problems.length > 0 ? 1 : 0);
    await announceProblems(this.ctx, pool, state, problems);
    await reconcileStatus(
      this.ctx,
      key,
      pool,
      computeStatus({
        pool,
        spec,
        deployment,
        hpa,
        sample,
        sampleUsable: usable,
        problems,
        lastDecision: state.lastDecision,
        now: new Date(now),
      }),
    );
    return requeue;
  }
}

/**
 * An error the user can fix (an invalid field, a policy that forbids it): reported as
 * Degraded/ApplyFailed, not retried hot. Server-side apply answers 500 for fields it cannot
 * convert (a bad quantity, an unknown field in a passed-through pod template): those too.
 */
export function isUserError(err: unknown): boolean {
  const code = apiCode(err);
  if (code === 400 || code === 403 || code === 422) return true;
  return (
    code === 500 &&
    /failed to create typed patch object|failed to convert new object|unable to convert unstructured object|field not declared in schema/i.test(
      apiMessage(err),
    )
  );
}

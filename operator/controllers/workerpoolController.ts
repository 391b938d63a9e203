// The WorkerPool controller's wiring: what it watches and what enqueues a pool.
//   for      WorkerPools — spec or label changes and deletion (not our own status writes)
//   owns     the worker Deployments and HPAs (managed-by label; mapped to the owning pool)
//   watches  the pools' pods (cache only: the busy/idle deletion costs read it), and each
//            ConfigMap a pool names as its contract, while named (contractSource.ts)
//   source   each backlog poll (leader only), so scaling follows the queue, not just the API
// and the external metric each pool's HPA reads. The reconcile itself: workerpoolReconciler.ts.
import type { Logger } from "pino";
import { RESOURCES } from "../apis/coordinates.ts";
import type { WorkerPool } from "../apis/v1alpha1/types.ts";
import type { KubeClient } from "../kube/client.ts";
import { Controller } from "../kube/controller.ts";
import { stripManagedFields } from "../kube/informer.ts";
import { BeingDeleted, GenerationChanged, LabelsChanged, anyOf } from "../kube/filters.ts";
import { splitKey } from "../kube/keys.ts";
import type { ManagedController } from "../kube/manager.ts";
import type { OperatorMetrics } from "../metrics.ts";
import type { MetricLookup } from "../metricsapi/server.ts";
import type { QueueCounts } from "../../queue/index.ts";
import { BacklogPoller, type BacklogSample } from "../scaling/backlog.ts";
import { RedisConnections } from "../scaling/redisConnections.ts";
import { backlogMetric } from "./backlogMetric.ts";
import { ConfigMapWatch } from "./contractSource.ts";
import type { ReconcileContext } from "./context.ts";
import { EventRecorder } from "./events.ts";
import { MANAGED_BY, POOL_LABEL } from "./names.ts";
import type { Deployment, HPA, Pod } from "./objects.ts";
import { WriteOverlay } from "./overlay.ts";
import { SecretReader, type SecretAccess } from "./secretReader.ts";
import { WorkerPoolReconciler } from "./workerpoolReconciler.ts";

export interface WorkerPoolControllerOptions {
  /** Client whose writes are gated on leadership. */
  client: KubeClient;
  /** Namespaces to watch; undefined or empty = all. */
  namespaces?: string[];
  defaultImage: string;
  defaultPythonImage?: string;
  /** The outbox byte budget of workers with job records (deployment.ts DeploymentOptions). */
  workerOutboxMaxBytes?: number;
  identity: string;
  isLeader: () => boolean;
  log: Logger;
  metrics: OperatorMetrics;
  /** Concurrent reconciles (different keys). Default 4. */
  workers?: number;
  /** Informer resync period (from the cache). Default 10 min. */
  relistMs?: number;
  /** How long a read Secret is trusted. Default 60 s (10 s when missing). */
  secretTtlMs?: number;
  /** Which Secrets a pool may name (--restrict-secret-access). Default: any. */
  secretAccess?: SecretAccess;
}

export class WorkerPoolController implements ManagedController {
  readonly conns: RedisConnections;
  readonly poller: BacklogPoller;
  private readonly controller: Controller;
  private readonly pools;
  private readonly deployments;
  private readonly reconciler: WorkerPoolReconciler;
  private readonly configMaps: ConfigMapWatch;
  private readonly opts: WorkerPoolControllerOptions;

  constructor(opts: WorkerPoolControllerOptions) {
    this.opts = opts;
    const { client, metrics } = opts;
    const controller = new Controller({
      name: "workerpool",
      client,
      namespaces: opts.namespaces,
      log: opts.log,
      metrics,
      workers: opts.workers,
      relistMs: opts.relistMs,
    });
    const log = controller.log;
    const managed = { labelSelector: `app.kubernetes.io/managed-by=${MANAGED_BY}` };
    this.pools = controller.for<WorkerPool>(RESOURCES.workerPools, {
      filters: [anyOf(GenerationChanged, LabelsChanged, BeingDeleted)],
    });
    const deployments = controller.owns<Deployment>(RESOURCES.deployments, RESOURCES.workerPools, managed);
    this.deployments = deployments;
    const hpas = controller.owns<HPA>(RESOURCES.horizontalPodAutoscalers, RESOURCES.workerPools, managed);
    const pods = controller.watches<Pod>(RESOURCES.pods, {
      ...managed,
      transform: podSummary,
      indexBy: (p) => {
        const pool = p.metadata.labels?.[POOL_LABEL];
        return pool === undefined ? undefined : `${p.metadata.namespace}/${pool}`;
      },
    });

    this.conns = new RedisConnections(log);
    this.poller = new BacklogPoller(
      this.conns,
      {
        onSample: (key, s, prev) => this.onSample(key, s, prev?.counts),
        shouldSweep: () => opts.isLeader(),
        onRing: (key) => {
          const { namespace, name } = splitKey(key);
          opts.metrics.doorbellRings.inc({ namespace, workerpool: name });
        },
      },
      { log },
    );
    const ctx: ReconcileContext = {
      client,
      log,
      metrics,
      events: new EventRecorder(client, opts.identity, log),
      defaultImage: opts.defaultImage,
      defaultPythonImage: opts.defaultPythonImage,
      workerOutboxMaxBytes: opts.workerOutboxMaxBytes,
      poolOverlay: new WriteOverlay<WorkerPool>(),
      deploymentOverlay: new WriteOverlay<Deployment>(),
      hpaOverlay: new WriteOverlay<HPA>(),
      deletedHPAs: new Map(),
      podsOf: (pool) =>
        pods
          .indexed(`${pool.metadata.namespace}/${pool.metadata.name}`)
          .filter((p) => !p.metadata.deletionTimestamp),
      workerReports: (key) => this.poller.workers(key),
    };
    // (the ConfigMaps pools name as their contract, each watched while named)
    this.configMaps = new ConfigMapWatch({ client, log, metrics, enqueue: (key) => this.enqueue(key) });
    this.reconciler = new WorkerPoolReconciler({
      ctx,
      caches: { pools: this.pools, deployments, hpas },
      poller: this.poller,
      secrets: new SecretReader(client, opts.secretTtlMs, opts.secretAccess),
      configMaps: this.configMaps,
      metrics,
      isLeader: opts.isLeader,
    });
    this.controller = controller.complete(this.reconciler);
  }

  start(): Promise<void> {
    return this.controller.start();
  }

  async stop(): Promise<void> {
    // Redis closes while a last reconcile may still wait on it: that one fails, nothing retries.
    const stopping = this.controller.stop();
    this.poller.stop();
    this.conns.closeAll();
    await Promise.all([stopping, this.configMaps.stop()]);
  }

  /** Leadership gained: re-check every pool now (a standby observed, it never acted). */
  onStartedLeading(): void {
    this.controller.enqueueAll();
  }

  enqueue(key: string): void {
    this.controller.enqueue(key);
  }

  listPools(): WorkerPool[] {
    return this.pools.list();
  }

  getPool(namespace: string, name: string): WorkerPool | undefined {
    return this.pools.get(namespace, name);
  }

  /** The external metric for one pool: its backlog, if read recently. */
  metricLookup(namespace: string, name: string): MetricLookup {
    return backlogMetric(
      namespace,
      name,
      this.getPool(namespace, name),
      this.poller.sample(`${namespace}/${name}`),
    );
  }

  /**
   * A poll finished: metrics and the cooldown clock on every replica; a reconcile on the leader
   * unless nothing it could act on changed (see settledAtZero).
   */
  private onSample(key: string, sample: BacklogSample, previous: QueueCounts | undefined): void {
    const { namespace, name } = splitKey(key);
    const labels = { namespace, workerpool: name };
    const { metrics } = this.opts;
    // Every replica tracks when a pool last had work, so a new leader knows the cooldown's start.
    if (sample.counts && (sample.counts.backlog > 0 || sample.counts.inflight > 0))
      this.reconciler.state(key).scaler.lastActiveAt = sample.at;
    metrics.polls.inc(labels);
    if (sample.counts) {
      metrics.pollErrors.inc(labels, 0); // the series exists (at 0) before the first failure
      metrics.backlog.set(labels, sample.counts.backlog);
      metrics.inflight.set(labels, sample.counts.inflight);
      if (sample.queue) this.reconciler.queueGauges(key, sample.queue, sample.counts, sample.at);
      this.reconciler.resourceGauges(key, sample.resources ?? [], sample.at);
    } else {
      metrics.pollErrors.inc(labels);
    }
    // Only the leader acts on samples; standbys just keep serving the metric.
    if (this.opts.isLeader() && !this.settledAtZero(namespace, name, previous, sample)) this.enqueue(key);
  }

  /**
   * An idle pool at zero replicas whose counts did not change since the last poll: its reconcile
   * would find nothing to do (activation needs a backlog, which changes the counts; errors,
   * replicas above zero and every spec or object change still reconcile). Skipping it keeps
   * 10,000 idle pools from costing 10,000 reconciles per poll interval.
   */
  private settledAtZero(
    namespace: string,
    name: string,
    previous: QueueCounts | undefined,
    sample: BacklogSample,
  ): boolean {
    const c = sample.counts;
    if (!c || !previous || c.backlog !== 0 || c.inflight !== 0) return false;
    if (!sameCounts(previous, c)) return false;
    const deployment = this.deployments.get(namespace, name);
    return deployment?.spec?.replicas === 0 && (deployment.status?.replicas ?? 0) === 0;
  }
}

/** What the reconcile reads of a pod (name, labels, deletion cost, deletion, phase): not its spec. */
function podSummary(pod: Pod): Pod {
  const { metadata } = stripManagedFields(pod);
  return { metadata, ...(pod.status?.phase ? { status: { phase: pod.status.phase } } : {}) };
}

function sameCounts(a: QueueCounts, b: QueueCounts): boolean {
  return (
    a.ready === b.ready &&
    a.delayed === b.delayed &&
    a.dueDelayed === b.dueDelayed &&
    a.inflight === b.inflight &&
    a.dead === b.dead &&
    a.completed === b.completed
  );
}

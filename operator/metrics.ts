// Prometheus metrics of the operator (its own registry, served on --metrics-port): a table of
// definitions, each made into a prom-client metric on the registry with its labels' types kept.
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";

const POOL = ["namespace", "workerpool"] as const;

interface Definition<L extends string, K extends "counter" | "gauge" | "histogram"> {
  kind: K;
  name: string;
  help: string;
  labelNames?: readonly L[];
  buckets?: number[];
}
const counter = <L extends string = string>(name: string, help: string, labelNames?: readonly L[]) =>
  ({ kind: "counter", name, help, labelNames }) as Definition<L, "counter">;
const gauge = <L extends string = string>(name: string, help: string, labelNames?: readonly L[]) =>
  ({ kind: "gauge", name, help, labelNames }) as Definition<L, "gauge">;
const histogram = (name: string, help: string, buckets: number[]) =>
  ({ kind: "histogram", name, help, buckets }) as Definition<string, "histogram">;

const METRICS = {
  reconciles: counter(
    "conveyor_operator_reconciles_total",
    "Reconciles of a WorkerPool by result (success, error, requeue)",
    ["result"],
  ),
  reconcileErrors: counter(
    "conveyor_operator_reconcile_errors_total",
    "Reconcile errors by concern (deployment, hpa, scaling, status) and reason",
    ["concern", "reason"],
  ),
  reconcileDuration: histogram(
    "conveyor_operator_reconcile_duration_seconds",
    "Duration of one reconcile",
    [0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
  ),
  queueDepth: gauge("conveyor_operator_workqueue_depth", "Keys waiting in the work queue"),
  queueAdds: counter(
    "conveyor_operator_workqueue_adds_total",
    "Keys added to the work queue (after de-duplication)",
  ),
  queueRetries: counter(
    "conveyor_operator_workqueue_retries_total",
    "Keys re-queued with backoff after an error",
  ),
  apiRequests: counter(
    "conveyor_operator_kube_api_requests_total",
    "Kubernetes API requests by verb (get, list, watch, create, patch, update, delete), resource and status code",
    ["verb", "resource", "code"],
  ),
  informerRestarts: counter(
    "conveyor_operator_informer_restarts_total",
    "Informer list/watch restarts after an error, by resource",
    ["resource"],
  ),
  isLeader: gauge("conveyor_operator_leader", "1 when this replica holds the leader lease"),
  leaderTransitions: counter(
    "conveyor_operator_leader_transitions_total",
    "Times this replica became leader",
  ),
  contractPublishes: counter(
    "conveyor_operator_contract_publishes_total",
    "Contracts the operator wrote to a pool's queue (spec.contract), by action (published, deleted)",
    [...POOL, "action"],
  ),
  decisions: counter(
    "conveyor_operator_scale_decisions_total",
    "Scale decisions applied by the operator, by direction (up, down) and reason",
    [...POOL, "direction", "reason"],
  ),
  backlog: gauge(
    "conveyor_operator_pool_backlog",
    "Backlog (ready + due-delayed + in-flight) at the last poll",
    POOL,
  ),
  inflight: gauge("conveyor_operator_pool_inflight", "In-flight jobs at the last poll", POOL),
  oldestReadyAge: gauge(
    "conveyor_queue_oldest_ready_age_seconds",
    "Age of the oldest ready job of the pool's queue (enqueued into this stage; the earliest head of the line, the prioritised set and the next group) at the last poll; 0 when nothing is ready",
    [...POOL, "queue"],
  ),
  deadLetters: gauge(
    "conveyor_queue_dead_letters",
    "Jobs in the pool queue's dead letters at the last poll",
    [...POOL, "queue"],
  ),
  readyReplicas: gauge(
    "conveyor_operator_pool_ready_replicas",
    "Ready replicas of the pool's Deployment (status.readyReplicas)",
    POOL,
  ),
  currentReplicas: gauge(
    "conveyor_operator_pool_current_replicas",
    "Replicas the pool's Deployment has (status.replicas)",
    POOL,
  ),
  maxReplicas: gauge("conveyor_operator_pool_max_replicas", "The pool's spec.scaling.maxReplicas", POOL),
  degraded: gauge("conveyor_operator_pool_degraded", "1 while the pool's Degraded condition is True", POOL),
  replicaCap: gauge(
    "conveyor_operator_pool_replica_cap",
    "Replicas a pool's rate limit, resources or groups can feed, the lowest (its scaling ceiling), by what binds it (cap: rateLimit, resources, groups); absent when none",
    [...POOL, "cap"],
  ),
  // Resources of the pipelines of pools with spec.resources, read at every poll.
  resourceUtilization: gauge(
    "conveyor_resource_utilization",
    "Used / max of a resource key's limit in its window ending now (0..1; admission stops at the ceiling)",
    [...POOL, "pipeline", "resource", "key", "limit"],
  ),
  resourceCeiling: gauge(
    "conveyor_resource_ceiling",
    "A resource's admission ceiling as a fraction of each limit",
    [...POOL, "pipeline", "resource"],
  ),
  resourceBenched: gauge(
    "conveyor_resource_benched_seconds",
    "Seconds a resource key stays benched after its provider's rate-limited answer (0 when not benched)",
    [...POOL, "pipeline", "resource", "key"],
  ),
  resourceAdmitted: counter(
    "conveyor_resource_admitted_total",
    "Jobs admitted on a resource key (the count kept in Redis)",
    [...POOL, "pipeline", "resource", "key"],
  ),
  resourceWaiting: gauge(
    "conveyor_resource_waiting_jobs",
    "Jobs waiting for a resource's budget, all queues of its pipeline",
    [...POOL, "pipeline", "resource"],
  ),
  arrivalRate: gauge(
    "conveyor_operator_pool_arrival_rate",
    "Jobs per second enqueued into the pool's queue (the enqueue counter's growth between polls, the time-weighted lower median of the last 30 s); latency mode only",
    POOL,
  ),
  jobSeconds: gauge(
    "conveyor_operator_pool_job_seconds",
    "How long a job holds a slot, as latency mode sizes by it: the mean run time of the attempts that ended in the last 60 s (the workers' median before any has); latency mode only",
    POOL,
  ),
  neededSlots: gauge(
    "conveyor_operator_pool_needed_slots",
    "Job slots latency mode computes the wait target needs (before min/max and stabilization); latency mode only",
    POOL,
  ),
  scaleInHeld: gauge(
    "conveyor_operator_pool_scale_in_held_replicas",
    "Replicas kept above what scaling wants because their pods run jobs that may outlast the drain (ScaleInHeld); 0 when no scale-in is held",
    POOL,
  ),
  rolloutWeight: gauge(
    "conveyor_operator_pool_rollout_canary_weight",
    "The canary's percent of the pods at the rollout's current step (spec.rollout); 0 when no rollout is in progress",
    POOL,
  ),
  rolloutFailureRate: gauge(
    "conveyor_operator_pool_rollout_failure_rate",
    "Each version's failure rate (handler failures / attempts) over the rollout's current step, as it is judged; absent when no rollout is in progress",
    [...POOL, "version"] as const,
  ),
  cordonedPods: gauge(
    "conveyor_operator_pool_cordoned_pods",
    "Pods cordoned while a scale-in is held: they claim no new jobs, so they go idle and the scale-in removes them; 0 when none",
    POOL,
  ),
  desiredReplicas: gauge(
    "conveyor_operator_pool_desired_replicas",
    "Replicas the pool's Deployment asks for (spec.replicas)",
    POOL,
  ),
  polls: counter(
    "conveyor_operator_backlog_polls_total",
    "Backlog polls of the pool (each may reconcile it): what a wait for N polls counts",
    POOL,
  ),
  doorbellRings: counter(
    "conveyor_operator_doorbell_rings_total",
    "Jobs that woke a pool sleeping at zero replicas (its doorbell rang), and surges that rang a running latency-mode pool's surge bell: each polled the pool at once",
    POOL,
  ),
  pollErrors: counter("conveyor_operator_backlog_poll_errors_total", "Failed backlog polls", POOL),
  metricRequests: counter(
    "conveyor_operator_external_metric_requests_total",
    "Requests to the external metrics API by result",
    ["result"],
  ),
  deletionCostPatches: counter(
    "conveyor_operator_pod_deletion_cost_patches_total",
    "Pods whose controller.kubernetes.io/pod-deletion-cost was changed",
  ),
};

type MetricOf<D> =
  D extends Definition<infer L, "counter">
    ? Counter<L>
    : D extends Definition<infer L, "gauge">
      ? Gauge<L>
      : D extends Definition<infer L, "histogram">
        ? Histogram<L>
        : never;

export type OperatorMetrics = { registry: Registry } & {
  [K in keyof typeof METRICS]: MetricOf<(typeof METRICS)[K]>;
};

export function createOperatorMetrics(
  registry = new Registry(),
  opts: { defaultMetrics?: boolean } = {},
): OperatorMetrics {
  if (opts.defaultMetrics ?? true)
    collectDefaultMetrics({ register: registry, prefix: "conveyor_operator_" });
  const registers = [registry];
  const made: Record<string, unknown> = { registry };
  for (const [key, d] of Object.entries(METRICS) as [
    string,
    Definition<string, "counter" | "gauge" | "histogram">,
  ][]) {
    const config = {
      name: d.name,
      help: d.help,
      ...(d.labelNames ? { labelNames: d.labelNames } : {}),
      ...(d.buckets ? { buckets: d.buckets } : {}),
      registers,
    };
    made[key] =
      d.kind === "counter"
        ? new Counter(config)
        : d.kind === "gauge"
          ? new Gauge(config)
          : new Histogram(config);
  }
  return made as OperatorMetrics;
}

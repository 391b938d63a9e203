// Prometheus metrics of the operator (its own registry, served on --metrics-port).
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";

export type OperatorMetrics = ReturnType<typeof createOperatorMetrics>;

export function createOperatorMetrics(registry = new Registry(), opts: { defaultMetrics?: boolean } = {}) {
  if (opts.defaultMetrics ?? true)
    collectDefaultMetrics({ register: registry, prefix: "conveyor_operator_" });
  const registers = [registry];
  const pool = ["namespace", "workerpool"] as const;
  return {
    registry,
    reconciles: new Counter({
      name: "conveyor_operator_reconciles_total",
      help: "Reconciles of a WorkerPool by result (success, error, requeue)",
      labelNames: ["result"] as const,
      registers,
    }),
    reconcileErrors: new Counter({
      name: "conveyor_operator_reconcile_errors_total",
      help: "Reconcile errors by concern (deployment, hpa, scaling, status) and reason",
      labelNames: ["concern", "reason"] as const,
      registers,
    }),
    reconcileDuration: new Histogram({
      name: "conveyor_operator_reconcile_duration_seconds",
      help: "Duration of one reconcile",
      buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers,
    }),
    queueDepth: new Gauge({
      name: "conveyor_operator_workqueue_depth",
      help: "Keys waiting in the work queue",
      registers,
    }),
    queueAdds: new Counter({
      name: "conveyor_operator_workqueue_adds_total",
      help: "Keys added to the work queue (after de-duplication)",
      registers,
    }),
    queueRetries: new Counter({
      name: "conveyor_operator_workqueue_retries_total",
      help: "Keys re-queued with backoff after an error",
      registers,
    }),
    apiRequests: new Counter({
      name: "conveyor_operator_kube_api_requests_total",
      help: "Kubernetes API requests by verb (get, list, watch, create, patch, update, delete), resource and status code",
      labelNames: ["verb", "resource", "code"] as const,
      registers,
    }),
    informerRestarts: new Counter({
      name: "conveyor_operator_informer_restarts_total",
      help: "Informer list/watch restarts after an error, by resource",
      labelNames: ["resource"] as const,
      registers,
    }),
    isLeader: new Gauge({
      name: "conveyor_operator_leader",
      help: "1 when this replica holds the leader lease",
      registers,
    }),
    leaderTransitions: new Counter({
      name: "conveyor_operator_leader_transitions_total",
      help: "Times this replica became leader",
      registers,
    }),
    contractPublishes: new Counter({
      name: "conveyor_operator_contract_publishes_total",
      help: "Contracts the operator wrote to a pool's queue (spec.contract), by action (published, deleted)",
      labelNames: [...pool, "action"] as const,
      registers,
    }),
    decisions: new Counter({
      name: "conveyor_operator_scale_decisions_total",
      help: "Scale decisions applied by the operator, by direction (up, down) and reason",
      labelNames: [...pool, "direction", "reason"] as const,
      registers,
    }),
    backlog: new Gauge({
      name: "conveyor_operator_pool_backlog",
      help: "Backlog (ready + due-delayed + in-flight) at the last poll",
      labelNames: pool,
      registers,
    }),
    inflight: new Gauge({
      name: "conveyor_operator_pool_inflight",
      help: "In-flight jobs at the last poll",
      labelNames: pool,
      registers,
    }),
    oldestReadyAge: new Gauge({
      name: "conveyor_queue_oldest_ready_age_seconds",
      help: "Age of the oldest ready job of the pool's queue (enqueued into this stage; the earliest head of the line, the prioritised set and the next group) at the last poll; 0 when nothing is ready",
      labelNames: [...pool, "queue"] as const,
      registers,
    }),
    deadLetters: new Gauge({
      name: "conveyor_queue_dead_letters",
      help: "Jobs in the pool queue's dead letters at the last poll",
      labelNames: [...pool, "queue"] as const,
      registers,
    }),
    readyReplicas: new Gauge({
      name: "conveyor_operator_pool_ready_replicas",
      help: "Ready replicas of the pool's Deployment (status.readyReplicas)",
      labelNames: pool,
      registers,
    }),
    currentReplicas: new Gauge({
      name: "conveyor_operator_pool_current_replicas",
      help: "Replicas the pool's Deployment has (status.replicas)",
      labelNames: pool,
      registers,
    }),
    maxReplicas: new Gauge({
      name: "conveyor_operator_pool_max_replicas",
      help: "The pool's spec.scaling.maxReplicas",
      labelNames: pool,
      registers,
    }),
    degraded: new Gauge({
      name: "conveyor_operator_pool_degraded",
      help: "1 while the pool's Degraded condition is True",
      labelNames: pool,
      registers,
    }),
    replicaCap: new Gauge({
      name: "conveyor_operator_pool_replica_cap",
      help: "Replicas a pool's rate limit, resources or groups can feed, the lowest (its scaling ceiling), by what binds it (cap: rateLimit, resources, groups); absent when none",
      labelNames: [...pool, "cap"] as const,
      registers,
    }),
    // Resources of the pipelines of pools with spec.resources, read at every poll.
    resourceUtilization: new Gauge({
      name: "conveyor_resource_utilization",
      help: "Used / max of a resource key's limit in its window ending now (0..1; admission stops at the ceiling)",
      labelNames: [...pool, "pipeline", "resource", "key", "limit"] as const,
      registers,
    }),
    resourceCeiling: new Gauge({
      name: "conveyor_resource_ceiling",
      help: "A resource's admission ceiling as a fraction of each limit",
      labelNames: [...pool, "pipeline", "resource"] as const,
      registers,
    }),
    resourceBenched: new Gauge({
      name: "conveyor_resource_benched_seconds",
      help: "Seconds a resource key stays benched after its provider's rate-limited answer (0 when not benched)",
      labelNames: [...pool, "pipeline", "resource", "key"] as const,
      registers,
    }),
    resourceAdmitted: new Counter({
      name: "conveyor_resource_admitted_total",
      help: "Jobs admitted on a resource key (the count kept in Redis)",
      labelNames: [...pool, "pipeline", "resource", "key"] as const,
      registers,
    }),
    resourceWaiting: new Gauge({
      name: "conveyor_resource_waiting_jobs",
      help: "Jobs waiting for a resource's budget, all queues of its pipeline",
      labelNames: [...pool, "pipeline", "resource"] as const,
      registers,
    }),
    arrivalRate: new Gauge({
      name: "conveyor_operator_pool_arrival_rate",
      help: "Jobs per second enqueued into the pool's queue (the enqueue counter's growth between polls, the time-weighted lower median of the last 30 s); latency mode only",
      labelNames: pool,
      registers,
    }),
    jobSeconds: new Gauge({
      name: "conveyor_operator_pool_job_seconds",
      help: "How long a job holds a slot, as latency mode sizes by it: the mean run time of the attempts that ended in the last 60 s (the workers' median before any has); latency mode only",
      labelNames: pool,
      registers,
    }),
    neededSlots: new Gauge({
      name: "conveyor_operator_pool_needed_slots",
      help: "Job slots latency mode computes the wait target needs (before min/max and stabilization); latency mode only",
      labelNames: pool,
      registers,
    }),
    scaleInHeld: new Gauge({
      name: "conveyor_operator_pool_scale_in_held_replicas",
      help: "Replicas kept above what scaling wants because their pods run jobs that may outlast the drain (ScaleInHeld); 0 when no scale-in is held",
      labelNames: pool,
      registers,
    }),
    cordonedPods: new Gauge({
      name: "conveyor_operator_pool_cordoned_pods",
      help: "Pods cordoned while a scale-in is held: they claim no new jobs, so they go idle and the scale-in removes them; 0 when none",
      labelNames: pool,
      registers,
    }),
    desiredReplicas: new Gauge({
      name: "conveyor_operator_pool_desired_replicas",
      help: "Replicas the pool's Deployment asks for (spec.replicas)",
      labelNames: pool,
      registers,
    }),
    polls: new Counter({
      name: "conveyor_operator_backlog_polls_total",
      help: "Backlog polls of the pool (each may reconcile it): what a wait for N polls counts",
      labelNames: pool,
      registers,
    }),
    doorbellRings: new Counter({
      name: "conveyor_operator_doorbell_rings_total",
      help: "Jobs that woke a pool sleeping at zero replicas (its doorbell rang), and surges that rang a running latency-mode pool's surge bell: each polled the pool at once",
      labelNames: pool,
      registers,
    }),
    pollErrors: new Counter({
      name: "conveyor_operator_backlog_poll_errors_total",
      help: "Failed backlog polls",
      labelNames: pool,
      registers,
    }),
    metricRequests: new Counter({
      name: "conveyor_operator_external_metric_requests_total",
      help: "Requests to the external metrics API by result",
      labelNames: ["result"] as const,
      registers,
    }),
    deletionCostPatches: new Counter({
      name: "conveyor_operator_pod_deletion_cost_patches_total",
      help: "Pods whose controller.kubernetes.io/pod-deletion-cost was changed",
      registers,
    }),
  };
}

// Prometheus metrics of one worker process (its own registry, served at /metrics).
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";

export type WorkerMetrics = ReturnType<typeof createWorkerMetrics>;

export function createWorkerMetrics(registry = new Registry()) {
  collectDefaultMetrics({ register: registry });
  const q = ["queue"] as const;
  const registers = [registry];
  return {
    registry,
    started: new Counter({
      name: "conveyor_jobs_started_total",
      help: "Job executions started",
      labelNames: q,
      registers,
    }),
    completed: new Counter({
      name: "conveyor_jobs_completed_total",
      help: "Jobs completed (including advanced to the next stage)",
      labelNames: q,
      registers,
    }),
    failed: new Counter({
      name: "conveyor_jobs_failed_total",
      help: "Failed attempts (retried or dead-lettered)",
      labelNames: q,
      registers,
    }),
    retried: new Counter({
      name: "conveyor_jobs_retried_total",
      help: "Failed attempts scheduled for retry",
      labelNames: q,
      registers,
    }),
    deadLettered: new Counter({
      name: "conveyor_jobs_dead_lettered_total",
      help: "Jobs moved to dead letters",
      labelNames: q,
      registers,
    }),
    duration: new Histogram({
      name: "conveyor_job_duration_seconds",
      // `task` on completed and failed runs of a task the handler declares (a module's `tasks`
      // export: a bounded set); absent otherwise, so untasked jobs keep their series.
      help: "Handler run time by outcome (and task, for a module handler's named tasks)",
      labelNames: ["queue", "outcome", "task"] as const,
      buckets: [0.005, 0.025, 0.1, 0.5, 1, 2.5, 10, 30, 120, 600, 3600],
      registers,
    }),
    batchCallJobs: new Histogram({
      name: "conveyor_batch_call_jobs",
      help: "Jobs per batch handler call (its count: the calls made; --batch-size above 1 only)",
      labelNames: q,
      buckets: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 10000],
      registers,
    }),
    inFlight: new Gauge({
      name: "conveyor_jobs_in_flight",
      help: "Jobs running in this worker",
      labelNames: q,
      registers,
    }),
    slots: new Gauge({
      name: "conveyor_worker_slots",
      help: "Job slots of this worker",
      labelNames: q,
      registers,
    }),
    leaseSeconds: new Gauge({
      name: "conveyor_worker_lease_seconds",
      help: "Lease length of this worker's jobs (renewal lag near it means leases are about to be lost)",
      labelNames: q,
      registers,
    }),
    leaseRenewals: new Counter({
      name: "conveyor_lease_renewals_total",
      help: "Leases renewed by the heartbeat",
      labelNames: q,
      registers,
    }),
    renewalLag: new Histogram({
      name: "conveyor_lease_renewal_lag_seconds",
      help: "How late a heartbeat ran against its schedule, plus its Redis round trip",
      labelNames: q,
      // Up to past the default 30 s lease: the alert compares the p99 with a fraction of the lease.
      buckets: [0.001, 0.005, 0.025, 0.1, 0.5, 1, 2.5, 5, 10, 20, 30, 60],
      registers,
    }),
    leasesLost: new Counter({
      name: "conveyor_leases_lost_total",
      help: "Leases this worker lost (its late results are fenced off)",
      labelNames: q,
      registers,
    }),
    redeliveries: new Counter({
      name: "conveyor_redeliveries_total",
      help: "Jobs run again: cause=lease_expired (claimed after a stall) or shutdown_handback (handed back at the drain deadline)",
      labelNames: ["queue", "cause"] as const,
      registers,
    }),
    layoutRefused: new Gauge({
      name: "conveyor_worker_layout_refused",
      help: "The pipeline's layout in force while this worker refuses it (a layout newer than it reads); absent otherwise",
      labelNames: q,
      registers,
    }),
    draining: new Gauge({
      name: "conveyor_worker_draining",
      help: "1 while the worker drains for shutdown",
      labelNames: q,
      registers,
    }),
    cordoned: new Gauge({
      name: "conveyor_worker_cordoned",
      help: "1 while the operator has cordoned the worker's pod: it claims nothing new until its jobs are done and a scale-in removes it",
      labelNames: q,
      registers,
    }),
    circuitOpen: new Gauge({
      name: "conveyor_circuit_open",
      help: "1 while the circuit breaker pauses claiming (0.5 half-open)",
      labelNames: q,
      registers,
    }),
    deferred: new Counter({
      name: "conveyor_jobs_deferred_total",
      help: "Jobs handed back without an attempt because a dependency failed",
      labelNames: q,
      registers,
    }),
    rateLimited: new Counter({
      name: "conveyor_jobs_rate_limited_total",
      help: "Jobs handed back without an attempt because a provider rate-limited their resource key (the key is benched)",
      labelNames: [...q, "resource"],
      registers,
    }),
    claimPolls: new Counter({
      name: "conveyor_claim_polls_total",
      help: "Claims the claim loop sent (one per wake-up, freed slot or 5 s idle; complete-and-claim not counted): an idle worker that still looks for work keeps it moving",
      labelNames: q,
      registers,
    }),
    writesUnconfirmed: new Counter({
      name: "conveyor_settle_writes_unconfirmed_total",
      help: "Settle writes (durability replicated) the primary applied but no replica confirmed in time: retried until one does",
      labelNames: ["queue"] as const,
      registers,
    }),
    writesRefused: new Counter({
      name: "conveyor_settle_writes_refused_total",
      help: "Writes settling a job that Redis refused for good (code: WRONGTYPE, OOM, NOPERM…): the slot was freed, the lease expires and the job runs again",
      labelNames: ["queue", "code"] as const,
      registers,
    }),
    reclaimed: new Counter({
      name: "conveyor_finished_jobs_reclaimed_total",
      help: "Completed and cancelled jobs' records this worker deleted after their retention (docs/protocol.md, Retention)",
      labelNames: q,
      registers,
    }),
    resultsReused: new Counter({
      name: "conveyor_results_reused_total",
      help: "Stage runs skipped because a result for the same content hash existed",
      labelNames: q,
      registers,
    }),
  };
}

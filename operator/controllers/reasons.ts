// Every reason the operator writes into a WorkerPool condition, an Event or a scale decision,
// as one typed set (like KEDA's pkg/eventreason): a reason is a stable, CamelCase word users
// grep for and alert on, so each is declared once here with what it means.
export const Reason = {
  // ---- problems: Degraded=True (and Ready=False) with this reason; a Warning Event when it appears
  /** The spec fails the operator's own checks (what the CRD schema could not say). */
  InvalidSpec: "InvalidSpec",
  /** A referenced Secret does not exist. */
  SecretNotFound: "SecretNotFound",
  /** A referenced Secret exists but lacks the key. */
  SecretKeyNotFound: "SecretKeyNotFound",
  /** A referenced Secret could not be read (RBAC, API error). */
  SecretUnreadable: "SecretUnreadable",
  /** --restrict-secret-access: the Secret is neither labelled for Conveyor nor in the operator's namespace. */
  SecretNotPermitted: "SecretNotPermitted",
  /** The backlog could not be read for several polls in a row. */
  RedisUnreachable: "RedisUnreachable",
  /** A Deployment of the pool's name exists and is not ours. */
  DeploymentConflict: "DeploymentConflict",
  /** An HPA of the pool's name exists and is not ours. */
  HPAConflict: "HPAConflict",
  /** The API server refused the Deployment or HPA (a user-fixable field). */
  ApplyFailed: "ApplyFailed",
  /** spec.contract is not a valid contract (a schema, a task name, the ConfigMap's text); the one in force stays. */
  ContractInvalid: "ContractInvalid",
  /** spec.contract.configMapRef names a ConfigMap (or key) that does not exist or cannot be read. */
  ContractNotFound: "ContractNotFound",

  // ---- Ready
  /** The worker Deployment has ready pods. */
  Available: "Available",
  /** The worker Deployment is at zero replicas (no backlog). Also ScalingActive=False. */
  ScaledToZero: "ScaledToZero",
  /** The worker Deployment wants pods, none is ready. */
  PodsNotReady: "PodsNotReady",
  /** The worker Deployment does not exist yet. */
  DeploymentMissing: "DeploymentMissing",
  /** Degraded=False. */
  AsExpected: "AsExpected",

  // ---- ScalingActive
  /** The HPA scales the pool (hpa mode). */
  HPA: "HPA",
  /** The operator scales the pool itself (direct mode). */
  Direct: "Direct",
  /** spec.scaling.paused freezes the replica count. */
  Paused: "Paused",
  /** spec.replicas pins the count; also the scale decision that applies it. */
  ManualReplicas: "ManualReplicas",
  /** The backlog has not been read yet. */
  Polling: "Polling",
  /** The backlog could not be read recently: no scaling decisions. */
  BacklogUnavailable: "BacklogUnavailable",
  /** The HPA reports it cannot read the metric. */
  HPAMetricFailed: "HPAMetricFailed",

  // ---- scale decisions (status.lastDecision, and inside the ScaledUp/ScaledDown Event's message)
  /** 0 → 1: backlog above activationBacklog. */
  Activated: "Activated",
  /** N → 0: no backlog and nothing in flight for cooldownSeconds. */
  CooledDown: "CooledDown",
  /** 0 → minReplicas. */
  BelowMinimum: "BelowMinimum",
  /** direct mode: the HPA algorithm wants more / fewer replicas. */
  DirectScaleUp: "DirectScaleUp",
  DirectScaleDown: "DirectScaleDown",
  /** latency mode (scaling.targetWaitSeconds): the wait target needs more / fewer replicas. */
  LatencyScaleUp: "LatencyScaleUp",
  LatencyScaleDown: "LatencyScaleDown",
  /**
   * A scale-in held at the pods running jobs (they would hand back jobs longer than the drain);
   * steps down as they go idle. Also ScalingActive=True's reason while it holds.
   */
  ScaleInHeld: "ScaleInHeld",
  /** hpa mode: the HPA changed the replica count (observed by the operator at its next pass). */
  HPAScaleUp: "HPAScaleUp",
  HPAScaleDown: "HPAScaleDown",

  // ---- Events only
  /** The operator changed the replica count (Normal). */
  /** The queue is paused: Paused=True; the pool scales down to its running jobs, then its minimum. */
  QueuePaused: "QueuePaused",
  /** Paused=False: the queue is claimed from normally. */
  QueueRunning: "QueueRunning",
  /** The queue's rate limit caps the replicas (status.control.replicaCap). */
  RateLimited: "RateLimited",
  /** Waiting jobs belong to groups at their limit or paused: the replicas are capped at what can start. */
  GroupLimited: "GroupLimited",
  /** The pool's resources (spec.resources: their keys' request rate) cap the replicas. */
  BudgetLimited: "BudgetLimited",
  ScaledUp: "ScaledUp",
  ScaledDown: "ScaledDown",
  /** Every problem is gone (Normal). */
  Recovered: "Recovered",
  /** A pool with spec.database: job records were switched on for its pipeline (Normal, once). */
  RecordsOn: "RecordsOn",
  /** spec.contract was published to the queue (a new hash in force; Normal). */
  ContractPublished: "ContractPublished",
  /** spec.contract was removed: the contract this pool had published was deleted from the queue (Normal). */
  ContractDeleted: "ContractDeleted",
  /** Every pod of every pool of the pipeline reads a newer layout: the operator moved the layout in force to it (Normal). */
  LayoutFinalized: "LayoutFinalized",

  // ---- rollouts (spec.rollout): Events, and the RolledBack condition's reasons
  /** A template change started a canary rollout (Normal). */
  RolloutStarted: "RolloutStarted",
  /** A canary step passed its judgement: the next step's weight (Normal). */
  RolloutStepPassed: "RolloutStepPassed",
  /** The canary passed every step (or `conveyor rollout promote`): the pool runs the new template (Normal). */
  RolloutPromoted: "RolloutPromoted",
  /** The canary failed a step's judgement: scaled to zero, the pool stays on the stable template (Warning; RolledBack=True). */
  RolledBack: "RolledBack",
  /** `conveyor rollout abort`: the canary scaled to zero, the pool on the stable template (Warning; RolledBack=True). */
  RolloutAborted: "RolloutAborted",
} as const;

export type Reason = (typeof Reason)[keyof typeof Reason];

/** Reasons for Degraded=True (and Ready=False): each is also a Warning Event when it appears. */
export const PROBLEM_REASONS = [
  Reason.InvalidSpec,
  Reason.SecretNotFound,
  Reason.SecretKeyNotFound,
  Reason.SecretUnreadable,
  Reason.SecretNotPermitted,
  Reason.RedisUnreachable,
  Reason.DeploymentConflict,
  Reason.HPAConflict,
  Reason.ApplyFailed,
  Reason.ContractInvalid,
  Reason.ContractNotFound,
] as const;
export type ProblemReason = (typeof PROBLEM_REASONS)[number];

/** Ready's own reasons (besides a problem's, when Degraded). */
export const READY_REASONS = [
  Reason.Available,
  Reason.ScaledToZero,
  Reason.PodsNotReady,
  Reason.DeploymentMissing,
] as const;
export type ReadyReason = ProblemReason | (typeof READY_REASONS)[number];

export type DegradedReason = ProblemReason | typeof Reason.AsExpected;

export const SCALING_ACTIVE_REASONS = [
  Reason.HPA,
  Reason.Direct,
  Reason.ScaledToZero,
  Reason.Paused,
  Reason.ManualReplicas,
  Reason.BacklogUnavailable,
  Reason.HPAMetricFailed,
  Reason.Polling,
  Reason.InvalidSpec,
  Reason.ScaleInHeld,
] as const;
export type ScalingActiveReason = (typeof SCALING_ACTIVE_REASONS)[number];

export type ConditionReason =
  ReadyReason | DegradedReason | ScalingActiveReason | typeof Reason.QueuePaused | typeof Reason.QueueRunning;

/** Why a pool's replica count changed (status.lastDecision.reason): the operator's decisions, and the HPA's it observed. */
export const SCALE_REASONS = [
  Reason.Activated,
  Reason.CooledDown,
  Reason.BelowMinimum,
  Reason.ManualReplicas,
  Reason.DirectScaleUp,
  Reason.DirectScaleDown,
  Reason.LatencyScaleUp,
  Reason.LatencyScaleDown,
  Reason.ScaleInHeld,
  Reason.HPAScaleUp,
  Reason.HPAScaleDown,
  Reason.QueuePaused,
  Reason.RateLimited,
  Reason.GroupLimited,
  Reason.BudgetLimited,
] as const;
export type ScaleReason = (typeof SCALE_REASONS)[number];

export const EVENT_REASONS = [
  ...PROBLEM_REASONS,
  Reason.ScaledUp,
  Reason.ScaledDown,
  Reason.Recovered,
  Reason.QueuePaused,
  Reason.QueueRunning,
  Reason.RateLimited,
  Reason.GroupLimited,
  Reason.BudgetLimited,
  Reason.RecordsOn,
  Reason.ContractPublished,
  Reason.ContractDeleted,
  Reason.LayoutFinalized,
  Reason.RolloutStarted,
  Reason.RolloutStepPassed,
  Reason.RolloutPromoted,
  Reason.RolledBack,
  Reason.RolloutAborted,
] as const;
export type EventReason = (typeof EVENT_REASONS)[number];

/** Something wrong with a pool that the user can fix: Degraded, a Warning Event, a log line. */
export interface Problem {
  reason: ProblemReason;
  message: string;
}

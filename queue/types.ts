// Shapes shared by producers, consumers, the operator and the CLI.
import type { AttemptError } from "./attemptErrors.ts";

/** What a flow job does when a parent dies or is cancelled (docs/flows.md). */
export type ParentFailurePolicy = "fail" | "continue" | "ignore";

/** One job of a flow (Producer.enqueueFlow, docs/flows.md). */
export interface FlowJob extends Pick<
  EnqueueOptions,
  "priority" | "attempts" | "timeoutMs" | "group" | "task" | "delayMs" | "uses" | "notify"
> {
  /** Its name in the flow: 1..100 of A-Z a-z 0-9 . _ : - (its parents name it so). */
  key: string;
  /** A queue of the flow's pipeline. */
  queue: string;
  data: unknown;
  /** The keys of the jobs that must end first. */
  parents?: string[];
  /** Default `fail`. */
  onParentFailure?: ParentFailurePolicy;
}

/** A flow written: its id, and each job's id by key. */
export interface FlowEnqueued {
  flowId: string;
  ids: Record<string, string>;
  /** false: the idempotency key named a flow already written; these are its id and ids, nothing was written. */
  created: boolean;
}

/** Options of a whole flow (Producer.enqueueFlow). */
export interface FlowOptions {
  /**
   * The same key within 24 hours returns the first submission's flow id and job ids and writes
   * nothing (1..200 characters).
   */
  idempotencyKey?: string;
}

/** JobInfo.flow. */
export interface JobFlowInfo {
  id: string;
  key: string;
  parents: string[];
  /** While it waits (state `waiting-children`): how many parents have not ended. */
  pending?: number;
  /** Why a parent's end cancelled it. */
  cancelReason?: string;
}

/**
 * A parent's outcome as its dependents see it (ctx.parents): its result, the error it ended with,
 * or, for a large result, a reference to it (`ref`, and its size in `bytes`): read any of them
 * with `ctx.parentResult(key)` (docs/flows.md, "Large results").
 */
export interface ParentOutcome {
  id: string;
  result?: unknown;
  error?: string;
  /** `<flow id>:<key>`: where the result waits in the flow's hash (fetchParentResult). */
  ref?: string;
  /** The referenced result's size (its JSON, bytes). */
  bytes?: number;
}

export interface EnqueueOptions {
  /** Stable job id; generated when absent. Enqueueing an existing id is a no-op. */
  id?: string;
  /** Producer idempotency key: a second enqueue with the same key returns the first job. */
  idempotencyKey?: string;
  /** 0..1000, higher runs first. Default 0. */
  priority?: number;
  /** Run no earlier than this many milliseconds from now. */
  delayMs?: number;
  /** Total attempts before dead-lettering. Default 3. */
  attempts?: number;
  /** Per-job handler timeout; 0 = the worker's default. */
  timeoutMs?: number;
  /** Content hash for result reuse (see docs/protocol.md). */
  contentHash?: string;
  /**
   * The job's group (a tenant, customer, key; 1..128 UTF-8 bytes): groups of a queue are served
   * round-robin and may have a concurrency limit (docs/protocol.md, "Groups").
   */
  group?: string;
  /**
   * Debounce or throttle by key (docs/protocol.md, "Debounce and throttle"). `debounce`: while
   * the job enqueued with this key still waits, it takes this job's data and waits `windowMs`
   * again (one run per burst, with the latest data); the job is delayed by `windowMs` (no
   * `delayMs` with it). `throttle`: the first job of a window of `windowMs` is created, the rest
   * report it (`created: false`). Idempotency keys are unaffected.
   */
  dedupe?: Dedupe;
  /**
   * What the job uses of a pipeline's resources (API keys with budgets): resource → unit →
   * amount, an estimate (`{openai: {tokens: 1200}}`; every use also costs 1 request). The claim
   * admits the job only when a key has room (docs/protocol.md, "Resources").
   */
  uses?: Record<string, Record<string, number>>;
  /**
   * The job's task: which of the stage's handlers runs it, and which of its contract's schemas
   * its data and result are checked against (a name of 1..100 characters of A-Z a-z 0-9 . _ -).
   */
  task?: string;
  /**
   * Notify a URL of this job's end (docs/notifications.md): a signed POST when it ends in one of
   * `events`, signed with the secret of the pool that runs it; the pool's own notify still applies.
   */
  notify?: JobNotify;
}

export const NOTIFY_EVENTS = ["completed", "dead", "cancelled"] as const;
export type NotifyEvent = (typeof NOTIFY_EVENTS)[number];

/** A job's own notification destination. */
export interface JobNotify {
  url: string;
  events: NotifyEvent[];
}

/** The key a claim granted a job for one resource, and what it reserved (docs/protocol.md, "Resources"). */
export interface ResourceGrant {
  key: string;
  /** The reservation's time in the key's window log (ms). */
  at: number;
  /** Reserved per unit besides the request (e.g. {tokens: 1200}). */
  amounts: Record<string, number>;
}

export interface Dedupe {
  /** 1..500 characters, within the queue. */
  key: string;
  mode: "debounce" | "throttle";
  /** 1 ms .. 7 days, whole ms. */
  windowMs: number;
}

export interface EnqueueResult {
  id: string;
  /** false when the id, idempotency key or throttle key already existed, or a debounce replaced. */
  created: boolean;
  /** true when a debounce gave the waiting job with its key this data (id: that job's). */
  replaced?: boolean;
}

/** A job as a consumer holds it: the lease token is the fencing token. */
export interface ClaimedJob {
  id: string;
  queue: string;
  token: string;
  /** The job's data exactly as stored (JSON text); the worker parses it. */
  rawData: string;
  /** 1-based number of this attempt. */
  attempt: number;
  maxAttempts: number;
  timeoutMs: number;
  stalls: number;
  createdAt: number;
  contentHash: string;
  /** The W3C trace context the job was created in (its record's `trace` field; '' = none). */
  trace: string;
  /** Why the job last went back to ready ('failed: …', 'stalled: …', 'handedBack: …', 'deferred: …'; '' = never). */
  requeued: string;
  /** When the lease was taken (ms since epoch, Redis clock of the claim call's caller). */
  claimedAt: number;
  /**
   * A rate window counted this start (docs/protocol.md, "Queue control"): start the handler by
   * this `performance.now()` — the claim's send time plus the window's start slack — or hand the
   * job back unstarted, so the window holds where handlers start. Absent: no such deadline.
   */
  startBy?: number;
  /** For a job with `uses`: resource → the key granted and what it reserved. */
  resources?: Record<string, ResourceGrant>;
  /** The hash of the queue's contract in force when it was claimed ('' or absent = none): queue/contracts.ts. */
  contract?: string;
  /** The job's task name (the record's `task`); absent when the job names none. */
  task?: string;
  /** The current stage's earlier failed attempts, oldest first (the last 5); [] on a first attempt. */
  previousErrors: AttemptError[];
  /** A flow job's parents' outcomes by key (docs/flows.md); absent for a job without parents. */
  parents?: Record<string, ParentOutcome>;
}

export interface Lease {
  id: string;
  token: string;
}

/** One line of a job's log, as a handler wrote it (ctx.log or the handler callback). */
export interface JobLogLine {
  /** ms since epoch, the worker's clock. */
  at: number;
  /** The execution (lease token) that wrote it. */
  executionId: string;
  message: string;
}

export interface SerializedError {
  name: string;
  message: string;
  stack?: string;
  code?: string;
}

/** O(log n) counts used for scaling and `conveyor stats`. */
export interface QueueCounts {
  ready: number;
  /** All delayed jobs (retries waiting for backoff and jobs with a delay). */
  delayed: number;
  /** Delayed jobs already due: they count as backlog. */
  dueDelayed: number;
  inflight: number;
  dead: number;
  completed: number;
  /** What the autoscaler follows: ready + due-delayed + in-flight. */
  backlog: number;
  /**
   * Waiting jobs no resource key can pay for now (docs/protocol.md, "Resources"): not in
   * `ready`, not in `backlog` (more workers would not run them sooner). Absent when 0.
   */
  waitingForBudget?: number;
  /**
   * When the oldest ready job was enqueued into this stage, ms since epoch — the earliest of
   * the heads of the prioritised set, the line and the group next in the ring (O(1); exact
   * for a FIFO queue, see docs/protocol.md#backlog); absent when nothing is ready. Read by
   * `QueueAdmin.counts` only with `{ oldestReady: true }` (the operator's poll).
   */
  oldestReadyAt?: number;
  /** The queue's lifetime enqueue counter (`<Q>counts` `enqueued`): its growth is the arrival rate. */
  enqueued?: number;
  /**
   * Flow jobs waiting for their parents (state `waiting-children`, docs/flows.md): not in
   * `ready`, not in `backlog` — a pool does not scale up for jobs that cannot start. Absent when 0.
   */
  waitingChildren?: number;
  /**
   * The attempts that ended, completed or failed (`<Q>counts` `completed` + `failed`), and their
   * total run time from claim to settle (`runMs`): lifetime counters, whose growth over time is
   * the mean time a job holds a slot (latency mode's job duration). Read with `enqueued`.
   */
  attemptsEnded?: { count: number; runMs: number };
}

export interface WorkerReport {
  id: string;
  pod: string;
  slots: number;
  busy: number;
  draining: boolean;
  /** Median duration (ms) of the worker's recent completed jobs; absent before its first. */
  jobP50Ms?: number;
  /** The operator has cordoned the worker's pod: it claims nothing new (a scale-in waits for it). */
  cordoned?: boolean;
  /** The worker's release and the layouts it reads (absent: a release before layouts, layout 1 only). */
  version?: string;
  layouts?: [number, number];
  seen: number;
}

export type JobState = "ready" | "delayed" | "active" | "completed" | "dead";

/**
 * One stage of a job (docs/protocol.md, "Stages"): a finished earlier stage, or the stage the
 * job is in (always last). `result` and `error` are JSON text; Redis keeps only the attempts of
 * an earlier stage, its result is in the PostgreSQL records.
 */
export interface JobStage {
  queue: string;
  /** `completed` for an earlier stage; the job's state for its current one. */
  state: string;
  /** Attempts that ran to an outcome (failed or succeeded); stalls and hand-backs are apart. */
  attempts: number;
  result?: string;
  error?: string;
  startedAt?: number;
  finishedAt?: number;
}

export interface JobInfo {
  id: string;
  queue: string;
  state: JobState | string;
  /** A flow job's flow (docs/flows.md): its id, the job's key, its parents' keys; absent otherwise. */
  flow?: JobFlowInfo;
  data: string;
  priority: number;
  attempts: number;
  /**
   * Attempts of the current stage that ran to an outcome: the failed ones and, once completed,
   * the one that succeeded (also those before a dead-letter retry). A stage advance starts at 0.
   */
  attemptsMade: number;
  stalls: number;
  handbacks: number;
  createdAt: number;
  startedAt?: number;
  finishedAt?: number;
  result?: string;
  error?: string;
  /** The stage's last failed attempts (JSON, parseAttemptErrors reads it). */
  errors?: string;
  /** The job's task name, when it names one. */
  task?: string;
  /** The last result the stage's contract refused (JSON text, cut at 64 KiB). */
  rejected?: string;
  deadReason?: string;
  worker?: string;
  /** 0..1 as last reported by the handler. */
  progress?: number;
  progressMessage?: string;
  /** The producer's idempotency key, when it gave one. */
  idempotencyKey?: string;
  /** The stages the job went through, in order, the current one last. */
  stages: JobStage[];
}

// The consumer side of the protocol: every call that changes a claimed job carries its
// fencing token, and the script refuses it when the lease has moved on.
import { assertSamePipeline, PIPELINES_KEY, QUEUES_KEY, QueueKeys } from "./keys.ts";
import { prepareScripts, type RedisClient } from "./scripts.ts";
import type { DurabilityOptions } from "./durability.ts";
import * as gateway from "./gateway.ts";
import { readableLayouts } from "./layout.ts";
import { settleOutcome, type SettleOutcome } from "./scriptReplies.ts";
import { correctResourceUsage } from "./resources.ts";
import { fetchParentResult } from "./flows.ts";
import { parseAttemptErrors, type AttemptErrorKind } from "./attemptErrors.ts";
import type {
  ClaimedJob,
  Lease,
  ParentOutcome,
  ResourceGrant,
  SerializedError,
  WorkerReport,
} from "./types.ts";

export const DEFAULT_RETENTION_SECONDS = 3600;
export const DEFAULT_MAX_STALLS = 2;
/** Lines kept per job log (older lines are dropped) and the longest line, in characters. */
export const JOB_LOG_MAX_LINES = 200;
export const JOB_LOG_MAX_CHARS = 4000;
/** The most of a rejected result (JSON text) a job record keeps. */
export const REJECTED_MAX_CHARS = 64 * 1024;

export interface ConsumerOptions extends DurabilityOptions {
  workerId: string;
  leaseMs: number;
  /** How long a completed job's record stays readable in Redis (0 = delete at once). */
  retentionSeconds?: number;
  /**
   * The worker's template version (the operator's hash of its pod template): its settles are
   * counted per version in `<queue>versions` for judging a canary (docs/rollouts.md). Unset: none.
   */
  templateVersion?: string;
  /**
   * The newest layout this consumer reads (default: this release's, or CONVEYOR_LAYOUTS'): a claim
   * takes nothing once a newer layout is in force, and says so (ClaimResult.refusedLayout).
   */
  readsLayout?: number;
}

export interface ClaimResult {
  jobs: ClaimedJob[];
  /** When the earliest delayed job becomes due (ms since epoch), or null. */
  nextDueAt: number | null;
  /** The layout in force when it is newer than this consumer reads: the claim took nothing. */
  refusedLayout?: number;
}

/** `lost`: the lease moved on (fenced); `cancelled`: the job was cancelled while it ran. */
export type FailOutcome = "retry" | "dead" | "lost" | "cancelled";

/** A renewal's answer: executions this worker no longer holds, and which of them were cancelled. */
export interface RenewResult {
  lost: string[];
  cancelled: string[];
  /** The operator has cordoned this worker's pod until then (ms): claim nothing new. */
  cordonedUntil?: number;
}

/** The next stage a finished job is handed to (advance_job). */
export interface NextStage {
  queue: string;
  /** The next stage's input; the result when absent. */
  data?: unknown;
  /** The next stage's input hash for result reuse ('' or absent: no reuse there). */
  contentHash?: string;
  /** The trace field of the hand-over (queue/tracing.ts); '' or absent = the job keeps its own. */
  trace?: string;
  /**
   * The hash of the next stage's contract its data was checked against ('' or absent: none). The
   * settle refuses a hash not in force (ContractChangedError): re-read, check again, settle again.
   */
  contract?: string;
}

/**
 * Most jobs one settle_jobs call carries (the script takes any number): Redis runs nothing else
 * while a script runs, and a call's arguments (up to 9 a job) are spread into one JS call.
 */
const SETTLE_BATCH_MAX = 500;

/** How a finished job is settled: see `Consumer.settle`. */
export interface Settlement {
  result: unknown;
  /** `result` already run through encodeResult by the caller (the worker validates it first): not encoded again. */
  encodedResult?: string;
  /** Hand the job to the next stage instead of completing it here. */
  next?: NextStage;
  reuse?: ResultReuse;
  /** Complete-and-claim: also claim up to this many jobs of this queue (0: the reply says so, claims none). */
  claim?: number;
}

/** A settle's outcome and, with `claim`, the jobs it claimed for the freed slot(s). */
export interface Settled extends ClaimResult {
  /** `fenced`: the lease was lost, the result was discarded (another worker owns the job). */
  outcome: SettleOutcome;
}

/** A batch's outcomes, in the batch's order, and the jobs claimed for the freed slots. */
export interface SettledBatch extends ClaimResult {
  outcomes: SettleOutcome[];
}

/** Result reuse: store (or mark as reused) a stage result under the job's content hash. */
export interface ResultReuse {
  contentHash?: string;
  /** How long a stored result may be reused; 0 = do not store. */
  ttlSeconds?: number;
  /** The result came from the cache: count it, do not store it again. */
  reused?: boolean;
}

/** How a stage hands a job to the next: result reuse, and the trace context it is sent in. */
export interface HandOver extends ResultReuse {
  nextContentHash?: string;
  /** The trace field of the hand-over (queue/tracing.ts); '' or absent = the job keeps its own. */
  nextTrace?: string;
}

/** Trace fields for a fan-out (queue/tracing.ts): absent = the children and the join keep the job's own. */
export interface FanOutTraces {
  /** The context the join job is created in. */
  join?: string;
  /** One per child, or none. */
  children?: string[];
}

/** How a fan-out hands its children to the next stage. */
export interface FanOutOptions {
  /**
   * The hash of the next stage's contract the children's data was checked against ('' or absent:
   * none). The script refuses a hash not in force (ContractChangedError): nothing is written.
   */
  contract?: string;
}

/** Why a running job goes back to ready without an attempt. */
export type ReleaseCause = "handedBack" | "deferred" | "rateLimited";

export interface SweepResult {
  /** false when another sweeper held the mutex. */
  ran: boolean;
  requeued: number;
  deadLettered: number;
  /**
   * > 0 while the outage grace is open (ms left): the sweeper saw a gap longer than `gapMs`
   * since the previous sweep call, so no lease is expired until every live worker renewed.
   */
  graceLeftMs: number;
}

export interface SweepOptions {
  maxStalls?: number;
  limit?: number;
  /** The mutex: at most one sweep per this many ms per queue. */
  lockMs?: number;
  workerStaleMs?: number;
  /**
   * A gap longer than this between two sweep calls (any caller) means nobody reached Redis, so
   * nobody could renew: it opens a grace of `graceMs` in which no lease expires. Callers that
   * do not know the workers' lease (the operator) leave both out and the queue's stored values
   * (from the workers' sweeps) apply. See sweep_leases.lua.
   */
  gapMs?: number;
  graceMs?: number;
}

/** What one reclaim_finished call did. */
export interface ReclaimResult {
  /** Records deleted. */
  reclaimed: number;
  /** Entries of the index are still due: call again. */
  more: boolean;
}

/** Records one reclaim_finished call examines at most (and one index member more): ~1.5 ms of Redis at ~12 µs a key on a loaded machine (bench/reclaimCall.ts). */
export const RECLAIM_BATCH = 100;

export { CLAIM_KEYS } from "./gateway.ts";

/**
 * Where each named field sits in a claim reply's per-job values: the reply's first element names
 * them (comma-separated), the values follow job by job. Cached by that text: it changes only
 * with the scripts.
 */
type ClaimLayout = { stride: number; at: Record<string, number> };
const claimLayouts = new Map<string, ClaimLayout>();
function claimLayout(names: string): ClaimLayout {
  let layout = claimLayouts.get(names);
  if (!layout) {
    const list = names.split(",");
    for (const required of ["id", "token", "data"])
      if (!list.includes(required)) throw new Error(`claim reply names no "${required}" field: ${names}`);
    layout = { stride: list.length, at: Object.fromEntries(list.map((n, i) => [n, i])) };
    claimLayouts.set(names, layout);
  }
  return layout;
}

/** A claim's grants field: {"openai":{"key":"k2","at":…,"tokens":1200}} → resource → grant. */
function parseGrants(text: string): Record<string, ResourceGrant> {
  const out: Record<string, ResourceGrant> = {};
  for (const [name, g] of Object.entries(JSON.parse(text) as Record<string, Record<string, unknown>>)) {
    const { key, at, ...amounts } = g;
    out[name] = { key: String(key), at: Number(at), amounts: amounts as Record<string, number> };
  }
  return out;
}

export class Consumer {
  readonly queue: string;
  readonly keys: QueueKeys;
  private readonly redis: RedisClient;
  private readonly opts: Required<Omit<ConsumerOptions, keyof DurabilityOptions | "templateVersion">> &
    DurabilityOptions &
    Pick<ConsumerOptions, "templateVersion">;

  constructor(redis: RedisClient, queue: string, opts: ConsumerOptions) {
    this.redis = redis;
    this.queue = queue;
    this.keys = new QueueKeys(queue);
    this.opts = {
      retentionSeconds: DEFAULT_RETENTION_SECONDS,
      ...opts,
      readsLayout: opts.readsLayout ?? readableLayouts().max,
    };
  }

  /**
   * Add the queue's pipeline to `cvy:pipelines`, so a job can be found by id alone whoever
   * enqueued it, and the queues it hands jobs to (a next stage) to `cvy:queues`, so a stage fed
   * only by the one before it is listed from its first job on (a producer adds the queues it
   * enqueues to). Both keys are outside the pipeline's slot, so no script can do it.
   */
  async register(handsTo: readonly string[] = []): Promise<void> {
    await Promise.all([
      this.redis.sadd(PIPELINES_KEY, this.keys.pipeline),
      ...(handsTo.length > 0 ? [this.redis.sadd(QUEUES_KEY, ...handsTo)] : []),
    ]);
  }

  /**
   * Before the first claim: the scripts resolved and loaded, so that claim's reply (and its jobs'
   * handlers) does not wait for them. Never fails: a problem is the first claim's to report.
   */
  async prepare(): Promise<void> {
    await prepareScripts(this.redis).catch(() => {});
  }

  /** Claim at most `count` jobs — never more than the caller has free slots for. */
  async claim(count: number): Promise<ClaimResult> {
    const k = this.keys;
    const now = Date.now();
    const sentAt = performance.now();
    const reply = await gateway.claimJobs(this.redis, {
      keys: k,
      now,
      leaseMs: this.opts.leaseMs,
      count,
      workerId: this.opts.workerId,
      readsLayout: this.opts.readsLayout,
    });
    return this.claimed(reply, now, sentAt);
  }

  /**
   * Parse a claim reply (claim_jobs, or the claim part of a complete-and-claim); `sentAt`: the
   * call's send time (performance.now()).
   */
  private claimed(reply: gateway.ClaimReply, now: number, sentAt: number): ClaimResult {
    const { jobs: flat, nextDueMs: nextDue, startSlackMs: slack, refusedLayout: refused } = reply;
    const jobs: ClaimedJob[] = [];
    const startBy = slack > 0 ? { startBy: sentAt + slack } : {};
    if (flat.length === 0)
      return {
        jobs,
        nextDueAt: nextDue >= 0 ? nextDue : null,
        ...(refused ? { refusedLayout: refused } : {}),
      };
    const { stride, at } = claimLayout(flat[0]!);
    // (a field the reply does not name reads as undefined: its default below)
    const field = (i: number, name: string): string | undefined => {
      const k = at[name];
      return k === undefined ? undefined : flat[i + k];
    };
    for (let i = 1; i < flat.length; i += stride) {
      const resources = field(i, "resources");
      const task = field(i, "task");
      jobs.push({
        id: field(i, "id")!,
        queue: this.queue,
        token: String(field(i, "token")),
        rawData: field(i, "data")!,
        attempt: Number(field(i, "attempt") ?? 1),
        maxAttempts: Number(field(i, "attempts") ?? 1),
        timeoutMs: Number(field(i, "timeoutMs") ?? 0),
        stalls: Number(field(i, "stalls") ?? 0),
        createdAt: Number(field(i, "createdAt") ?? 0),
        contentHash: field(i, "contentHash") ?? "",
        trace: field(i, "trace") ?? "",
        requeued: field(i, "requeued") ?? "",
        contract: field(i, "contract") ?? "",
        claimedAt: now,
        ...startBy,
        ...(resources ? { resources: parseGrants(resources) } : {}),
        ...(task ? { task } : {}),
        previousErrors: parseAttemptErrors(field(i, "errors")),
        ...parentsOf(field(i, "parents")),
      });
    }
    return { jobs, nextDueAt: nextDue >= 0 ? nextDue : null };
  }

  /** Renew every lease in one call; returns the ids whose lease is no longer ours (and which were cancelled). */
  async renew(leases: Lease[], report?: WorkerReport): Promise<RenewResult> {
    const { lost, cancelled, cordonedUntil } = await gateway.renewLeases(this.redis, {
      keys: this.keys,
      now: Date.now(),
      leaseMs: this.opts.leaseMs,
      workerId: this.opts.workerId,
      report: report ? JSON.stringify(report) : "",
      pod: report?.pod ?? "",
      leases,
    });
    return { lost, cancelled, ...(cordonedUntil ? { cordonedUntil: Number(cordonedUntil) } : {}) };
  }

  /**
   * The one settle path for a finished job: complete it here, or (with `next`) hand it to the
   * next stage in the same script; with `claim`, that script also claims up to `claim` jobs of
   * this queue for the slot(s) it frees (complete-and-claim, BullMQ's moveToFinished with
   * fetch-next: one round trip per job instead of two). The claim runs even when the settle was
   * fenced off — the slot is free either way. A batch of one `settleMany`.
   */
  async settle(job: Lease, settlement: Settlement): Promise<Settled> {
    const { claim, ...rest } = settlement;
    const r = await this.settleMany([{ job, settlement: rest }], claim ?? 0);
    return { outcome: r.outcomes[0]!, jobs: r.jobs, nextDueAt: r.nextDueAt };
  }

  /**
   * Settle finished jobs of this queue in one script call (settle_jobs.lua) and claim up to
   * `claim` jobs for the slots they free. Every settlement must go to the same place: all
   * complete here, or all hand over to the same next queue. Each job is fenced on its own; the
   * outcomes come back in order. (`claim` in the settlements is ignored.)
   */
  async settleMany(
    batch: readonly { job: Lease; settlement: Settlement }[],
    claim = 0,
  ): Promise<SettledBatch> {
    if (batch.length > SETTLE_BATCH_MAX) {
      // Settle in chunks, claiming with the last one.
      const outcomes: SettleOutcome[] = [];
      for (let i = 0; i < batch.length; i += SETTLE_BATCH_MAX) {
        const last = i + SETTLE_BATCH_MAX >= batch.length;
        const r = await this.settleMany(batch.slice(i, i + SETTLE_BATCH_MAX), last ? claim : 0);
        outcomes.push(...r.outcomes);
        if (last) return { ...r, outcomes };
      }
    }
    const k = this.keys;
    const now = Date.now();
    const sentAt = performance.now();
    const next = batch[0]?.settlement.next;
    let nextKeys: QueueKeys | undefined;
    if (next) {
      assertSamePipeline(this.queue, next.queue);
      nextKeys =
        this.nextKeys?.queue === next.queue ? this.nextKeys : (this.nextKeys = new QueueKeys(next.queue));
    }
    const jobs: gateway.SettleJob[] = [];
    for (const { job, settlement: s } of batch) {
      if (s.next?.queue !== next?.queue || (s.next?.contract ?? "") !== (next?.contract ?? ""))
        throw new RangeError(
          `settleMany: one batch hands over to one place, checked against one contract (${describeNext(next)} and ${describeNext(s.next)})`,
        );
      const reuse = s.reuse ?? {};
      const result = s.encodedResult ?? encodeResult(s.result);
      jobs.push({
        id: job.id,
        token: job.token,
        result,
        contentHash: reuse.contentHash ?? "",
        resultTtlSeconds: reuse.ttlSeconds ?? 0,
        reused: reuse.reused === true,
        ...(s.next
          ? {
              next: {
                data: s.next.data === undefined ? result : encodeResult(s.next.data),
                contentHash: s.next.contentHash ?? "",
                trace: s.next.trace ?? "",
              },
            }
          : {}),
      });
    }
    const reply = await gateway.settleJobs(this.redis, this.opts, {
      keys: k,
      now,
      retentionSeconds: this.opts.retentionSeconds,
      ...(next && nextKeys ? { next: { keys: nextKeys, contract: next.contract ?? "" } } : {}),
      claim,
      leaseMs: this.opts.leaseMs,
      workerId: this.opts.workerId,
      templateVersion: this.opts.templateVersion ?? "",
      readsLayout: this.opts.readsLayout,
      jobs,
    });
    return { outcomes: reply.codes.map(settleOutcome), ...this.claimed(reply, now, sentAt) };
  }
  private nextKeys: QueueKeys | undefined;

  /** Shorthand for `settle` without a claim: true when completed, false when fenced off. */
  async complete(job: Lease, result: unknown, reuse: ResultReuse = {}): Promise<boolean> {
    return (await this.settle(job, { result, reuse })).outcome === "settled";
  }

  /** Shorthand for `settle` to the next stage (`nextData` defaults to the result), without a claim. */
  async advance(
    job: Lease,
    result: unknown,
    nextQueue: string,
    nextData: unknown = result,
    opts: HandOver = {},
  ): Promise<boolean> {
    const { nextContentHash, nextTrace, ...reuse } = opts;
    const next = { queue: nextQueue, data: nextData, contentHash: nextContentHash, trace: nextTrace };
    return (await this.settle(job, { result, next, reuse })).outcome === "settled";
  }

  /**
   * Complete this job by fanning it out: one child job per element of `children` in
   * `nextQueue` (ids `<id>:1`…`<id>:n`), and once every child has finished — completed at its
   * last stage or dead-lettered — a single join job `<id>:join` in `joinQueue` whose data is
   * `{parent, results: [{id, result} | {id, error}, …]}` in child order. Returns the number of
   * children, null when the lease was lost, or "cancelled" when the job was cancelled meanwhile.
   */
  async fanOut(
    job: Lease,
    children: unknown[],
    nextQueue: string,
    joinQueue: string,
    traces: FanOutTraces = {},
    opts: FanOutOptions = {},
  ): Promise<number | null | "cancelled"> {
    const childTraces = traces.children ?? [];
    if (childTraces.length > 0 && childTraces.length !== children.length)
      throw new RangeError(
        `fanOut: ${childTraces.length} child trace contexts for ${children.length} children`,
      );
    assertSamePipeline(this.queue, nextQueue);
    assertSamePipeline(this.queue, joinQueue);
    const n = await gateway.fanOut(this.redis, this.opts, {
      keys: this.keys,
      id: job.id,
      token: job.token,
      now: Date.now(),
      next: new QueueKeys(nextQueue),
      joinQueue,
      joinTrace: traces.join ?? "",
      children: children.map((c) => encodeResult(c)),
      childTraces,
      contract: opts.contract ?? "",
    });
    return n === -2 ? "cancelled" : n < 0 ? null : n;
  }

  /** A stored result for this job's content hash at this stage, as JSON text, or null. */
  async reusableResult(contentHash: string): Promise<string | null> {
    if (!contentHash) return null;
    return this.redis.get(this.keys.result(contentHash));
  }

  /** Parent `key`'s result for a claimed flow job: inline, or fetched by its reference (fetchParentResult). */
  parentResult(job: Pick<ClaimedJob, "queue" | "parents">, key: string): Promise<unknown> {
    return fetchParentResult(this.redis, job.queue, job.parents, key);
  }

  /** Progress from a running handler; false when the lease was lost. */
  async progress(job: Lease, fraction: number, message = ""): Promise<boolean> {
    return gateway.reportProgress(this.redis, {
      keys: this.keys,
      id: job.id,
      token: job.token,
      now: Date.now(),
      fraction,
      message,
    });
  }

  /**
   * A line for the job's log (capped at JOB_LOG_MAX_LINES, longer lines cut); false when the
   * lease was lost. The log expires `ttlSeconds` after its last line.
   */
  async appendLog(job: Lease, message: string, ttlSeconds: number): Promise<boolean> {
    const text = message.length > JOB_LOG_MAX_CHARS ? `${message.slice(0, JOB_LOG_MAX_CHARS)}…` : message;
    const line = JSON.stringify({ at: Date.now(), executionId: job.token, message: text });
    return gateway.appendLog(this.redis, {
      keys: this.keys,
      id: job.id,
      token: job.token,
      now: Date.now(),
      line,
      maxLines: JOB_LOG_MAX_LINES,
      ttlSeconds: Math.max(1, Math.ceil(ttlSeconds)),
    });
  }

  /**
   * Record a failed attempt. `kind` (default exception), `details` (an invalid result's
   * violations) and `rejected` (that result's JSON text, kept as the record's `rejected`) go
   * into the job's `errors` for its next attempt (attemptErrors.ts).
   */
  async fail(
    job: Lease,
    error: SerializedError,
    opts: {
      retryable: boolean;
      retryDelayMs: number;
      kind?: AttemptErrorKind;
      details?: unknown[];
      rejected?: string;
    },
  ): Promise<FailOutcome> {
    return gateway.failJob<FailOutcome>(this.redis, this.opts, {
      keys: this.keys,
      id: job.id,
      token: job.token,
      now: Date.now(),
      error: JSON.stringify(error),
      retryDelayMs: Math.max(0, Math.round(opts.retryDelayMs)),
      retryable: opts.retryable,
      kind: opts.kind ?? "exception",
      details: opts.details && opts.details.length > 0 ? JSON.stringify(opts.details) : "",
      rejected: opts.rejected === undefined ? "" : opts.rejected.slice(0, REJECTED_MAX_CHARS),
      templateVersion: this.opts.templateVersion ?? "",
    });
  }

  /** Hand a running job back for immediate redelivery, without counting an attempt. */
  async release(job: Lease, reason: string, cause: ReleaseCause = "handedBack"): Promise<boolean> {
    return (await this.releaseOutcome(job, reason, cause)) === "settled";
  }

  /**
   * `release`, telling a lost lease (`fenced`) from a cancelled job. With `bench` (cause
   * `rateLimited`), the resource's key admits nothing until `untilMs`, for every worker.
   */
  async releaseOutcome(
    job: Lease,
    reason: string,
    cause: ReleaseCause = "handedBack",
    bench?: { resource: string; key: string; untilMs: number },
  ): Promise<SettleOutcome> {
    const code = await gateway.releaseJob(this.redis, {
      keys: this.keys,
      id: job.id,
      token: job.token,
      now: Date.now(),
      reason,
      cause,
      ...(bench ? { bench: { ...bench, untilMs: Math.round(bench.untilMs) } } : {}),
      templateVersion: this.opts.templateVersion ?? "",
    });
    return settleOutcome(code);
  }

  /**
   * Correct the window of the key a claim granted `job` for `resource` by `deltas` (unit → actual
   * − counted so far): docs/protocol.md, "Resources".
   */
  async correctUsage(job: ClaimedJob, resource: string, deltas: Record<string, number>): Promise<void> {
    const grant = job.resources?.[resource];
    if (!grant || Object.keys(deltas).length === 0) return;
    await correctResourceUsage(this.redis, this.queue, resource, grant.key, grant.at, deltas);
  }

  async sweep(opts: SweepOptions = {}): Promise<SweepResult> {
    return sweepQueue(this.redis, this.queue, opts);
  }

  /**
   * Reclaim finished jobs whose retention has passed: at most `limit` records per call
   * (reclaim_finished.lua); `more` says whether to call again.
   */
  async reclaimFinished(limit = RECLAIM_BATCH): Promise<ReclaimResult> {
    return gateway.reclaimFinished(this.redis, { keys: this.keys, now: Date.now(), limit });
  }

  /**
   * Block until a producer (or a hand-back) signals work, or `timeoutMs` passes. Needs a
   * connection of its own: a blocked connection serves nothing else. True when it took a wake-up
   * (the token is this worker's to act on, or to pass on: passWake).
   */
  async waitForWork(blocking: RedisClient, timeoutMs: number): Promise<boolean> {
    return (await blocking.blpop(this.keys.wake, Math.max(0.01, timeoutMs / 1000))) !== null;
  }

  /** Hand a wake-up this worker took but will not act on (cordoned) to the next blocked worker. */
  async passWake(): Promise<void> {
    await this.redis.lpush(this.keys.wake, "1");
  }

  async forgetWorker(): Promise<void> {
    await this.redis.hdel(this.keys.workers, this.opts.workerId);
  }
}

/** The leaderless sweeper, callable by anyone holding a connection (workers, operator). */
export async function sweepQueue(
  redis: RedisClient,
  queue: string,
  opts: SweepOptions = {},
): Promise<SweepResult> {
  return sweepResult(
    await gateway.sweepLeases(redis, {
      keys: new QueueKeys(queue),
      now: Date.now(),
      settings: sweepSettings(opts),
    }),
  );
}

/** sweep_leases' settings (poll_queues' too), defaults filled in. */
export function sweepSettings(opts: SweepOptions = {}): gateway.SweepSettings {
  return {
    maxStalls: opts.maxStalls ?? DEFAULT_MAX_STALLS,
    limit: opts.limit ?? 1000,
    lockMs: opts.lockMs ?? 1000,
    workerStaleMs: opts.workerStaleMs ?? 60_000,
    gapMs: Math.max(0, Math.round(opts.gapMs ?? 0)),
    graceMs: Math.max(0, Math.round(opts.graceMs ?? 0)),
  };
}

/** A sweep_leases reply as a SweepResult. */
export function sweepResult({ requeued, dead, graceLeftMs }: gateway.SweepReply): SweepResult {
  if (requeued < 0) return { ran: false, requeued: 0, deadLettered: 0, graceLeftMs };
  return { ran: true, requeued, deadLettered: dead, graceLeftMs };
}

function describeNext(next: NextStage | undefined): string {
  return next ? `${next.queue}${next.contract ? ` contract ${next.contract}` : ""}` : "complete";
}

/** A handler result (or fan-out child) that JSON cannot encode: retrying cannot help. */
export class InvalidResultError extends Error {
  override name = "InvalidResultError";
  readonly retryable = false;
}

/**
 * A result as the JSON text stored in Redis. Values JSON has no text for at the top level
 * (undefined, a function, a Symbol) are `null`, as nested ones are dropped by JSON itself; a
 * value JSON.stringify refuses (a BigInt, a cycle, a throwing toJSON) is an InvalidResultError.
 */
export function encodeResult(result: unknown): string {
  let json: string | undefined;
  try {
    json = JSON.stringify(result);
  } catch (err) {
    let why = "JSON.stringify threw";
    try {
      if (err instanceof Error) why = err.message.split("\n")[0]!;
    } catch {
      // an Error whose message cannot be read: keep the generic reason
    }
    throw new InvalidResultError(`handler result is not JSON: ${why}`, { cause: err });
  }
  return typeof json === "string" ? json : "null";
}

/** The claim reply's `parents` (JSON {key: {id, result} | {id, ref, bytes} | {id, error}}, '' = none) as ClaimedJob.parents. */
function parentsOf(text: string | undefined): { parents?: Record<string, ParentOutcome> } {
  if (!text) return {};
  try {
    const parsed: unknown = JSON.parse(text);
    if (parsed && typeof parsed === "object") return { parents: parsed as Record<string, ParentOutcome> };
  } catch {
    // a reply that does not parse is a broken record: the job runs without its parents' outcomes
  }
  return {};
}

// One job's execution, apart from the slot loop (worker.ts): parse its data, run the handler
// under its timeout and abort signal, and settle the outcome — completed or handed to the next
// stage (the slots' owner claiming for the freed slot on the way), failed, fanned out or deferred.
import { createHash } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import type { Logger } from "pino";
import { exponentialDelay, type BackoffPolicy } from "../lib/backoff.ts";
import {
  ContractChangedError,
  ContractError,
  encodeResult,
  permanentReplyCode,
  ReplicationError,
  retryDelay,
  type AttemptError,
  type ParentOutcome,
  type ClaimedJob,
  type CompiledContract,
  type ContractCache,
  type FailOutcome,
  type Consumer,
  type Schedules,
  type Settlement,
  type SettleOutcome,
} from "../queue/index.ts";
import { BatchCalls } from "./batchCalls.ts";
import type { CircuitBreaker } from "./circuitBreaker.ts";
import {
  childrenDataProblem,
  cachedContract,
  isJoinJob,
  joinDataProblem,
  nextDataProblem,
  ResultContractError,
  resultProblem,
  taskOf,
} from "./contractCheck.ts";
import type { WorkerConfig } from "./config.ts";
import { attemptFailureOf, JobTimeoutError, MalformedJobError, serializeError } from "./errors.ts";
import { fanOutRequest, type FanOutRequest } from "./fanOut.ts";
import {
  isDependencyFailure,
  isRetryable,
  isStalled,
  rateLimitOf,
  type Handler,
  type HandlerContext,
  type JobLogger,
  type JobView,
} from "./handlers/index.ts";
import type { HandlerCallbacks } from "./handlerCallback.ts";
import type { WorkerMetrics } from "./metrics.ts";
import { NO_TRACE, type ExecutionTrace } from "./tracing.ts";

/** Waits after a failed write that settles a job (Redis outages). */
const SETTLE_RETRY: BackoffPolicy = { baseMs: 200, maxMs: 2000 };

/** A job in a slot, shared by its execution and the slot loop (hand-back, lost leases). */
export interface RunningJob {
  job: ClaimedJob;
  /** Its effective timeout (ms): the job's own, else the worker's (effectiveTimeoutMs). */
  timeoutMs: number;
  /** Made when the handler first reads ctx.signal (most never do): see jobSignal(). */
  controller?: AbortController;
  /** Aborted (timeout, hand-back, lost lease, cancel): the first reason, as the signal reports it. */
  aborted: boolean;
  abortReason?: unknown;
  /** While the handler runs: gives up on it (the kill grace after an abort ran out). */
  abandon?: (reason: unknown) => void;
  grace?: NodeJS.Timeout;
  handedBack: boolean;
  /** Stopped at the drain deadline without a hand-back (Redis unreachable): its lease lapses. */
  leftToLease?: boolean;
  lost: boolean;
  /** Cancelled while it ran (seen at a renewal): already final in Redis, nothing to settle. */
  cancelled: boolean;
  /** Its outcome is being written: a concurrent heartbeat may see the token already cleared. */
  settling: boolean;
  /** Its `process {queue}` span (NO_TRACE while tracing is off). */
  trace: ExecutionTrace;
  /** A rate limit the handler reported through the callback (`POST /rate-limited`). */
  rateLimited?: { retryAfterMs: number; resource?: string };
}

export interface ExecutionDeps<E extends RunningJob> {
  config: WorkerConfig;
  log: Logger;
  metrics: WorkerMetrics;
  handler: Handler;
  /** The loopback callback of http/command handlers (progress, log lines, cancellation check). */
  callbacks?: HandlerCallbacks;
  consumer: Consumer;
  circuit: CircuitBreaker;
  /**
   * A completion's first write: batched complete-and-claim, the claimed jobs going to the slots'
   * owner (worker.ts).
   */
  complete(entry: E, settlement: Settlement): Promise<SettleOutcome>;
  /** A schedule's tick puts the next one in line when it starts. */
  schedules: Schedules;
  /** Told each completed job's duration (ms). */
  onCompleted?: (ms: number) => void;
  /** The stages' contracts (this one's, the next one's): results are checked at settle. Absent: none checked. */
  contracts?: ContractCache;
}

/** Settle tries refused because the next stage's contract changed meanwhile, before the attempt fails. */
const CONTRACT_CHANGES_MAX = 3;

export class JobExecutor<E extends RunningJob = RunningJob> {
  private readonly config: WorkerConfig;
  private readonly log: Logger;
  private readonly metrics: WorkerMetrics;
  private readonly handler: Handler;
  /** The task names job metrics are labelled with: the handler's own list, so a bounded set. */
  private readonly metricTasks: ReadonlySet<string>;
  private readonly callbacks: HandlerCallbacks | undefined;
  private readonly consumer: Consumer;
  private readonly circuit: CircuitBreaker;
  private readonly complete: ExecutionDeps<E>["complete"];
  private readonly schedules: Schedules;
  private readonly onCompleted: (ms: number) => void;
  private readonly contracts: ContractCache | undefined;
  /** The writes that settle jobs (the hand-back at the drain deadline too); /readyz asks it. */
  readonly writes: SettleWrites;
  /** With --batch-size: the calls that take several jobs at once (absent: one job per call). */
  readonly batches: BatchCalls<RunningJob> | undefined;
  /** Metrics of the per-job path bound to their labels once (prom-client hashes a label object per call). */
  private readonly perJob;

  constructor(deps: ExecutionDeps<E>) {
    this.config = deps.config;
    this.log = deps.log;
    this.metrics = deps.metrics;
    this.handler = deps.handler;
    this.metricTasks = new Set(deps.handler.tasks ?? []);
    this.callbacks = deps.callbacks;
    this.consumer = deps.consumer;
    this.circuit = deps.circuit;
    this.complete = deps.complete;
    this.schedules = deps.schedules;
    this.onCompleted = deps.onCompleted ?? (() => {});
    this.contracts = deps.contracts;
    const queue = deps.config.queue;
    this.writes = new SettleWrites(
      (code) => this.metrics.writesRefused.inc({ queue, code }),
      () => this.metrics.writesUnconfirmed.inc({ queue }),
    );
    const batch = deps.config.batch;
    if (batch && deps.handler.batch)
      this.batches = new BatchCalls<RunningJob>({
        fn: deps.handler.batch.bind(deps.handler),
        config: batch,
        concurrency: deps.config.concurrency,
        killGraceMs: deps.config.killGraceMs,
        log: deps.log,
        timedOut: (entry, reason) => this.abort(entry, reason),
        onCall: (jobs) => this.metrics.batchCallJobs.observe({ queue: deps.config.queue }, jobs),
      });
    this.perJob = {
      started: this.metrics.started.labels({ queue }),
      completed: this.metrics.completed.labels({ queue }),
      completedSeconds: this.metrics.duration.labels({ queue, outcome: "completed" }),
    };
  }

  /** The job's task as a metric label: only a task the handler declares (none for an untasked job). */
  private metricTask(job: ClaimedJob): string | undefined {
    return job.task !== undefined && this.metricTasks.has(job.task) ? job.task : undefined;
  }

  /**
   * Run one claimed job to its end: handler, timeout, abort, result or error, settle. A settle
   * write Redis refused for good ends it too (logged and counted by SettleWrites).
   */
  async run(entry: E): Promise<void> {
    try {
      await this.execute(entry);
    } catch (err) {
      if (!(err instanceof WriteRefusedError)) throw err;
      entry.trace.end("writeRefused", err);
    }
  }

  /** Parse → run → settle: each phase ends the execution itself when that is its outcome. */
  private async execute(entry: E): Promise<void> {
    const exec = await this.parse(entry);
    if (exec === undefined) return;
    const result = await this.runJob(entry, exec);
    if (result !== ENDED) await this.settle(entry, exec, result);
  }

  /**
   * Start the execution (its logger, the started count, a schedule's next tick) and parse the
   * job's data; data that is not JSON fails the job here.
   */
  private async parse(entry: E): Promise<Execution | undefined> {
    const { job } = entry;
    // The job's child logger is made when something logs (or the handler reads ctx.log): at
    // LOG_LEVEL=warn a job that completes logs nothing, and a pino child costs per job.
    let child: Logger | undefined;
    const jobLog = () =>
      (child ??= this.log.child({
        jobId: job.id,
        attempt: job.attempt,
        executionId: job.token,
        ...(job.task ? { task: job.task } : {}),
      }));
    // ctx.log("…") lines go to the job's own log (Redis, capped), kept as long as its record.
    const logTtlSeconds = entry.timeoutMs / 1000 + this.config.retentionSeconds;
    const appendLog = (message: string) => this.consumer.appendLog(job, message, logTtlSeconds);
    const log = lazyLogger(jobLog, (message) => {
      appendLog(message).catch((err: Error) => jobLog().warn({ err: err.message }, "log line not recorded"));
    });
    this.perJob.started.inc();
    if (job.stalls > 0) this.metrics.redeliveries.inc({ queue: job.queue, cause: "lease_expired" });
    const exec: Execution = { log, appendLog, startedAt: performance.now(), data: undefined, reused: false };
    // A schedule's tick (id `sched:…`): the next tick goes in line before this one runs, so a
    // crash here cannot end the schedule (a redelivered tick enqueues nothing twice).
    if (job.id.startsWith("sched:")) {
      const next = await this.writes.write(log, "schedule the next tick", () =>
        this.schedules.onTickStarted(job.queue, job.id),
      );
      if (next !== null) log.debug({ nextTick: new Date(next).toISOString() }, "next schedule tick enqueued");
    }
    try {
      exec.data = JSON.parse(job.rawData);
    } catch (err) {
      const error = new MalformedJobError(`job data is not JSON: ${(err as Error).message}`);
      await this.settleFailure(entry, error, log, secondsSince(exec));
      return undefined;
    }
    const refused =
      this.contracts && isJoinJob(job, exec.data) ? await this.joinProblem(job, log, exec.data) : undefined;
    if (refused) {
      await this.settleFailure(entry, refused, log, secondsSince(exec));
      return undefined;
    }
    return exec;
  }

  /** A join's data against its stage's contract in force at the claim (one no producer checked). */
  private async joinProblem(job: ClaimedJob, log: Logger, data: unknown): Promise<Error | undefined> {
    const cache = this.contracts!;
    let compiled = cachedContract(cache, job.queue, job.contract);
    if (compiled === undefined) {
      const read = await this.readContract(log, () => cache.ensure(job.queue, job.contract));
      if (read instanceof Error) return read;
      compiled = read;
    }
    return joinDataProblem(compiled, job.queue, data);
  }

  /**
   * Run the handler (or reuse a stored result) under the job's timeout. Resolves with the result
   * to settle; ENDED when the execution ended otherwise (abandoned, failed, deferred…).
   */
  private async runJob(entry: E, exec: Execution): Promise<unknown> {
    const { job } = entry;
    const view: JobView = {
      id: job.id,
      queue: job.queue,
      data: exec.data,
      attempt: job.attempt,
      maxAttempts: job.maxAttempts,
      executionId: job.token,
      createdAt: job.createdAt,
      ...(job.task ? { task: job.task } : {}),
      previousErrors: job.previousErrors,
      ...(job.parents ? { parents: job.parents } : {}),
    };
    const ctx = new JobContext(entry, exec.log, this.consumer);
    const callback = this.callbacks?.open({
      signal: jobSignal(entry),
      progress: (fraction, message) => this.consumer.progress(job, fraction, message),
      log: exec.appendLog,
      usage: (used) => ctx.reportUsage(used),
      parentResult: (key) => ctx.parentResult(key),
      rateLimited: (mark) => {
        entry.rateLimited = mark;
      },
    });
    if (callback) ctx.callback = { url: callback.url, token: callback.token };
    const cached = this.reuses(job)
      ? await this.consumer.reusableResult(job.contentHash).catch(() => null)
      : null;
    // Arguments, not a closure: nothing per job is captured until it fires. A batched job is
    // timed by its call instead (BatchCalls), so waiting for the batch to fill does not count.
    const timer = this.batches ? undefined : setTimeout(this.timedOut, entry.timeoutMs, entry);
    exec.reused = cached !== null;
    let result: unknown;
    try {
      result = cached !== null ? JSON.parse(cached) : await this.runHandler(entry, view, ctx);
    } catch (err) {
      clearTimeout(timer);
      callback?.close();
      await this.settleError(entry, err, exec);
      return ENDED;
    }
    clearTimeout(timer);
    callback?.close();
    this.circuit.success();
    if (entry.handedBack || entry.lost || entry.cancelled) {
      this.logAbandoned(entry, exec.log, secondsSince(exec));
      return ENDED;
    }
    return result;
  }

  /** The handler threw (or was aborted): the outcome its error and the job's state call for. */
  private async settleError(entry: E, err: unknown, exec: Execution): Promise<void> {
    const { log } = exec;
    const seconds = secondsSince(exec);
    if (entry.handedBack || entry.lost || entry.cancelled) return this.logAbandoned(entry, log, seconds);
    if (isStalled(err) && !entry.aborted) return this.leaveToLease(entry, err, log, seconds);
    const limited = rateLimitOf(err) ?? entry.rateLimited;
    if (limited && entry.job.resources) return this.sidelineAndRelease(entry, limited, err, log, seconds);
    if (isDependencyFailure(err) && this.circuit.enabled) return this.defer(entry, err, log, seconds);
    // A handler aborted by its timeout usually rethrows a generic AbortError: record why.
    const reason: unknown = entry.aborted ? entry.abortReason : undefined;
    await this.settleFailure(entry, reason instanceof JobTimeoutError ? reason : err, log, seconds);
  }

  /**
   * Settle a result: completed, or advanced to the next stage (complete-and-claim on the first
   * try), or fanned out. A result JSON cannot encode fails the job.
   */
  private async settle(entry: E, exec: Execution, result: unknown): Promise<void> {
    const { job, trace } = entry;
    const { log, reused: cached } = exec;
    let fan: FanOutRequest | null;
    let encoded: string;
    try {
      // A result JSON cannot encode (a BigInt, a cycle) fails the job, not retryable, here:
      // inside settle() it would look like a Redis write failure and be retried forever.
      encoded = encodeResult(result);
      fan = fanOutRequest(result, job.queue, this.config.nextQueue);
    } catch (err) {
      await this.settleFailure(entry, err, log, secondsSince(exec));
      return;
    }
    if (fan) return this.settleFanOut(entry, fan, log, secondsSince(exec), encoded);
    const next = this.config.nextQueue;
    // The stage's contract, and the next stage's for a hand-over ('' when none: nothing checked,
    // nothing awaited — the claim said this stage has none, the cache that the next one has none).
    let nextContract = "";
    const contracts = this.contracts;
    if (contracts && (job.contract || (next && contracts.known(next) !== null))) {
      const checked = await this.checkContracts(job, log, result, encoded, next);
      if (typeof checked !== "string") return this.settleFailure(entry, checked, log, secondsSince(exec));
      nextContract = checked;
    }
    entry.settling = true;
    const reuse = this.reuses(job);
    const settlement: Settlement = {
      result,
      encodedResult: encoded,
      reuse: {
        contentHash: reuse ? job.contentHash : "",
        ttlSeconds: this.config.resultTtlSeconds,
        reused: cached,
      },
      next: next
        ? {
            queue: next,
            contentHash: reuse ? contentHashOf(encoded) : "",
            trace: trace.handOver(next, job.id),
            contract: nextContract,
          }
        : undefined,
    };
    let outcome: SettleOutcome;
    for (let changes = 0; ; changes++) {
      const written = await this.writes.write(log, "complete", async (attempt, unconfirmed) => {
        try {
          // Batched complete-and-claim: settled with the completions of the same tick, in one call
          // that also claims for the freed slots. Not on a retry: a reply lost to a connection
          // error would strand what the earlier try claimed until its lease expires.
          if (attempt > 1) {
            const again = (await this.consumer.settle(job, settlement)).outcome;
            // (fenced by our own earlier, applied but unconfirmed settle)
            return again === "fenced" && unconfirmed ? "settled" : again;
          }
          return await this.complete(entry, settlement);
        } catch (err) {
          // (the next stage's contract is not the one checked: nothing was written)
          if (err instanceof ContractChangedError) return err;
          throw err;
        }
      });
      if (!(written instanceof ContractChangedError)) {
        outcome = written;
        break;
      }
      // Re-read the next stage's contract and check the hand-over again against it.
      const again =
        changes + 1 < CONTRACT_CHANGES_MAX
          ? await this.checkNext(
              log,
              next!,
              (c) => nextDataProblem(c, next!, result, encoded, taskOf(job)),
              written.inForce,
            )
          : new Error(
              `the data contract of the next stage ${next} changed ${CONTRACT_CHANGES_MAX} times during the settle`,
            );
      if (typeof again !== "string") return this.settleFailure(entry, again, log, secondsSince(exec));
      settlement.next!.contract = again;
    }
    trace.end(outcome === "settled" ? (next ? "advanced" : "completed") : outcome);
    const seconds = secondsSince(exec);
    if (outcome === "cancelled") return this.logCancelled(entry, log, seconds, "result refused");
    if (outcome !== "settled") {
      this.metrics.leasesLost.inc({ queue: job.queue });
      this.metrics.duration.observe({ queue: job.queue, outcome: "fenced" }, seconds);
      log.warn(
        { outcome: "fenced", durationMs: Math.round(seconds * 1000) },
        "lease was lost before completion: result discarded (another worker owns the job)",
      );
      return;
    }
    this.perJob.completed.inc();
    if (cached) this.metrics.resultsReused.inc({ queue: job.queue });
    const task = this.metricTask(job);
    if (task) this.metrics.duration.observe({ queue: job.queue, outcome: "completed", task }, seconds);
    else this.perJob.completedSeconds.observe(seconds);
    this.onCompleted(seconds * 1000);
    if (this.log.isLevelEnabled("info"))
      log.info(
        {
          outcome: next ? "advanced" : "completed",
          nextQueue: next,
          reused: cached || undefined,
          durationMs: Math.round(secondsSince(exec) * 1000),
        },
        "job completed",
      );
  }

  /**
   * The result against the stage's result contract and, for a hand-over, against the next
   * stage's data contract: the next contract's hash checked ('' none), or why the result is
   * refused (a ResultContractError; an Error when a contract cannot be read or compiled).
   */
  private async checkContracts(
    job: ClaimedJob,
    log: Logger,
    result: unknown,
    encoded: string,
    next: string | undefined,
  ): Promise<string | Error> {
    const cache = this.contracts!;
    let compiled: CompiledContract | null | Error | undefined = cachedContract(
      cache,
      job.queue,
      job.contract,
    );
    if (compiled === undefined)
      compiled = await this.readContract(log, () => cache.ensure(job.queue, job.contract));
    if (compiled instanceof Error) return compiled;
    const problem = resultProblem(compiled, result, encoded, taskOf(job));
    if (problem) return problem;
    if (!next) return "";
    return this.checkNext(log, next, (c) => nextDataProblem(c, next, result, encoded, taskOf(job)));
  }

  /**
   * The hand-over against the next stage's data contract — the one cached, or read again when
   * `inForce` (the settle's refusal) says it changed: its hash ('' none), or why it is refused.
   */
  private async checkNext(
    log: Logger,
    next: string,
    check: (contract: CompiledContract | null) => ResultContractError | undefined,
    inForce?: string,
  ): Promise<string | Error> {
    const cache = this.contracts!;
    const known = inForce === undefined ? cache.known(next) : undefined;
    const contract =
      known !== undefined
        ? known
        : await this.readContract(log, () =>
            inForce === undefined ? cache.get(next) : cache.ensure(next, inForce),
          );
    if (contract instanceof Error) return contract;
    return check(contract) ?? contract?.hash ?? "";
  }

  /** A contract read through an outage (retried like a settle write); one that does not compile is an Error. */
  private readContract(
    log: Logger,
    read: () => Promise<CompiledContract | null>,
  ): Promise<CompiledContract | null | Error> {
    return this.writes.write(log, "read the stage's contract", async () => {
      try {
        return await read();
      } catch (err) {
        if (err instanceof ContractError) return err;
        throw err;
      }
    });
  }

  /** Results are stored and reused by content hash (the job has one and reuse is on). */
  private reuses(job: ClaimedJob): boolean {
    return this.config.resultTtlSeconds > 0 && job.contentHash !== "";
  }

  /**
   * Abort a running job (timeout, hand-back, lost lease, cancel): its signal, if the handler made
   * one, aborts; a handler still running gets the kill grace to stop, then it is abandoned so the
   * slot cannot be held forever by a hung handler. The first reason wins, as with AbortSignal.
   */
  abort(entry: RunningJob, reason: unknown): void {
    if (entry.aborted) return;
    entry.aborted = true;
    entry.abortReason = reason;
    entry.controller?.abort(reason);
    if (entry.abandon) this.startGrace(entry);
  }

  private readonly timedOut = (entry: RunningJob): void =>
    this.abort(entry, new JobTimeoutError(`job exceeded its timeout of ${entry.timeoutMs}ms`));

  private startGrace(entry: RunningJob): void {
    entry.grace ??= setTimeout(abandonHandler, this.config.killGraceMs, entry);
    entry.grace.unref();
  }

  /**
   * Run the handler, to be given up on by abort() after the kill grace. No abort listener and no
   * per-job signal unless the handler asks for one: the abort sites call abort() instead. (A
   * Promise.race with a never-settling "abandoned" promise kept each job's promise graph
   * reachable from its signal: per-job objects outlived scavenges; docs/performance.md.)
   */
  private runHandler(entry: RunningJob, view: JobView, ctx: HandlerContext): Promise<unknown> {
    return new Promise((resolve, reject) => {
      entry.abandon = reject;
      // Aborted before the handler started (e.g. handed back while the result cache was read).
      if (entry.aborted) this.startGrace(entry);
      let running: Promise<unknown>;
      try {
        running = this.batches
          ? this.batches.run(entry, view, ctx)
          : entry.trace === NO_TRACE
            ? this.handler.run(view, ctx)
            : entry.trace.run(() => this.handler.run(view, ctx));
      } catch (err) {
        running = Promise.reject(err);
      }
      // A settled promise ignores later calls: whichever of the handler and abandonHandler is first wins.
      Promise.resolve(running).then(
        (value) => {
          handlerEnded(entry);
          resolve(value);
        },
        (err: unknown) => {
          handlerEnded(entry);
          reject(err);
        },
      );
    });
  }

  private async settleFailure(entry: RunningJob, err: unknown, log: Logger, seconds: number): Promise<void> {
    const { job } = entry;
    entry.settling = true;
    const q = { queue: job.queue };
    const error = serializeError(err);
    const retryable = isRetryable(err);
    const delay = retryDelay(job.attempt, {
      baseMs: this.config.backoffBaseMs,
      maxMs: this.config.backoffMaxMs,
    });
    const failure = { retryable, retryDelayMs: delay, ...attemptFailureOf(err) };
    const outcome = await this.writes.write(log, "fail", async (_attempt, unconfirmed) => {
      const o = await this.consumer.fail(job, error, failure);
      // (lost to our own earlier, applied but unconfirmed write: that one's outcome stands)
      return o === "lost" && unconfirmed ? (unconfirmed.reply as FailOutcome) : o;
    });
    const task = this.metricTask(job);
    this.metrics.duration.observe(
      { queue: job.queue, outcome: outcome === "lost" ? "fenced" : "failed", ...(task ? { task } : {}) },
      seconds,
    );
    entry.trace.end(
      outcome === "lost"
        ? "fenced"
        : outcome === "retry"
          ? "retried"
          : outcome === "dead"
            ? "deadLettered"
            : outcome,
      err,
    );
    const fields = {
      outcome,
      error: { name: error.name, message: error.message, stack: error.stack },
      durationMs: Math.round(seconds * 1000),
    };
    if (outcome === "cancelled") return this.logCancelled(entry, log, seconds, "failure not recorded");
    if (outcome === "lost") {
      this.metrics.leasesLost.inc(q);
      log.warn(fields, "lease was lost before the failure was recorded: discarded");
      return;
    }
    this.metrics.failed.inc(q);
    if (outcome === "retry") {
      this.metrics.retried.inc(q);
      log.warn({ ...fields, retryInMs: delay }, "job failed; will retry");
    } else {
      this.metrics.deadLettered.inc(q);
      log.error(fields, "job failed; moved to dead letters");
    }
  }

  private async settleFanOut(
    entry: RunningJob,
    fan: FanOutRequest,
    log: Logger,
    seconds: number,
    encoded: string,
  ): Promise<void> {
    const { job } = entry;
    const next = this.config.nextQueue!;
    // The children are the next stage's jobs: their data keeps its contract, as a hand-over's.
    const check = (c: CompiledContract | null) =>
      childrenDataProblem(c, next, fan.children, encoded, taskOf(job));
    const contracts = this.contracts;
    let contract = "";
    if (contracts && contracts.known(next) !== null) {
      const checked = await this.checkNext(log, next, check);
      if (typeof checked !== "string") return this.settleFailure(entry, checked, log, seconds);
      contract = checked;
    }
    entry.settling = true;
    const traces = entry.trace.fanOut(next, job.id, fan.children.length);
    let n: number | null | "cancelled";
    for (let changes = 0; ; changes++) {
      const written = await this.writes.write(log, "fan out", async () => {
        try {
          return await this.consumer.fanOut(job, fan.children, next, fan.join, traces, { contract });
        } catch (err) {
          // (the next stage's contract is not the one checked: nothing was written)
          if (err instanceof ContractChangedError) return err;
          throw err;
        }
      });
      if (!(written instanceof ContractChangedError)) {
        n = written;
        break;
      }
      const again =
        changes + 1 < CONTRACT_CHANGES_MAX
          ? await this.checkNext(log, next, check, written.inForce)
          : new Error(
              `the data contract of the next stage ${next} changed ${CONTRACT_CHANGES_MAX} times during the fan-out`,
            );
      if (typeof again !== "string") return this.settleFailure(entry, again, log, seconds);
      contract = again;
    }
    entry.trace.end(n === "cancelled" ? "cancelled" : n === null ? "fenced" : "fannedOut");
    if (n === "cancelled") return this.logCancelled(entry, log, seconds, "fan-out refused");
    if (n === null) {
      this.metrics.leasesLost.inc({ queue: job.queue });
      log.warn(
        { outcome: "fenced" },
        "lease was lost before the fan-out: discarded (another worker owns the job)",
      );
      return;
    }
    this.metrics.completed.inc({ queue: job.queue });
    this.metrics.duration.observe({ queue: job.queue, outcome: "completed" }, seconds);
    log.info(
      {
        outcome: "fannedOut",
        children: n,
        nextQueue: this.config.nextQueue,
        join: fan.join,
        durationMs: Math.round(seconds * 1000),
      },
      "job fanned out",
    );
  }

  /** A dependency failure: hand the job back without an attempt and feed the circuit breaker. */
  private async defer(entry: RunningJob, err: unknown, log: Logger, seconds: number): Promise<void> {
    const error = serializeError(err);
    entry.settling = true;
    this.circuit.dependencyFailure();
    const released = await this.writes.write(log, "defer", () =>
      this.consumer.release(entry.job, `dependency failure: ${error.message}`, "deferred"),
    );
    if (released) this.metrics.deferred.inc({ queue: entry.job.queue });
    entry.trace.event("deferred", { "conveyor.reason": `dependency failure: ${error.message}` });
    entry.trace.end(released ? "deferred" : "fenced");
    this.metrics.duration.observe({ queue: entry.job.queue, outcome: "deferred" }, seconds);
    log.warn(
      {
        outcome: "deferred",
        error: { name: error.name, message: error.message },
        circuit: this.circuit.state,
      },
      "handler dependency failed: job deferred without an attempt",
    );
  }

  /**
   * A provider rate-limited the job's resource key: the key is sidelined for every worker until the
   * retry-after, and the job goes back to waiting without an attempt (docs/protocol.md, "Resources").
   */
  private async sidelineAndRelease(
    entry: RunningJob,
    limited: { retryAfterMs: number; resource?: string },
    err: unknown,
    log: Logger,
    seconds: number,
  ): Promise<void> {
    const { job } = entry;
    const names = Object.keys(job.resources ?? {});
    const resource =
      limited.resource !== undefined && names.includes(limited.resource) ? limited.resource : names[0]!;
    const key = job.resources![resource]!.key;
    const untilMs = Date.now() + limited.retryAfterMs;
    const error = serializeError(err);
    entry.settling = true;
    const reason = `rate limited: ${resource} key ${key} benched for ${Math.round(limited.retryAfterMs)} ms: ${error.message}`;
    const outcome = await this.writes.write(log, "bench and release", () =>
      this.consumer.releaseOutcome(job, reason, "rateLimited", { resource, key, untilMs }),
    );
    if (outcome === "settled") this.metrics.rateLimited.inc({ queue: job.queue, resource });
    entry.trace.event("rateLimited", { "conveyor.reason": reason });
    entry.trace.end(outcome === "settled" ? "rateLimited" : outcome);
    this.metrics.duration.observe({ queue: job.queue, outcome: "rateLimited" }, seconds);
    log.warn(
      { outcome: "rateLimited", resource, key, benchedUntil: new Date(untilMs).toISOString() },
      "provider rate limit: key benched, job back to waiting without an attempt",
    );
  }

  /**
   * The handler's process died under the job: nothing is written; the slot frees and the lease,
   * no longer renewed, lapses — the sweeper redelivers the job as a stall (maxStalls guards).
   */
  private leaveToLease(entry: RunningJob, err: unknown, log: Logger, seconds: number): void {
    const error = serializeError(err);
    this.metrics.duration.observe({ queue: entry.job.queue, outcome: "stalled" }, seconds);
    entry.trace.end("stalled", err);
    log.warn(
      {
        outcome: "stalled",
        error: { name: error.name, message: error.message },
        durationMs: Math.round(seconds * 1000),
      },
      "handler process died under the job: left to its lease, redelivered as a stall when it lapses",
    );
  }

  /** The job was cancelled while it ran: nothing of this execution is kept. */
  private logCancelled(entry: RunningJob, log: Logger, seconds: number, what: string): void {
    this.metrics.duration.observe({ queue: entry.job.queue, outcome: "cancelled" }, seconds);
    entry.trace.end("cancelled");
    log.info(
      { outcome: "cancelled", durationMs: Math.round(seconds * 1000) },
      `job was cancelled while it ran: ${what}`,
    );
  }

  private logAbandoned(entry: RunningJob, log: Logger, seconds: number): void {
    if (entry.cancelled) return this.logCancelled(entry, log, seconds, "handler stopped");
    const outcome = entry.leftToLease ? "leftToLease" : entry.handedBack ? "handedBack" : "leaseLost";
    this.metrics.duration.observe({ queue: entry.job.queue, outcome }, seconds);
    entry.trace.end(outcome);
    log.info(
      { outcome, durationMs: Math.round(seconds * 1000) },
      entry.leftToLease
        ? "job stopped without a hand-back (Redis unreachable); it runs again once its lease lapses"
        : entry.handedBack
          ? "job handed back; another worker will run it"
          : "job abandoned: its lease moved to another worker",
    );
  }
}

/** A job's timeout (ms): its own when it has one, else the worker's --job-timeout. */
export function effectiveTimeoutMs(job: ClaimedJob, config: WorkerConfig): number {
  return job.timeoutMs > 0 ? job.timeoutMs : config.jobTimeoutMs;
}

/** What the phases of one execution share (one object: the per-job path allocates little). */
interface Execution {
  log: JobLogger;
  appendLog: (message: string) => Promise<boolean>;
  /** performance.now() when it started. */
  startedAt: number;
  /** The job's parsed data. */
  data: unknown;
  /** The result is a stored one (reuse by content hash), not the handler's. */
  reused: boolean;
}

/** runJob's answer when the execution ended without a result to settle. */
const ENDED: unique symbol = Symbol("ended");

function secondsSince(exec: Execution): number {
  return (performance.now() - exec.startedAt) / 1000;
}

/** Refused writes in a row after which the worker reports unready (/readyz), until a write goes through. */
export const REFUSALS_UNREADY = 3;

/** A write settling a job that Redis refused for good (permanentReplyCode): trying again cannot succeed. */
export class WriteRefusedError extends Error {
  override name = "WriteRefusedError";
  readonly code: string;
  constructor(what: string, code: string, cause: unknown) {
    super(`${what}: Redis refused the write (${code})`, { cause });
    this.code = code;
  }
}

/**
 * The Redis writes that settle a job. A transient failure (an outage) is retried until the write
 * goes through: a finished job must not be re-run for a blip. A refusal (WRONGTYPE, OOM, NOPERM…:
 * queue's permanentReplyCode) gets one more try — alone: a completion's first try is batched, and
 * another job's record may be the one refused — then it is logged, counted and thrown as a
 * WriteRefusedError: the caller frees the slot and stops renewing the lease, so the job runs
 * again once the lease expires instead of wedging the slot forever.
 */
export class SettleWrites {
  private refusedInARow = 0;
  private lastRefusal = "";
  private readonly refused: (code: string) => void;

  private readonly unconfirmed: () => void;

  constructor(refused: (code: string) => void, unconfirmed: () => void = () => {}) {
    this.refused = refused;
    this.unconfirmed = unconfirmed;
  }

  /**
   * `op` gets the attempt and, after an attempt the primary applied but no replica confirmed
   * (durability "replicated"), that ReplicationError: the retry runs the write again (and WAITs
   * again), and finds its own earlier write — a settle then answers fenced.
   */
  async write<T>(
    log: Logger,
    what: string,
    op: (attempt: number, unconfirmed?: ReplicationError) => Promise<T>,
  ): Promise<T> {
    let unconfirmed: ReplicationError | undefined;
    for (let attempt = 1; ; attempt++) {
      try {
        const done = await op(attempt, unconfirmed);
        this.refusedInARow = 0;
        return done;
      } catch (err) {
        const message = err instanceof Error ? err.message : String(err);
        if (err instanceof ReplicationError) {
          unconfirmed = err;
          this.unconfirmed();
        }
        const code = permanentReplyCode(err);
        if (code !== undefined && attempt > 1) {
          this.refusedInARow++;
          this.lastRefusal = `${what}: ${message}`;
          this.refused(code);
          log.error(
            { err: message, code, attempt },
            `${what}: Redis refused the write for good; slot freed, the job runs again when its lease expires`,
          );
          throw new WriteRefusedError(what, code, err);
        }
        if (attempt === 1 || attempt % 10 === 0)
          log.warn({ err: message, attempt }, `${what}: Redis write failed; retrying`);
        await sleep(exponentialDelay(attempt, SETTLE_RETRY));
      }
    }
  }

  /** Why the worker is not ready: the refusals, once REFUSALS_UNREADY came in a row; else undefined. */
  unready(): string | undefined {
    if (this.refusedInARow < REFUSALS_UNREADY) return undefined;
    return `${this.refusedInARow} settle writes in a row refused by Redis, the last: ${this.lastRefusal}`;
  }
}

/** The job's AbortSignal, made on first use (aborted already if the job was). */
export function jobSignal(entry: RunningJob): AbortSignal {
  if (!entry.controller) {
    entry.controller = new AbortController();
    if (entry.aborted) entry.controller.abort(entry.abortReason);
  }
  return entry.controller.signal;
}

function abandonHandler(entry: RunningJob): void {
  entry.abandon?.(entry.abortReason);
}

function handlerEnded(entry: RunningJob): void {
  clearTimeout(entry.grace);
  entry.grace = undefined;
  entry.abandon = undefined;
}

/** The handler's ctx; `signal` is a getter so that the AbortController is made only when read. */
class JobContext implements HandlerContext {
  callback?: { url: string; token: string };
  private readonly entry: RunningJob;
  readonly log: JobLogger;
  private readonly consumer: Consumer;
  constructor(entry: RunningJob, log: JobLogger, consumer: Consumer) {
    this.entry = entry;
    this.log = log;
    this.consumer = consumer;
  }

  get previousErrors(): AttemptError[] {
    return this.entry.job.previousErrors;
  }

  get parents(): Record<string, ParentOutcome> | undefined {
    return this.entry.job.parents;
  }

  parentResult(key: string): Promise<unknown> {
    return this.consumer.parentResult(this.entry.job, key);
  }

  get signal(): AbortSignal {
    return jobSignal(this.entry);
  }

  get resources(): Readonly<Record<string, { key: string }>> {
    const granted = this.entry.job.resources;
    if (!granted) return NO_RESOURCES;
    return (this.granted ??= Object.fromEntries(
      Object.entries(granted).map(([name, g]) => [name, { key: g.key }]),
    ));
  }
  private granted: Record<string, { key: string }> | undefined;
  /** Per resource and unit: what the window counts for this job now (the reservation, then reports). */
  private counted: Record<string, Record<string, number>> | undefined;

  /** `ctx.usage`: totals so far; the windows are corrected by the change (fire and forget, logged). */
  readonly usage = (used: Record<string, Record<string, number>>): void => {
    this.reportUsage(used).catch((err: Error) => this.log.warn({ err: err.message }, "usage not recorded"));
  };

  /** As `usage`, for the handler callback: resolves false when the job holds no such resource. */
  async reportUsage(used: Record<string, Record<string, number>>): Promise<boolean> {
    const granted = this.entry.job.resources;
    if (typeof used !== "object" || used === null)
      throw new TypeError("usage: an object {resource: {unit: amount}} is required");
    let known = true;
    for (const [name, units] of Object.entries(used)) {
      const g = granted?.[name];
      if (!g) {
        known = false;
        continue;
      }
      this.counted ??= {};
      const counted = (this.counted[name] ??= { requests: 1, ...g.amounts });
      const deltas: Record<string, number> = {};
      for (const [unit, amount] of Object.entries(units ?? {})) {
        if (typeof amount !== "number" || !Number.isFinite(amount) || amount < 0)
          throw new TypeError(`usage.${name}.${unit} must be a number ≥ 0, got ${JSON.stringify(amount)}`);
        const delta = Math.round(amount) - (counted[unit] ?? 0);
        if (delta !== 0) deltas[unit] = delta;
        counted[unit] = Math.round(amount);
      }
      await this.consumer.correctUsage(this.entry.job, name, deltas);
    }
    return known;
  }

  /** An own arrow, not a method: handlers may call it detached (`const { progress } = ctx`). */
  readonly progress = (fraction: number, message?: string): void => {
    if (!(fraction >= 0 && fraction <= 1))
      throw new RangeError(`progress must be between 0 and 1, got ${fraction}`);
    this.consumer
      .progress(this.entry.job, fraction, message)
      .catch((err: Error) => this.log.warn({ err: err.message }, "progress not recorded"));
  };
}

const NO_RESOURCES: Readonly<Record<string, { key: string }>> = Object.freeze({});

/** The content hash a next stage's input gets when reuse is on for the job. */
function contentHashOf(encoded: string): string {
  return createHash("sha256").update(encoded).digest("hex");
}

/**
 * A Logger that creates the real one (a pino child) on first use: the worker's per-job logger
 * is passed around and handed to the handler as ctx.log, but most jobs never log. Called as a
 * function (`ctx.log("text")`) it writes a line to the job's own log.
 */
function lazyLogger(make: () => Logger, line: (message: string) => void): JobLogger {
  const target = ((message: string) => line(message)) as unknown as JobLogger;
  return new Proxy(target, {
    apply: (_, __, args: unknown[]) => line(String(args[0])),
    get: (_, prop) => {
      const real = make();
      const v = Reflect.get(real, prop, real) as unknown;
      return typeof v === "function" ? (v as (...a: unknown[]) => unknown).bind(real) : v;
    },
    set: (_, prop, value) => Reflect.set(make(), prop, value),
    has: (_, prop) => Reflect.has(make(), prop),
  });
}

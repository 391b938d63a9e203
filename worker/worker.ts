// The generic worker: N async job slots in one process, claims only for free slots, a lease
// heartbeat on every running job, and a warm shutdown that keeps heartbeating until running
// jobs finish — handing back only what is still running at the drain deadline.
import { setTimeout as sleep } from "node:timers/promises";
import type { Logger } from "pino";
import { exponentialDelay, type BackoffPolicy } from "../lib/backoff.ts";
import {
  connectRedis,
  ContractCache,
  Consumer,
  assertLayoutReadable,
  keepLayoutFence,
  describeRedisUrl,
  LayoutRefusedError,
  pipelineOf,
  readerFields,
  Schedules,
  shardPrimaryProblem,
  type ClaimedJob,
  type RedisClient,
  type ReleaseCause,
  type Settlement,
  type SettleOutcome,
} from "../queue/index.ts";
import { jobSlots, type WorkerConfig } from "./config.ts";
import { HandedBackError, JobCancelledError, LeaseLostError } from "./errors.ts";
import { CircuitBreaker } from "./circuitBreaker.ts";
import { effectiveTimeoutMs, JobExecutor, WriteRefusedError, type RunningJob } from "./execution.ts";
import type { Handler } from "./handlers/index.ts";
import type { HandlerCallbacks } from "./handlerCallback.ts";
import { JobDurations } from "./jobDurations.ts";
import { LeaseHeartbeat, type HeldLease, type LostLease } from "./leaseHeartbeat.ts";
import type { WorkerMetrics } from "./metrics.ts";
import { SettleBatcher, type BatchSlots } from "./settleBatcher.ts";
import { SlotArray } from "./slotArray.ts";
import { traceExecution } from "./tracing.ts";

/** Longest idle block on the wake list: bounds how late a delayed job is noticed. */
const IDLE_WAIT_MS = 5000;
/**
 * How often at most a claim asks the heartbeat thread for a prompt renewal (which also writes
 * the busy/idle report). Reports otherwise go out every heartbeat interval (a third of the
 * lease); this bounds how long a worker that just got work can look idle to the operator to
 * ~1 s — the operator reads reports every pollSeconds (≥ 1 s) — at one extra renew_leases per
 * second at most, instead of one per claim.
 */
const BUSY_REPORT_MS = 1000;
/** Waits after a failed claim (Redis outages). */
const CLAIM_RETRY: BackoffPolicy = { baseMs: 200, maxMs: 5000 };

export type WorkerState = "starting" | "running" | "draining" | "stopped";

export interface StopHook {
  stop(): Promise<void>;
}

export class QueueWorker {
  state: WorkerState = "starting";
  /** Resolves when the worker has drained and released everything. */
  readonly done: Promise<void>;
  private resolveDone!: () => void;
  private readonly config: WorkerConfig;
  private readonly log: Logger;
  private readonly metrics: WorkerMetrics;
  private readonly handler: Handler;
  /** The loopback callback of http/command handlers (progress, log lines, cancellation check). */
  private readonly callbacks: HandlerCallbacks | undefined;
  /** The pipeline is in `cvy:pipelines` (`conveyor job <id>` finds its jobs), the next stage in `cvy:queues` (listed). */
  private queuesRegistered = false;
  private readonly redis: RedisClient;
  private readonly blocking: RedisClient;
  private readonly consumer: Consumer;
  private readonly heartbeat: LeaseHeartbeat;
  private readonly running = new SlotArray<SlottedJob>();
  private readonly stopHooks: StopHook[] = [];
  /** Notified whenever a slot frees or the state changes; the claim loop and the drain wait on it. */
  private readonly changed = new Notifier();
  private jobsFinished = 0;
  /** Jobs running at the drain deadline that could not be handed back (Redis unreachable). */
  leftToLease = 0;
  /** Slots claims in flight may fill, beyond the running jobs (so two claims never overbook). */
  private reserved = 0;
  /**
   * Claims sent and not answered yet (the loop's and complete-and-claims), and jobs claimed after
   * the drain began that are being handed back: the drain waits for them, or what they claim
   * would be abandoned until its lease lapses.
   */
  private claimsPending = 0;
  /** Until when (ms) the operator cordoned this pod: no claims meanwhile (0: not cordoned). */
  private cordonedUntil = 0;
  private cordonTimer?: NodeJS.Timeout;
  /** Set once the drain deadline (or a second signal) hands running jobs back. */
  private handingBack = false;
  private lastBusyBeat = 0;
  private busyBeatTimer: NodeJS.Timeout | undefined;
  private drainTimer: NodeJS.Timeout | undefined;
  private redisError = "";
  private readonly circuit: CircuitBreaker;
  private readonly executor: JobExecutor<SlottedJob>;
  private readonly settler: SettleBatcher;
  private readonly durations = new JobDurations((ms) => this.heartbeat.jobP50(ms));
  private readonly inFlight;
  /** Jobs held at once: concurrency, times the batch size with batch calls. */
  private readonly slots: number;
  private readonly claimPolls;

  constructor(
    config: WorkerConfig,
    deps: { log: Logger; metrics: WorkerMetrics; handler: Handler; callbacks?: HandlerCallbacks },
  ) {
    this.config = config;
    this.slots = jobSlots(config);
    this.log = deps.log;
    this.metrics = deps.metrics;
    this.handler = deps.handler;
    this.callbacks = deps.callbacks;
    this.done = new Promise((resolve) => (this.resolveDone = resolve));
    const url = describeRedisUrl(config.redisUrl);
    let connected = false;
    const onError = (err: Error) => {
      if (err.message !== this.redisError)
        this.log.warn(
          { redis: url, err: err.message },
          connected
            ? `Redis connection problem at ${url}; reconnecting`
            : `cannot connect to Redis at ${url}; retrying (not ready until connected)`,
        );
      this.redisError = err.message;
    };
    this.redis = connectRedis(config.redisUrl, { name: `conveyor-worker:${config.workerId}`, onError });
    this.redis.on("ready", () => {
      if (this.redisError)
        this.log.info({ redis: url }, connected ? "Redis connection restored" : "connected to Redis");
      connected = true;
      this.redisError = "";
      this.changed.notify();
    });
    // The claim loop waits for the connection; a drain stops waiting for claims it cannot answer.
    this.redis.on("close", () => this.changed.notify());
    this.blocking = connectRedis(config.redisUrl, {
      name: `conveyor-wait:${config.workerId}`,
      blocking: true,
      onError: () => {},
    });
    this.consumer = new Consumer(this.redis, config.queue, {
      workerId: config.workerId,
      leaseMs: config.leaseMs,
      retentionSeconds: config.retentionSeconds,
      durability: config.durability,
      replicaTimeoutMs: config.replicaTimeoutMs,
      ...(config.templateVersion ? { templateVersion: config.templateVersion } : {}),
    });
    const q = { queue: config.queue };
    this.heartbeat = new LeaseHeartbeat(
      {
        redisUrl: config.redisUrl,
        queue: config.queue,
        workerId: config.workerId,
        pod: config.pod,
        slots: jobSlots(config),
        leaseMs: config.leaseMs,
        intervalMs: Math.max(50, Math.floor(config.leaseMs / 3)),
        sweepIntervalMs: Math.max(100, Math.floor(config.leaseMs / 2)),
        maxStalls: config.maxStalls,
      },
      {
        onRenewed: (count, lagMs, durationMs) => {
          this.metrics.leaseRenewals.inc(q, count);
          this.metrics.renewalLag.observe(q, (lagMs + durationMs) / 1000);
        },
        onLost: (leases) => this.leasesLost(leases),
        onSwept: (requeued, deadLettered) =>
          this.log.warn({ requeued, deadLettered }, "sweeper requeued jobs whose lease expired"),
        onReclaimed: (count) => this.metrics.reclaimed.inc(q, count),
        onCordon: (until) => this.setCordon(until),
        onError: (message) => this.log.warn(message),
      },
    );
    this.circuit = new CircuitBreaker(config.circuitThreshold, config.circuitBackoffMs, (state, d) => {
      this.metrics.circuitOpen.set(q, state === "open" ? 1 : state === "half-open" ? 0.5 : 0);
      if (state === "open")
        this.log.warn(
          { circuit: state, consecutiveFailures: d.failures, pauseMs: d.pauseMs },
          "handler dependency failing: circuit open, claiming paused",
        );
      else
        this.log.info(
          { circuit: state },
          state === "closed" ? "circuit closed: dependency recovered" : "circuit half-open: trying one job",
        );
      this.changed.notify();
    });
    this.inFlight = this.metrics.inFlight.labels(q);
    this.claimPolls = this.metrics.claimPolls.labels(q);
    this.settler = new SettleBatcher(this.consumer, this.lentSlots());
    this.executor = new JobExecutor<SlottedJob>({
      config,
      log: this.log,
      metrics: this.metrics,
      handler: this.handler,
      callbacks: this.callbacks,
      consumer: this.consumer,
      circuit: this.circuit,
      schedules: new Schedules(this.redis),
      onCompleted: (ms) => this.durations.add(ms),
      complete: (entry, settlement) => this.completeAndClaim(entry, settlement),
      contracts: new ContractCache(this.redis),
    });
    this.metrics.circuitOpen.set(q, 0);
    this.metrics.cordoned.set(q, 0);
    this.metrics.leaseSeconds.set(q, config.leaseMs / 1000);
    // Every per-queue series exists from the start at 0, so rates and alerts see a zero, not nothing.
    const m = this.metrics;
    for (const c of [
      m.completed,
      m.started,
      m.failed,
      m.retried,
      m.deadLettered,
      m.leasesLost,
      m.deferred,
      m.claimPolls,
      m.reclaimed,
    ])
      c.inc(q, 0);
    for (const cause of ["lease_expired", "shutdown_handback"]) m.redeliveries.inc({ ...q, cause }, 0);
    this.metrics.slots.set(q, this.slots);
    this.metrics.inFlight.set(q, 0);
    this.metrics.draining.set(q, 0);
  }

  /** Things to stop after the drain (job records, the health server…). */
  onStop(hook: StopHook): void {
    this.stopHooks.push(hook);
  }

  /** The worker's command connection, shared with helpers that only read or set up (job records). */
  get redisClient(): RedisClient {
    return this.redis;
  }

  get busy(): number {
    return this.running.size;
  }

  live(): { ok: boolean; reason: string } {
    const staleMs = this.config.leaseMs * 2;
    if (this.state === "stopped") return { ok: false, reason: "stopped" };
    const since = Date.now() - this.heartbeat.lastBeatAt;
    if (since > staleMs) return { ok: false, reason: `lease heartbeat thread has not ticked for ${since}ms` };
    return { ok: true, reason: "ok" };
  }

  ready(): { ok: boolean; reason: string } {
    if (this.refusal) return { ok: false, reason: this.refusal };
    if (this.state !== "running") return { ok: false, reason: this.state };
    if (!this.layoutChecked) return { ok: false, reason: "reading the pipeline's layout in force" };
    if (this.redis.status !== "ready") return { ok: false, reason: `redis ${this.redis.status}` };
    // (a cluster stays "ready" while the shard of this queue has no primary)
    const shard = shardPrimaryProblem(this.redis, this.consumer.keys.ready);
    if (shard) return { ok: false, reason: `redis ${shard}` };
    const refused = this.executor.writes.unready();
    if (refused) return { ok: false, reason: refused };
    if (this.circuit.state === "open")
      return { ok: false, reason: `circuit open until ${new Date(this.circuit.openUntil).toISOString()}` };
    return { ok: true, reason: "ok" };
  }

  start(): void {
    this.state = "running";
    this.log.info(
      {
        concurrency: this.config.concurrency,
        ...(this.config.batch ? { batch: this.config.batch } : {}),
        handler: this.handler.kind,
        nextQueue: this.config.nextQueue,
        leaseMs: this.config.leaseMs,
        drainMs: this.config.drainMs,
      },
      "worker started",
    );
    void this.checkLayout().then((ok) => {
      // (a stop requested while the layout was read: nothing to claim, no timer to leave behind)
      if (!ok || this.state !== "running") return;
      this.layoutTimer = setInterval(
        () => void this.checkLayout(),
        Math.max(100, this.config.leaseMs / 3),
      ).unref();
      void this.loop();
    });
  }

  /** Why the worker refused to work (a layout it does not read), if it did: exit 1. */
  refusal: string | undefined;
  private layoutChecked = false;
  private layoutTimer: NodeJS.Timeout | undefined;

  /**
   * Reads the pipeline's layout in force (at start, then every heartbeat interval): a layout newer
   * than this worker reads stops it before it claims a job it would misread — not ready, a
   * metric, a drain of what runs, exit 1. Other errors (Redis away) wait for the next check.
   */
  private async checkLayout(): Promise<boolean> {
    if (this.refusal) return false;
    const pipeline = pipelineOf(this.config.queue);
    for (;;) {
      try {
        const layout = await assertLayoutReadable(this.redis, pipeline);
        // The fence that keeps the release before layouts off the queue: a resume by one of its
        // CLIs lifts it until here (docs/protocol.md, "The layout in force").
        if (layout.inForce >= 2) await keepLayoutFence(this.redis, this.config.queue);
        this.layoutChecked = true;
        return true;
      } catch (err) {
        if (err instanceof LayoutRefusedError) {
          this.refusal = err.message;
          clearInterval(this.layoutTimer);
          this.metrics.layoutRefused.set({ queue: this.config.queue }, err.inForce);
          this.log.error({ pipeline, layout: err.inForce, firstVersion: err.firstVersion }, err.message);
          void this.shutdown(`refused: layout ${err.inForce} in force`);
          return false;
        }
        // (only the first check waits for an answer; later ones try again at the next interval)
        if (this.layoutChecked || this.state !== "running") return this.layoutChecked;
        await this.changed.wait();
      }
    }
  }

  /** Warm shutdown; a second call hands back whatever still runs, at once. */
  async shutdown(reason: string): Promise<void> {
    if (this.state === "stopped") return;
    if (this.state === "draining") {
      this.log.warn(
        { reason, running: this.running.size },
        "second stop request: handing running jobs back now",
      );
      await this.handBackAll(reason);
      return this.done;
    }
    this.state = "draining";
    this.metrics.draining.set({ queue: this.config.queue }, 1);
    this.reportStatus();
    this.log.info(
      { reason, running: this.running.size, drainDeadlineMs: this.config.drainMs },
      "draining: no new jobs; running jobs continue with their leases renewed",
    );
    this.blocking.disconnect(); // stop waiting for work at once
    // No more jobs come: those waiting for a batch to fill go in a call now.
    this.executor.batches?.flush();
    this.changed.notify();
    this.drainTimer = setTimeout(() => void this.handBackAll("drain deadline"), this.config.drainMs);
    // A claim cannot be answered while Redis is unreachable: with nothing running, stop now.
    while (this.running.size > 0 || (this.claimsPending > 0 && this.connected())) await this.changed.wait();
    clearTimeout(this.drainTimer);
    await this.finish();
  }

  private connected(): boolean {
    return this.redis.status === "ready";
  }

  /** `p`, or undefined as soon as the connection to Redis is (or goes) down. */
  private whileConnected<T>(p: Promise<T>): Promise<T | undefined> {
    if (!this.connected()) return Promise.resolve(undefined);
    return new Promise((resolve, reject) => {
      const onClose = () => resolve(undefined);
      this.redis.once("close", onClose);
      p.then(resolve, reject).finally(() => this.redis.off("close", onClose));
    });
  }

  private async finish(): Promise<void> {
    if (this.state === "stopped") return;
    this.state = "stopped";
    clearInterval(this.layoutTimer);
    clearTimeout(this.busyBeatTimer);
    clearTimeout(this.cordonTimer);
    await this.heartbeat.stop();
    for (const hook of this.stopHooks) {
      await hook.stop().catch((err: Error) => this.log.warn({ err: err.message }, "error while stopping"));
    }
    await this.callbacks?.close();
    await this.handler
      .close?.()
      .catch((err: Error) => this.log.warn({ err: err.message }, "handler close failed"));
    // (QUIT to a Redis that is not there would wait in the offline queue)
    if (!(await this.whileConnected(this.redis.quit().catch(() => "")))) this.redis.disconnect();
    this.log.info(
      { jobsFinished: this.jobsFinished, leftToLease: this.leftToLease || undefined },
      "worker stopped",
    );
    this.resolveDone();
  }

  private async loop(): Promise<void> {
    let failures = 0;
    let started = false;
    while (this.state === "running") {
      // Commands sent while disconnected would queue for minutes (ioredis's offline queue and
      // retries) and hold up a drain: wait for the connection instead.
      if (!this.connected()) {
        await this.changed.wait();
        continue;
      }
      if (!started) {
        // Once per start, before the first claim: the scripts loaded, so the first claim's jobs
        // start as promptly as any later claim's; and the worker's report in Redis, since the
        // heartbeat thread that keeps it fresh starts apart (a second or more in a loaded pod) and
        // jobs in flight on a worker no report named showed as "Workers 0". Until that thread
        // reports, this thread writes each busy change itself (reportStatus), so a starting pod
        // never reads as idle to the operator's scale-in.
        await this.consumer.prepare();
        await this.writeReport();
        started = true;
      }
      if (!this.queuesRegistered)
        this.queuesRegistered = await this.consumer
          .register(this.config.nextQueue ? [this.config.nextQueue] : [])
          .then(
            () => true,
            () => false, // Redis not there yet: the claim below reports it; try again next round
          );
      const free = this.claimBudget(0);
      if (free <= 0) {
        // Draining since the loop's last check (e.g. while the pipeline registered): no claim, and
        // no wait for a change that may have come already.
        if (this.state !== "running") break;
        const pause =
          this.circuit.state === "open"
            ? sleep(Math.max(10, this.circuit.openUntil - Date.now()))
            : new Promise(() => {});
        await Promise.race([this.changed.wait(), pause]);
        continue;
      }
      let claimed;
      this.reserved += free;
      this.claimsPending++;
      try {
        claimed = await this.consumer.claim(free);
        failures = 0;
      } catch (err) {
        failures++;
        if (failures === 1) this.log.warn({ err: (err as Error).message }, "claim failed; retrying");
        await sleep(exponentialDelay(failures, CLAIM_RETRY));
        continue;
      } finally {
        this.reserved -= free;
        this.claimsPending--;
        this.claimPolls.inc();
      }
      if (claimed.jobs.length > 0) {
        this.takeClaimed(claimed.jobs);
        this.reportStatus();
        continue;
      }
      // A layout newer than this worker reads came into force since its last check: refuse now,
      // as that check would (the claim took nothing).
      if (claimed.refusedLayout !== undefined) await this.checkLayout();
      if (this.state !== "running") break;
      const untilDue = claimed.nextDueAt === null ? IDLE_WAIT_MS : claimed.nextDueAt - Date.now();
      const woken = await this.consumer
        .waitForWork(this.blocking, Math.max(10, Math.min(IDLE_WAIT_MS, untilDue)))
        .catch(() => sleep(50).then(() => false));
      // Cordoned while blocked: the wake-up is for a worker that claims.
      if (woken && this.isCordoned()) await this.consumer.passWake().catch(() => {});
    }
    // A drain waiting for this loop's last claim sees it answered (and its jobs handed back).
    this.changed.notify();
  }

  /**
   * How many jobs a claim may ask for now: free slots not already reserved by a claim in flight,
   * within --max-jobs and the circuit's allowance; none while cordoned or draining (no
   * fetch-next-on-complete during a warm shutdown). A settle of `completing` running jobs (batched
   * complete-and-claim) may also claim for their slots, which still count as running (and as
   * finished once they end, for --max-jobs) — except with durability "replicated": the call's
   * WAIT would hold the claimed jobs too, their leases running out before they start (WAIT blocks
   * up to the replica timeout, e.g. while a new primary has no replica yet); the claim loop claims
   * for the freed slots instead.
   */
  private claimBudget(completing: number): number {
    if (this.state !== "running" || this.isCordoned()) return 0;
    if (completing > 0 && this.config.durability === "replicated") return 0;
    const free = this.slots - this.running.size - this.reserved;
    return this.circuit.allowance(Math.max(0, Math.min(completing + free, this.recycleBudget())));
  }

  /** What the settle batcher borrows from the slots: the claim budget and reservations. */
  private lentSlots(): BatchSlots {
    return {
      forCompletions: (n) => this.claimBudget(n),
      running: () => this.running.size,
      reserve: (n, claiming) => {
        this.reserved += n;
        if (claiming) this.claimsPending++;
        return () => {
          this.reserved -= n;
          if (!claiming) return;
          this.claimsPending--;
          // After the settle's continuation has taken (or handed back) what it claimed.
          setImmediate(() => this.changed.notify());
        };
      },
    };
  }

  /**
   * A completion's first write (batched complete-and-claim): the jobs it claims start in the slot
   * it frees, once its execution has ended (startJob).
   */
  private async completeAndClaim(entry: SlottedJob, settlement: Settlement): Promise<SettleOutcome> {
    const r = await this.settler.settle(entry.job, settlement);
    entry.next = r.jobs;
    return r.outcome;
  }

  /**
   * The operator cordoned this pod (a scale-in waits for its running jobs) or lifted it: claim
   * nothing new until `until` — the jobs running finish and the pod goes idle, so the scale-in can
   * remove it instead of waiting for a stream of new jobs spread over every pod.
   */
  private setCordon(until: number): void {
    const was = this.isCordoned();
    this.cordonedUntil = until;
    const is = Date.now() < until;
    clearTimeout(this.cordonTimer);
    if (is) this.cordonTimer = setTimeout(() => this.setCordon(0), until - Date.now()).unref();
    if (is === was) return;
    this.metrics.cordoned.set({ queue: this.config.queue }, is ? 1 : 0);
    if (is)
      this.log.info(
        { cordonedUntil: new Date(until).toISOString(), running: this.running.size },
        "cordoned by the operator: claiming nothing new while a scale-in waits for this pod's jobs",
      );
    else this.log.info("cordon lifted: claiming again");
    this.changed.notify();
  }

  private isCordoned(): boolean {
    return Date.now() < this.cordonedUntil;
  }

  /** With --max-jobs: how many more jobs may start before the worker recycles. */
  private recycleBudget(): number {
    if (this.config.maxJobs <= 0) return Number.MAX_SAFE_INTEGER;
    return this.config.maxJobs - this.jobsFinished - this.running.size - this.reserved;
  }

  /**
   * Start claimed jobs (callers report status once). A claim sent before the drain began and
   * answered after it starts its jobs like any other (the drain waits for them, heartbeats go on):
   * nothing is handed back by a scale-down that did not have to be. Only once the drain deadline
   * (or a second signal) handed everything back, or the worker stopped, go they straight back.
   */
  private takeClaimed(jobs: ClaimedJob[]): void {
    if (this.state === "stopped" || this.handingBack) {
      for (const job of jobs)
        void this.handBackUnstarted(job).catch((err: Error) =>
          this.log.warn(
            { jobId: job.id, err: err.message },
            "hand back failed; the job runs again when its lease lapses",
          ),
        );
      return;
    }
    let late = 0;
    for (const job of jobs) {
      // (checked job by job: starting the ones before it takes time too)
      if (job.startBy !== undefined && performance.now() > job.startBy) {
        late++;
        void this.releaseUnstarted(job, "started too late for its rate window", "rateLimited").catch(
          (err: Error) =>
            this.log.warn(
              { jobId: job.id, err: err.message },
              "hand back failed; the job runs again when its lease lapses",
            ),
        );
      } else this.startJob(job);
    }
    if (late > 0)
      this.log.warn(
        { jobs: late, overMs: Math.round(performance.now() - jobs[0]!.startBy!) },
        "claimed jobs handed back unstarted: their claim came back too late to start them inside the rate window that counted them",
      );
    this.busyReport();
  }

  /** Release a job claimed after the drain began, with its token: no attempt counted. */
  private async handBackUnstarted(job: ClaimedJob): Promise<void> {
    const reason = "claimed after the drain deadline";
    const released = await this.releaseUnstarted(job, reason, "handedBack");
    if (released) this.metrics.redeliveries.inc({ queue: job.queue, cause: "shutdown_handback" });
    this.log.info(
      {
        jobId: job.id,
        attempt: job.attempt,
        executionId: job.token,
        outcome: "handedBack",
        reason,
        released,
      },
      "job claimed past the drain deadline: handed back unstarted",
    );
  }

  /** Release a claimed job that never started, with its token: no attempt counted. */
  private async releaseUnstarted(job: ClaimedJob, reason: string, cause: ReleaseCause): Promise<boolean> {
    this.claimsPending++;
    const log = this.log.child({ jobId: job.id, attempt: job.attempt, executionId: job.token });
    try {
      return await this.executor.writes
        .write(log, "hand back", () => this.consumer.release(job, reason, cause))
        .catch((err: unknown) => {
          // (refused for good: logged and counted; the lease expires and the job runs again)
          if (err instanceof WriteRefusedError) return false;
          throw err;
        });
    } finally {
      this.claimsPending--;
      this.changed.notify();
    }
  }

  /** Ask the heartbeat for a prompt renewal + busy report, at most every BUSY_REPORT_MS. */
  private busyReport(): void {
    if (this.busyBeatTimer) return;
    const wait = this.lastBusyBeat + BUSY_REPORT_MS - Date.now();
    const beat = () => {
      this.busyBeatTimer = undefined;
      this.lastBusyBeat = Date.now();
      if (this.state !== "stopped") this.heartbeat.beat();
    };
    if (wait <= 0) return beat();
    this.busyBeatTimer = setTimeout(beat, wait);
    this.busyBeatTimer.unref();
  }

  /** Start a claimed job in a slot; callers report status (once per batch). */
  private startJob(job: ClaimedJob): SlottedJob {
    const timeoutMs = effectiveTimeoutMs(job, this.config);
    const entry: SlottedJob = {
      job,
      timeoutMs,
      aborted: false,
      handedBack: false,
      lost: false,
      cancelled: false,
      settling: false,
      trace: traceExecution(job),
      slot: 0,
      // Past its timeout and kill grace a job is hung, not slow: stop renewing so its lease lapses.
      lease: this.heartbeat.hold(job.id, job.token, job.claimedAt + timeoutMs + this.config.killGraceMs),
    };
    entry.slot = this.running.add(entry);
    // Inside its process span (when tracing): log lines, Redis calls and the handler nest under it.
    void entry.trace
      .run(() => this.executor.run(entry))
      .finally(() => {
        if (!entry.handedBack) {
          // (at hand-back its slot was freed already)
          this.running.remove(entry.slot);
          this.dropLease(entry);
          this.jobsFinished++;
        }
        // Jobs its completion claimed take the freed slot before anyone sees it free.
        if (entry.next && entry.next.length > 0) this.takeClaimed(entry.next);
        else if (entry.handedBack) return;
        this.reportStatus();
        this.changed.notify();
        this.checkRecycle();
      });
    return entry;
  }

  private reportStatus(): void {
    const busy = this.running.size;
    const draining = this.state !== "running";
    this.inFlight.set(busy);
    // Only changes go to the heartbeat thread (a job that ends and hands its slot to the next
    // one it claimed leaves the report as it was).
    if (busy === this.reported.busy && draining === this.reported.draining) return;
    this.reported = { busy, draining };
    this.heartbeat.status(busy, this.slots, draining);
    if (!this.heartbeat.reporting) void this.writeReport();
  }

  /** This worker's report, written from the main thread (before the heartbeat thread writes it). */
  private async writeReport(): Promise<void> {
    // (without Redis it would wait in the client's offline queue: the heartbeat reports once it can)
    if (!this.connected()) return;
    await this.consumer
      .renew([], {
        id: this.config.workerId,
        pod: this.config.pod,
        slots: this.slots,
        busy: this.running.size,
        draining: this.state !== "running",
        ...readerFields(),
        seen: Date.now(),
      })
      .catch(() => {});
  }
  private reported = { busy: 0, draining: false };

  private async handBackAll(reason: string): Promise<void> {
    this.handingBack = true;
    const entries = this.running.values().filter((e) => !e.handedBack && !e.lost && !e.cancelled);
    await Promise.all(entries.map((entry) => this.handBack(entry, reason)));
    this.reportStatus();
    this.changed.notify();
  }

  private async handBack(entry: SlottedJob, reason: string): Promise<void> {
    entry.handedBack = true;
    // Without Redis a hand-back cannot be written, and waiting for it would outlast the deadline:
    // the job is stopped and left to its lease, which lapses; the sweeper delivers it again.
    if (!this.connected()) entry.leftToLease = true;
    // Before the abort: the handler's end closes the execution's span.
    entry.trace.event(entry.leftToLease ? "left to its lease" : "handed back", { "conveyor.reason": reason });
    this.executor.abort(
      entry,
      new HandedBackError(
        entry.leftToLease ? `stopped: ${reason}; Redis unreachable` : `handed back: ${reason}`,
      ),
    );
    const log = this.log.child({
      jobId: entry.job.id,
      attempt: entry.job.attempt,
      executionId: entry.job.token,
    });
    const released = entry.leftToLease
      ? undefined
      : await this.whileConnected(
          this.executor.writes
            .write(log, "hand back", () => this.consumer.release(entry.job, reason, "handedBack"))
            .catch((err: unknown) => {
              // (refused for good: logged and counted; the lease expires and the job runs again)
              if (err instanceof WriteRefusedError) return false;
              throw err;
            }),
        );
    if (released === undefined) {
      entry.leftToLease = true;
      this.leftToLease++;
      log.error(
        { outcome: "leftToLease", reason },
        "job not handed back: Redis is unreachable; it runs again once its lease lapses (the sweeper delivers it)",
      );
    } else {
      if (released) this.metrics.redeliveries.inc({ queue: entry.job.queue, cause: "shutdown_handback" });
      log.warn(
        { outcome: "handedBack", reason, released },
        "job still running at the drain deadline: handed back for immediate redelivery",
      );
    }
    // The handler was told to stop; its slot is free now (the result, if any, is ignored).
    this.running.remove(entry.slot);
    this.dropLease(entry);
  }

  private dropLease(entry: SlottedJob): void {
    if (entry.lease === undefined) return;
    this.heartbeat.drop(entry.job.id, entry.lease);
    entry.lease = undefined;
  }

  private leasesLost(leases: LostLease[]): void {
    for (const { id, token, cancelled } of leases) {
      const entry = this.running.find((e) => e.job.id === id && e.job.token === token);
      // A job whose outcome is being written has just cleared its own token: not a loss (the
      // write itself is fenced and reports a real loss). Another token: a later execution of the
      // same job on this worker (failed and claimed again while the renewal was in flight).
      if (!entry || entry.handedBack || entry.settling) continue;
      if (cancelled) {
        // Final in Redis already: stop renewing, abort the handler (commands get SIGTERM, then
        // SIGKILL after the kill grace); its slot frees when the handler has stopped.
        entry.cancelled = true;
        this.dropLease(entry);
        this.log.info({ jobId: id, executionId: token }, "job cancelled: aborting its handler");
        this.executor.abort(entry, new JobCancelledError("job cancelled"));
        continue;
      }
      entry.lost = true;
      entry.trace.event("lease lost", { "conveyor.reason": "lease expired: this worker stalled past it" });
      this.metrics.leasesLost.inc({ queue: this.config.queue });
      this.log.warn(
        { jobId: id, executionId: entry.job.token },
        "lease lost (this worker stalled past its lease): aborting the handler; its result will be fenced off",
      );
      this.executor.abort(entry, new LeaseLostError("lease lost"));
    }
  }

  private checkRecycle(): void {
    if (this.state !== "running") return;
    const { maxJobs, maxMemoryMb } = this.config;
    if (maxJobs > 0 && this.jobsFinished >= maxJobs) {
      void this.shutdown(`recycle: ${this.jobsFinished} jobs done (max ${maxJobs})`);
    } else if (maxMemoryMb > 0 && process.memoryUsage.rss() > maxMemoryMb * 1024 * 1024) {
      void this.shutdown(
        `recycle: RSS ${Math.round(process.memoryUsage.rss() / 1048576)} MiB above ${maxMemoryMb} MiB`,
      );
    }
  }
}

/** A running job in its slot of `running`, with where its lease is held until dropped. */
interface SlottedJob extends RunningJob {
  slot: number;
  lease: HeldLease | undefined;
  /** Jobs its completion claimed for the slot it frees (complete-and-claim), started when it ends. */
  next?: ClaimedJob[];
}

/** Wakes every current waiter at once. */
class Notifier {
  private waiters: (() => void)[] = [];
  wait(): Promise<void> {
    return new Promise((resolve) => this.waiters.push(resolve));
  }
  notify(): void {
    const waiting = this.waiters;
    this.waiters = [];
    for (const w of waiting) w();
  }
}

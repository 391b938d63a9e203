// Read-side and operator commands: counts for scaling and `conveyor stats`, job lookup,
// the busy/idle worker reports, and dead-letter retry/purge.
import { countsFromReply } from "./backlogPoll.ts";
import * as gateway from "./gateway.ts";
import { PIPELINES_KEY, PipelineKeys, QueueKeys, assertJobId } from "./keys.ts";
import type { RedisClient } from "./scripts.ts";
import type { JobInfo, JobLogLine, JobStage, QueueCounts, WorkerReport } from "./types.ts";
import {
  cancelJob,
  formatRateLimit,
  pauseQueue,
  queueControl,
  resumeQueue,
  setRateLimit,
  type CancelResult,
  type QueueControlState,
  type RateLimit,
} from "./control.ts";
import { Schedules } from "./schedules.ts";
import { readVersionCounters, type VersionCounters } from "./versions.ts";
import {
  cancelFlow,
  flowView,
  repairFlow,
  type FlowCancelResult,
  type FlowRepairResult,
  type FlowView,
} from "./flows.ts";

/** `conveyor stats --json`: the five counts, then queue control. */
export interface QueueStats {
  ready: number;
  delayed: number;
  inflight: number;
  completed: number;
  dead: number;
  /** Waiting jobs no resource key can pay for now (docs/protocol.md, "Resources"): not in `ready`. */
  waitingForBudget: number;
  paused: boolean;
  /** "20/s", or null when there is none. */
  rateLimit: string | null;
  /** Jobs cancelled, all time. */
  cancelled: number;
  /** How many schedules the queue has. */
  schedules: number;
  /**
   * Whether any worker ever claimed from the queue or reports serving it now. False for a queue
   * only producers know: a typo in a queue name, or a pool not deployed yet.
   */
  served: boolean;
}

/** What `conveyor stats`, `conveyor job` and the dashboard say about a queue no worker serves. */
export const NOT_SERVED_WARNING = "no worker has claimed from this queue";

export interface DeadJob {
  id: string;
  deadAt: number;
  reason: string;
  attemptsMade: number;
  error?: string;
}

export interface PromoteResult {
  id: string;
  queue: string;
  outcome: "promoted" | "notDelayed" | "notFound";
  /** What the job was ("" when not found). */
  state: string;
}

export interface DeleteResult {
  id: string;
  /** `refused`: running, or a fan-out parent waiting for its children (cancel it first). */
  outcome: "deleted" | "refused" | "notFound";
  /** What the job was (`malformed`: its key was not a hash; "" when not found). */
  state: string;
}

export class QueueAdmin {
  private readonly redis: RedisClient;
  /** The queue's schedules: add / list / remove. */
  readonly schedules: Schedules;
  constructor(redis: RedisClient) {
    this.redis = redis;
    this.schedules = new Schedules(redis);
  }

  /**
   * Cancel a job: waiting or delayed, it leaves the queue; running, its worker aborts it at the
   * next heartbeat; a fan-out parent takes its unfinished children along. A finished job is
   * left as it is (`outcome: "finished"`), an unknown id is `notFound`.
   */
  cancel(id: string, queueOrPipeline?: string): Promise<CancelResult> {
    return cancelJob(this.redis, id, { queueOrPipeline });
  }

  /** Every worker template version's outcome counters on a queue (`<queue>versions`). */
  versionCounters(queue: string): Promise<Map<string, VersionCounters>> {
    return readVersionCounters(this.redis, queue);
  }

  /** A flow's jobs, states and parents (docs/flows.md); null when unknown. */
  flow(id: string, pipeline?: string): Promise<FlowView | null> {
    return flowView(this.redis, id, pipeline);
  }

  /** Cancel every unfinished job of a flow; running ones are aborted at their next heartbeat. */
  cancelFlow(id: string, pipeline?: string): Promise<FlowCancelResult> {
    return cancelFlow(this.redis, id, { pipeline });
  }

  /** Tell the dependents a previous release's worker left waiting (flows.ts, repairFlow). */
  repairFlow(id: string, pipeline?: string): Promise<FlowRepairResult> {
    return repairFlow(this.redis, id, { pipeline });
  }

  /** No worker claims from the queue until resume (running jobs finish; enqueues are accepted). */
  pause(queue: string): Promise<void> {
    return pauseQueue(this.redis, queue);
  }

  resume(queue: string): Promise<void> {
    return resumeQueue(this.redis, queue);
  }

  /** At most `limit.max` starts per `limit.perMs` across all workers; null removes the limit. */
  setRateLimit(queue: string, limit: RateLimit | null): Promise<void> {
    return setRateLimit(this.redis, queue, limit);
  }

  /** Whether the queue is paused, and its rate limit. */
  control(queue: string): Promise<QueueControlState> {
    return queueControl(this.redis, queue);
  }

  /** The counts `conveyor stats` shows, with queue control. */
  async stats(queue: string): Promise<QueueStats> {
    const k = new QueueKeys(queue);
    const [c, control, [cancelled, started], fields, workers] = await Promise.all([
      this.counts(queue),
      this.control(queue),
      this.redis.hmget(k.counts, "cancelled", "started"),
      this.redis.hkeys(k.schedules),
      this.redis.hlen(k.workers),
    ]);
    return {
      ready: c.ready,
      delayed: c.delayed,
      inflight: c.inflight,
      completed: c.completed,
      dead: c.dead,
      waitingForBudget: c.waitingForBudget ?? 0,
      paused: control.paused,
      rateLimit: control.rateLimit ? formatRateLimit(control.rateLimit) : null,
      cancelled: Number(cancelled ?? 0),
      schedules: fields.filter((f) => !f.startsWith("next:")).length,
      // (`started` counts every claim; a worker reports itself before its first claim)
      served: Number(started ?? 0) > 0 || workers > 0,
    };
  }

  /** One round trip, atomic: the backlog_counts script the operator's poll runs. */
  async counts(
    queue: string,
    opts: { oldestReady?: boolean; counters?: boolean } = {},
  ): Promise<QueueCounts> {
    const counts = countsFromReply(
      await gateway.backlogCounts(this.redis, { keys: new QueueKeys(queue), now: Date.now() }),
    );
    if (!opts.oldestReady) delete counts.oldestReadyAt;
    if (!opts.counters) {
      delete counts.enqueued;
      delete counts.attemptsEnded;
    }
    return counts;
  }

  /** Raw lifetime counters (enqueued, started, completed, failed, retried, dead, stalled, handedBack, fenced…). */
  async counters(queue: string): Promise<Record<string, number>> {
    const raw = await this.redis.hgetall(new QueueKeys(queue).counts);
    return Object.fromEntries(Object.entries(raw).map(([k, v]) => [k, Number(v)]));
  }

  /** Live worker reports (busy/idle per pod) for scale-in decisions. */
  async workers(queue: string): Promise<WorkerReport[]> {
    const raw = await this.redis.hgetall(new QueueKeys(queue).workers);
    const out: WorkerReport[] = [];
    for (const [id, json] of Object.entries(raw)) {
      try {
        out.push({ ...(JSON.parse(json) as WorkerReport), id });
      } catch {
        // A garbled report is ignored; the sweeper prunes it.
      }
    }
    return out;
  }

  /**
   * Cordon exactly `pods` of the queue until `untilMs` (they claim nothing new; the rest are
   * uncordoned): one write, replacing the last. The key expires with the deadline, so a cordon
   * the operator stops refreshing lifts by itself. No pods: no cordon.
   */
  async setCordon(queue: string, pods: readonly string[], untilMs: number): Promise<void> {
    const key = new QueueKeys(queue).cordon;
    if (pods.length === 0) {
      await this.redis.del(key);
      return;
    }
    await this.redis
      .multi()
      .del(key)
      .hset(key, Object.fromEntries(pods.map((p) => [p, String(untilMs)])))
      .pexpireat(key, untilMs)
      .exec();
  }

  /** Whether any worker ever claimed from the queue or serves it now (QueueStats.served). */
  async served(queue: string): Promise<boolean> {
    const k = new QueueKeys(queue);
    const [started, workers] = await Promise.all([
      this.redis.hget(k.counts, "started"),
      this.redis.hlen(k.workers),
    ]);
    return Number(started ?? 0) > 0 || workers > 0;
  }

  async job(id: string, queueOrPipeline?: string): Promise<JobInfo | null> {
    assertJobId(id);
    const pipelines = queueOrPipeline
      ? [queueOrPipeline.split("/")[0]!]
      : await this.redis.smembers(PIPELINES_KEY);
    for (const p of pipelines) {
      const key = new PipelineKeys(p).job(id);
      const raw: Record<string, string> = await this.redis.hgetall(key).catch(async (err: Error) => {
        if (!/WRONGTYPE/.test(err.message)) throw err;
        return {
          id,
          state: "malformed",
          deadReason: `malformed: job key is a ${await this.redis.type(key)}, not a hash`,
        };
      });
      if (Object.keys(raw).length === 0) continue;
      // A waiting job's data longer than 64 B is in its own key until it is claimed.
      if (raw.data === undefined && raw.queue !== undefined) {
        const parked = await this.redis.get(new PipelineKeys(p).data(id)).catch(() => null);
        if (parked !== null) raw.data = parked;
      }
      return toJobInfo(id, raw);
    }
    return null;
  }

  /**
   * The lines a job's handlers logged (ctx.log, or the handler callback's /log), oldest first:
   * at most the last JOB_LOG_MAX_LINES, for as long as the log is kept. Empty when it never
   * logged, its log expired, or the job is unknown.
   */
  async jobLogs(id: string, queueOrPipeline?: string): Promise<JobLogLine[]> {
    assertJobId(id);
    const pipelines = queueOrPipeline
      ? [queueOrPipeline.split("/")[0]!]
      : await this.redis.smembers(PIPELINES_KEY);
    for (const p of pipelines) {
      const raw = await this.redis.lrange(new PipelineKeys(p).logs(id), 0, -1);
      if (raw.length > 0) return raw.map(parseLogLine);
    }
    return [];
  }

  async deadJobs(queue: string, limit = 100): Promise<DeadJob[]> {
    const k = new QueueKeys(queue);
    const entries = await this.redis.zrange(k.dead, 0, limit - 1, "WITHSCORES");
    const out: DeadJob[] = [];
    for (let i = 0; i < entries.length; i += 2) {
      const id = entries[i]!;
      const fields = await this.redis
        .hmget(k.job(id), "deadReason", "attemptsMade", "error")
        .catch(async (err: Error) => {
          // another client replaced the record with a non-hash after it was dead-lettered
          if (!/WRONGTYPE/.test(err.message)) throw err;
          return [`malformed: job key is a ${await this.redis.type(k.job(id))}, not a hash`, "0", null];
        });
      const [reason, attemptsMade, error] = fields;
      out.push({
        id,
        deadAt: Number(entries[i + 1]),
        reason: reason ?? "",
        attemptsMade: Number(attemptsMade ?? 0),
        error: error ?? undefined,
      });
    }
    return out;
  }

  /**
   * Run a delayed job now: it becomes ready (priority 0: the tail of the line; else its score's
   * place among the prioritised jobs). A job that is not delayed is refused (`outcome:
   * "notDelayed"`, with its state); an unknown id is `notFound`.
   */
  async promote(id: string, queue: string): Promise<PromoteResult> {
    assertJobId(id);
    const k = new QueueKeys(queue);
    const { outcome, state } = await gateway.promoteJob<PromoteResult["outcome"]>(this.redis, {
      keys: k,
      id,
      now: Date.now(),
    });
    return { id, queue, outcome, state };
  }

  /**
   * Delete jobs of `queue` (waiting, delayed, dead, completed or cancelled) in one atomic call:
   * each leaves its set, its record and log are deleted, its idempotency key is freed, and a
   * `deleted` event is recorded. A running job and a fan-out parent waiting for its children are
   * refused (cancel them first); an id that is not a job of this queue is `notFound`.
   */
  async deleteJobs(queue: string, ids: string[]): Promise<DeleteResult[]> {
    if (ids.length === 0) return [];
    for (const id of ids) assertJobId(id);
    return gateway.deleteJobs<DeleteResult["outcome"]>(this.redis, {
      keys: new QueueKeys(queue),
      ids,
      now: Date.now(),
    });
  }

  /** Move dead jobs back to ready (all of them when `ids` is empty). Returns how many moved. */
  async retryDead(queue: string, ids: string[] = []): Promise<number> {
    const keys = new QueueKeys(queue);
    if (ids.length > 0) return gateway.retryDead(this.redis, { keys, now: Date.now(), ids });
    let total = 0;
    for (;;) {
      const moved = await gateway.retryDead(this.redis, { keys, now: Date.now(), limit: 500 });
      total += moved;
      if (moved === 0) return total;
    }
  }

  async purgeDead(queue: string): Promise<number> {
    const k = new QueueKeys(queue);
    let total = 0;
    for (;;) {
      const n = await gateway.purgeDead(this.redis, { keys: k, limit: 500 });
      total += n;
      if (n === 0) return total;
    }
  }
}

function parseLogLine(text: string): JobLogLine {
  try {
    const v = JSON.parse(text) as Partial<JobLogLine>;
    return {
      at: Number(v.at ?? 0),
      executionId: String(v.executionId ?? ""),
      message: String(v.message ?? ""),
    };
  } catch {
    return { at: 0, executionId: "", message: text };
  }
}

/**
 * The stages of a job record: the finished ones from `stages` (`queue=attempts …`, written by
 * the stage advance), then the current one.
 */
export function stagesOf(info: Omit<JobInfo, "stages">, stages: string | undefined): JobStage[] {
  const out: JobStage[] = [];
  for (const entry of (stages ?? "").split(" ")) {
    const eq = entry.lastIndexOf("=");
    if (eq <= 0) continue;
    out.push({ queue: entry.slice(0, eq), state: "completed", attempts: Number(entry.slice(eq + 1)) || 0 });
  }
  const current: JobStage = { queue: info.queue, state: info.state, attempts: info.attemptsMade };
  if (info.state === "completed" && info.result !== undefined) current.result = info.result;
  if (info.error !== undefined) current.error = info.error;
  if (info.startedAt !== undefined) current.startedAt = info.startedAt;
  if (info.finishedAt !== undefined) current.finishedAt = info.finishedAt;
  out.push(current);
  return out;
}

/** A job record as stored: fields at their default are absent (docs/protocol.md, "Job record fields"). */
function toJobInfo(id: string, raw: Record<string, string>): JobInfo {
  const num = (v: string | undefined) => (v === undefined || v === "" ? undefined : Number(v));
  const info: Omit<JobInfo, "stages"> = {
    id,
    queue: raw.queue ?? "",
    state: raw.state ?? "unknown",
    data: raw.data ?? "",
    priority: num(raw.priority) ?? 0,
    attempts: num(raw.attempts) ?? 0,
    // (a dead-letter retry gives a fresh budget; the attempts before it still ran)
    attemptsMade: (num(raw.attemptsMade) ?? 0) + (num(raw.attemptsBefore) ?? 0),
    stalls: num(raw.stalls) ?? 0,
    handbacks: num(raw.handbacks) ?? 0,
    createdAt: num(raw.createdAt) ?? 0,
    startedAt: num(raw.startedAt),
    finishedAt: num(raw.finishedAt),
    result: raw.result,
    error: raw.error || undefined,
    errors: raw.errors || undefined,
    task: raw.task || undefined,
    rejected: raw.rejected || undefined,
    deadReason: raw.deadReason || undefined,
    worker: raw.worker,
    progress: num(raw.progress),
    progressMessage: raw.progressMessage || undefined,
    idempotencyKey: raw.idempotencyKey || undefined,
  };
  if (raw.flow)
    info.flow = {
      id: raw.flow,
      key: raw.flowKey ?? "",
      parents: raw.parents ? raw.parents.split(" ") : [],
      ...(raw.pending ? { pending: Number(raw.pending) } : {}),
      ...(raw.cancelReason ? { cancelReason: raw.cancelReason } : {}),
    };
  return { ...info, stages: stagesOf(info, raw.stages) };
}

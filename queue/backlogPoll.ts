// The operator's poll of many queues on one Redis server in one round trip: a pipeline of one
// atomic backlog_counts call and one HMGET of the queue's control (pause, rate limit) per
// queue (and, for the leader, one sweep_leases call per queue).
// On Redis Cluster the queues' keys live on different nodes, so each queue gets a pipeline of
// its own there (still one round trip per queue, all in parallel).
import { QueueKeys } from "./keys.ts";
import { sweepCall, sweepResult, type SweepResult } from "./consumer.ts";
import { controlFields, parseQueueControl, type QueueControlState } from "./control.ts";
import { installScripts, pipelineScript, type RedisClient } from "./scripts.ts";
import type { QueueCounts } from "./types.ts";

/** One queue's poll: its counts, or why they could not be read; the sweep's outcome when asked. */
export interface QueuePoll {
  counts?: QueueCounts;
  /** Pause and rate limit in force (read with the counts). */
  control?: QueueControlState;
  error?: Error;
  sweep?: SweepResult | Error;
}

type CountsReply = [number, number, number, number, number, number, number];

/** The backlog_counts call for one queue (the poll pipelines it; QueueAdmin.counts runs it alone). */
export function backlogCountsCall(
  queue: string,
  now = Date.now(),
): { keys: string[]; args: (string | number)[] } {
  const k = new QueueKeys(queue);
  return { keys: [k.ready, k.delayed, k.inflight, k.dead, k.counts], args: [now, k.jobPrefix] };
}

/** backlog_counts' reply as QueueCounts. */
export function countsFromReply(r: CountsReply): QueueCounts {
  const [ready, delayed, dueDelayed, inflight, dead, completed, oldest] = r.map(Number) as CountsReply;
  const counts: QueueCounts = {
    ready,
    delayed,
    dueDelayed,
    inflight,
    dead,
    completed,
    backlog: ready + dueDelayed + inflight,
  };
  if (ready > 0 && Number.isFinite(oldest) && oldest > 0) counts.oldestReadyAt = oldest;
  return counts;
}

function isCluster(redis: RedisClient): boolean {
  return (redis as { isCluster?: boolean }).isCluster === true;
}

async function pollBatch(redis: RedisClient, queues: string[], sweep: boolean): Promise<QueuePoll[]> {
  installScripts(redis);
  const pipeline = redis.pipeline();
  const now = Date.now();
  for (const queue of queues) {
    const k = new QueueKeys(queue);
    // Pause first: counts read after a pause include every job that can still be running.
    const f = controlFields(queue);
    pipeline.hmget(k.meta, f.paused, f.rate);
    const counts = backlogCountsCall(queue, now);
    pipelineScript(redis, pipeline, "backlog_counts", counts.keys, counts.args);
    if (sweep) {
      const call = sweepCall(queue);
      pipelineScript(redis, pipeline, "sweep_leases", call.keys, call.args);
    }
  }
  const replies = await pipeline.exec();
  if (!replies) throw new Error("backlog poll: pipeline aborted");
  const per = sweep ? 3 : 2;
  return queues.map((_, i) => {
    const [controlErr, control] = replies[i * per]!;
    const [err, reply] = replies[i * per + 1]!;
    const out: QueuePoll =
      err || controlErr
        ? { error: (err ?? controlErr)! }
        : {
            counts: countsFromReply(reply as CountsReply),
            control: parseQueueControl(...(control as [string | null, string | null])),
          };
    if (sweep) {
      const [sweepErr, sweepReply] = replies[i * per + 2]!;
      out.sweep = sweepErr ?? sweepResult(sweepReply as [number, number, number]);
    }
    return out;
  });
}

/**
 * The counts (with oldestReadyAt) of every queue, one round trip for all on a single server.
 * A failed round trip rejects; a failed call for one queue is that queue's `error`.
 */
export async function pollQueues(
  redis: RedisClient,
  queues: string[],
  opts: { sweep?: boolean } = {},
): Promise<QueuePoll[]> {
  if (queues.length === 0) return [];
  const sweep = opts.sweep ?? false;
  if (!isCluster(redis)) return pollBatch(redis, queues, sweep);
  return Promise.all(
    queues.map((q) =>
      pollBatch(redis, [q], sweep).then(
        (p) => p[0]!,
        (err: unknown) => ({ error: err instanceof Error ? err : new Error(String(err)) }),
      ),
    ),
  );
}

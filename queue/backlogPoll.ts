// The operator's poll of many queues on one Redis server: poll_queues calls of up to
// POLL_CHUNK queues each, all sent at once (one round trip), each reading a queue's counts, its
// control (pause, rate limit) and, for the leader, sweeping it.
// On Redis Cluster the queues' keys live on different nodes, so each queue gets a call of its
// own there (still one round trip, all in parallel).
import { QueueKeys } from "./keys.ts";
import { sweepResult, sweepSettings, type SweepResult } from "./consumer.ts";
import { parseQueueControl, type QueueControlState } from "./control.ts";
import * as gateway from "./gateway.ts";
import type { CountsReply, PolledQueue } from "./gateway.ts";
import type { RedisClient } from "./scripts.ts";
import type { QueueCounts } from "./types.ts";

/**
 * Queues per poll_queues call. A call holds Redis while it runs (an idle queue costs ~20
 * commands with its sweep): 100 keep one call near a millisecond.
 */
export const POLL_CHUNK = 100;

export type { PolledQueue } from "./gateway.ts";

/** A queue's part of a poll_queues call, made once (a caller that polls the same queues again keeps it). */
export function polledQueue(queue: string): PolledQueue {
  return gateway.polledQueue(new QueueKeys(queue));
}

/** One queue's poll: its counts, or why they could not be read; the sweep's outcome when asked. */
export interface QueuePoll {
  counts?: QueueCounts;
  /** Pause and rate limit in force (read with the counts). */
  control?: QueueControlState;
  /** Jobs waiting in groups (included in counts.ready); 0 without groups. */
  groupedWaiting?: number;
  error?: Error;
  sweep?: SweepResult | Error;
}

/** backlog_counts' reply (poll_queues' first 11 values of a queue) as QueueCounts. */
export function countsFromReply(r: CountsReply): QueueCounts {
  const [
    ready,
    delayed,
    dueDelayed,
    inflight,
    dead,
    completed,
    oldest,
    enqueued,
    budget,
    ended,
    runMs,
    waiting,
  ] = r.map(Number) as CountsReply;
  const counts: QueueCounts = {
    ready,
    delayed,
    dueDelayed,
    inflight,
    dead,
    completed,
    backlog: ready + dueDelayed + inflight,
  };
  if (Number.isFinite(enqueued)) counts.enqueued = enqueued;
  if (Number.isFinite(ended) && Number.isFinite(runMs))
    counts.attemptsEnded = { count: ended!, runMs: runMs! };
  if (budget) counts.waitingForBudget = budget;
  if (waiting) counts.waitingChildren = waiting;
  if (ready > 0 && Number.isFinite(oldest) && oldest > 0) counts.oldestReadyAt = oldest;
  return counts;
}

function isCluster(redis: RedisClient): boolean {
  return (redis as { isCluster?: boolean }).isCluster === true;
}

/** One poll_queues call for `queues` (all on one node). */
async function pollChunk(redis: RedisClient, queues: PolledQueue[], sweep: boolean): Promise<QueuePoll[]> {
  const replies = await gateway.pollQueues(redis, {
    now: Date.now(),
    sweep,
    settings: sweepSettings(),
    queues,
  });
  return replies.map(({ counts, swept }) => {
    const out: QueuePoll =
      counts.length === 1
        ? { error: new Error(String(counts[0])) }
        : {
            counts: countsFromReply([...counts.slice(0, 11), counts[14] ?? 0] as unknown as CountsReply),
            control: parseQueueControl((counts[11] as string) || null, (counts[12] as string) || null),
            groupedWaiting: Number(counts[13] ?? 0),
          };
    if (sweep)
      out.sweep =
        swept.length === 1
          ? new Error(String(swept[0]))
          : sweepResult({
              requeued: Number(swept[0]),
              dead: Number(swept[1]),
              graceLeftMs: Number(swept[2]),
            });
    return out;
  });
}

/**
 * The counts (with oldestReadyAt) and control of every queue, and a sweep of each when asked:
 * one round trip for all on a single server. A failed round trip rejects; a failed read of one
 * queue is that queue's `error` (a failed sweep its `sweep`).
 */
export async function pollQueues(
  redis: RedisClient,
  queues: (string | PolledQueue)[],
  opts: { sweep?: boolean } = {},
): Promise<QueuePoll[]> {
  if (queues.length === 0) return [];
  const sweep = opts.sweep ?? false;
  const polled = queues.map((q) => (typeof q === "string" ? polledQueue(q) : q));
  if (isCluster(redis))
    return Promise.all(
      polled.map((q) =>
        pollChunk(redis, [q], sweep).then(
          (p) => p[0]!,
          (err: unknown) => ({ error: err instanceof Error ? err : new Error(String(err)) }),
        ),
      ),
    );
  const chunks: Promise<QueuePoll[]>[] = [];
  for (let i = 0; i < polled.length; i += POLL_CHUNK)
    chunks.push(pollChunk(redis, polled.slice(i, i + POLL_CHUNK), sweep));
  return (await Promise.all(chunks)).flat();
}

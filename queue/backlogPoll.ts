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

/** backlog_counts' reply (poll_queues' counts of a queue) as QueueCounts. */
export function countsFromReply(r: CountsReply): QueueCounts {
  const ready = Number(r.ready);
  const dueDelayed = Number(r.dueDelayed);
  const inflight = Number(r.inflight);
  const counts: QueueCounts = {
    ready,
    delayed: Number(r.delayed),
    dueDelayed,
    inflight,
    dead: Number(r.dead),
    completed: Number(r.completed),
    backlog: ready + dueDelayed + inflight,
    enqueued: Number(r.enqueued),
    attemptsEnded: { count: Number(r.ended), runMs: Number(r.runMs) },
  };
  const budget = Number(r.waitingForBudget ?? 0);
  const waiting = Number(r.waitingChildren ?? 0);
  const oldest = Number(r.oldestReadyAt ?? 0);
  if (budget) counts.waitingForBudget = budget;
  if (waiting) counts.waitingChildren = waiting;
  if (ready > 0 && oldest > 0) counts.oldestReadyAt = oldest;
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
  return replies.map((r) => {
    const out: QueuePoll =
      r.error !== undefined
        ? { error: new Error(String(r.error)) }
        : {
            counts: countsFromReply(r as CountsReply),
            control: parseQueueControl(r.paused ? "1" : null, r.rate ?? null),
            groupedWaiting: Number(r.groupedWaiting ?? 0),
          };
    if (sweep)
      out.sweep =
        r.sweepError !== undefined || !r.sweep
          ? new Error(String(r.sweepError ?? "poll_queues replied no sweep"))
          : sweepResult({
              requeued: Number(r.sweep.requeued),
              dead: Number(r.sweep.dead),
              graceLeftMs: Number(r.sweep.graceLeftMs),
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

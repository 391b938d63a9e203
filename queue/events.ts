// Following a queue's events: every transition (enqueued, started, progress, retried,
// completed, dead, handedBack, deferred, stalled) in order, from a capped stream per queue.
import { QueueKeys } from "./keys.ts";
import type { RedisClient } from "./scripts.ts";

export interface QueueEvent {
  /** Stream id: events are totally ordered per queue. */
  eventId: string;
  type: string;
  id: string;
  queue: string;
  at: number;
  fields: Record<string, string>;
}

function toEvent(eventId: string, flat: string[]): QueueEvent {
  const fields: Record<string, string> = {};
  for (let i = 0; i < flat.length; i += 2) fields[flat[i]!] = flat[i + 1]!;
  return {
    eventId,
    type: fields.type ?? "",
    id: fields.id ?? "",
    queue: fields.queue ?? "",
    at: Number(fields.at ?? 0),
    fields,
  };
}

export class QueueEvents {
  private readonly redis: RedisClient;
  constructor(redis: RedisClient) {
    this.redis = redis;
  }

  /** The most recent `count` events, oldest first. */
  async recent(queue: string, count = 100): Promise<QueueEvent[]> {
    const entries = await this.redis.xrevrange(new QueueKeys(queue).events, "+", "-", "COUNT", count);
    return entries.map(([id, flat]) => toEvent(id, flat)).reverse();
  }

  /**
   * Follow new events (after `from`, default: only new ones) until `signal` aborts. Needs a
   * connection of its own: it blocks.
   */
  async *follow(
    blocking: RedisClient,
    queue: string,
    opts: { from?: string; signal?: AbortSignal; blockMs?: number } = {},
  ): AsyncGenerator<QueueEvent> {
    const key = new QueueKeys(queue).events;
    let last = opts.from ?? "$";
    while (!opts.signal?.aborted) {
      const reply = (await blocking.xread(
        "COUNT",
        500,
        "BLOCK",
        opts.blockMs ?? 1000,
        "STREAMS",
        key,
        last,
      )) as [string, [string, string[]][]][] | null;
      if (!reply) continue;
      for (const [, entries] of reply) {
        for (const [id, flat] of entries) {
          last = id;
          yield toEvent(id, flat);
        }
      }
    }
  }
}

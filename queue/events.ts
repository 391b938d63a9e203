// Following a queue's events: every transition (enqueued, started, progress, retried,
// completed, dead, handedBack, deferred, stalled) in order, from a capped stream per queue.
import { QueueKeys } from "./keys.ts";
import type { RedisClient } from "./scripts.ts";

export interface QueueEvent {
  /** Stream id: events are totally ordered per queue. The jobs of one batch entry share it. */
  eventId: string;
  /** The job's place in its batch entry (0 for an entry of one job): (eventId, part) is unique. */
  part: number;
  type: string;
  id: string;
  queue: string;
  at: number;
  fields: Record<string, string>;
}

/** What joins a batch entry's per-job values (docs/protocol.md, Events). */
export const EVENT_LIST_SEPARATOR = "\x1f";

/**
 * The events of one stream entry, in order: one for a per-job entry, n for a batch entry (the
 * jobs one script call started or completed: `n`, per-job lists in fields named `x[]`, shared
 * fields). `queue` fills in an entry without a queue field (queue-control entries have one).
 */
export function eventsOfEntry(eventId: string, flat: readonly string[], queue = ""): QueueEvent[] {
  const shared: Record<string, string> = {};
  let lists: [string, string[]][] | undefined;
  for (let i = 0; i + 1 < flat.length; i += 2) {
    const name = flat[i]!;
    if (name.endsWith("[]"))
      (lists ??= []).push([name.slice(0, -2), flat[i + 1]!.split(EVENT_LIST_SEPARATOR)]);
    else shared[name] = flat[i + 1]!;
  }
  if (!lists) return [toEvent(eventId, 0, shared, queue)];
  delete shared.n;
  // (a list shorter than n — an entry written by hand — yields the jobs all lists have)
  const n = Math.min(...lists.map(([, values]) => values.length));
  const out: QueueEvent[] = [];
  for (let k = 0; k < n; k++) {
    const fields: Record<string, string> = { ...shared };
    for (const [name, values] of lists) fields[name] = values[k]!;
    out.push(toEvent(eventId, k, fields, queue));
  }
  return out;
}

function toEvent(eventId: string, part: number, fields: Record<string, string>, queue: string): QueueEvent {
  return {
    eventId,
    part,
    type: fields.type ?? "",
    id: fields.id ?? "",
    queue: fields.queue || queue,
    at: Number(fields.at ?? 0),
    fields,
  };
}

/** The events of XRANGE/XREVRANGE/XREAD entries, oldest first when the entries are. */
export function eventsOfEntries(entries: readonly [string, string[]][], queue = ""): QueueEvent[] {
  const out: QueueEvent[] = [];
  for (const [id, flat] of entries) out.push(...eventsOfEntry(id, flat, queue));
  return out;
}

/** (eventId, part) after (prevId, prevPart): stream ids compare as (ms, seq). */
export function eventAfter(
  e: Pick<QueueEvent, "eventId" | "part">,
  prevId: string,
  prevPart: number,
): boolean {
  if (e.eventId === prevId) return e.part > prevPart;
  const [am, as] = e.eventId.split("-").map(BigInt) as [bigint, bigint];
  const [bm, bs] = prevId.split("-").map(BigInt) as [bigint, bigint];
  return am > bm || (am === bm && as > bs);
}

export class QueueEvents {
  private readonly redis: RedisClient;
  constructor(redis: RedisClient) {
    this.redis = redis;
  }

  /** The most recent `count` events, oldest first (a batch entry counts as its jobs). */
  async recent(queue: string, count = 100): Promise<QueueEvent[]> {
    const entries = await this.redis.xrevrange(new QueueKeys(queue).events, "+", "-", "COUNT", count);
    return eventsOfEntries(entries.reverse(), queue).slice(-count);
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
          yield* eventsOfEntry(id, flat, queue);
        }
      }
    }
  }
}

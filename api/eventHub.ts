// Live queue events for every SSE client from ONE blocking Redis connection: the hub XREADs
// all known queues' event streams and fans each entry out in process. It runs only while
// someone listens. A queue that appears later is read from its first entry, so the event that
// created it is not missed. Resuming (Last-Event-ID) reads the gap with XRANGE.
import {
  eventAfter,
  eventsOfEntries,
  eventsOfEntry,
  QueueKeys,
  type QueueEvent,
  type RedisClient,
} from "../queue/index.ts";
import type { QueueDirectory } from "./queueDirectory.ts";

/** Called once per XREAD batch (up to 500 events, across queues), so a client writes once per batch. */
export type Listener = (batch: QueueEvent[]) => void;
export type QueuesListener = (queues: string[]) => void;

const BLOCK_MS = 1_000;
const BATCH = 500;

/** An SSE event id: the stream entry's id, and `/part` for the later jobs of a batch entry. */
export const EVENT_ID = /^(\d{1,20}-\d{1,20})(?:\/(\d{1,6}))?$/;

export function sseEventId(e: Pick<QueueEvent, "eventId" | "part">): string {
  return e.part === 0 ? e.eventId : `${e.eventId}/${e.part}`;
}

/** An SSE event id as (stream id, part), or null when it is not one. */
export function parseEventId(text: string): { eventId: string; part: number } | null {
  const m = EVENT_ID.exec(text);
  return m ? { eventId: m[1]!, part: Number(m[2] ?? 0) } : null;
}

export class EventHub {
  private readonly redis: RedisClient;
  private readonly directory: QueueDirectory;
  private blocking: RedisClient | null = null;
  private readonly listeners = new Set<Listener>();
  private readonly queueListeners = new Set<QueuesListener>();
  /** Last id read per queue stream. */
  private readonly positions = new Map<string, string>();
  private running: Promise<void> | null = null;
  private stopped = false;
  /** Set after the first look at the queue list: later queues are new and read from their start. */
  private primed = false;

  constructor(redis: RedisClient, directory: QueueDirectory) {
    this.redis = redis;
    this.directory = directory;
  }

  get listenerCount(): number {
    return this.listeners.size;
  }

  subscribe(listener: Listener, onQueues?: QueuesListener): () => void {
    this.listeners.add(listener);
    if (onQueues) this.queueListeners.add(onQueues);
    this.running ??= this.run().finally(() => {
      this.running = null;
    });
    return () => {
      this.listeners.delete(listener);
      if (onQueues) this.queueListeners.delete(onQueues);
    };
  }

  /** Events of `queue` after (`afterId`, `part`), oldest first (from at most `count` entries). */
  async since(queue: string, afterId: string, part = 0, count = 1000): Promise<QueueEvent[]> {
    const entries = await this.redis.xrange(new QueueKeys(queue).events, afterId, "+", "COUNT", count);
    return eventsOfEntries(entries, queue).filter((e) => eventAfter(e, afterId, part));
  }

  async close(): Promise<void> {
    this.stopped = true;
    this.blocking?.disconnect();
    await this.running?.catch(() => {});
  }

  private async run(): Promise<void> {
    this.blocking ??= this.redis.duplicate();
    let delay = 100;
    while (!this.stopped && this.listeners.size > 0) {
      try {
        await this.readOnce();
        delay = 100;
      } catch {
        if (this.stopped) return;
        // Redis away: keep the clients, try again with back-off.
        await new Promise((r) => setTimeout(r, delay));
        delay = Math.min(delay * 2, 5_000);
      }
    }
  }

  private async readOnce(): Promise<void> {
    const queues = await this.directory.list();
    const fresh = queues.filter((q) => !this.positions.has(q));
    if (fresh.length > 0) {
      // Queues known before the hub started: from their current end; new ones: from the start.
      const firstRun = !this.primed;
      for (const q of fresh) {
        let from = "0-0";
        if (firstRun) {
          const last = await this.redis.xrevrange(new QueueKeys(q).events, "+", "-", "COUNT", 1);
          from = last[0]?.[0] ?? "0-0";
        }
        this.positions.set(q, from);
      }
      if (!firstRun) for (const l of this.queueListeners) l(queues);
    }
    this.primed = true;
    if (queues.length === 0) {
      await new Promise((r) => setTimeout(r, BLOCK_MS));
      return;
    }
    const keys = queues.map((q) => new QueueKeys(q).events);
    const reply = (await this.blocking!.xread(
      "COUNT",
      BATCH,
      "BLOCK",
      BLOCK_MS,
      "STREAMS",
      ...keys,
      ...queues.map((q) => this.positions.get(q)!),
    )) as [string, [string, string[]][]][] | null;
    if (!reply) return;
    const batch: QueueEvent[] = [];
    for (const [key, entries] of reply) {
      const queue = queues[keys.indexOf(key)]!;
      for (const [id, flat] of entries) {
        this.positions.set(queue, id);
        batch.push(...eventsOfEntry(id, flat, queue));
      }
    }
    for (const l of this.listeners) l(batch);
  }
}

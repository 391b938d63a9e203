// Live queue events for every SSE client from ONE reader: the hub XREADs all known queues'
// event streams and fans each entry out in process. It runs only while someone listens, and
// forgets its read positions when the last listener leaves (the next one starts from now, not
// from where the last one stopped). A queue that appears later is read from its first entry, so
// the event that created it is not missed. Resuming (Last-Event-ID) reads the gap with XRANGE
// and says so when that history was trimmed.
//
// On one server every stream is in one blocking XREAD. On Redis Cluster a pipeline's streams
// share a slot but pipelines do not: one non-blocking XREAD per pipeline each round (ioredis
// routes each to its node), and a short pause when every stream was quiet.
import {
  eventAfter,
  eventsOfEntries,
  eventsOfEntry,
  pipelineOf,
  QueueKeys,
  type QueueEvent,
  type RedisClient,
} from "../queue/index.ts";
import type { ApiMetrics } from "./metrics.ts";
import type { QueueDirectory } from "./queueDirectory.ts";

/** Called once per XREAD batch (up to 500 events, across queues), so a client writes once per batch. */
export type Listener = (batch: QueueEvent[]) => void;
export type QueuesListener = (queues: string[]) => void;

const BLOCK_MS = 1_000;
/** Redis Cluster: the pause after a round in which no stream had anything new. */
const CLUSTER_POLL_MS = 200;
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

/** What a resume read: the events after the id, and whether some of them are gone. */
export interface Replay {
  events: QueueEvent[];
  /** "trimmed": the stream dropped entries after the id; "truncated": more than `count` followed. */
  gap: "trimmed" | "truncated" | null;
}

type XreadReply = [string, [string, string[]][]][] | null;

/** Streams grouped so each group's keys share a Redis Cluster slot (a pipeline's hash tag). */
export function slotGroups(queues: readonly string[]): string[][] {
  const groups = new Map<string, string[]>();
  for (const q of queues) {
    const p = pipelineOf(q);
    const g = groups.get(p);
    if (g) g.push(q);
    else groups.set(p, [q]);
  }
  return [...groups.values()];
}

export class EventHub {
  private readonly redis: RedisClient;
  private readonly directory: QueueDirectory;
  private readonly metrics: ApiMetrics;
  private blocking: RedisClient | null = null;
  private readonly listeners = new Set<Listener>();
  private readonly queueListeners = new Set<QueuesListener>();
  /** Last id read per queue stream, in the current generation. */
  private positions = new Map<string, string>();
  /** Bumped when the last listener leaves: a read begun before then is dropped. */
  private generation = 0;
  private running: Promise<void> | null = null;
  private stopped = false;
  /** Set after the first look at the queue list: later queues are new and read from their start. */
  private primed = false;
  /** Waiters for the next time every known queue has a position (`ready`). */
  private primedWaiters: (() => void)[] = [];

  constructor(redis: RedisClient, directory: QueueDirectory, metrics: ApiMetrics) {
    this.redis = redis;
    this.directory = directory;
    this.metrics = metrics;
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
      if (this.listeners.size === 0) {
        this.positions = new Map();
        this.primed = false;
        this.generation++;
      }
    };
  }

  /** Resolves once the hub follows every known queue from a position: later events reach listeners. */
  ready(): Promise<void> {
    if (this.primed) return Promise.resolve();
    return new Promise((resolve) => this.primedWaiters.push(resolve));
  }

  /** Events of `queue` after (`afterId`, `part`), oldest first (from at most `count` entries). */
  async since(queue: string, afterId: string, part = 0, count = 1000): Promise<Replay> {
    const key = new QueueKeys(queue).events;
    const [entries, lost] = await Promise.all([
      this.redis.xrange(key, afterId, "+", "COUNT", count),
      this.lostAfter(key, afterId),
    ]);
    const events = eventsOfEntries(entries, queue).filter((e) => eventAfter(e, afterId, part));
    return { events, gap: lost ? "trimmed" : entries.length >= count ? "truncated" : null };
  }

  /**
   * Whether the stream may have dropped entries after `afterId` (XINFO STREAM): one deleted after
   * it, or trimmed ones while its oldest kept entry is newer. (Redis does not keep the newest
   * trimmed id, so a trim that ended exactly at `afterId` counts too: the client only reloads.)
   */
  private async lostAfter(key: string, afterId: string): Promise<boolean> {
    const reply = (await this.redis.call("XINFO", "STREAM", key).catch((err: Error) => {
      if (/no such key/i.test(err.message)) return null;
      throw err;
    })) as unknown[] | null;
    if (!reply) return false;
    const info = new Map<string, unknown>();
    for (let i = 0; i + 1 < reply.length; i += 2) info.set(String(reply[i]), reply[i + 1]);
    const newer = (id: unknown) => typeof id === "string" && eventAfter({ eventId: id, part: 0 }, afterId, 0);
    const first = (info.get("first-entry") as [string] | null)?.[0];
    const trimmed = Number(info.get("entries-added")) > Number(info.get("length"));
    return newer(info.get("max-deleted-entry-id")) || (trimmed && newer(first));
  }

  async close(): Promise<void> {
    this.stopped = true;
    this.blocking?.disconnect();
    await this.running?.catch(() => {});
  }

  private async run(): Promise<void> {
    if (!this.redis.isCluster) this.blocking ??= this.redis.duplicate();
    let delay = 100;
    while (!this.stopped && this.listeners.size > 0) {
      try {
        await this.readOnce();
        delay = 100;
      } catch (err) {
        if (this.stopped) return;
        // Redis away (or refusing): keep the clients, say so, try again with back-off.
        this.metrics.error("event_hub", err);
        await new Promise((r) => setTimeout(r, delay));
        delay = Math.min(delay * 2, 5_000);
      }
    }
  }

  private async readOnce(): Promise<void> {
    const generation = this.generation;
    const queues = await this.directory.list();
    const fresh = queues.filter((q) => !this.positions.has(q));
    const firstRun = !this.primed;
    if (fresh.length > 0) {
      // Queues known before the hub started: from their current end; new ones: from the start.
      const starts = await Promise.all(
        fresh.map(async (q) =>
          firstRun
            ? ((await this.redis.xrevrange(new QueueKeys(q).events, "+", "-", "COUNT", 1))[0]?.[0] ?? "0-0")
            : "0-0",
        ),
      );
      if (generation !== this.generation) return;
      fresh.forEach((q, i) => this.positions.set(q, starts[i]!));
      if (!firstRun) for (const l of this.queueListeners) l(queues);
    }
    this.primed = true;
    for (const w of this.primedWaiters.splice(0)) w();
    if (queues.length === 0) {
      await new Promise((r) => setTimeout(r, BLOCK_MS));
      return;
    }
    const positions = this.positions;
    const read = (group: string[], block: boolean) =>
      (block
        ? this.blocking!.xread(
            "COUNT",
            BATCH,
            "BLOCK",
            BLOCK_MS,
            "STREAMS",
            ...group.map(streamOf),
            ...group.map((q) => positions.get(q)!),
          )
        : this.redis.xread(
            "COUNT",
            BATCH,
            "STREAMS",
            ...group.map(streamOf),
            ...group.map((q) => positions.get(q)!),
          )) as Promise<XreadReply>;
    const replies = this.redis.isCluster
      ? await Promise.all(slotGroups(queues).map((g) => read(g, false)))
      : [await read(queues, true)];
    if (generation !== this.generation) return;
    const byKey = new Map(queues.map((q) => [streamOf(q), q]));
    const batch: QueueEvent[] = [];
    for (const reply of replies)
      for (const [key, entries] of reply ?? []) {
        const queue = byKey.get(key)!;
        for (const [id, flat] of entries) {
          positions.set(queue, id);
          batch.push(...eventsOfEntry(id, flat, queue));
        }
      }
    if (batch.length > 0) for (const l of this.listeners) l(batch);
    else if (this.redis.isCluster) await new Promise((r) => setTimeout(r, CLUSTER_POLL_MS));
  }
}

const streamOf = (queue: string) => new QueueKeys(queue).events;

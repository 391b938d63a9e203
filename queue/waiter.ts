// Waiting for jobs to end (docs/flows.md, "Waiting for results"): one reader of the queues'
// event streams per pipeline, shared by every wait of this client — waiting on 10,000 ids costs
// the reads of the streams, not a poll per job. A job already ended when its wait starts is
// answered from its record.
import { eventAfter, eventsOfEntries, type QueueEvent } from "./events.ts";
import { PIPELINES_KEY, PipelineKeys, QUEUES_KEY, QueueKeys, assertJobId, pipelineOf } from "./keys.ts";
import type { Cluster, Redis } from "ioredis";
import * as gateway from "./gateway.ts";
import type { RedisClient } from "./scripts.ts";

/** The states a job ends in; `unknown`: no record (never enqueued, or reclaimed after its retention). */
export type EndState = "completed" | "dead" | "cancelled" | "deleted" | "unknown";
const END_STATES = new Set(["completed", "dead", "cancelled"]);

export interface JobOutcome {
  id: string;
  /** The queue (stage) it ended in; "" when unknown. */
  queue: string;
  state: EndState;
  /** A completed job's result, parsed from JSON (the text when it is not JSON). */
  result?: unknown;
  /** A dead job's last error (JSON text) or a cancelled job's error. */
  error?: string;
  /** Why it died or was cancelled, when known. */
  reason?: string;
}

export interface WaitResult {
  /** Every job that ended, by id. */
  jobs: Record<string, JobOutcome>;
  /** Ids still open when the timeout passed (empty when every job ended). */
  open: string[];
}

/** A job to wait for: its id, or its id and queue (saves finding its pipeline). */
export type WaitTarget = string | { id: string; queue: string };

export interface WaitOptions {
  /** Give up after this long: the ids not ended yet are in `open`. Default: wait as long as it takes. */
  timeoutMs?: number;
  signal?: AbortSignal;
}

export class InvalidWaitError extends Error {
  override name = "InvalidWaitError";
}

/** The record fields an outcome is built from, in this order. */
const RECORD_FIELDS = ["state", "queue", "result", "error", "deadReason", "cancelReason"] as const;
/** Records per job_states call: a call holds Redis while it runs (2.5 ms for 1,000 on a busy 2-core machine). */
const READ_BATCH = 1000;

interface Wait {
  pending: Set<string>;
  jobs: Record<string, JobOutcome>;
  /** Per queue: the stream id its events count after (events before it are the record's). */
  since: Map<string, string>;
  done: () => void;
}

interface Reader {
  pipeline: string;
  /** The stream position per followed queue. */
  streams: Map<string, string>;
  /** The waits of this pipeline by job id. */
  byId: Map<string, Set<Wait>>;
  running: boolean;
  /** The blocking connection while the reader runs. */
  conn?: RedisClient;
}

function parseResult(text: string | undefined): unknown {
  if (text === undefined) return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

function outcomeOfRecord(id: string, f: (string | null)[]): JobOutcome | null {
  const [state, queue, result, error, deadReason, cancelReason] = f;
  if (!state) return { id, queue: "", state: "unknown" };
  if (!END_STATES.has(state)) return null;
  const out: JobOutcome = { id, queue: queue ?? "", state: state as EndState };
  if (state === "completed") out.result = parseResult(result ?? undefined);
  if (state !== "completed" && error) out.error = error;
  const reason = state === "dead" ? deadReason : cancelReason;
  if (reason) out.reason = reason;
  return out;
}

/** An event that ends its job, as an outcome; null for any other (a stage advance included). */
function outcomeOfEvent(e: QueueEvent): JobOutcome | null {
  const f = e.fields;
  switch (e.type) {
    case "completed":
      return f.next ? null : { id: e.id, queue: e.queue, state: "completed", result: parseResult(f.result) };
    case "dead":
      return {
        id: e.id,
        queue: e.queue,
        state: "dead",
        ...(f.error ? { error: f.error } : {}),
        ...(f.reason ? { reason: f.reason } : {}),
      };
    case "cancelled":
      return { id: e.id, queue: e.queue, state: "cancelled", ...(f.reason ? { reason: f.reason } : {}) };
    case "deleted":
      return { id: e.id, queue: e.queue, state: "deleted" };
    default:
      return null;
  }
}

export class JobWaiter {
  private readonly redis: RedisClient;
  private readonly blockMs: number;
  private readonly readers = new Map<string, Reader>();
  /** Redis commands this waiter sent (the bench reads it). */
  commands = 0;
  /** Errors that stopped a reader (a lost connection), for whoever looks. */
  readonly failures: Error[] = [];

  /** How many pipelines' streams are being read now. */
  get following(): number {
    let n = 0;
    for (const r of this.readers.values()) if (r.running) n++;
    return n;
  }

  constructor(redis: RedisClient, opts: { blockMs?: number } = {}) {
    this.redis = redis;
    this.blockMs = opts.blockMs ?? 1000;
  }

  /** Waits until every job has ended or the timeout passes. */
  async wait(targets: readonly WaitTarget[], opts: WaitOptions = {}): Promise<WaitResult> {
    if (opts.timeoutMs !== undefined && !(Number.isFinite(opts.timeoutMs) && opts.timeoutMs >= 0))
      throw new InvalidWaitError(`timeoutMs must be a number of milliseconds ≥ 0, got ${opts.timeoutMs}`);
    const byPipeline = await this.locate(targets);
    const wait: Wait = { pending: new Set(), jobs: {}, since: new Map(), done: () => {} };
    const finished = new Promise<void>((resolve) => (wait.done = resolve));
    for (const [pipeline, ids] of byPipeline) {
      if (pipeline === "") {
        for (const id of ids) wait.jobs[id] = { id, queue: "", state: "unknown" };
        continue;
      }
      await this.add(pipeline, ids, wait);
    }
    if (wait.pending.size > 0) {
      let timer: NodeJS.Timeout | undefined;
      const onAbort = () => wait.done();
      opts.signal?.addEventListener("abort", onAbort, { once: true });
      if (opts.timeoutMs !== undefined) timer = setTimeout(() => wait.done(), opts.timeoutMs);
      await finished;
      clearTimeout(timer);
      opts.signal?.removeEventListener("abort", onAbort);
    }
    const open = [...wait.pending];
    this.forget(wait);
    return { jobs: wait.jobs, open };
  }

  /** Each target's pipeline ("" for an id no pipeline has a record of). */
  private async locate(targets: readonly WaitTarget[]): Promise<Map<string, string[]>> {
    const out = new Map<string, string[]>();
    const push = (p: string, id: string) => {
      const list = out.get(p) ?? [];
      if (list.length === 0) out.set(p, list);
      list.push(id);
    };
    const bare: string[] = [];
    const seen = new Set<string>();
    for (const t of targets) {
      const id = typeof t === "string" ? t : t?.id;
      if (typeof id !== "string")
        throw new InvalidWaitError(`a job to wait for is an id or {id, queue}, got ${JSON.stringify(t)}`);
      assertJobId(id);
      if (seen.has(id)) continue;
      seen.add(id);
      if (typeof t === "string") bare.push(id);
      else push(pipelineOf(t.queue), id);
    }
    if (bare.length === 0) return out;
    this.commands++;
    const pipelines = await this.redis.smembers(PIPELINES_KEY);
    // The first id is looked for in every pipeline, the others first where it was found: the
    // ids of one wait are mostly of one pipeline.
    const [first] = await this.find(pipelines, bare.slice(0, 1), push);
    const hit = first ? [] : [...out.keys()];
    pipelines.sort((x, y) => Number(hit.includes(y)) - Number(hit.includes(x)));
    if (first) push("", first);
    for (const id of await this.find(pipelines, bare.slice(1), push)) push("", id);
    return out;
  }

  /** Places each id in the first pipeline with its record; returns the ids none has. */
  private async find(
    pipelines: readonly string[],
    ids: string[],
    push: (pipeline: string, id: string) => void,
  ): Promise<string[]> {
    let left = ids;
    for (const p of pipelines) {
      if (left.length === 0) break;
      const found = await this.records(p, left, ["state"]);
      const rest: string[] = [];
      left.forEach((id, i) => (found[i]!.type !== "none" ? push(p, id) : rest.push(id)));
      left = rest;
    }
    return left;
  }

  /** `fields` of each id's record in `pipeline`: one job_states call per READ_BATCH ids. */
  private async records(
    pipeline: string,
    ids: readonly string[],
    fields: readonly string[],
  ): Promise<gateway.JobStateReply[]> {
    const keys = new PipelineKeys(pipeline);
    const calls: Promise<gateway.JobStateReply[]>[] = [];
    for (let i = 0; i < ids.length; i += READ_BATCH) {
      this.commands++;
      calls.push(
        gateway.jobStates(this.redis, {
          pipeline: keys,
          ids: ids.slice(i, i + READ_BATCH),
          whole: false,
          fields,
        }),
      );
    }
    return (await Promise.all(calls)).flat();
  }

  private reader(pipeline: string): Reader {
    let r = this.readers.get(pipeline);
    if (!r) {
      r = { pipeline, streams: new Map(), byId: new Map(), running: false };
      this.readers.set(pipeline, r);
    }
    return r;
  }

  /** The pipeline's queues: the registered ones and the ones named. */
  private async queuesOf(pipeline: string, named: Iterable<string>): Promise<string[]> {
    this.commands++;
    const all = await this.redis.smembers(QUEUES_KEY);
    const qs = new Set(all.filter((q) => q === pipeline || q.startsWith(`${pipeline}/`)));
    for (const q of named) if (q) qs.add(q);
    return [...qs];
  }

  /** The last id of each queue's stream now ("0-0" for an empty one). */
  private async positions(queues: readonly string[]): Promise<Map<string, string>> {
    const batch = this.redis.pipeline();
    for (const q of queues) batch.xrevrange(new QueueKeys(q).events, "+", "-", "COUNT", 1);
    this.commands += queues.length;
    const replies = (await batch.exec()) ?? [];
    const out = new Map<string, string>();
    queues.forEach((q, i) => {
      const [err, entries] = replies[i] ?? [];
      const last = !err && Array.isArray(entries) && entries.length > 0 ? (entries[0] as [string])[0] : "0-0";
      out.set(q, last);
    });
    return out;
  }

  /** Reads the records of `ids`: the ended ones are answered, the others left pending. */
  private async check(
    pipeline: string,
    ids: readonly string[],
    waits: (id: string) => Iterable<Wait>,
  ): Promise<string[]> {
    const queues: string[] = [];
    const replies = await this.records(pipeline, ids, RECORD_FIELDS);
    ids.forEach((id, k) => {
      const reply = replies[k]!;
      // (no record, or a key that is not a hash: a malformed record, reported as unknown)
      const f = reply.type === undefined ? RECORD_FIELDS.map((n) => reply.fields[n] ?? null) : [null];
      const outcome = outcomeOfRecord(id, f);
      if (outcome) for (const w of waits(id)) this.settle(w, outcome);
      else if (f[1]) queues.push(f[1]);
    });
    return queues;
  }

  private async add(pipeline: string, ids: readonly string[], wait: Wait): Promise<void> {
    const r = this.reader(pipeline);
    for (const id of ids) {
      wait.pending.add(id);
      let set = r.byId.get(id);
      if (!set) r.byId.set(id, (set = new Set()));
      set.add(wait);
    }
    // Positions first, then the records: an end after the position is an event, one before is
    // in the record — none is missed.
    const queues = await this.queuesOf(pipeline, []);
    const now = await this.positions(queues);
    for (const [q, id] of now) {
      wait.since.set(q, id);
      if (!r.streams.has(q)) r.streams.set(q, id);
    }
    const current = await this.check(pipeline, ids, () => [wait]);
    const missing = [...new Set(current)].filter((q) => !r.streams.has(q));
    if (missing.length > 0) {
      // (a queue registered after the list was read: follow it too and read again)
      for (const [q, id] of await this.positions(missing)) {
        wait.since.set(q, id);
        r.streams.set(q, id);
      }
      await this.check(
        pipeline,
        [...wait.pending].filter((id) => r.byId.has(id)),
        () => [wait],
      );
    }
    if (wait.pending.size > 0 && !r.running) void this.run(r);
  }

  private settle(wait: Wait, outcome: JobOutcome): void {
    if (!wait.pending.delete(outcome.id)) return;
    wait.jobs[outcome.id] = outcome;
    if (wait.pending.size === 0) wait.done();
  }

  private forget(wait: Wait): void {
    for (const r of this.readers.values()) {
      for (const [id, set] of r.byId) {
        if (!set.delete(wait)) continue;
        if (set.size === 0) r.byId.delete(id);
      }
      // No wait left: end the blocked read now rather than at its timeout.
      if (r.byId.size === 0) r.conn?.disconnect();
    }
  }

  /** The pipeline's reader: one blocking connection while it has waits. */
  private async run(r: Reader): Promise<void> {
    r.running = true;
    let failed: Error | undefined;
    // (queued while it connects and never given up on: a client's fail-fast settings are for
    // its own requests, not for a read that blocks)
    const conn = (
      "isCluster" in this.redis && this.redis.isCluster
        ? (this.redis as Cluster).duplicate(undefined, { enableOfflineQueue: true })
        : (this.redis as Redis).duplicate({ enableOfflineQueue: true, maxRetriesPerRequest: null })
    ) as RedisClient;
    r.conn = conn;
    conn.on("error", () => {});
    try {
      while (r.byId.size > 0) {
        const queues = [...r.streams.keys()];
        this.commands++;
        const reply = (await conn.xread(
          "COUNT",
          1000,
          "BLOCK",
          this.blockMs,
          "STREAMS",
          ...queues.map((q) => new QueueKeys(q).events),
          ...queues.map((q) => r.streams.get(q)!),
        )) as [string, [string, string[]][]][] | null;
        if (!reply) continue;
        const advanced: [string, string][] = [];
        for (const [key, entries] of reply) {
          const queue = queues.find((q) => new QueueKeys(q).events === key) ?? "";
          if (entries.length > 0) r.streams.set(queue, entries[entries.length - 1]![0]);
          for (const e of eventsOfEntries(entries, queue)) {
            const waits = r.byId.get(e.id);
            if (!waits) continue;
            const outcome = outcomeOfEvent(e);
            if (!outcome) {
              if (e.type === "completed" && e.fields.next && !r.streams.has(e.fields.next))
                advanced.push([e.id, e.fields.next]);
              continue;
            }
            for (const w of [...waits]) {
              const since = w.since.get(queue);
              if (since === undefined || eventAfter(e, since, Number.MAX_SAFE_INTEGER))
                this.settle(w, outcome);
            }
          }
        }
        if (advanced.length > 0) {
          // A job went on to a stage not followed yet: follow it, then read the job's record.
          const fresh = await this.positions([...new Set(advanced.map(([, q]) => q))]);
          for (const [q, id] of fresh) r.streams.set(q, id);
          const ids = [...new Set(advanced.map(([id]) => id))];
          for (const id of ids)
            for (const w of r.byId.get(id) ?? []) for (const [q, p] of fresh) w.since.set(q, p);
          await this.check(r.pipeline, ids, (id) => [...(r.byId.get(id) ?? [])]);
        }
      }
    } catch (err) {
      // A lost connection, or the disconnect when the last wait left (and a new one came since).
      if (r.byId.size > 0) failed = err as Error;
    } finally {
      r.conn = undefined;
      conn.disconnect();
      if (r.byId.size > 0) {
        // Waits are left (added while this ended, or the connection failed): read on from the
        // same positions, after a pause when it failed.
        if (failed) this.failures.push(failed);
        setTimeout(() => void this.run(r), failed ? 250 : 0);
      } else {
        r.running = false;
        r.streams.clear();
      }
    }
  }
}

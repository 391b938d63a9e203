// The job recorder: drains each pipeline's outbox stream (written by the queue scripts in the
// same atomic step as every transition) into PostgreSQL. It runs beside the job loop and the
// job loop never waits for it: with PostgreSQL down, entries simply stay in the stream (read
// but unacknowledged, or unread) and are written when it returns.
//
// Delivery is at-least-once through a Redis consumer group shared by every worker of the
// pipeline; the writes are idempotent and order-independent (see migrations.ts), so entries
// redelivered after a crash, or applied by two recorders in either order, leave one correct row.
import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import { setTimeout as sleep } from "node:timers/promises";
import type pg from "pg";
import type { Logger } from "pino";
import { Counter, Gauge, Registry, type Metric } from "prom-client";
import { Backoff } from "../../lib/backoff.ts";
import { connectRedis, PipelineKeys, type RedisClient } from "../../queue/index.ts";
import {
  foldEvents,
  MalformedEventError,
  parseEntry,
  streamTime,
  type OutboxEvent,
  type RawEntry,
} from "./events.ts";
import {
  createPool,
  describeDatabaseUrl,
  isDataError,
  migrate,
  writeBatch,
  type PoolOptions,
} from "./postgres.ts";

export const RECORDER_GROUP = "conveyor-records";

export interface RecorderOptions {
  /** Shared connection: set-up and the small periodic gauge reads only. */
  redis: RedisClient;
  /** Where to open the recorder's own (blocking) connections, one per pipeline. */
  redisUrl?: string;
  /** Alternative to `redisUrl`: make a dedicated connection (it may block). */
  connectBlocking?: () => RedisClient;
  /** DATABASE_URL, a pg pool config, or a pool the caller owns (not ended by stop()). */
  database: string | pg.PoolConfig | pg.Pool;
  /** Pipelines whose outbox to record (a queue `docs/ocr` belongs to pipeline `docs`). */
  pipelines: string[];
  logger: Logger;
  registry?: Registry;
  /** Consumer name in the group; unique per process (default host-pid-random). */
  consumer?: string;
  /** Pool size; default 5. */
  maxConnections?: number;
  pool?: Omit<PoolOptions, "maxConnections">;
  /** Entries per read (adapted down for large payloads). Default 500. */
  batchSize?: number;
  /** XREADGROUP BLOCK, ms. Default 1000. */
  blockMs?: number;
  /** Claim another consumer's entries once they have been pending this long. Default 30 s. */
  claimIdleMs?: number;
  /** How often to look for such entries. Default 10 s. */
  claimIntervalMs?: number;
  /** Backoff while PostgreSQL is unavailable: from `minBackoffMs` doubling to `maxBackoffMs`. */
  minBackoffMs?: number;
  maxBackoffMs?: number;
  /** How long stop() lets a batch that is being written finish. Default 5 s. */
  stopTimeoutMs?: number;
  /** How often the outbox length/pending/age gauges are read. Default 5 s. */
  gaugeIntervalMs?: number;
}

export interface RecorderStats {
  /** Outbox entries written to PostgreSQL (replays included). */
  written: number;
  batches: number;
  /** Failed attempts to write a batch (each retried). */
  failures: number;
  /** Entries that could not be recorded (malformed, or rejected by PostgreSQL), acknowledged and skipped. */
  rejected: number;
  /** Entries trimmed from the stream before they were recorded. */
  lost: number;
  databaseUp: boolean;
}

const BATCH_TARGET_BYTES = 4 * 1024 * 1024;
const MIN_BATCH = 16;

type RecorderMetrics = ReturnType<typeof createMetrics>;

function metric<T extends Metric>(
  registry: Registry | undefined,
  name: string,
  make: (registers: Registry[]) => T,
): T {
  const existing = registry?.getSingleMetric(name);
  return (existing as T | undefined) ?? make(registry ? [registry] : []);
}

function createMetrics(registry?: Registry) {
  const p = ["pipeline"] as const;
  return {
    written: metric(
      registry,
      "conveyor_records_written_total",
      (registers) =>
        new Counter({
          name: "conveyor_records_written_total",
          help: "Outbox entries written to PostgreSQL",
          labelNames: p,
          registers,
        }),
    ),
    batches: metric(
      registry,
      "conveyor_records_batches_total",
      (registers) =>
        new Counter({
          name: "conveyor_records_batches_total",
          help: "Batches written to PostgreSQL (one transaction each)",
          labelNames: p,
          registers,
        }),
    ),
    failures: metric(
      registry,
      "conveyor_records_failures_total",
      (registers) =>
        new Counter({
          name: "conveyor_records_failures_total",
          help: "Failed batch writes (retried with backoff)",
          labelNames: p,
          registers,
        }),
    ),
    rejected: metric(
      registry,
      "conveyor_records_rejected_total",
      (registers) =>
        new Counter({
          name: "conveyor_records_rejected_total",
          help: "Outbox entries skipped as unusable (malformed or refused by PostgreSQL)",
          labelNames: p,
          registers,
        }),
    ),
    lost: metric(
      registry,
      "conveyor_records_lost_total",
      (registers) =>
        new Counter({
          name: "conveyor_records_lost_total",
          help: "Outbox entries trimmed from the stream before they were recorded",
          labelNames: p,
          registers,
        }),
    ),
    outboxLength: metric(
      registry,
      "conveyor_records_outbox_length",
      (registers) =>
        new Gauge({
          name: "conveyor_records_outbox_length",
          help: "Entries in the outbox stream not yet recorded (XLEN)",
          labelNames: p,
          registers,
        }),
    ),
    outboxPending: metric(
      registry,
      "conveyor_records_outbox_pending",
      (registers) =>
        new Gauge({
          name: "conveyor_records_outbox_pending",
          help: "Outbox entries read by a recorder and not yet acknowledged",
          labelNames: p,
          registers,
        }),
    ),
    lag: metric(
      registry,
      "conveyor_records_lag_seconds",
      (registers) =>
        new Gauge({
          name: "conveyor_records_lag_seconds",
          help: "Age of the oldest outbox entry not yet recorded (0 when caught up)",
          labelNames: p,
          registers,
        }),
    ),
    trimmed: metric(
      registry,
      "conveyor_records_outbox_trimmed",
      (registers) =>
        new Gauge({
          name: "conveyor_records_outbox_trimmed",
          help: "Unread outbox entries trimmed away by the stream's length cap (records lost; visible until recorders read past the gap)",
          labelNames: p,
          registers,
        }),
    ),
    databaseUp: metric(
      registry,
      "conveyor_records_database_up",
      (registers) =>
        new Gauge({
          name: "conveyor_records_database_up",
          help: "1 while PostgreSQL accepts the records, 0 during an outage",
          registers,
        }),
    ),
  };
}

class Stopped extends Error {}

interface PipelineLoop {
  pipeline: string;
  keys: PipelineKeys;
  conn: RedisClient;
  /** Re-read our own pending entries (start-up, or after an acknowledgement failed). */
  ownPending: boolean;
  claimCursor: string;
  nextClaimAt: number;
  batchSize: number;
  done?: Promise<void>;
}

export class JobRecorder {
  readonly consumer: string;
  readonly pipelines: readonly string[];
  private readonly opts: RecorderOptions;
  private readonly log: Logger;
  private readonly metrics: RecorderMetrics;
  private readonly pool: pg.Pool;
  private readonly ownsPool: boolean;
  /** Aborted by stop() at once: ends backoff sleeps. */
  private readonly closeSignal = new AbortController();
  /** Aborted when stop() gives up waiting for the last flush. */
  private readonly abort = new AbortController();
  private readonly loops: PipelineLoop[] = [];
  private schema: Promise<void> | null = null;
  private gaugeTimer: NodeJS.Timeout | null = null;
  private started: Promise<void> | null = null;
  private stopping: Promise<void> | null = null;
  private outageSince: number | null = null;
  private redisTroubleSince: number | null = null;
  /** Set by stop(): flush what is there, then end. */
  private closingSince: number | null = null;
  private readonly trimReported = new Set<string>();
  private readonly unknownTypes = new Set<string>();
  private readonly counts: RecorderStats = {
    written: 0,
    batches: 0,
    failures: 0,
    rejected: 0,
    lost: 0,
    databaseUp: false,
  };

  constructor(opts: RecorderOptions) {
    if (!opts.redisUrl && !opts.connectBlocking)
      throw new Error("JobRecorder needs redisUrl or connectBlocking for its own connections");
    if (opts.pipelines.length === 0) throw new Error("JobRecorder needs at least one pipeline");
    this.opts = opts;
    this.pipelines = [...new Set(opts.pipelines)];
    this.consumer = opts.consumer ?? `${hostname()}-${process.pid}-${randomBytes(3).toString("hex")}`;
    this.log = opts.logger.child({ component: "records" });
    this.metrics = createMetrics(opts.registry);
    const db = opts.database;
    this.ownsPool = !isPool(db);
    this.pool = isPool(db) ? db : createPool(db, { ...opts.pool, maxConnections: opts.maxConnections });
  }

  /**
   * Switch the outbox on for each pipeline (consumer group first, then `meta records=1`) and
   * start draining in the background. Resolves once Redis is set up — transitions from then on
   * are recorded; PostgreSQL need not be reachable (migrations run when it is).
   */
  start(): Promise<void> {
    this.started ??= this.setUp();
    return this.started;
  }

  private async setUp(): Promise<void> {
    const { redis } = this.opts;
    for (const pipeline of this.pipelines) {
      const keys = new PipelineKeys(pipeline);
      await createGroup(redis, keys.outbox);
      await redis.hset(keys.meta, "records", "1");
    }
    this.log.info(
      { pipelines: this.pipelines, consumer: this.consumer, database: this.describeDatabase() },
      "job records on: draining the outbox into PostgreSQL",
    );
    await this.readGauges(); // before reading: a gap left while no recorder ran is seen now
    for (const pipeline of this.pipelines) {
      const keys = new PipelineKeys(pipeline);
      const conn =
        this.opts.connectBlocking?.() ??
        connectRedis(this.opts.redisUrl!, { blocking: true, name: `conveyor-records:${this.consumer}` });
      const loop: PipelineLoop = {
        pipeline,
        keys,
        conn,
        ownPending: true,
        claimCursor: "0-0",
        nextClaimAt: 0,
        batchSize: this.opts.batchSize ?? 500,
      };
      loop.done = this.run(loop);
      this.loops.push(loop);
    }
    const interval = this.opts.gaugeIntervalMs ?? 5_000;
    this.gaugeTimer = setInterval(() => void this.readGauges(), interval);
    this.gaugeTimer.unref();
  }

  /**
   * Stop draining, after a last flush: for up to `stopTimeoutMs` the recorder keeps writing
   * what the outbox holds up to now (the transitions of this worker's last jobs, when it is the
   * last one running), without waiting for new entries and without waiting out an outage.
   * Whatever is read but not acknowledged by then is redelivered to another recorder (or this
   * one's successor) later, which is harmless because the writes are idempotent.
   */
  stop(): Promise<void> {
    this.stopping ??= this.shutDown();
    return this.stopping;
  }

  private async shutDown(): Promise<void> {
    this.closingSince = Date.now();
    this.closeSignal.abort();
    if (this.gaugeTimer) clearInterval(this.gaugeTimer);
    await this.started?.catch(() => {});
    // A blocked read returns within `blockMs`; what it brings is written and acknowledged.
    // (Cutting the connection instead could lose a reply in flight: those entries would wait
    // for `claimIdleMs` before another recorder takes them.)
    const timeout = this.opts.stopTimeoutMs ?? 5_000;
    const all = Promise.all(this.loops.map((l) => l.done));
    let finished = await Promise.race([all.then(() => true), sleep(timeout, false, { ref: false })]);
    this.abort.abort();
    if (!finished) {
      // A write in flight gets a moment more to commit and be acknowledged.
      finished = await Promise.race([all.then(() => true), sleep(1_000, false, { ref: false })]);
      if (!finished)
        this.log.warn(
          { timeoutMs: timeout },
          "job records: a batch was still being written at stop; it will be redelivered",
        );
    }
    for (const loop of this.loops) {
      if (finished) await this.forgetConsumer(loop).catch(() => {});
      loop.conn.disconnect();
    }
    if (this.ownsPool)
      await Promise.race([this.pool.end().catch(() => {}), sleep(timeout, undefined, { ref: false })]);
    this.log.info({ ...this.stats() }, "job records stopped");
  }

  stats(): RecorderStats {
    return { ...this.counts };
  }

  private get stopped(): boolean {
    return this.abort.signal.aborted;
  }

  private get closing(): boolean {
    return this.closingSince !== null;
  }

  private describeDatabase(): string {
    const db = this.opts.database;
    if (typeof db === "string") return describeDatabaseUrl(db);
    if (isPool(db)) return "(pool)";
    return db.connectionString
      ? describeDatabaseUrl(db.connectionString)
      : `${db.host ?? "localhost"}:${db.port ?? 5432}/${db.database ?? ""}`;
  }

  // ---- the per-pipeline loop ------------------------------------------------------------

  private async run(loop: PipelineLoop): Promise<void> {
    const backoff = this.newBackoff();
    while (!this.stopped) {
      try {
        await this.ensureSchema();
      } catch (err) {
        this.databaseFailed(loop.pipeline, err);
        if (this.closing) break;
        await this.pause(backoff.next()).catch(() => {});
        continue;
      }
      try {
        const entries = await this.nextEntries(loop);
        if (entries.length > 0) await this.record(loop, entries);
        backoff.reset();
        this.redisOk();
        if (
          this.closing &&
          (entries.length === 0 || streamTime(entries[entries.length - 1]![0]) >= this.closingSince!)
        )
          break;
      } catch (err) {
        // Whatever was read and not acknowledged: read it again first.
        loop.ownPending = true;
        if (this.stopped || this.closing || err instanceof Stopped) break;
        if (isNoGroup(err)) {
          // The stream was deleted (and with it the group): start over from its beginning.
          this.log.warn(
            { pipeline: loop.pipeline },
            "job records: the outbox stream or its consumer group vanished; recreating it",
          );
          await createGroup(loop.conn, loop.keys.outbox).catch(() => {});
          continue;
        }
        this.redisFailed(loop.pipeline, err);
        await this.pause(backoff.next()).catch(() => {});
      }
    }
  }

  private newBackoff(): Backoff {
    return new Backoff({ baseMs: this.opts.minBackoffMs ?? 250, maxMs: this.opts.maxBackoffMs ?? 10_000 });
  }

  private ensureSchema(): Promise<void> {
    this.schema ??= migrate(this.pool).then(
      (applied) => {
        if (applied.length > 0)
          this.log.info({ migrations: applied }, "job records: database schema migrated");
        this.databaseOk();
      },
      (err: unknown) => {
        this.schema = null;
        throw err;
      },
    );
    return this.schema;
  }

  /** Our own unacknowledged entries first, then stale ones of dead consumers, then new ones. */
  private async nextEntries(loop: PipelineLoop): Promise<RawEntry[]> {
    const { conn, keys } = loop;
    if (loop.ownPending) {
      const own = readReply(
        await conn.xreadgroup(
          "GROUP",
          RECORDER_GROUP,
          this.consumer,
          "COUNT",
          loop.batchSize,
          "STREAMS",
          keys.outbox,
          "0",
        ),
      );
      if (own.length > 0) return own;
      loop.ownPending = false;
    }
    if (this.closing) {
      // The last flush: what is there now, no waiting.
      return readReply(
        await conn.xreadgroup(
          "GROUP",
          RECORDER_GROUP,
          this.consumer,
          "COUNT",
          loop.batchSize,
          "STREAMS",
          keys.outbox,
          ">",
        ),
      );
    }
    if (Date.now() >= loop.nextClaimAt) {
      const claimed = await this.claimStale(loop);
      if (claimed.length > 0) return claimed;
    }
    return readReply(
      await conn.xreadgroup(
        "GROUP",
        RECORDER_GROUP,
        this.consumer,
        "COUNT",
        loop.batchSize,
        "BLOCK",
        this.opts.blockMs ?? 1_000,
        "STREAMS",
        keys.outbox,
        ">",
      ),
    );
  }

  private async claimStale(loop: PipelineLoop): Promise<RawEntry[]> {
    const reply = (await loop.conn.xautoclaim(
      loop.keys.outbox,
      RECORDER_GROUP,
      this.consumer,
      this.opts.claimIdleMs ?? 30_000,
      loop.claimCursor,
      "COUNT",
      loop.batchSize,
    )) as unknown as [string, RawEntry[], string[]?];
    const [cursor, entries, deleted] = reply;
    if (deleted && deleted.length > 0) this.lost(loop.pipeline, deleted.length, "claimed");
    loop.claimCursor = cursor;
    if (cursor === "0-0") loop.nextClaimAt = Date.now() + (this.opts.claimIntervalMs ?? 10_000);
    if (entries.length > 0)
      this.log.info(
        { pipeline: loop.pipeline, entries: entries.length },
        "job records: took over entries a stopped recorder had read but not recorded",
      );
    return entries;
  }

  private async record(loop: PipelineLoop, entries: RawEntry[]): Promise<void> {
    const events: OutboxEvent[] = [];
    let bytes = 0;
    for (const entry of entries) {
      if (!entry[1]) {
        // Pending, but its content is gone: trimmed (MAXLEN) before anyone recorded it.
        this.lost(loop.pipeline, 1, "trimmed");
        continue;
      }
      for (const f of entry[1]) bytes += f.length;
      try {
        const event = parseEntry(loop.pipeline, entry);
        if (event) events.push(event);
      } catch (err) {
        this.reject(loop.pipeline, entry[0], err); // acknowledged below with the rest
      }
    }
    this.adaptBatchSize(loop, entries.length, bytes);
    await this.write(loop, events);
    // Written (or skipped): acknowledge and delete, so the stream holds only unrecorded entries.
    // If this fails, the entries are read again (loop.ownPending) and the replay writes nothing new.
    const ids = entries.map((e) => e[0]);
    const replies = await loop.conn
      .multi()
      .xack(loop.keys.outbox, RECORDER_GROUP, ...ids)
      .xdel(loop.keys.outbox, ...ids)
      .exec();
    const failed = replies?.find(([err]) => err)?.[0];
    if (!replies || failed) throw failed ?? new Error("XACK/XDEL transaction aborted");
  }

  /** Write a batch, waiting out a database outage; on data errors, isolate the bad entries. */
  private async write(loop: PipelineLoop, events: OutboxEvent[]): Promise<void> {
    if (events.length === 0) return;
    const backoff = this.newBackoff();
    for (;;) {
      try {
        await writeBatch(this.pool, foldEvents(events));
        this.written(loop.pipeline, events.length);
        return;
      } catch (batchErr) {
        let err = batchErr;
        if (isDataError(err)) {
          try {
            await this.writeOneByOne(loop, events);
            return;
          } catch (outage) {
            err = outage; // the database went away meanwhile: retry the whole batch
          }
        }
        this.databaseFailed(loop.pipeline, err);
        if (this.closing) throw new Stopped(); // no waiting out an outage at shutdown
        await this.pause(backoff.next());
      }
    }
  }

  private async writeOneByOne(loop: PipelineLoop, events: OutboxEvent[]): Promise<void> {
    for (const event of events) {
      try {
        await writeBatch(this.pool, foldEvents([event]));
        this.written(loop.pipeline, 1);
      } catch (err) {
        if (!isDataError(err)) throw err; // an outage after all: the whole batch is retried
        this.reject(loop.pipeline, event.streamId, err);
      }
    }
  }

  private adaptBatchSize(loop: PipelineLoop, count: number, bytes: number): void {
    const max = this.opts.batchSize ?? 500;
    if (count === 0) return;
    const perEntry = Math.max(1, bytes / count);
    loop.batchSize = Math.max(
      Math.min(MIN_BATCH, max),
      Math.min(max, Math.floor(BATCH_TARGET_BYTES / perEntry)),
    );
  }

  /** Sleep, unless stop() is called first (then throw Stopped). */
  private async pause(ms: number): Promise<void> {
    const jittered = ms / 2 + Math.random() * (ms / 2);
    try {
      await sleep(jittered, undefined, { signal: this.closeSignal.signal });
    } catch {
      throw new Stopped();
    }
  }

  private async forgetConsumer(loop: PipelineLoop): Promise<void> {
    const pending = (await this.opts.redis.xpending(
      loop.keys.outbox,
      RECORDER_GROUP,
      "-",
      "+",
      1,
      this.consumer,
    )) as unknown[];
    if (pending.length === 0)
      await this.opts.redis.xgroup("DELCONSUMER", loop.keys.outbox, RECORDER_GROUP, this.consumer);
  }

  private async readGauges(): Promise<void> {
    for (const pipeline of this.pipelines) {
      const key = new PipelineKeys(pipeline).outbox;
      try {
        const replies = await this.opts.redis
          .multi()
          .xlen(key)
          .xinfo("GROUPS", key)
          .xrange(key, "-", "+", "COUNT", 1)
          .exec();
        if (!replies) continue;
        const [[, rawLen], [, groups], [, first]] = replies as [
          [unknown, number],
          [unknown, unknown[][]],
          [unknown, RawEntry[]],
        ];
        const len = Number(rawLen);
        const group = (groups ?? []).map(fieldMap).find((g) => g.name === RECORDER_GROUP);
        this.metrics.outboxLength.set({ pipeline }, len);
        this.metrics.outboxPending.set({ pipeline }, Number(group?.pending ?? 0));
        const oldest = first?.[0]?.[0];
        this.metrics.lag.set(
          { pipeline },
          oldest ? Math.max(0, (Date.now() - streamTime(oldest)) / 1000) : 0,
        );
        // Entries not yet delivered to the group (`lag`, Redis ≥ 7) can only exceed the stream's
        // length when the MAXLEN cap trimmed some of them away before anyone read them.
        const undelivered = group?.lag === null || group?.lag === undefined ? null : Number(group.lag);
        const trimmed = undelivered !== null && undelivered > len ? undelivered - len : 0;
        this.metrics.trimmed.set({ pipeline }, trimmed);
        if (trimmed > 0 && !this.trimReported.has(pipeline)) {
          this.trimReported.add(pipeline);
          this.log.error(
            { pipeline, entries: trimmed },
            "job records: the outbox reached its length cap and unread entries were trimmed: their records are lost",
          );
        } else if (trimmed === 0) {
          this.trimReported.delete(pipeline);
        }
      } catch {
        // Gauges are best effort; the loop reports real trouble.
      }
    }
  }

  // ---- bookkeeping ----------------------------------------------------------------------

  private written(pipeline: string, n: number): void {
    this.counts.written += n;
    this.counts.batches += 1;
    this.metrics.written.inc({ pipeline }, n);
    this.metrics.batches.inc({ pipeline });
    this.databaseOk();
  }

  private databaseOk(): void {
    this.counts.databaseUp = true;
    this.metrics.databaseUp.set(1);
    if (this.outageSince !== null) {
      this.log.info(
        { outageMs: Date.now() - this.outageSince, failures: this.counts.failures },
        "job records: PostgreSQL is back, catching up",
      );
      this.outageSince = null;
    }
  }

  private databaseFailed(pipeline: string, err: unknown): void {
    this.counts.failures += 1;
    this.counts.databaseUp = false;
    this.metrics.failures.inc({ pipeline });
    this.metrics.databaseUp.set(0);
    if (this.outageSince === null) {
      this.outageSince = Date.now();
      this.log.warn(
        { err: errorInfo(err), database: this.describeDatabase() },
        "job records: PostgreSQL unavailable; jobs keep running and their records wait in the outbox",
      );
    }
  }

  private redisOk(): void {
    if (this.redisTroubleSince !== null) {
      this.log.info({ troubleMs: Date.now() - this.redisTroubleSince }, "job records: Redis answers again");
      this.redisTroubleSince = null;
    }
  }

  private redisFailed(pipeline: string, err: unknown): void {
    if (this.redisTroubleSince === null) {
      this.redisTroubleSince = Date.now();
      this.log.warn(
        { pipeline, err: errorInfo(err) },
        "job records: reading the outbox failed; retrying with backoff",
      );
    }
  }

  private reject(pipeline: string, streamId: string, err: unknown): void {
    this.counts.rejected += 1;
    this.metrics.rejected.inc({ pipeline });
    const unknownType = err instanceof MalformedEventError ? err.unknownType : undefined;
    if (unknownType !== undefined) {
      // A newer queue version may add event types: say so once per type, not per entry.
      if (this.unknownTypes.has(unknownType)) return;
      this.unknownTypes.add(unknownType);
    }
    this.log.error(
      { pipeline, entry: streamId, err: errorInfo(err), malformed: err instanceof MalformedEventError },
      "job records: outbox entry skipped",
    );
  }

  private lost(pipeline: string, n: number, how: string): void {
    this.counts.lost += n;
    this.metrics.lost.inc({ pipeline }, n);
    this.log.error(
      { pipeline, entries: n, how },
      "job records: outbox entries were trimmed before they were recorded (outbox full: records were away too long)",
    );
  }
}

export interface StartRecorderOptions extends Omit<RecorderOptions, "database"> {
  /** DATABASE_URL; when empty, no recorder (the caller says so once in its log). */
  databaseUrl: string | undefined;
}

/**
 * The worker's entry point: null without a database, else a started recorder. It never
 * throws for PostgreSQL trouble (that is retried in the background); it throws only when
 * Redis cannot be set up.
 */
export async function startRecorder(opts: StartRecorderOptions): Promise<JobRecorder | null> {
  const { databaseUrl, ...rest } = opts;
  if (!databaseUrl) return null;
  const recorder = new JobRecorder({ ...rest, database: databaseUrl });
  try {
    await recorder.start();
  } catch (err) {
    await recorder.stop();
    throw err;
  }
  return recorder;
}

// ---- Redis helpers ----------------------------------------------------------------------

async function createGroup(redis: RedisClient, stream: string): Promise<void> {
  try {
    // From the stream's beginning: entries written before the group existed are recorded too.
    await redis.xgroup("CREATE", stream, RECORDER_GROUP, "0", "MKSTREAM");
  } catch (err) {
    if (!String((err as Error).message).includes("BUSYGROUP")) throw err;
  }
}

/** A Redis reply of alternating names and values (XINFO) as an object. */
function fieldMap(list: unknown[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (let i = 0; i + 1 < list.length; i += 2) out[String(list[i])] = list[i + 1];
  return out;
}

function readReply(reply: unknown): RawEntry[] {
  if (!reply) return [];
  const streams = reply as [string, RawEntry[]][];
  return streams[0]?.[1] ?? [];
}

function isPool(db: RecorderOptions["database"]): db is pg.Pool {
  return (
    typeof db === "object" &&
    db !== null &&
    typeof (db as pg.Pool).connect === "function" &&
    typeof (db as pg.Pool).end === "function"
  );
}

function isNoGroup(err: unknown): boolean {
  return String((err as Error)?.message).includes("NOGROUP");
}

function errorInfo(err: unknown): { name?: string; message: string; code?: string } {
  if (err instanceof Error)
    return { name: err.name, message: err.message, code: (err as { code?: string }).code };
  return { message: String(err) };
}

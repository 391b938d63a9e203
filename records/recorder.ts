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
import type { Registry } from "prom-client";
import { Backoff } from "../lib/backoff.ts";
import { connectRedis, enableRecords, PipelineKeys, type RedisClient } from "../queue/index.ts";
import { foldEvents, parseEntry, streamTime, type OutboxEvent, type RawEntry } from "./events.ts";
import { DEFAULT_OUTBOX_MAX_BYTES, OutboxBudget } from "./outboxBudget.ts";
import { createGroup, isNoGroup, readReply, RECORDER_GROUP } from "./outboxStream.ts";
import { RecorderHealth, type RecorderStats } from "./recorderHealth.ts";
import { createRecorderMetrics, OutboxGauges, type RecorderMetrics } from "./recorderMetrics.ts";
import {
  createPool,
  describeDatabaseUrl,
  isDataError,
  migrate,
  writeBatch,
  type PoolOptions,
} from "./postgres.ts";

export { RECORDER_GROUP } from "./outboxStream.ts";
export type { RecorderStats } from "./recorderHealth.ts";

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
  /** The outbox's byte budget: over it, the oldest entries are shed (outboxBudget.ts). Default 256 MiB. */
  outboxMaxBytes?: number;
  /** How often the outbox's size is measured against the budget. Default 1 s. */
  budgetIntervalMs?: number;
}

const BATCH_TARGET_BYTES = 4 * 1024 * 1024;
const MIN_BATCH = 16;

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
  private budgetTimer: NodeJS.Timeout | null = null;
  private started: Promise<void> | null = null;
  private stopping: Promise<void> | null = null;
  /** Set by stop(): flush what is there, then end. */
  private closingSince: number | null = null;
  private readonly health: RecorderHealth;
  private readonly gauges: OutboxGauges;
  private readonly budget: OutboxBudget;

  constructor(opts: RecorderOptions) {
    if (!opts.redisUrl && !opts.connectBlocking)
      throw new Error("JobRecorder needs redisUrl or connectBlocking for its own connections");
    if (opts.pipelines.length === 0) throw new Error("JobRecorder needs at least one pipeline");
    this.opts = opts;
    this.pipelines = [...new Set(opts.pipelines)];
    this.consumer = opts.consumer ?? `${hostname()}-${process.pid}-${randomBytes(3).toString("hex")}`;
    this.log = opts.logger.child({ component: "records" });
    this.metrics = createRecorderMetrics(opts.registry);
    const db = opts.database;
    this.ownsPool = !isPool(db);
    this.pool = isPool(db) ? db : createPool(db, { ...opts.pool, maxConnections: opts.maxConnections });
    this.health = new RecorderHealth(this.metrics, this.log, this.describeDatabase());
    this.gauges = new OutboxGauges(opts.redis, this.metrics, this.log);
    const maxBytes = opts.outboxMaxBytes ?? DEFAULT_OUTBOX_MAX_BYTES;
    this.budget = new OutboxBudget(opts.redis, maxBytes, this.metrics, this.log);
  }

  /**
   * Switch the outbox on for each pipeline (enableRecords: consumer group first, then
   * `meta records=1`) and start draining in the background. Resolves once Redis is set up — transitions from then on
   * are recorded; PostgreSQL need not be reachable (migrations run when it is).
   */
  start(): Promise<void> {
    this.started ??= this.setUp();
    return this.started;
  }

  private async setUp(): Promise<void> {
    const { redis } = this.opts;
    for (const pipeline of this.pipelines) await enableRecords(redis, pipeline);
    this.log.info(
      { pipelines: this.pipelines, consumer: this.consumer, database: this.describeDatabase() },
      "job records on: draining the outbox into PostgreSQL",
    );
    await this.gauges.read(this.pipelines); // before reading: a gap left while no recorder ran is seen now
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
    this.gaugeTimer = setInterval(() => void this.gauges.read(this.pipelines), interval);
    this.gaugeTimer.unref();
    // Not on the drain loop: with PostgreSQL down that loop waits, and that is when it matters.
    let measuring = false;
    this.budgetTimer = setInterval(() => {
      if (measuring) return;
      measuring = true;
      void this.budget.enforce(this.pipelines).finally(() => (measuring = false));
    }, this.opts.budgetIntervalMs ?? 1_000);
    this.budgetTimer.unref();
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
    if (this.budgetTimer) clearInterval(this.budgetTimer);
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
    return this.health.stats();
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
        this.health.databaseFailed(loop.pipeline, err);
        if (this.closing) break;
        await this.pause(backoff.next()).catch(() => {});
        continue;
      }
      try {
        const entries = await this.nextEntries(loop);
        if (entries.length > 0) await this.record(loop, entries);
        backoff.reset();
        this.health.redisOk();
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
        this.health.redisFailed(loop.pipeline, err);
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
        this.health.databaseOk();
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
    if (loop.ownPending) {
      const own = await this.read(loop, "0");
      if (own.length > 0) return own;
      loop.ownPending = false;
    }
    // The last flush: what is there now, no waiting.
    if (this.closing) return this.read(loop, ">");
    if (Date.now() >= loop.nextClaimAt) {
      const claimed = await this.claimStale(loop);
      if (claimed.length > 0) return claimed;
    }
    return this.read(loop, ">", this.opts.blockMs ?? 1_000);
  }

  /** XREADGROUP on the outbox: from "0" our own pending entries, from ">" new ones (waiting up to `blockMs`). */
  private async read(loop: PipelineLoop, from: "0" | ">", blockMs?: number): Promise<RawEntry[]> {
    const { conn, keys } = loop;
    const group = ["GROUP", RECORDER_GROUP, this.consumer, "COUNT", loop.batchSize] as const;
    return readReply(
      blockMs === undefined
        ? await conn.xreadgroup(...group, "STREAMS", keys.outbox, from)
        : await conn.xreadgroup(...group, "BLOCK", blockMs, "STREAMS", keys.outbox, from),
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
    if (deleted && deleted.length > 0) this.health.lost(loop.pipeline, deleted.length, "claimed");
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
        this.health.lost(loop.pipeline, 1, "trimmed");
        continue;
      }
      for (const f of entry[1]) bytes += f.length;
      try {
        const event = parseEntry(loop.pipeline, entry);
        if (event) events.push(event);
      } catch (err) {
        this.health.reject(loop.pipeline, entry[0], err); // acknowledged below with the rest
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
        this.health.written(loop.pipeline, events.length);
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
        this.health.databaseFailed(loop.pipeline, err);
        if (this.closing) throw new Stopped(); // no waiting out an outage at shutdown
        await this.pause(backoff.next());
      }
    }
  }

  private async writeOneByOne(loop: PipelineLoop, events: OutboxEvent[]): Promise<void> {
    for (const event of events) {
      try {
        await writeBatch(this.pool, foldEvents([event]));
        this.health.written(loop.pipeline, 1);
      } catch (err) {
        if (!isDataError(err)) throw err; // an outage after all: the whole batch is retried
        this.health.reject(loop.pipeline, event.streamId, err);
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

function isPool(db: RecorderOptions["database"]): db is pg.Pool {
  return (
    typeof db === "object" &&
    db !== null &&
    typeof (db as pg.Pool).connect === "function" &&
    typeof (db as pg.Pool).end === "function"
  );
}

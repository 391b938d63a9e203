// The recorder's bookkeeping and error handling: what it wrote, failed, skipped or lost, as
// counts (stats()), metrics and log lines — an outage or a trouble spell is logged once when it
// starts and once when it ends, a malformed entry once per unknown type.
import type { Logger } from "pino";
import { MalformedEventError } from "./events.ts";
import type { RecorderMetrics } from "./recorderMetrics.ts";

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

export class RecorderHealth {
  private readonly counts: RecorderStats = {
    written: 0,
    batches: 0,
    failures: 0,
    rejected: 0,
    lost: 0,
    databaseUp: false,
  };
  private outageSince: number | null = null;
  private redisTroubleSince: number | null = null;
  private readonly unknownTypes = new Set<string>();

  private readonly metrics: RecorderMetrics;
  private readonly log: Logger;
  /** The database as logs may show it (no password). */
  private readonly database: string;

  constructor(metrics: RecorderMetrics, log: Logger, database: string) {
    this.metrics = metrics;
    this.log = log;
    this.database = database;
  }

  stats(): RecorderStats {
    return { ...this.counts };
  }

  written(pipeline: string, n: number): void {
    this.counts.written += n;
    this.counts.batches += 1;
    this.metrics.written.inc({ pipeline }, n);
    this.metrics.batches.inc({ pipeline });
    this.databaseOk();
  }

  databaseOk(): void {
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

  databaseFailed(pipeline: string, err: unknown): void {
    this.counts.failures += 1;
    this.counts.databaseUp = false;
    this.metrics.failures.inc({ pipeline });
    this.metrics.databaseUp.set(0);
    if (this.outageSince === null) {
      this.outageSince = Date.now();
      this.log.warn(
        { err: errorInfo(err), database: this.database },
        "job records: PostgreSQL unavailable; jobs keep running and their records wait in the outbox",
      );
    }
  }

  redisOk(): void {
    if (this.redisTroubleSince !== null) {
      this.log.info({ troubleMs: Date.now() - this.redisTroubleSince }, "job records: Redis answers again");
      this.redisTroubleSince = null;
    }
  }

  redisFailed(pipeline: string, err: unknown): void {
    if (this.redisTroubleSince === null) {
      this.redisTroubleSince = Date.now();
      this.log.warn(
        { pipeline, err: errorInfo(err) },
        "job records: reading the outbox failed; retrying with backoff",
      );
    }
  }

  reject(pipeline: string, streamId: string, err: unknown): void {
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

  lost(pipeline: string, n: number, how: string): void {
    this.counts.lost += n;
    this.metrics.lost.inc({ pipeline }, n);
    this.log.error(
      { pipeline, entries: n, how },
      "job records: outbox entries were trimmed before they were recorded (outbox full: records were away too long)",
    );
  }
}

export function errorInfo(err: unknown): { name?: string; message: string; code?: string } {
  if (err instanceof Error)
    return { name: err.name, message: err.message, code: (err as { code?: string }).code };
  return { message: String(err) };
}

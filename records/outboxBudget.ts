// The outbox's byte budget. With PostgreSQL down the outbox only grows (every transition adds an
// entry, up to 512 KiB each), and Redis memory is what the queue itself runs on. So each
// recorder measures the stream (MEMORY USAGE, sampled) on a timer and, over the budget, sheds the
// oldest entries (XTRIM MAXLEN =): their records are lost, the jobs run on. Nothing is added to
// the per-job path; the cost is two commands per pipeline per interval, whatever the job rate.
import type { Logger } from "pino";
import { PipelineKeys, type RedisClient } from "../queue/index.ts";
import type { RecorderMetrics } from "./recorderMetrics.ts";

/** 256 MiB: hours of ordinary entries, minutes of 64 KiB results at thousands of jobs a second. */
export const DEFAULT_OUTBOX_MAX_BYTES = 256 * 1024 * 1024;
/** Trim to this share of the budget, so the next check does not trim again at once. */
const TRIM_TO = 0.9;
/** Nodes MEMORY USAGE samples: entries differ in size (an enqueue carries the payload, a start does not). */
const SAMPLES = 100;

/**
 * How many of the newest `length` entries to keep when the stream uses `bytes` of a `maxBytes`
 * budget; null when it is within the budget.
 */
export function entriesToKeep(length: number, bytes: number, maxBytes: number): number | null {
  if (bytes <= maxBytes || length === 0) return null;
  return Math.floor((length * maxBytes * TRIM_TO) / bytes);
}

export class OutboxBudget {
  private readonly redis: RedisClient;
  private readonly maxBytes: number;
  private readonly metrics: RecorderMetrics;
  private readonly log: Logger;

  constructor(redis: RedisClient, maxBytes: number, metrics: RecorderMetrics, log: Logger) {
    this.redis = redis;
    this.maxBytes = maxBytes;
    this.metrics = metrics;
    this.log = log;
  }

  /** Measure each pipeline's outbox and shed its oldest entries when it is over the budget. */
  async enforce(pipelines: readonly string[]): Promise<void> {
    for (const pipeline of pipelines) {
      const key = new PipelineKeys(pipeline).outbox;
      try {
        const [length, bytes] = await Promise.all([
          this.redis.xlen(key),
          this.redis.memory("USAGE", key, "SAMPLES", SAMPLES) as Promise<number | null>,
        ]);
        this.metrics.outboxBytes.set({ pipeline }, bytes ?? 0);
        const keep = entriesToKeep(length, bytes ?? 0, this.maxBytes);
        if (keep === null) continue;
        const shed = await this.redis.xtrim(key, "MAXLEN", keep);
        this.metrics.shed.inc({ pipeline }, shed);
        this.log.error(
          { pipeline, shed, kept: keep, bytes, maxBytes: this.maxBytes },
          "job records: the outbox is over its byte budget (PostgreSQL away?): the oldest entries were shed and their records are lost",
        );
      } catch (err) {
        this.metrics.budgetFailures.inc({ pipeline });
        this.log.warn({ pipeline, err }, "job records: could not measure the outbox's size");
      }
    }
  }
}

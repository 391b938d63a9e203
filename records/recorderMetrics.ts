// The recorder's Prometheus metrics, and the outbox gauges (length, pending, age, trimmed) read
// from Redis on a timer.
import type { Logger } from "pino";
import { Counter, Gauge, Registry, type Metric } from "prom-client";
import { PipelineKeys, type RedisClient } from "../queue/index.ts";
import { streamTime, type RawEntry } from "./events.ts";
import { fieldMap, RECORDER_GROUP } from "./outboxStream.ts";

export type RecorderMetrics = ReturnType<typeof createRecorderMetrics>;

function metric<T extends Metric>(
  registry: Registry | undefined,
  name: string,
  make: (registers: Registry[]) => T,
): T {
  const existing = registry?.getSingleMetric(name);
  return (existing as T | undefined) ?? make(registry ? [registry] : []);
}

export function createRecorderMetrics(registry?: Registry) {
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
    shed: metric(
      registry,
      "conveyor_records_shed_total",
      (registers) =>
        new Counter({
          name: "conveyor_records_shed_total",
          help: "Outbox entries shed unrecorded because the outbox was over its byte budget",
          labelNames: p,
          registers,
        }),
    ),
    budgetFailures: metric(
      registry,
      "conveyor_records_budget_failures_total",
      (registers) =>
        new Counter({
          name: "conveyor_records_budget_failures_total",
          help: "Failed measurements of the outbox's size (the byte budget was not enforced then)",
          labelNames: p,
          registers,
        }),
    ),
    outboxBytes: metric(
      registry,
      "conveyor_records_outbox_bytes",
      (registers) =>
        new Gauge({
          name: "conveyor_records_outbox_bytes",
          help: "Memory the outbox stream uses in Redis (MEMORY USAGE, sampled)",
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

/** Reads the outbox gauges of each pipeline; says once when unread entries were trimmed away. */
export class OutboxGauges {
  private readonly trimReported = new Set<string>();
  private readonly redis: RedisClient;
  private readonly metrics: RecorderMetrics;
  private readonly log: Logger;

  constructor(redis: RedisClient, metrics: RecorderMetrics, log: Logger) {
    this.redis = redis;
    this.metrics = metrics;
    this.log = log;
  }

  async read(pipelines: readonly string[]): Promise<void> {
    for (const pipeline of pipelines) {
      const key = new PipelineKeys(pipeline).outbox;
      try {
        const replies = await this.redis
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
}

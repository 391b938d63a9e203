// Drains each pipeline's audit stream (queue/audit.ts: the CLI's and the operator's changes)
// into conveyor_audit. Replicas share one consumer group per stream; a row is keyed by the
// change's first entry (`source`), so an entry read twice (a replica died before its XACK, the
// entry was claimed by another) writes nothing new, and a change's outcome entry read before
// its first entry still makes one complete row.
import type pg from "pg";
import { PipelineKeys, type RedisClient } from "../queue/index.ts";

export const AUDIT_GROUP = "conveyor-audit";
/** An entry a replica read and did not acknowledge for this long is taken over. */
const CLAIM_IDLE_MS = 30_000;

type Entry = [id: string, fields: string[] | null];

const UPSERT = `
INSERT INTO conveyor_audit (at, token, verb, operation, target, params, client, status, jobs, result, source)
VALUES (to_timestamp($1 / 1000.0), $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
ON CONFLICT (source) WHERE source IS NOT NULL DO UPDATE SET
  status = COALESCE(excluded.status, conveyor_audit.status),
  jobs = COALESCE(excluded.jobs, conveyor_audit.jobs),
  result = COALESCE(excluded.result, conveyor_audit.result)`;

export class AuditDrain {
  private readonly redis: RedisClient;
  private readonly db: pg.Pool;
  private readonly pipelines: () => Promise<string[]>;
  private readonly consumer: string;
  private readonly onError: (err: unknown) => void;
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private readonly grouped = new Set<string>();

  constructor(opts: {
    redis: RedisClient;
    db: pg.Pool;
    pipelines: () => Promise<string[]>;
    consumer: string;
    onError: (err: unknown) => void;
  }) {
    this.redis = opts.redis;
    this.db = opts.db;
    this.pipelines = opts.pipelines;
    this.consumer = opts.consumer;
    this.onError = opts.onError;
  }

  start(everyMs = 1000): void {
    this.timer = setInterval(() => void this.drainOnce(), everyMs).unref();
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.running;
  }

  /** One pass over every pipeline's stream; returns how many entries it wrote. */
  drainOnce(): Promise<void> {
    this.running ??= this.pass()
      .catch(this.onError)
      .finally(() => {
        this.running = null;
      });
    return this.running;
  }

  private async pass(): Promise<void> {
    for (const pipeline of await this.pipelines()) {
      const key = new PipelineKeys(pipeline).audit;
      if (!this.grouped.has(key)) {
        await this.redis.xgroup("CREATE", key, AUDIT_GROUP, "0", "MKSTREAM").catch((err: Error) => {
          if (!String(err.message).includes("BUSYGROUP")) throw err;
        });
        this.grouped.add(key);
      }
      // Entries another replica read and never acknowledged, then new ones.
      const claimed = (await this.redis.xautoclaim(
        key,
        AUDIT_GROUP,
        this.consumer,
        CLAIM_IDLE_MS,
        "0-0",
        "COUNT",
        100,
      )) as [string, Entry[]];
      await this.write(pipeline, key, claimed[1] ?? []);
      for (;;) {
        let reply: [string, Entry[]][] | null;
        try {
          reply = (await this.redis.xreadgroup(
            "GROUP",
            AUDIT_GROUP,
            this.consumer,
            "COUNT",
            100,
            "STREAMS",
            key,
            ">",
          )) as [string, Entry[]][] | null;
        } catch (err) {
          // The stream was deleted with its group: made again at the next pass.
          if (String((err as Error).message).includes("NOGROUP")) this.grouped.delete(key);
          throw err;
        }
        const entries = reply?.[0]?.[1] ?? [];
        if (entries.length === 0) break;
        await this.write(pipeline, key, entries);
      }
    }
  }

  private async write(pipeline: string, key: string, entries: Entry[]): Promise<void> {
    if (entries.length === 0) return;
    for (const [id, list] of entries) {
      if (!list) continue; // trimmed while pending
      const f: Record<string, string> = {};
      for (let i = 0; i + 1 < list.length; i += 2) f[list[i]!] = list[i + 1]!;
      const first = f.kind === "end" ? f.of! : id;
      const json = (s: string | undefined) => {
        try {
          return s === undefined ? null : JSON.stringify(JSON.parse(s));
        } catch {
          return JSON.stringify(s);
        }
      };
      await this.db.query(UPSERT, [
        Number(f.at) || Date.now(),
        f.actor ?? "unknown",
        f.verb ?? "operate",
        f.operation ?? "unknown",
        f.target ?? "",
        json(f.params) ?? "{}",
        f.client || null,
        f.status ? Number(f.status) : null,
        f.jobs ? Number(f.jobs) : null,
        f.kind === "begin" ? null : json(f.result),
        `${pipeline}:${first}`,
      ]);
    }
    const ids = entries.map(([id]) => id);
    await this.redis
      .multi()
      .xack(key, AUDIT_GROUP, ...ids)
      .xdel(key, ...ids)
      .exec();
  }
}

// Which queues exist: the registry set producers add to (QUEUES_KEY), plus a SCAN for queues
// that only ever received jobs another way (a stage fed by its previous stage), run at start
// and then rarely (on Redis Cluster: on every master). Never per request: listings read the
// cached set.
import type { Cluster } from "ioredis";
import { KEY_ROOT, QUEUES_KEY, type RedisClient } from "../queue/index.ts";
import type { ApiMetrics } from "./metrics.ts";

const RESCAN_MS = 60_000;
const REFRESH_MS = 1_000;
const COUNTS_KEY = /^cvy:\{[^}]*\}:q:(.+):counts$/;

export class QueueDirectory {
  private readonly redis: RedisClient;
  private readonly allowed: (queue: string) => boolean;
  private readonly metrics: ApiMetrics;
  private known = new Set<string>();
  private scanned = new Set<string>();
  private refreshedAt = 0;
  private scannedAt = 0;
  private inflight: Promise<string[]> | null = null;

  constructor(redis: RedisClient, allowed: (queue: string) => boolean, metrics: ApiMetrics) {
    this.redis = redis;
    this.allowed = allowed;
    this.metrics = metrics;
  }

  /** Known queues, sorted; at most a second old. */
  list(): Promise<string[]> {
    if (Date.now() - this.refreshedAt < REFRESH_MS) return Promise.resolve(this.sorted());
    this.inflight ??= this.refresh().finally(() => {
      this.inflight = null;
    });
    return this.inflight;
  }

  private sorted(): string[] {
    return [...this.known].filter(this.allowed).sort();
  }

  private async refresh(): Promise<string[]> {
    const registered = await this.redis.smembers(QUEUES_KEY);
    if (this.scannedAt === 0) {
      this.scannedAt = Date.now();
      this.scanned = await this.scan();
    } else if (Date.now() - this.scannedAt > RESCAN_MS) {
      // Later rescans run beside requests: a SCAN over a large keyspace must not delay a page.
      this.scannedAt = Date.now();
      this.scan().then(
        (found) => {
          this.scanned = found;
        },
        (err: unknown) => this.metrics.error("queue_directory", err),
      );
    }
    this.known = new Set([...registered, ...this.scanned]);
    this.refreshedAt = Date.now();
    return this.sorted();
  }

  private async scan(): Promise<Set<string>> {
    const found = new Set<string>();
    const nodes = this.redis.isCluster ? (this.redis as Cluster).nodes("master") : [this.redis];
    await Promise.all(nodes.map((node) => scanNode(node, found)));
    return found;
  }
}

async function scanNode(node: RedisClient, found: Set<string>): Promise<void> {
  let cursor = "0";
  do {
    const [next, keys] = await node.scan(cursor, "MATCH", `${KEY_ROOT}:*:q:*:counts`, "COUNT", 1000);
    cursor = next;
    for (const k of keys) {
      const m = COUNTS_KEY.exec(k);
      if (m) found.add(m[1]!);
    }
  } while (cursor !== "0");
}

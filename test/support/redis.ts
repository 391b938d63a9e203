// Throwaway Redis servers (single node or a 3-node cluster) on free loopback ports.
import { execFileSync } from "node:child_process";
import { after, before, describe } from "node:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { freePort } from "./ports.ts";
import {
  connectRedis,
  Producer,
  QueueAdmin,
  type ProducerOptions,
  type RedisClient,
} from "../../queue/index.ts";
import { startProcess, stopProcess, waitFor, type Started } from "./processes.ts";

export interface RedisServerOptions {
  /** Extra redis-server arguments, e.g. ["--appendonly", "yes", "--appendfsync", "always"]. */
  args?: string[];
  dir?: string;
  port?: number;
  /** `requirepass`: clients must AUTH with it (the url carries no password). */
  password?: string;
  /** Addresses to listen on besides 127.0.0.1, e.g. a real node's bridge address for its pods. */
  extraBind?: string[];
}

export class RedisServer {
  readonly port: number;
  readonly dir: string;
  /** The requirepass password, if any. */
  readonly password: string | undefined;
  private readonly args: string[];
  private proc: Started | null = null;

  private constructor(port: number, dir: string, args: string[], password?: string) {
    this.port = port;
    this.dir = dir;
    this.args = args;
    this.password = password;
  }

  static async start(opts: RedisServerOptions = {}): Promise<RedisServer> {
    const dir = opts.dir ?? mkdtempSync(join(tmpdir(), "cvy-redis-"));
    // protected mode would refuse the password-less clients on the extra addresses
    const bind = opts.extraBind?.length
      ? ["--bind", ["127.0.0.1", ...opts.extraBind].join(" "), "--protected-mode", "no"]
      : ["--bind", "127.0.0.1"];
    const server = new RedisServer(
      opts.port ?? (await freePort()),
      dir,
      [...bind, ...(opts.args ?? [])],
      opts.password,
    );
    await server.resume();
    return server;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  /**
   * (Re)start the server with the same port and data directory; `replicaOf` (a port on
   * 127.0.0.1) starts it as that primary's replica instead of what it was started as.
   */
  async resume(replicaOf?: number): Promise<void> {
    const args =
      replicaOf === undefined
        ? this.args
        : [...withoutReplicaOf(this.args), "--replicaof", "127.0.0.1", String(replicaOf)];
    this.proc = startProcess(
      "redis-server",
      [
        "--port",
        String(this.port),
        "--dir",
        this.dir,
        "--save",
        "",
        "--daemonize",
        "no",
        "--logfile",
        join(this.dir, "redis.log"),
        ...(this.password !== undefined ? ["--requirepass", this.password] : []),
        ...args,
      ],
      { logFile: join(this.dir, "stdout.log") },
    );
    await waitFor(`redis on ${this.port}`, async () => {
      const r = new Redis({
        port: this.port,
        host: "127.0.0.1",
        password: this.password,
        lazyConnect: true,
        maxRetriesPerRequest: 0,
        retryStrategy: () => null,
      });
      r.on("error", () => {});
      try {
        await r.connect();
        return (await r.ping()) === "PONG";
      } finally {
        r.disconnect();
      }
    });
  }

  async kill(signal: "SIGTERM" | "SIGKILL" = "SIGTERM"): Promise<void> {
    if (!this.proc) return;
    if (signal === "SIGKILL") {
      try {
        process.kill(-this.proc.child.pid!, "SIGKILL");
      } catch {
        /* gone */
      }
      await this.proc.exited;
    } else {
      await stopProcess(this.proc);
    }
    this.proc = null;
  }

  async stop(): Promise<void> {
    await this.kill();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

export class RedisClusterServer {
  readonly nodes: RedisServer[];
  private constructor(nodes: RedisServer[]) {
    this.nodes = nodes;
  }

  /**
   * `size` primaries, each with `opts.replicas` replicas; `nodeTimeoutMs` is how long a silent
   * primary takes to be failed over to its replica.
   */
  static async start(
    size = 3,
    opts: { replicas?: number; nodeTimeoutMs?: number } = {},
  ): Promise<RedisClusterServer> {
    const nodes: RedisServer[] = [];
    for (let i = 0; i < size * (1 + (opts.replicas ?? 0)); i++) {
      nodes.push(
        await RedisServer.start({
          args: [
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            "nodes.conf",
            "--cluster-node-timeout",
            String(opts.nodeTimeoutMs ?? 5000),
            "--appendonly",
            "no",
            // (no 5 s wait before a replica's first diskless sync)
            "--repl-diskless-sync-delay",
            "0",
          ],
        }),
      );
    }
    execFileSync(
      "redis-cli",
      [
        "--cluster",
        "create",
        ...nodes.map((n) => `127.0.0.1:${n.port}`),
        "--cluster-replicas",
        String(opts.replicas ?? 0),
        "--cluster-yes",
      ],
      { stdio: "pipe" },
    );
    const cluster = new RedisClusterServer(nodes);
    await cluster.waitHealthy(nodes.length);
    // A replica still waiting for its first sync would be promoted empty.
    await waitFor(
      "the replicas in sync",
      async () => {
        for (const n of nodes) {
          const r = new Redis({ port: n.port, host: "127.0.0.1", maxRetriesPerRequest: 0 });
          try {
            const info = await r.info("replication");
            if (/role:slave/.test(info) && !/master_link_status:up/.test(info)) return false;
          } finally {
            r.disconnect();
          }
        }
        return true;
      },
      60_000,
      100,
    );
    return cluster;
  }

  /** Until a live node reports cluster_state:ok and knows `expected` nodes. */
  async waitHealthy(expected = this.nodes.length): Promise<void> {
    await waitFor(
      "cluster state ok",
      async () => {
        for (const n of this.nodes) {
          const r = new Redis({
            port: n.port,
            host: "127.0.0.1",
            lazyConnect: true,
            maxRetriesPerRequest: 0,
            retryStrategy: () => null,
          });
          r.on("error", () => {});
          try {
            await r.connect();
            const info = String(await r.cluster("INFO"));
            const known = String(await r.cluster("NODES"))
              .split("\n")
              .filter(Boolean).length;
            return info.includes("cluster_state:ok") && known >= expected;
          } catch {
            continue;
          } finally {
            r.disconnect();
          }
        }
        return false;
      },
      60_000,
      200,
    );
  }

  /** The node serving `key`'s slot as primary now. */
  async primaryOf(key: string): Promise<RedisServer> {
    for (const n of this.nodes) {
      const r = new Redis({
        port: n.port,
        host: "127.0.0.1",
        lazyConnect: true,
        maxRetriesPerRequest: 0,
        retryStrategy: () => null,
      });
      r.on("error", () => {});
      try {
        await r.connect();
        const slot = Number(await r.cluster("KEYSLOT", key));
        const shards = (await r.cluster("SLOTS")) as unknown as [number, number, [string, number]][];
        const owner = shards.find(([from, to]) => slot >= from && slot <= to)?.[2][1];
        const node = this.nodes.find((x) => x.port === owner);
        if (node) return node;
      } catch {
        // a node that is down: ask the next
      } finally {
        r.disconnect();
      }
    }
    throw new Error(`no live node knows the primary of ${key}`);
  }

  /**
   * SIGKILL the primary serving `key` and wait until its replica took over (cluster_state:ok,
   * the slot served by another node). Returns the killed node (resume() makes it a replica).
   */
  async failover(key: string): Promise<{ killed: RedisServer; promoted: RedisServer }> {
    const killed = await this.primaryOf(key);
    await killed.kill("SIGKILL");
    let promoted: RedisServer | undefined;
    await waitFor(
      `a replica promoted for ${key}`,
      async () => {
        const p = await this.primaryOf(key).catch(() => undefined);
        if (!p || p === killed) return false;
        promoted = p;
        return true;
      },
      60_000,
      200,
    );
    return { killed, promoted: promoted! };
  }

  get url(): string {
    return `redis-cluster://${this.nodes.map((n) => `127.0.0.1:${n.port}`).join(",")}`;
  }

  async stop(): Promise<void> {
    await Promise.all(this.nodes.map((n) => n.stop()));
  }
}

/** A throwaway server with a client, a producer and an admin on it: how most queue tests start. */
export interface QueueRedis {
  server: RedisServer;
  redis: RedisClient;
  producer: Producer;
  admin: QueueAdmin;
}

export async function startQueueRedis(producer: ProducerOptions = {}): Promise<QueueRedis> {
  const server = await RedisServer.start();
  const redis = connectRedis(server.url);
  return { server, redis, producer: new Producer(redis, producer), admin: new QueueAdmin(redis) };
}

export async function stopQueueRedis({ server, redis }: Pick<QueueRedis, "server" | "redis">): Promise<void> {
  redis.disconnect();
  await server.stop();
}

/** One server for the enclosing describe (started before its first test, stopped after its last). */
export function useQueueRedis(producer: ProducerOptions = {}): () => QueueRedis {
  let q: QueueRedis | undefined;
  before(async () => {
    q = await startQueueRedis(producer);
  });
  after(() => (q ? stopQueueRedis(q) : undefined));
  return () => {
    if (!q) throw new Error("useQueueRedis: read before its before() hook ran");
    return q;
  };
}

/** What a shared queue case gets: a client, a producer and an admin on one server or a Cluster. */
export type QueueClients = Pick<QueueRedis, "redis" | "producer" | "admin">;

/**
 * The same cases against one Redis server ("<title> (single Redis)") and a real 3-node Cluster
 * ("<title> on a real 3-node Redis Cluster"). `queue(n)` names the n-th test's queue on each;
 * on the Cluster give each test its own pipeline so the tests spread over the nodes.
 */
export function describeOnRedisAndCluster(
  title: string,
  cases: (clients: () => QueueClients, queue: () => string) => void,
  queue: { single: (n: number) => string; cluster: (n: number) => string },
): void {
  describe(`${title} (single Redis)`, () => {
    let n = 0;
    cases(useQueueRedis(), () => queue.single(++n));
  });
  describe(`${title} on a real 3-node Redis Cluster`, () => {
    let cluster: RedisClusterServer;
    let clients: QueueClients;
    let n = 0;
    before(async () => {
      cluster = await RedisClusterServer.start(3);
      const redis = connectRedis(cluster.url);
      clients = { redis, producer: new Producer(redis), admin: new QueueAdmin(redis) };
    });
    after(async () => {
      clients.redis.disconnect();
      await cluster.stop();
    });
    cases(
      () => clients,
      () => queue.cluster(++n),
    );
  });
}

/** `args` without a `--replicaof <host> <port>` option. */
function withoutReplicaOf(args: string[]): string[] {
  const i = args.indexOf("--replicaof");
  return i < 0 ? args : [...args.slice(0, i), ...args.slice(i + 3)];
}

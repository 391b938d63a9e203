// One place that turns a Redis URL into an ioredis client, single node or cluster.
// Credentials come from the URL's password or REDIS_PASSWORD (a Secret in Kubernetes) and are
// never logged: `describeRedisUrl` gives the form that may be printed.
import { Cluster, Redis, type RedisOptions } from "ioredis";
import { exponentialDelay } from "../lib/backoff.ts";
import type { RedisClient } from "./scripts.ts";

export interface RedisTarget {
  nodes: { host: string; port: number }[];
  cluster: boolean;
  tls: boolean;
  username?: string;
  password?: string;
  db: number;
}

export class RedisUrlError extends Error {
  override name = "RedisUrlError";
}

/**
 * Accepts `redis://[user:pass@]host:port[/db]`, `rediss://…` (TLS), and
 * `redis-cluster://[user:pass@]host:port,host:port[?tls=true]` for Redis Cluster.
 */
export function parseRedisUrl(url: string, password = process.env.REDIS_PASSWORD): RedisTarget {
  const m =
    /^(redis|rediss|redis-cluster):\/\/(?:([^:@/]*)(?::([^@/]*))?@)?([^/?]+)(?:\/(\d+))?(?:\?(.*))?$/.exec(
      url,
    );
  if (!m)
    throw new RedisUrlError(
      `invalid Redis URL ${describeRedisUrl(url)}: expected redis://host:port, rediss://host:port or redis-cluster://host:port,host:port`,
    );
  const [, scheme, user, pass, hostList, db, query] = m;
  const params = new URLSearchParams(query ?? "");
  const nodes = hostList!.split(",").map((hp) => {
    const hm = /^\[?([^\]]+?)\]?(?::(\d+))?$/.exec(hp.trim());
    const port = Number(hm?.[2] ?? 6379);
    if (!hm || !Number.isInteger(port) || port < 1 || port > 65535)
      throw new RedisUrlError(`invalid Redis host ${JSON.stringify(hp)} in ${describeRedisUrl(url)}`);
    return { host: hm[1]!, port };
  });
  return {
    nodes,
    cluster: scheme === "redis-cluster",
    tls: scheme === "rediss" || params.get("tls") === "true",
    username: user ? decodeURIComponent(user) : undefined,
    password: pass ? decodeURIComponent(pass) : password || undefined,
    db: Number(db ?? 0),
  };
}

/** The URL with any password masked: safe for logs, Events and status. */
export function describeRedisUrl(url: string): string {
  return url.replace(/\/\/([^:@/]*):[^@/]*@/, "//$1:***@");
}

export interface ConnectOptions {
  /** Client name shown in `CLIENT LIST`. */
  name?: string;
  /** For connections that block (BLPOP): never time out a command. */
  blocking?: boolean;
  /** Fail commands fast instead of queueing them while disconnected (operator probes). */
  failFast?: boolean;
  /**
   * Connection errors (refused, reset) while ioredis reconnects. Commands still fail through
   * their own promises; this is for logs. Without it the errors are dropped, not thrown.
   */
  onError?: (err: Error) => void;
}

/** ioredis reconnects: 200 ms, 400 ms, … up to 3 s. */
const RECONNECT = { baseMs: 100, maxMs: 3000 };

export function connectRedis(url: string, opts: ConnectOptions = {}): RedisClient {
  const t = parseRedisUrl(url);
  const common: RedisOptions = {
    username: t.username,
    password: t.password,
    connectionName: opts.name,
    tls: t.tls ? {} : undefined,
    // Reconnect forever with a capped delay: a Redis restart must not kill a worker.
    retryStrategy: (times) => exponentialDelay(times + 1, RECONNECT),
    maxRetriesPerRequest: opts.blocking ? null : opts.failFast ? 1 : 50,
    enableOfflineQueue: !opts.failFast,
    lazyConnect: false,
  };
  const node = t.nodes[0]!;
  const client: RedisClient = t.cluster
    ? new Cluster(t.nodes, {
        redisOptions: common,
        clusterRetryStrategy: common.retryStrategy,
        enableOfflineQueue: !opts.failFast,
      })
    : new Redis({ ...common, host: node.host, port: node.port, db: t.db });
  client.on("error", opts.onError ?? (() => {}));
  if (!t.cluster && t.db !== 0) {
    // ioredis reports a refused SELECT once and then runs every command in database 0, mixing
    // this queue into whatever lives there: close the client instead (before the commands queued
    // while connecting are sent), so callers fail with the server's reason.
    client.on("error", (err: Error) => {
      if (/DB index is out of range|SELECT is not allowed/i.test(err.message)) client.disconnect(false);
    });
  }
  return client;
}

/** Resolve once the client is connected; reject with a message naming the (masked) URL. */
export function waitUntilReady(client: RedisClient, url: string, timeoutMs = 5000): Promise<void> {
  if (client.status === "ready") return Promise.resolve();
  return new Promise((resolve, reject) => {
    let lastError = "no answer";
    const onError = (err: Error) =>
      (lastError = err.message || (err as { code?: string }).code || String(err));
    const onReady = () => {
      cleanup();
      resolve();
    };
    const timer = setTimeout(() => {
      cleanup();
      reject(
        new Error(`cannot connect to Redis at ${describeRedisUrl(url)} within ${timeoutMs}ms: ${lastError}`),
      );
    }, timeoutMs);
    const cleanup = () => {
      clearTimeout(timer);
      client.off("error", onError);
      client.off("ready", onReady);
    };
    client.on("error", onError);
    client.on("ready", onReady);
  });
}

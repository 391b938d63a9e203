// One place that turns a Redis URL into an ioredis client: single node, Sentinel-managed
// primary/replicas, or cluster. Failover is ioredis's own: the Sentinel connector asks the
// sentinels for the current primary on every (re)connect, the Cluster client follows
// MOVED/ASK/TRYAGAIN/CLUSTERDOWN.
// Credentials come from the URL's password or REDIS_PASSWORD (a Secret in Kubernetes) and are
// never logged: `describeRedisUrl` gives the form that may be printed.
import { Cluster, Command, Redis, type RedisOptions } from "ioredis";
import { exponentialDelay } from "../lib/backoff.ts";
import type { RedisClient } from "./scripts.ts";

export interface RedisTarget {
  /** The data nodes, or for Sentinel the sentinels. */
  nodes: { host: string; port: number }[];
  cluster: boolean;
  /** Sentinel: the monitored primary's name (`sentinel monitor <name> …`). */
  sentinelMaster?: string;
  /** Sentinel: authenticate to the sentinels with the same user and password as to the data nodes. */
  sentinelAuth?: boolean;
  tls: boolean;
  username?: string;
  password?: string;
  db: number;
}

export class RedisUrlError extends Error {
  override name = "RedisUrlError";
}

const SCHEMES =
  "redis://host:port, rediss://host:port, redis-cluster://host:port,host:port or redis-sentinel://host:port,host:port/<master-name>";
const SENTINEL_PARAMS = new Set(["tls", "sentinelAuth", "db"]);

/**
 * Accepts `redis://[user:pass@]host:port[/db]`, `rediss://…` (TLS),
 * `redis-cluster://[user:pass@]host:port,host:port[?tls=true]` for Redis Cluster, and
 * `redis-sentinel://[user:pass@]host:port,host:port/<master-name>[?tls=true&sentinelAuth=same&db=N]`
 * (the hosts are sentinels) for a Sentinel-managed primary.
 */
export function parseRedisUrl(url: string, password = process.env.REDIS_PASSWORD): RedisTarget {
  const m =
    /^(redis|rediss|redis-cluster|redis-sentinel):\/\/(?:([^:@/]*)(?::([^@/]*))?@)?([^/?]+)(?:\/([^/?]*))?(?:\?(.*))?$/.exec(
      url,
    );
  if (!m) throw new RedisUrlError(`invalid Redis URL ${describeRedisUrl(url)}: expected ${SCHEMES}`);
  const [, scheme, user, pass, hostList, path, query] = m;
  const sentinel = scheme === "redis-sentinel";
  const params = new URLSearchParams(query ?? "");
  const nodes = hostList!.split(",").map((hp) => {
    const hm = /^\[?([^\]]+?)\]?(?::(\d+))?$/.exec(hp.trim());
    const port = Number(hm?.[2] ?? (sentinel ? 26379 : 6379));
    if (!hm || !Number.isInteger(port) || port < 1 || port > 65535)
      throw new RedisUrlError(`invalid Redis host ${JSON.stringify(hp)} in ${describeRedisUrl(url)}`);
    return { host: hm[1]!, port };
  });
  const tlsParam = params.get("tls");
  if (tlsParam !== null && tlsParam !== "true" && tlsParam !== "false")
    throw new RedisUrlError(`invalid tls=${tlsParam} in ${describeRedisUrl(url)}: expected true or false`);
  let db = 0;
  let sentinelMaster: string | undefined;
  let sentinelAuth: boolean | undefined;
  if (sentinel) {
    for (const k of params.keys())
      if (!SENTINEL_PARAMS.has(k))
        throw new RedisUrlError(
          `unknown option ${k} in ${describeRedisUrl(url)}: expected tls, sentinelAuth or db`,
        );
    sentinelMaster = path ? decodeURIComponent(path) : "";
    if (!sentinelMaster)
      throw new RedisUrlError(
        `invalid Redis URL ${describeRedisUrl(url)}: a redis-sentinel:// URL names the primary: redis-sentinel://host:port,host:port/<master-name>`,
      );
    const auth = params.get("sentinelAuth") ?? "none";
    if (auth !== "none" && auth !== "same")
      throw new RedisUrlError(
        `invalid sentinelAuth=${auth} in ${describeRedisUrl(url)}: expected none (sentinels without a password) or same (the data nodes' user and password)`,
      );
    sentinelAuth = auth === "same";
    const dbParam = params.get("db");
    if (dbParam !== null) {
      if (!/^\d+$/.test(dbParam))
        throw new RedisUrlError(`invalid db=${dbParam} in ${describeRedisUrl(url)}: expected a number`);
      db = Number(dbParam);
    }
  } else if (path !== undefined && path !== "") {
    if (!/^\d+$/.test(path))
      throw new RedisUrlError(`invalid Redis URL ${describeRedisUrl(url)}: expected ${SCHEMES}`);
    db = Number(path);
  }
  return {
    nodes,
    cluster: scheme === "redis-cluster",
    sentinelMaster,
    sentinelAuth,
    tls: scheme === "rediss" || tlsParam === "true",
    username: user ? decodeURIComponent(user) : undefined,
    password: pass ? decodeURIComponent(pass) : password || undefined,
    db,
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
        // While a replica is being promoted the slots answer CLUSTERDOWN/TRYAGAIN or the node is
        // gone: retry those every 200 ms (up to maxRedirections) instead of 100 ms.
        retryDelayOnFailover: 200,
        retryDelayOnClusterDown: 200,
        retryDelayOnTryAgain: 200,
      })
    : t.sentinelMaster !== undefined
      ? new Redis({
          ...common,
          sentinels: t.nodes,
          name: t.sentinelMaster,
          role: "master",
          db: t.db,
          sentinelUsername: t.sentinelAuth ? t.username : undefined,
          sentinelPassword: t.sentinelAuth ? t.password : undefined,
          enableTLSForSentinelMode: t.tls,
          sentinelTLS: t.tls ? {} : undefined,
          // No failoverDetector: its +switch-master handler disconnects the connector, and one that
          // lands while the client is reconnecting rejects the connect, which ends the ioredis
          // client for good (seen in `make chaos --redis sentinel`). A dead primary drops the
          // connection anyway, and every reconnect asks the sentinels.
          // A demoted primary answers READONLY (nothing was written): reconnect, which asks the
          // sentinels again, and resend the command.
          reconnectOnError: (err) => (/^READONLY/.test(err.message) ? 2 : false),
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

/** The connection that serves `key`: the client itself, or in a cluster the slot's primary. */
export function connectionFor(redis: RedisClient, key: string): Redis | undefined {
  if (!("isCluster" in redis) || !redis.isCluster) return redis as Redis;
  const cluster = redis as Cluster;
  // (ioredis's own slot hash, as it routed the script)
  const owner = cluster.slots[new Command("get", [key]).getSlot()]?.[0];
  return cluster
    .nodes("master")
    .find((n) => `${n.options.host}:${n.options.port}` === owner || n.options.host === owner);
}

/**
 * Why the primary serving `key` cannot be used now, or null when it can (always null off a
 * cluster: the client's own status says it). In a cluster the client stays "ready" while one
 * shard's primary is down; a worker whose queue lives there can do nothing until a replica is
 * promoted.
 */
export function shardPrimaryProblem(redis: RedisClient, key: string): string | null {
  if (!("isCluster" in redis) || !redis.isCluster) return null;
  const conn = connectionFor(redis, key);
  const owner = (redis as Cluster).slots[new Command("get", [key]).getSlot()]?.[0] ?? "no node";
  if (!conn) return `the primary for ${key} (${owner}) is unreachable`;
  if (conn.status !== "ready") return `the primary for ${key} (${owner}) is ${conn.status}`;
  return null;
}

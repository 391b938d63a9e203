// Backlog polling: every pool's queue counts are read every pollSeconds, over one fail-fast
// Redis connection per distinct Redis (URL + credentials), shared by the pools using it and
// closed when the last one goes. A sample is what the external metric serves, what scaling
// decisions use and what status shows. Credentials never appear in logs, errors or samples.
import { createHash } from "node:crypto";
import type { Logger } from "pino";
import {
  QueueAdmin,
  connectRedis,
  describeRedisUrl,
  sweepQueue,
  waitUntilReady,
  type QueueControlState,
  type QueueCounts,
  type RateLimit,
  type RedisClient,
  type WorkerReport,
} from "../../queue/index.ts";

export interface BacklogSample {
  /** When the poll finished (ms). */
  at: number;
  /** The queue polled. */
  queue?: string;
  counts?: QueueCounts;
  /** Set when the poll failed; the message is safe to show. */
  error?: string;
  /** Consecutive failed polls. */
  failures: number;
  /** The last good counts and when they were read. */
  lastGood?: { at: number; counts: QueueCounts };
  /** Pause and rate limit in force in Redis at the last good poll. */
  control?: QueueControlState;
  /** While rate-limited: the workers' reports, for the median job duration (queueControl.ts). */
  reports?: WorkerReport[];
}

export interface PollTarget {
  key: string;
  queue: string;
  /** Effective URL (TLS applied), no password. */
  url: string;
  password?: string;
  pollSeconds: number;
}

interface Conn {
  client: RedisClient;
  users: Set<string>;
  lastError?: string;
}

/** Puts a password into a Redis URL for connectRedis (which takes it only from the URL or the process env). */
export function urlWithPassword(url: string, password: string | undefined): string {
  if (!password) return url;
  return url.replace(
    /^([a-z-]+:\/\/)(?:([^:@/]*)@)?/,
    (_m, scheme: string, user?: string) => `${scheme}${user ?? ""}:${encodeURIComponent(password)}@`,
  );
}

export class RedisConnections {
  private readonly conns = new Map<string, Conn>();
  private readonly log?: Logger;

  constructor(log?: Logger) {
    this.log = log;
  }

  private id(url: string, password?: string): string {
    return createHash("sha256")
      .update(`${url}\n${password ?? ""}`)
      .digest("hex")
      .slice(0, 16);
  }

  /** The shared client for (url, password); `user` is released with release(user). */
  acquire(user: string, url: string, password?: string): { id: string; client: RedisClient } {
    const id = this.id(url, password);
    let c = this.conns.get(id);
    if (!c) {
      const safe = describeRedisUrl(url);
      const conn: Conn = {
        users: new Set(),
        client: connectRedis(urlWithPassword(url, password), {
          name: "conveyor-operator",
          failFast: true,
          onError: (err) => {
            const msg = redactError(err, password);
            if (msg !== conn.lastError) this.log?.warn({ redis: safe, err: msg }, "redis connection error");
            conn.lastError = msg;
          },
        }),
      };
      conn.client.on("ready", () => {
        if (conn.lastError) this.log?.info({ redis: safe }, "redis connection restored");
        conn.lastError = undefined;
      });
      c = conn;
      this.conns.set(id, c);
    }
    c.users.add(user);
    return { id, client: c.client };
  }

  release(user: string, id: string): void {
    const c = this.conns.get(id);
    if (!c) return;
    c.users.delete(user);
    if (c.users.size === 0) {
      this.conns.delete(id);
      c.client.disconnect();
    }
  }

  get size(): number {
    return this.conns.size;
  }

  closeAll(): void {
    for (const c of this.conns.values()) c.client.disconnect();
    this.conns.clear();
  }
}

/** An error message with any trace of the password removed. */
export function redactError(err: unknown, password?: string): string {
  let msg = err instanceof Error ? err.message : String(err);
  msg = describeRedisUrl(msg);
  if (password) msg = msg.split(password).join("***").split(encodeURIComponent(password)).join("***");
  return msg;
}

function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    p.finally(() => clearTimeout(timer)),
    new Promise<T>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what}: no reply within ${ms} ms`)), ms);
    }),
  ]);
}

export interface PollerHooks {
  /** Called after every poll (success or failure) of a pool. */
  onSample: (key: string, sample: BacklogSample) => void;
  /** The leader also runs the lease sweeper (requeues expired leases even with no workers running). */
  shouldSweep: () => boolean;
}

interface PoolPoll {
  target: PollTarget;
  connId: string;
  client: RedisClient;
  timer?: NodeJS.Timeout;
  sample?: BacklogSample;
  inFlight: boolean;
  stopped: boolean;
}

/** Polls every registered pool on its own interval. */
export class BacklogPoller {
  private readonly pools = new Map<string, PoolPoll>();
  private readonly conns: RedisConnections;
  private readonly hooks: PollerHooks;
  private readonly log?: Logger;
  private readonly timeoutMs: number;

  constructor(conns: RedisConnections, hooks: PollerHooks, opts: { log?: Logger; timeoutMs?: number } = {}) {
    this.conns = conns;
    this.hooks = hooks;
    this.log = opts.log;
    this.timeoutMs = opts.timeoutMs ?? 5000;
  }

  /** Start or update polling of a pool (a changed URL, password or interval takes effect now). */
  upsert(target: PollTarget): void {
    const cur = this.pools.get(target.key);
    if (
      cur &&
      cur.target.url === target.url &&
      cur.target.password === target.password &&
      cur.target.queue === target.queue
    ) {
      if (cur.target.pollSeconds !== target.pollSeconds) {
        cur.target = target;
        this.schedule(cur, 0);
      }
      return;
    }
    if (cur) this.remove(target.key);
    const { id, client } = this.conns.acquire(target.key, target.url, target.password);
    const p: PoolPoll = { target, connId: id, client, inFlight: false, stopped: false };
    this.pools.set(target.key, p);
    this.schedule(p, 0);
  }

  remove(key: string): void {
    const p = this.pools.get(key);
    if (!p) return;
    p.stopped = true;
    clearTimeout(p.timer);
    this.pools.delete(key);
    this.conns.release(key, p.connId);
  }

  has(key: string): boolean {
    return this.pools.has(key);
  }

  sample(key: string): BacklogSample | undefined {
    return this.pools.get(key)?.sample;
  }

  /** Worker busy/idle reports of a pool's queue (for pod-deletion-cost). */
  async workers(key: string): Promise<WorkerReport[]> {
    const p = this.pools.get(key);
    if (!p) return [];
    return withTimeout(new QueueAdmin(p.client).workers(p.target.queue), this.timeoutMs, "worker reports");
  }

  /** Write spec.paused / spec.rateLimit into the pool's Redis (the spec wins while set). */
  async applyControl(key: string, change: { paused?: boolean; rateLimit?: RateLimit }): Promise<void> {
    const p = this.pools.get(key);
    if (!p) return;
    const admin = new QueueAdmin(p.client);
    const q = p.target.queue;
    if (change.paused !== undefined)
      await withTimeout(change.paused ? admin.pause(q) : admin.resume(q), this.timeoutMs, "pause");
    if (change.rateLimit)
      await withTimeout(admin.setRateLimit(q, change.rateLimit), this.timeoutMs, "rate limit");
    if (p.sample?.control) p.sample.control = { ...p.sample.control, ...change };
  }

  /** Poll a pool now (e.g. right after it was created), without waiting for its timer. */
  pollNow(key: string): void {
    const p = this.pools.get(key);
    if (p) this.schedule(p, 0);
  }

  stop(): void {
    for (const key of [...this.pools.keys()]) this.remove(key);
  }

  private schedule(p: PoolPoll, delayMs: number): void {
    clearTimeout(p.timer);
    p.timer = setTimeout(() => void this.poll(p), delayMs);
    p.timer.unref();
  }

  private async poll(p: PoolPoll): Promise<void> {
    if (p.stopped) return;
    if (p.inFlight) return;
    p.inFlight = true;
    const t = p.target;
    try {
      // A new or reconnecting connection: wait for it rather than fail (fail-fast clients queue nothing).
      await waitUntilReady(p.client, t.url, this.timeoutMs);
      const counts = await withTimeout(
        new QueueAdmin(p.client).counts(t.queue, { oldestReady: true }),
        this.timeoutMs,
        "queue counts",
      );
      const admin = new QueueAdmin(p.client);
      const control = await withTimeout(admin.control(t.queue), this.timeoutMs, "queue control");
      const reports = control.rateLimit
        ? await withTimeout(admin.workers(t.queue), this.timeoutMs, "worker reports")
        : undefined;
      p.sample = {
        at: Date.now(),
        queue: t.queue,
        counts,
        failures: 0,
        lastGood: { at: Date.now(), counts },
        control,
        ...(reports ? { reports } : {}),
      };
      if (this.hooks.shouldSweep()) {
        // Best effort: the mutex makes concurrent sweeps by workers no-ops.
        await withTimeout(sweepQueue(p.client, t.queue), this.timeoutMs, "sweep").catch((err) =>
          this.log?.debug({ pool: t.key, err: redactError(err, t.password) }, "lease sweep failed"),
        );
      }
    } catch (err) {
      const prev = p.sample;
      p.sample = {
        at: Date.now(),
        queue: t.queue,
        error: redactError(err, t.password),
        failures: (prev?.failures ?? 0) + 1,
        lastGood: prev?.lastGood,
      };
    } finally {
      p.inFlight = false;
    }
    if (p.stopped) return;
    try {
      this.hooks.onSample(t.key, p.sample);
    } catch (err) {
      this.log?.error({ pool: t.key, err: String(err) }, "backlog sample handler failed");
    }
    this.schedule(p, t.pollSeconds * 1000);
  }
}

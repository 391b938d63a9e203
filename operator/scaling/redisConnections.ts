// The operator's Redis connections: one fail-fast client per distinct Redis (URL + credentials),
// shared by the pools using it and closed when the last one goes. Credentials never appear in
// logs or errors.
import { createHash } from "node:crypto";
import type { Logger } from "pino";
import { connectRedis, describeRedisUrl, type RedisClient } from "../../queue/index.ts";

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

export function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    p.finally(() => clearTimeout(timer)),
    new Promise<T>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what}: no reply within ${ms} ms`)), ms);
    }),
  ]);
}

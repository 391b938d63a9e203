// Completion notifications (docs/notifications.md): the worker's sender. The settle scripts append
// an entry to the pipeline's `notify` stream for each ended job its pool or the job asks about
// (queue/scripts/includes/notify.lua); this loop reads it in the consumer group `notify:<queue>`
// (so the pool's workers share it, and a crashed worker's pending entries are claimed by another
// with XAUTOCLAIM), POSTs each a signed JSON body, and acknowledges the entry once every
// destination is delivered or given up. A failed attempt leaves the entry pending until its
// backoff has passed; the state of each delivery is kept in `notified:<id>` for `conveyor job`.
import { createHmac } from "node:crypto";
import { lookup } from "node:dns/promises";
import http from "node:http";
import https from "node:https";
import { BlockList, isIP, type LookupFunction } from "node:net";
import { Counter, type Registry } from "prom-client";
import type { Logger } from "pino";
import {
  connectRedis,
  PipelineKeys,
  pipelineOf,
  type NotifyEvent,
  type RedisClient,
} from "../queue/index.ts";
import type { Delivery } from "../queue/notifications.ts";
import { exponentialDelay } from "../lib/backoff.ts";

export interface NotifyConfig {
  /** The pool's destination; absent: only jobs' own `notify` URLs are sent. */
  url?: string;
  /** The events the pool notifies (its `notify:<queue>` meta field). */
  events: NotifyEvent[];
  /** The HMAC key of `Conveyor-Signature` (from a Secret or --notify-secret-file, never job data). */
  secret: string;
  /** CIDRs a destination may resolve into although loopback, link-local or private. */
  allow: string[];
  /** Give a delivery up this long after its first attempt. */
  retryMaxMs: number;
  /** The first retry's delay; each next one doubles, up to an hour. */
  retryBaseMs: number;
  /** One attempt's limit: connecting, sending and reading the answer. */
  timeoutMs: number;
}

export const NOTIFY_GROUP_PREFIX = "notify:";
/** How long a job's delivery states outlive its last attempt. */
const STATE_TTL_SECONDS = 7 * 24 * 3600;
/** The most of an answer read (the rest is dropped with the connection). */
const ANSWER_LIMIT_BYTES = 64 * 1024;
const ANSWER_KEPT_CHARS = 200;
const BACKOFF_CAP_MS = 3600_000;

/** `Conveyor-Signature` of a body at unix time `t`: `t=<t>,v1=<hex HMAC-SHA256 of "t.body">`. */
export function signature(secret: string, t: number, body: string): string {
  return `t=${t},v1=${createHmac("sha256", secret).update(`${t}.${body}`).digest("hex")}`;
}

// Loopback, link-local, private (RFC 1918, ULA), carrier-grade NAT, unspecified and multicast.
const REFUSED = new BlockList();
for (const [net, bits] of [
  ["0.0.0.0", 8],
  ["10.0.0.0", 8],
  ["100.64.0.0", 10],
  ["127.0.0.0", 8],
  ["169.254.0.0", 16],
  ["172.16.0.0", 12],
  ["192.168.0.0", 16],
  ["224.0.0.0", 4],
  ["240.0.0.0", 4],
] as const)
  REFUSED.addSubnet(net, bits, "ipv4");
for (const [net, bits] of [
  ["::", 128],
  ["::1", 128],
  ["fc00::", 7],
  ["fe80::", 10],
  ["ff00::", 8],
] as const)
  REFUSED.addSubnet(net, bits, "ipv6");

/** `a.b.c.d/n` or `x::/n` → a BlockList; an error names the bad entry. */
export function allowList(cidrs: readonly string[]): BlockList {
  const list = new BlockList();
  for (const c of cidrs) {
    const m = /^([^/]+)\/(\d{1,3})$/.exec(c);
    const family = m ? isIP(m[1]!) : 0;
    const bits = m ? Number(m[2]) : -1;
    if (!m || family === 0 || bits > (family === 4 ? 32 : 128))
      throw new Error(`${JSON.stringify(c)} is not a CIDR (e.g. 10.0.0.0/8, 127.0.0.1/32, fd00::/8)`);
    list.addSubnet(m[1]!, bits, family === 4 ? "ipv4" : "ipv6");
  }
  return list;
}

/** Why `address` may not be sent to, or undefined when it may. */
export function refusedAddress(address: string, allow: BlockList): string | undefined {
  let a = address;
  let family: "ipv4" | "ipv6" = isIP(a) === 6 ? "ipv6" : "ipv4";
  // (an IPv4-mapped IPv6 address is judged as the IPv4 one it is)
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(a);
  if (mapped) [a, family] = [mapped[1]!, "ipv4"];
  if (!REFUSED.check(a, family)) return undefined;
  if (allow.check(a, family)) return undefined;
  return `${address} is loopback, link-local or private (allow it with --notify-allow / spec.notify.allow)`;
}

export type SendOutcome =
  | { kind: "answered"; status: number; answer: string }
  | { kind: "error"; answer: string }
  | { kind: "refused"; answer: string };

/**
 * POST `body` to `url`: the host's every address is checked before connecting, and the connection
 * goes to those checked addresses (no second lookup to rebind); no redirect is followed, the whole
 * attempt is bounded by `timeoutMs`, and at most 64 KiB of the answer is read.
 */
export async function postNotification(
  url: string,
  body: string,
  headers: Record<string, string>,
  opts: { timeoutMs: number; allow: BlockList },
): Promise<SendOutcome> {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return { kind: "refused", answer: `not a URL: ${url}` };
  }
  if (u.protocol !== "https:" && u.protocol !== "http:")
    return { kind: "refused", answer: `${u.protocol} is not http: or https:` };
  const host = u.hostname.replace(/^\[(.*)\]$/, "$1");
  let addresses: { address: string; family: number }[];
  try {
    addresses = await lookup(host, { all: true, verbatim: true });
  } catch (err) {
    return { kind: "error", answer: `cannot resolve ${host}: ${(err as Error).message}` };
  }
  for (const a of addresses) {
    const why = refusedAddress(a.address, opts.allow);
    if (why) return { kind: "refused", answer: `${host} resolves to ${why}` };
  }
  const pinned: LookupFunction = (_h, options, cb) => {
    if ((options as { all?: boolean }).all) (cb as (e: null, a: typeof addresses) => void)(null, addresses);
    else cb(null, addresses[0]!.address, addresses[0]!.family);
  };
  const signal = AbortSignal.timeout(opts.timeoutMs);
  return new Promise<SendOutcome>((resolve) => {
    const req = (u.protocol === "https:" ? https : http).request(
      u,
      {
        method: "POST",
        headers: { ...headers, "content-length": String(Buffer.byteLength(body)) },
        lookup: pinned,
        signal,
        servername: isIP(host) ? undefined : host,
      },
      (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        const done = () => {
          const answer = Buffer.concat(chunks).toString("utf8").slice(0, ANSWER_KEPT_CHARS);
          const status = res.statusCode ?? 0;
          if (status >= 300 && status < 400)
            resolve({
              kind: "answered",
              status,
              answer: `redirect to ${res.headers.location ?? "?"} not followed`,
            });
          else resolve({ kind: "answered", status, answer });
        };
        res.on("data", (c: Buffer) => {
          size += c.length;
          if (size <= ANSWER_LIMIT_BYTES) chunks.push(c);
          else {
            res.destroy();
            done();
          }
        });
        res.on("end", done);
        res.on("error", done);
      },
    );
    req.on("error", (err) =>
      resolve({
        kind: "error",
        answer: signal.aborted ? `no answer within ${opts.timeoutMs} ms` : err.message,
      }),
    );
    req.end(body);
  });
}

/** The JSON body of a stream entry's notification. */
export function notificationBody(entry: Record<string, string>): string {
  const iso = (ms: string | undefined) => (ms ? new Date(Number(ms)).toISOString() : null);
  const out: Record<string, unknown> = {
    id: entry.id,
    queue: entry.queue,
    pipeline: pipelineOf(entry.queue ?? ""),
    state: entry.state,
  };
  if (entry.result !== undefined) out.result = parseJson(entry.result);
  if (entry.error !== undefined) out.error = parseJson(entry.error);
  out.enqueuedAt = iso(entry.createdAt);
  out.finishedAt = iso(entry.at);
  out.attempts = Number(entry.attempts ?? 0);
  return JSON.stringify(out);
}
function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** The list separator of batch entries (queue/scripts/includes/record.lua LIST_SEP). */
const LIST_SEP = "\x1f";

/**
 * A stream entry's jobs with their delivery ids: a per-job entry is one (its entry id); a batch
 * entry (`n` and `x[]` lists, notify.lua) is n, `<entry id>/<k>`.
 */
export function expandEntry(entryId: string, e: Record<string, string>): [string, Record<string, string>][] {
  if (e.n === undefined) return [[entryId, e]];
  const n = Number(e.n);
  const lists: Record<string, string[]> = {};
  const shared: Record<string, string> = {};
  for (const [k, v] of Object.entries(e)) {
    if (k === "n") continue;
    if (k.endsWith("[]")) lists[k.slice(0, -2)] = v.split(LIST_SEP);
    else shared[k] = v;
  }
  const out: [string, Record<string, string>][] = [];
  for (let k = 0; k < n; k++) {
    const job: Record<string, string> = { ...shared };
    for (const [name, values] of Object.entries(lists))
      if (values[k] !== undefined && values[k] !== "") job[name] = values[k]!;
    out.push([`${entryId}/${k}`, job]);
  }
  return out;
}

export function createNotifyMetrics(registry: Registry) {
  return new Counter({
    name: "conveyor_notify_deliveries_total",
    help: "Notification attempts by outcome: delivered, retried (an attempt failed, tried again later), failed (given up), refused (destination not allowed)",
    labelNames: ["outcome"] as const,
    registers: [registry],
  });
}

type Entry = [string, string[]];

export interface NotifierOptions {
  queue: string;
  /** The worker's connection (commands that do not block). */
  redis: RedisClient;
  /** For the sender's own connection, which blocks reading the stream. */
  redisUrl: string;
  consumer: string;
  log: Logger;
  registry: Registry;
}

export class Notifier {
  private readonly conn: RedisClient;
  private readonly keys: PipelineKeys;
  private readonly group: string;
  private readonly allow: BlockList;
  private readonly deliveries: Counter<"outcome">;
  /** After this long without an acknowledgement an entry is claimed again (crash, or its backoff). */
  readonly claimIdleMs: number;
  private stopping = false;
  private loop?: Promise<void>;
  private lastClaim = 0;

  private readonly config: NotifyConfig;
  private readonly opts: NotifierOptions;

  constructor(config: NotifyConfig, opts: NotifierOptions) {
    this.config = config;
    this.opts = opts;
    this.keys = new PipelineKeys(pipelineOf(opts.queue));
    this.group = NOTIFY_GROUP_PREFIX + opts.queue;
    this.allow = allowList(config.allow);
    this.deliveries = createNotifyMetrics(opts.registry);
    this.claimIdleMs = Math.max(1000, 2 * config.timeoutMs + 500);
    this.conn = connectRedis(opts.redisUrl, { blocking: true, name: `conveyor-notify:${opts.consumer}` });
  }

  async start(): Promise<void> {
    const { redis, queue } = this.opts;
    // The settle scripts read which events the pool notifies from meta (no command of their own).
    const field = NOTIFY_GROUP_PREFIX + queue;
    if (this.config.url && this.config.events.length > 0)
      await redis.hset(this.keys.meta, field, this.config.events.join(","));
    else await redis.hdel(this.keys.meta, field);
    try {
      await redis.xgroup("CREATE", this.keys.notify, this.group, "0", "MKSTREAM");
    } catch (err) {
      if (!String((err as Error).message).includes("BUSYGROUP")) throw err;
    }
    this.loop = this.run();
  }

  async stop(): Promise<void> {
    this.stopping = true;
    this.conn.disconnect();
    await this.loop?.catch(() => {});
  }

  private async run(): Promise<void> {
    while (!this.stopping) {
      try {
        if (Date.now() - this.lastClaim >= this.claimIdleMs / 2) {
          this.lastClaim = Date.now();
          await this.claimStale();
        }
        const reply = (await this.conn.xreadgroup(
          "GROUP",
          this.group,
          this.opts.consumer,
          "COUNT",
          100,
          "BLOCK",
          Math.max(100, Math.min(1000, this.claimIdleMs / 2)),
          "STREAMS",
          this.keys.notify,
          ">",
        )) as [string, Entry[]][] | null;
        for (const entry of reply?.[0]?.[1] ?? []) await this.handle(entry);
      } catch (err) {
        if (this.stopping) return;
        this.opts.log.warn({ err: (err as Error).message }, "notifications: reading the outbox failed");
        await new Promise((r) => setTimeout(r, 1000));
      }
    }
  }

  /** Entries left unacknowledged past claimIdleMs: a crashed worker's, or retries whose backoff may be due. */
  private async claimStale(): Promise<void> {
    let cursor = "0-0";
    do {
      const [next, entries] = (await this.conn.xautoclaim(
        this.keys.notify,
        this.group,
        this.opts.consumer,
        this.claimIdleMs,
        cursor,
        "COUNT",
        100,
      )) as [string, (Entry | null)[]];
      for (const entry of entries) if (entry) await this.handle(entry);
      cursor = next;
    } while (cursor !== "0-0" && !this.stopping);
  }

  private async handle([entryId, list]: Entry): Promise<void> {
    const e: Record<string, string> = {};
    for (let i = 0; i + 1 < list.length; i += 2) e[list[i]!] = list[i + 1]!;
    const { redis } = this.opts;
    let open = false;
    if (e.queue === this.opts.queue)
      for (const [delivery, job] of expandEntry(entryId, e))
        if (await this.handleJob(delivery, job)) open = true;
    if (!open) await redis.xack(this.keys.notify, this.group, entryId);
  }

  /** One job's notification to each of its destinations; true while one is still to be retried. */
  private async handleJob(delivery: string, e: Record<string, string>): Promise<boolean> {
    const { redis } = this.opts;
    const urls = new Set<string>();
    if (e.pool === "1" && this.config.url) urls.add(this.config.url);
    if (e.url) urls.add(e.url);
    if (urls.size === 0) return false;
    const stateKey = this.keys.notified(e.id!);
    const known = await redis.hgetall(stateKey);
    const body = notificationBody(e);
    let open = false;
    for (const url of urls) {
      const field = `${delivery} ${url}`;
      const before = known[field] ? (JSON.parse(known[field]) as Delivery) : undefined;
      if (before && before.state !== "retrying") continue;
      if (before?.nextAt && before.nextAt > Date.now()) {
        open = true;
        continue;
      }
      const d = await this.attempt(url, e, delivery, body, before);
      await redis.multi().hset(stateKey, field, JSON.stringify(d)).expire(stateKey, STATE_TTL_SECONDS).exec();
      if (d.state === "retrying") open = true;
    }
    return open;
  }

  private async attempt(
    url: string,
    e: Record<string, string>,
    entryId: string,
    body: string,
    before: Delivery | undefined,
  ): Promise<Delivery> {
    const now = Date.now();
    const t = Math.floor(now / 1000);
    const outcome = await postNotification(
      url,
      body,
      {
        "content-type": "application/json",
        "user-agent": "conveyor-notify",
        "conveyor-signature": signature(this.config.secret, t, body),
        "conveyor-delivery": entryId,
        "conveyor-event": e.state ?? "",
      },
      { timeoutMs: this.config.timeoutMs, allow: this.allow },
    );
    const attempts = (before?.attempts ?? 0) + 1;
    const firstAt = before?.firstAt ?? now;
    const status = outcome.kind === "answered" ? outcome.status : 0;
    const base = {
      url,
      event: e.state ?? "",
      attempts,
      firstAt,
      lastAt: Date.now(),
      status,
      answer: outcome.answer,
    };
    const log = this.opts.log.child({ job: e.id, url, event: e.state, attempts });
    if (outcome.kind === "answered" && status >= 200 && status < 300) {
      this.deliveries.inc({ outcome: "delivered" });
      log.debug("notification delivered");
      return { ...base, state: "delivered" };
    }
    if (outcome.kind === "refused") {
      this.deliveries.inc({ outcome: "refused" });
      log.warn({ reason: outcome.answer }, "notification refused");
      return { ...base, state: "failed" };
    }
    const delay = exponentialDelay(attempts, { baseMs: this.config.retryBaseMs, maxMs: BACKOFF_CAP_MS });
    const nextAt = Date.now() + Math.round(delay * (0.5 + Math.random() / 2));
    if (nextAt - firstAt > this.config.retryMaxMs) {
      this.deliveries.inc({ outcome: "failed" });
      log.warn({ status, answer: outcome.answer }, "notification failed: retries spent");
      return { ...base, state: "failed" };
    }
    this.deliveries.inc({ outcome: "retried" });
    log.info({ status, answer: outcome.answer }, "notification attempt failed: retrying");
    return { ...base, state: "retrying", nextAt };
  }
}

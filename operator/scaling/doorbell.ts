// The doorbell: a pool scaled to zero has no worker to notice a new job, so without it the job
// waits for the operator's next poll (up to pollSeconds). While a pool sleeps at zero the
// operator leaves `<Q>doorbell` = DOORBELL_CHANNEL in the queue's Redis and subscribes to that
// channel; the first wake after it (an enqueue, a fan-out, a resume: queue/scripts/includes/wake.lua)
// takes the doorbell and publishes, and the pool is polled at once. The poll stays the guarantee:
// a ring lost to a reconnect or a failover costs one poll interval, nothing more.
// A running latency-mode pool gets a surge bell instead, `<channel> <n>`: rung by a wake only once
// n jobs wait (more than its slots start within the target), so a spike is heard at once too.
import type { Logger } from "pino";
import { connectRedis, DOORBELL_CHANNEL, QueueKeys, type RedisClient } from "../../queue/index.ts";
import { redactError, urlWithPassword, withTimeout } from "./redisConnections.ts";

/** Where a pool's queue lives: the poller's shared client for commands, the URL for a subscriber. */
export interface DoorbellTarget {
  key: string;
  queue: string;
  connId: string;
  client: RedisClient;
  url: string;
  password?: string;
}

interface Bell {
  target: DoorbellTarget;
  bell: string;
  /** What is left in Redis: the channel (a sleeping pool's doorbell) or `<channel> <n>` (a surge bell). */
  value: string;
  /** The bell is in Redis (a doorbell is left only while nothing waits: see sleep). */
  armed: boolean;
  arming: boolean;
  /** Its last SET failed. */
  failed: boolean;
}

interface Subscriber {
  client: RedisClient;
  listening: Promise<unknown>;
  /** Pools that slept while it listened and are still polled: it closes with the last. */
  users: Set<string>;
}

export class Doorbells {
  private readonly bells = new Map<string, Bell>();
  private readonly subscribers = new Map<string, Subscriber>();
  /** Pools whose doorbell could not be left, said once. */
  private readonly warned = new Set<string>();
  private readonly onRing: (key: string) => void;
  private readonly log?: Logger;
  private readonly timeoutMs: number;

  constructor(onRing: (key: string) => void, opts: { log?: Logger; timeoutMs?: number } = {}) {
    this.onRing = onRing;
    this.log = opts.log;
    this.timeoutMs = opts.timeoutMs ?? 5000;
  }

  /**
   * The pool sleeps at zero: listen for its bell, and leave the bell in Redis when nothing waits
   * (`idle`). A pool held at zero with jobs waiting (a paused queue) gets no bell — each enqueue
   * would ring it for nothing — but still hears the ring a resume sends (queue/control.ts).
   * Resolves true when the bell was left now: the caller polls once more, for a job enqueued
   * after its last poll and before the bell.
   */
  async sleep(target: DoorbellTarget, idle: boolean): Promise<boolean> {
    if (!idle) {
      // (jobs wait, or the reading may predate them: a bell left before is taken back)
      const e = this.bells.get(target.key);
      if (e && (e.armed || e.arming)) this.forget(target.key, e);
    }
    const entry = this.entry(target, DOORBELL_CHANNEL);
    if (!idle || entry.armed || entry.arming)
      return this.listen(target).then(
        () => false,
        () => false,
      );
    return this.arm(entry);
  }

  /**
   * The pool runs: leave a surge bell that rings once `waiting` jobs wait (replacing the last
   * when the count changed). No extra poll after it: jobs that arrived before it are the next
   * poll's, as without a bell.
   */
  async surge(target: DoorbellTarget, waiting: number): Promise<void> {
    const entry = this.entry(target, `${DOORBELL_CHANNEL} ${Math.max(1, Math.ceil(waiting))}`);
    if (!entry.armed && !entry.arming) await this.arm(entry);
  }

  /** No bell for the pool now (it starts or runs, is paused or pinned): one it left is taken back. */
  wake(key: string): void {
    const e = this.bells.get(key);
    if (e) this.forget(key, e);
  }

  /** Whether the pool's doorbell is left or being left (or could not be left: its next reconcile tries again). */
  left(key: string): boolean {
    const e = this.bells.get(key);
    return e !== undefined && e.value === DOORBELL_CHANNEL && (e.armed || e.arming || e.failed);
  }

  /** The pool's bell entry for `value`: a new one when the pool's Redis, queue or bell changed. */
  private entry(target: DoorbellTarget, value: string): Bell {
    const e = this.bells.get(target.key);
    if (e && e.target.connId === target.connId && e.target.queue === target.queue && e.value === value)
      return e;
    // (the same key with another value is overwritten by the new bell's SET)
    if (e && (e.target.connId !== target.connId || e.bell !== new QueueKeys(target.queue).doorbell))
      this.forget(target.key, e);
    const next = {
      target,
      bell: new QueueKeys(target.queue).doorbell,
      value,
      armed: false,
      arming: false,
      failed: false,
    };
    this.bells.set(target.key, next);
    return next;
  }

  /**
   * Drop the pool's entry and take its bell out of Redis if it may be there: a bell must not
   * outlive what it was left for (a pool at zero with nothing waiting). Its SET, if sent, went
   * first on the same connection; one not sent yet is not sent (arm checks the entry).
   */
  private forget(key: string, e: Bell): void {
    if (this.bells.get(key) === e) this.bells.delete(key);
    if (!e.armed && !e.arming) return;
    e.armed = false;
    // (pools sharing a queue share its bell: it stays while another one wants it)
    for (const o of this.bells.values())
      if (o.target.connId === e.target.connId && o.bell === e.bell && (o.armed || o.arming)) return;
    e.target.client
      .del(e.bell)
      .catch((err: unknown) =>
        this.log?.debug(
          { pool: key, err: redactError(err, e.target.password) },
          "doorbell not taken back: it rings once, unheard",
        ),
      );
  }

  /** Leave the entry's bell in Redis. Resolves true when it is there now. */
  private async arm(entry: Bell): Promise<boolean> {
    const { target } = entry;
    entry.arming = true;
    try {
      await this.listen(target);
      // Rung or woken meanwhile: what the bell was for no longer holds.
      if (this.bells.get(target.key) !== entry) return false;
      await withTimeout(target.client.set(entry.bell, entry.value), this.timeoutMs, "doorbell");
      if (this.bells.get(target.key) !== entry) return false;
      entry.armed = true;
      entry.failed = false;
      this.warned.delete(target.key);
      return true;
    } catch (err) {
      entry.failed = true;
      // No bell: the pool is still polled; its next reconcile tries again.
      // Said once per pool at warn (e.g. an ACL user without `&cvy:doorbell`), then at debug.
      const level = this.warned.has(target.key) ? "debug" : "warn";
      this.warned.add(target.key);
      this.log?.[level](
        { pool: target.key, err: redactError(err, target.password) },
        "doorbell not armed: a job arriving while the pool is at zero (or a surge) is seen at the next poll",
      );
      return false;
    } finally {
      entry.arming = false;
    }
  }

  /** The pool is no longer polled: forget it, and close a subscriber no pool uses any more. */
  remove(key: string): void {
    this.bells.delete(key);
    this.warned.delete(key);
    for (const [connId, sub] of this.subscribers) {
      sub.users.delete(key);
      if (sub.users.size === 0) this.closeSubscriber(connId);
    }
  }

  stop(): void {
    this.bells.clear();
    for (const s of this.subscribers.values()) s.client.disconnect();
    this.subscribers.clear();
  }

  private async listen(target: DoorbellTarget): Promise<void> {
    const sub = this.subscriber(target);
    sub.users.add(target.key);
    await withTimeout(sub.listening, this.timeoutMs, "doorbell subscribe").catch((err: unknown) => {
      this.closeSubscriber(target.connId); // the next sleep subscribes again
      throw err;
    });
  }

  private subscriber(target: DoorbellTarget): Subscriber {
    let sub = this.subscribers.get(target.connId);
    if (sub) return sub;
    const client = connectRedis(urlWithPassword(target.url, target.password), {
      name: "conveyor-operator-doorbell",
      onError: () => {}, // the poll's connection reports the outage
    });
    client.on("message", (_channel: string, bell: string) => this.rang(target.connId, bell));
    // Redis came back (a restart or a failover may have lost the bells): leave them again.
    let first = true;
    client.on("ready", () => {
      if (first) return void (first = false);
      for (const e of this.bells.values())
        if (e.target.connId === target.connId && e.armed && !e.arming) void this.arm(e);
    });
    sub = { client, listening: client.subscribe(DOORBELL_CHANNEL), users: new Set() };
    sub.listening.catch(() => {});
    this.subscribers.set(target.connId, sub);
    return sub;
  }

  private rang(connId: string, bell: string): void {
    // (over a copy: a bell left again from onRing is not this ring's)
    for (const [key, e] of [...this.bells]) {
      if (e.target.connId !== connId || e.bell !== bell) continue;
      // Rung once: the bell is gone from Redis (a SET still in flight is taken back); another is
      // left once a poll after the ring finds nothing waiting.
      this.forget(key, e);
      this.log?.info(
        { pool: key, ...(e.value !== DOORBELL_CHANNEL ? { surge: e.value.split(" ")[1] } : {}) },
        e.value === DOORBELL_CHANNEL
          ? "doorbell rang: polling the queue now"
          : "surge bell rang: polling the queue now",
      );
      this.onRing(key);
    }
  }

  private closeSubscriber(connId: string): void {
    this.subscribers.get(connId)?.client.disconnect();
    this.subscribers.delete(connId);
  }
}

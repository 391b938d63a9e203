// A de-duplicating, rate-limited work queue of keys (controller-runtime's model): a key is in
// the queue at most once; a key being processed is never handed out twice — adding it again
// marks it dirty and it is re-queued when its processing ends; failures re-queue it with
// per-key exponential backoff under an overall token bucket.
import { exponentialDelay } from "../../lib/backoff.ts";

export interface WorkQueueOptions {
  /** Per-key backoff after failures: baseMs·2^(n-1), capped (defaults 200 ms, 5 min). */
  baseDelayMs?: number;
  maxDelayMs?: number;
  /** Overall limit on rate-limited re-adds (defaults 10/s, burst 100). */
  qps?: number;
  burst?: number;
  onDepth?: (depth: number) => void;
  onAdd?: () => void;
}

export class WorkQueue {
  private readonly queue: string[] = [];
  private readonly queued = new Set<string>();
  private readonly processing = new Set<string>();
  private readonly dirty = new Set<string>();
  private readonly timers = new Map<string, { at: number; timer: NodeJS.Timeout }>();
  private readonly failures = new Map<string, number>();
  private readonly waiters: ((key: string | undefined) => void)[] = [];
  private readonly opts: Required<Omit<WorkQueueOptions, "onDepth" | "onAdd">> & WorkQueueOptions;
  private tokens: number;
  private lastRefill = Date.now();
  private closed = false;

  constructor(opts: WorkQueueOptions = {}) {
    this.opts = { baseDelayMs: 200, maxDelayMs: 5 * 60_000, qps: 10, burst: 100, ...opts };
    this.tokens = this.opts.burst;
  }

  get length(): number {
    return this.queue.length;
  }

  get isShutDown(): boolean {
    return this.closed;
  }

  add(key: string): void {
    if (this.closed) return;
    if (this.processing.has(key)) {
      this.dirty.add(key);
      return;
    }
    if (this.queued.has(key)) return;
    this.queued.add(key);
    this.opts.onAdd?.();
    const waiter = this.waiters.shift();
    if (waiter) {
      this.queued.delete(key);
      this.processing.add(key);
      waiter(key);
    } else {
      this.queue.push(key);
    }
    this.opts.onDepth?.(this.queue.length);
  }

  /** Add after `ms`; an earlier pending addAfter of the same key wins. */
  addAfter(key: string, ms: number): void {
    if (this.closed) return;
    if (ms <= 0) {
      this.add(key);
      return;
    }
    const at = Date.now() + ms;
    const existing = this.timers.get(key);
    if (existing && existing.at <= at) return;
    if (existing) clearTimeout(existing.timer);
    const timer = setTimeout(() => {
      this.timers.delete(key);
      this.add(key);
    }, ms);
    timer.unref();
    this.timers.set(key, { at, timer });
  }

  /** Re-queue after a failure, backing off per key and overall. */
  addRateLimited(key: string): number {
    const n = (this.failures.get(key) ?? 0) + 1;
    this.failures.set(key, n);
    const itemDelay = exponentialDelay(n, { baseMs: this.opts.baseDelayMs, maxMs: this.opts.maxDelayMs });
    const delay = Math.max(itemDelay, this.bucketDelay());
    this.addAfter(key, delay);
    return delay;
  }

  /** The key succeeded: its backoff starts over. */
  forget(key: string): void {
    this.failures.delete(key);
  }

  numRequeues(key: string): number {
    return this.failures.get(key) ?? 0;
  }

  private bucketDelay(): number {
    const now = Date.now();
    this.tokens = Math.min(this.opts.burst, this.tokens + ((now - this.lastRefill) / 1000) * this.opts.qps);
    this.lastRefill = now;
    this.tokens -= 1;
    return this.tokens >= 0 ? 0 : Math.ceil((-this.tokens / this.opts.qps) * 1000);
  }

  /** The next key to process (resolves undefined once shut down). Call done(key) after. */
  get(): Promise<string | undefined> {
    if (this.closed) return Promise.resolve(undefined);
    const key = this.queue.shift();
    if (key !== undefined) {
      this.queued.delete(key);
      this.processing.add(key);
      this.opts.onDepth?.(this.queue.length);
      return Promise.resolve(key);
    }
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  done(key: string): void {
    this.processing.delete(key);
    if (this.dirty.delete(key)) this.add(key);
  }

  shutDown(): void {
    this.closed = true;
    for (const { timer } of this.timers.values()) clearTimeout(timer);
    this.timers.clear();
    for (const w of this.waiters.splice(0)) w(undefined);
  }
}

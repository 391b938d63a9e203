// A list-watch cache that never stops on its own. client-node's informer stops on any watch
// error other than 410 Gone and never relists (kubernetes-client/javascript#596, #958, #1933);
// this one relists after any watch error with capped exponential backoff and jitter, and — as
// client-go — only then: every resync period it announces a resync from the cache (no API call),
// so the controller re-checks every key. An optional index (by owner, by label) answers "the
// objects of X" without walking the cache.
import { setTimeout as sleep } from "node:timers/promises";
import type { Logger } from "pino";
import { Backoff } from "../../lib/backoff.ts";
import { apiCode, type KubeClient, type KubeObject, type WatchEvent } from "./client.ts";
import type { OperatorMetrics } from "../metrics.ts";
import { objectKey } from "./keys.ts";
import { StringPool } from "./stringPool.ts";

export interface InformerHandlers<T extends KubeObject> {
  add?: (obj: T) => void;
  update?: (obj: T, old: T) => void;
  delete?: (obj: T) => void;
  /** After every (re)list and every resync period: the cache is complete and current. */
  synced?: () => void;
}

export interface InformerOptions<T extends KubeObject = KubeObject> {
  /** e.g. /apis/apps/v1/deployments or /apis/apps/v1/namespaces/ns/deployments */
  path: string;
  labelSelector?: string;
  /** Server-side field selector (e.g. `metadata.name=x`: one object's cache). */
  fieldSelector?: string;
  /** Resync (from the cache, no API call) this often (default 10 min, ±10% jitter). */
  relistMs?: number;
  /** The index value of an object (e.g. its pool's `namespace/name`): `indexed(value)` finds them. */
  indexBy?: (obj: T) => string | undefined;
  /** Backoff after an error: from minBackoffMs doubling to maxBackoffMs (defaults 500 ms, 30 s). */
  minBackoffMs?: number;
  maxBackoffMs?: number;
  /** Server-side watch timeout per request (default 5–10 min, randomized as client-go does). */
  watchTimeoutSeconds?: number;
  /**
   * What the cache keeps of each object (default: cacheForm — everything but
   * metadata.managedFields, as controller-runtime's TransformStripManagedFields, with repeated
   * strings shared). Handlers see the transformed object.
   */
  transform?: (obj: T) => T;
  log?: Logger;
  metrics?: OperatorMetrics;
}

/** The object without metadata.managedFields: a third of a typical object, never read by a controller. */
export function stripManagedFields<T extends KubeObject>(obj: T): T {
  if (!obj?.metadata || !("managedFields" in obj.metadata)) return obj;
  const { managedFields: _dropped, ...metadata } = obj.metadata as T["metadata"] & {
    managedFields?: unknown;
  };
  return { ...obj, metadata };
}

/** One pool for every informer: Deployments, HPAs and WorkerPools repeat each other's strings. */
const cachedStrings = new StringPool();

/** The informers' default transform: stripManagedFields, then one copy of each repeated string (stringPool.ts). */
export function cacheForm<T extends KubeObject>(obj: T): T {
  return cachedStrings.internAll(stripManagedFields(obj));
}

class RelistNeeded extends Error {}

export class Informer<T extends KubeObject> {
  private readonly client: KubeClient;
  private readonly opts: InformerOptions<T>;
  private readonly transform: (obj: T) => T;
  private readonly cache = new Map<string, T>();
  /** indexBy value → keys of the objects with it (the key strings are the cache's own). */
  private readonly index = new Map<string, Set<string>>();
  private readonly handlers: InformerHandlers<T>[] = [];
  private resourceVersion = "";
  private abort = new AbortController();
  private running: Promise<void> | undefined;
  private stopped = false;
  private syncedOnce = false;
  private syncWaiters: (() => void)[] = [];
  /** Errors since the last good list (for tests and logs). */
  failures = 0;
  lastError: unknown;

  constructor(client: KubeClient, opts: InformerOptions<T>) {
    this.client = client;
    this.opts = opts;
    this.transform = opts.transform ?? cacheForm;
  }

  on(h: InformerHandlers<T>): void {
    this.handlers.push(h);
  }

  get(namespace: string, name: string): T | undefined {
    return this.cache.get(`${namespace}/${name}`);
  }

  /** The objects whose indexBy value is `value` (none without indexBy). */
  indexed(value: string): T[] {
    const keys = this.index.get(value);
    return keys ? [...keys].map((k) => this.cache.get(k)!) : [];
  }

  /** Every cached key, without copying the cache. */
  keys(): IterableIterator<string> {
    return this.cache.keys();
  }

  list(namespace?: string): T[] {
    const all = [...this.cache.values()];
    return namespace === undefined ? all : all.filter((o) => o.metadata.namespace === namespace);
  }

  get hasSynced(): boolean {
    return this.syncedOnce;
  }

  /** Resolves after the first complete list. */
  waitForSync(): Promise<void> {
    if (this.syncedOnce) return Promise.resolve();
    return new Promise((resolve) => this.syncWaiters.push(resolve));
  }

  start(): void {
    if (this.running) return;
    this.stopped = false;
    this.abort = new AbortController();
    this.running = this.loop();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.abort.abort();
    await this.running;
    this.running = undefined;
  }

  private emit<K extends keyof InformerHandlers<T>>(
    kind: K,
    ...args: Parameters<NonNullable<InformerHandlers<T>[K]>>
  ): void {
    for (const h of this.handlers) {
      const fn = h[kind] as ((...a: unknown[]) => void) | undefined;
      try {
        fn?.(...args);
      } catch (err) {
        this.opts.log?.error({ err, path: this.opts.path }, "informer handler threw");
      }
    }
  }

  private async loop(): Promise<void> {
    const min = this.opts.minBackoffMs ?? 500;
    const max = this.opts.maxBackoffMs ?? 30_000;
    const backoff = new Backoff({ baseMs: min, maxMs: max });
    const nextResync = () => Date.now() + (this.opts.relistMs ?? 10 * 60_000) * (0.9 + Math.random() * 0.2);
    let listed = false;
    let resyncAt = 0;
    while (!this.stopped) {
      try {
        if (!listed) {
          await this.relist();
          listed = true;
          backoff.reset();
          this.failures = 0;
          resyncAt = nextResync();
        } else if (Date.now() >= resyncAt) {
          this.emit("synced");
          resyncAt = nextResync();
        }
        const remaining = Math.ceil((resyncAt - Date.now()) / 1000);
        const timeoutSeconds = Math.max(
          1,
          Math.min(remaining, this.opts.watchTimeoutSeconds ?? Math.round(300 + Math.random() * 300)),
        );
        // A watch that ends without an error resumes from the last resource version seen.
        await this.client.watch<T>(
          this.opts.path,
          {
            resourceVersion: this.resourceVersion,
            labelSelector: this.opts.labelSelector,
            fieldSelector: this.opts.fieldSelector,
            timeoutSeconds,
          },
          (ev) => this.onEvent(ev),
          this.abort.signal,
        );
      } catch (err) {
        if (this.stopped) break;
        listed = false;
        if (err instanceof RelistNeeded || apiCode(err) === 410) {
          // 410 Gone: the resource version is too old. Relist at once, no backoff.
          this.resourceVersion = "";
          continue;
        }
        this.failures++;
        this.lastError = err;
        this.opts.metrics?.informerRestarts.inc({
          resource: this.opts.path.split("/").pop() ?? this.opts.path,
        });
        const wait = backoff.next() * (0.5 + Math.random());
        this.opts.log?.warn(
          { err: String(err), code: apiCode(err), path: this.opts.path, retryInMs: Math.round(wait) },
          "list/watch failed; relisting after backoff",
        );
        try {
          await sleep(wait, undefined, { signal: this.abort.signal });
        } catch {
          // stopped
        }
      }
    }
  }

  /** Puts `obj` in the cache and the index (replacing `old`, the object under the same key). */
  private store(k: string, obj: T, old: T | undefined): void {
    this.cache.set(k, obj);
    const by = this.opts.indexBy;
    if (!by) return;
    const before = old && by(old);
    const after = by(obj);
    if (before === after) return;
    if (before !== undefined) this.unindex(k, before);
    if (after !== undefined) {
      let keys = this.index.get(after);
      if (!keys) this.index.set(after, (keys = new Set()));
      keys.add(k);
    }
  }

  private remove(k: string, old: T | undefined): void {
    this.cache.delete(k);
    const value = old && this.opts.indexBy?.(old);
    if (value !== undefined) this.unindex(k, value);
  }

  private unindex(k: string, value: string): void {
    const keys = this.index.get(value);
    keys?.delete(k);
    if (keys?.size === 0) this.index.delete(value);
  }

  private onEvent(ev: WatchEvent<T>): void {
    switch (ev.type) {
      case "ADDED":
      case "MODIFIED": {
        const obj = this.transform(ev.object);
        const k = objectKey(obj);
        const old = this.cache.get(k);
        this.store(k, obj, old);
        if (old) {
          if (old.metadata.resourceVersion !== obj.metadata.resourceVersion) this.emit("update", obj, old);
        } else {
          this.emit("add", obj);
        }
        break;
      }
      case "DELETED": {
        const k = objectKey(ev.object);
        const old = this.cache.get(k);
        this.remove(k, old);
        this.emit("delete", old ?? ev.object);
        break;
      }
      case "BOOKMARK":
        break;
      case "ERROR": {
        const status = ev.object as unknown as { code?: number; message?: string };
        if (status.code === 410) throw new RelistNeeded("resource version expired");
        throw new Error(
          `watch ${this.opts.path}: ${status.message ?? "error event"} (${status.code ?? "?"})`,
        );
      }
    }
    const rv = ev.object?.metadata?.resourceVersion;
    if (rv) this.resourceVersion = rv;
  }

  /** Full list: replaces the cache, emitting add/update/delete for the differences. */
  private async relist(): Promise<void> {
    const list = await this.client.listAll<T>(this.opts.path, {
      labelSelector: this.opts.labelSelector,
      fieldSelector: this.opts.fieldSelector,
    });
    const seen = new Set<string>();
    for (const item of list.items) {
      const obj = this.transform(item);
      const k = objectKey(obj);
      seen.add(k);
      const old = this.cache.get(k);
      this.store(k, obj, old);
      if (!old) this.emit("add", obj);
      else if (old.metadata.resourceVersion !== obj.metadata.resourceVersion) this.emit("update", obj, old);
    }
    for (const [k, old] of this.cache) {
      if (!seen.has(k)) {
        this.remove(k, old);
        this.emit("delete", old);
      }
    }
    this.resourceVersion = list.metadata.resourceVersion ?? "";
    this.syncedOnce = true;
    for (const w of this.syncWaiters.splice(0)) w();
    this.emit("synced");
  }
}

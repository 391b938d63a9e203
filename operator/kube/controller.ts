// A generic controller in controller-runtime's shape: informers on the primary kind (`for`),
// the kinds it creates (`owns`, mapped to their controlling owner) and anything else it reads
// (`watches`), feeding one de-duplicating, rate-limited work queue of `namespace/name` keys;
// `workers` loops hand each key to the Reconciler, one reconcile per key at a time, and act on
// its Result (see result.ts). It knows nothing about WorkerPools.
import type { Logger } from "pino";
import type { Resource } from "../apis/coordinates.ts";
import { resourcePath } from "../apis/coordinates.ts";
import type { OperatorMetrics } from "../metrics.ts";
import { NotLeaderError, apiCode, apiMessage, type KubeClient, type KubeObject } from "./client.ts";
import { passes, type EventFilter } from "./filters.ts";
import { Informer } from "./informer.ts";
import { objectKey } from "./keys.ts";
import { Result } from "./result.ts";
import { WorkQueue } from "./workqueue.ts";

export interface Reconciler {
  /** Brings one object (by `namespace/name`) to its desired state; idempotent, level-triggered. */
  reconcile(key: string): Promise<Result>;
}

export interface ControllerOptions {
  /** Names the controller in logs. */
  name: string;
  client: KubeClient;
  /** Namespaces to watch; undefined or empty = all. */
  namespaces?: string[];
  log: Logger;
  metrics: OperatorMetrics;
  /** Concurrent reconciles (different keys). Default 4. */
  workers?: number;
  /** Informer resync period (from the cache; relists happen only after a watch error). Default 10 min. */
  relistMs?: number;
}

export interface WatchOptions<T extends KubeObject> {
  /** Server-side label selector (scopes the cache to our objects). */
  labelSelector?: string;
  /** All must pass for an event to enqueue. */
  filters?: EventFilter<T>[];
  /** What the cache keeps of each object (default: all but metadata.managedFields). */
  transform?: (obj: T) => T;
  /** Index the cache by this value (ObjectCache.indexed). */
  indexBy?: (obj: T) => string | undefined;
}

/** A read-only view over one kind's informers (one per namespace watched). */
export class ObjectCache<T extends KubeObject> {
  private readonly informers: Informer<T>[];

  constructor(informers: Informer<T>[]) {
    this.informers = informers;
  }

  get(namespace: string, name: string): T | undefined {
    for (const inf of this.informers) {
      const obj = inf.get(namespace, name);
      if (obj) return obj;
    }
    return undefined;
  }

  list(namespace?: string): T[] {
    return this.informers.flatMap((i) => i.list(namespace));
  }

  /** The objects whose WatchOptions.indexBy value is `value`. */
  indexed(value: string): T[] {
    return this.informers.flatMap((i) => i.indexed(value));
  }

  *keys(): Generator<string> {
    for (const inf of this.informers) yield* inf.keys();
  }
}

export class Controller {
  readonly log: Logger;
  private readonly opts: ControllerOptions;
  private readonly queue: WorkQueue;
  private readonly informers: Informer<KubeObject>[] = [];
  private reconciler: Reconciler | undefined;
  private primary: ObjectCache<KubeObject> | undefined;
  private running: Promise<void> | undefined;

  constructor(opts: ControllerOptions) {
    this.opts = opts;
    this.log = opts.log.child({ controller: opts.name });
    this.queue = new WorkQueue({
      onDepth: (d) => opts.metrics.queueDepth.set(d),
      onAdd: () => opts.metrics.queueAdds.inc(),
    });
  }

  /** The primary kind: its events enqueue its own key; every (re)list and resync enqueues every object. */
  for<T extends KubeObject>(resource: Resource, opts: WatchOptions<T> = {}): ObjectCache<T> {
    const cache = this.watch<T>(
      resource,
      opts,
      (obj) => objectKey(obj),
      () => this.enqueueAll(),
    );
    this.primary = cache as unknown as ObjectCache<KubeObject>;
    return cache;
  }

  /** A kind the controller creates: its events enqueue the key of its controlling `owner`. */
  owns<T extends KubeObject>(
    resource: Resource,
    owner: Resource,
    opts: WatchOptions<T> = {},
  ): ObjectCache<T> {
    const group = owner.group;
    return this.watch<T>(resource, opts, (obj) => {
      const ref = obj.metadata.ownerReferences?.find(
        (r) => r.controller && r.kind === owner.kind && r.apiVersion.split("/")[0] === group,
      );
      return ref ? `${obj.metadata.namespace}/${ref.name}` : undefined;
    });
  }

  /** Any other kind the reconciler reads: `toKey` maps an event to a key (none: cache only). */
  watches<T extends KubeObject>(
    resource: Resource,
    opts: WatchOptions<T> & { toKey?: (obj: T) => string | undefined } = {},
  ): ObjectCache<T> {
    return this.watch<T>(resource, opts, opts.toKey);
  }

  private namespaces(): (string | undefined)[] {
    const ns = this.opts.namespaces;
    return ns && ns.length > 0 ? ns : [undefined];
  }

  private watch<T extends KubeObject>(
    resource: Resource,
    opts: WatchOptions<T>,
    toKey: ((obj: T) => string | undefined) | undefined,
    onSynced?: () => void,
  ): ObjectCache<T> {
    const filters = opts.filters ?? [];
    const informers = this.namespaces().map((namespace) => {
      const inf = new Informer<T>(this.opts.client, {
        path: resourcePath(resource, { namespace }),
        labelSelector: opts.labelSelector,
        log: this.log,
        metrics: this.opts.metrics,
        relistMs: this.opts.relistMs,
        transform: opts.transform,
        indexBy: opts.indexBy,
      });
      if (toKey) {
        const enqueue = (obj: T) => {
          const key = toKey(obj);
          if (key) this.enqueue(key);
        };
        inf.on({
          add: (obj) => passes(filters, "create", obj) && enqueue(obj),
          update: (obj, old) => passes(filters, "update", obj, old) && enqueue(obj),
          delete: (obj) => passes(filters, "delete", obj) && enqueue(obj),
        });
      }
      if (onSynced) inf.on({ synced: onSynced });
      this.informers.push(inf as unknown as Informer<KubeObject>);
      return inf;
    });
    return new ObjectCache(informers);
  }

  /** Sets the reconciler (before start). */
  complete(reconciler: Reconciler): this {
    this.reconciler = reconciler;
    return this;
  }

  enqueue(key: string): void {
    this.queue.add(key);
  }

  /** Every primary object: after a list or resync, and when leadership is gained. */
  enqueueAll(): void {
    for (const key of this.primary?.keys() ?? []) this.enqueue(key);
  }

  /** Starts the informers, waits for their caches, then runs the workers. */
  async start(): Promise<void> {
    for (const inf of this.informers) inf.start();
    await Promise.all(this.informers.map((i) => i.waitForSync()));
    this.log.info({ objects: this.primary?.list().length ?? 0 }, "caches synced");
    this.running = Promise.all(Array.from({ length: this.opts.workers ?? 4 }, () => this.work())).then(
      () => undefined,
    );
  }

  async stop(): Promise<void> {
    this.queue.shutDown();
    await Promise.all(this.informers.map((i) => i.stop()));
    await this.running;
  }

  private async work(): Promise<void> {
    for (;;) {
      const key = await this.queue.get();
      if (key === undefined) return;
      try {
        const result = await this.reconcileCounted(key);
        this.queue.forget(key);
        if (result.requeueAfterMs !== undefined) this.queue.addAfter(key, result.requeueAfterMs);
      } catch (err) {
        const retryInMs = this.queue.addRateLimited(key);
        this.opts.metrics.queueRetries.inc();
        this.log.warn(
          { key, err: apiMessage(err), code: apiCode(err), retryInMs },
          "reconcile failed; retrying",
        );
      } finally {
        this.queue.done(key);
      }
    }
  }

  private async reconcileCounted(key: string): Promise<Result> {
    const m = this.opts.metrics;
    const end = m.reconcileDuration.startTimer();
    try {
      const result = await this.reconciler!.reconcile(key);
      m.reconciles.inc({ result: Result.isDone(result) ? "success" : "requeue" });
      return result;
    } catch (err) {
      if (err instanceof NotLeaderError) {
        m.reconciles.inc({ result: "not-leader" });
        return Result.done();
      }
      m.reconciles.inc({ result: "error" });
      m.reconcileErrors.inc({ concern: "reconcile", reason: String(apiCode(err) ?? "error") });
      throw err;
    } finally {
      end();
    }
  }
}

// "Read your own writes" over an informer cache. After the operator writes an object, its cache
// holds the old version until the watch delivers the new one; a reconcile in between would see
// stale state and write again (a duplicate write, a duplicate Event). The overlay remembers the
// written version until the cache shows that resource version (events arrive in order, so
// anything after it is newer) or a timeout passes (a relist may skip it).
import type { KubeObject } from "../kube/client.ts";
import { stripManagedFields } from "../kube/informer.ts";

export class WriteOverlay<T extends KubeObject> {
  private readonly written = new Map<string, { obj: T; at: number }>();
  private readonly ttlMs: number;
  private sweptAt = Date.now();

  constructor(ttlMs = 30_000) {
    this.ttlMs = ttlMs;
  }

  /** Remembers a write (without managedFields, as the caches keep objects); drops expired ones. */
  set(key: string, obj: T): void {
    const now = Date.now();
    // Entries are otherwise dropped only when read: a pool that is not reconciled again (idle)
    // would keep its last written objects for good.
    if (now - this.sweptAt > this.ttlMs) {
      this.sweptAt = now;
      for (const [k, w] of this.written) if (now - w.at > this.ttlMs) this.written.delete(k);
    }
    this.written.set(key, { obj: stripManagedFields(obj), at: now });
  }

  /** How many writes are remembered (tests). */
  get size(): number {
    return this.written.size;
  }

  /** The freshest known version: the cache's once it caught up with the write, else the write. */
  get(key: string, cached: T | undefined): T | undefined {
    const w = this.written.get(key);
    if (!w) return cached;
    if (
      Date.now() - w.at > this.ttlMs ||
      (cached && caughtUp(cached.metadata.resourceVersion, w.obj.metadata.resourceVersion))
    ) {
      this.written.delete(key);
      return cached;
    }
    return w.obj;
  }

  /** The object was deleted (by us): forget it. */
  delete(key: string): void {
    this.written.delete(key);
  }
}

/**
 * The cache holds the written version or a later one. Resource versions are opaque, but every
 * API server backed by etcd 3 issues increasing integers: when both are integers, a larger one
 * is later (this only shortens how long the overlay is kept).
 */
function caughtUp(cachedRv: string | undefined, writtenRv: string | undefined): boolean {
  if (cachedRv === writtenRv) return true;
  if (cachedRv && writtenRv && /^\d+$/.test(cachedRv) && /^\d+$/.test(writtenRv))
    return BigInt(cachedRv) > BigInt(writtenRv);
  return false;
}

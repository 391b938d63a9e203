// Values in numbered slots that are reused: add() returns the slot, remove() frees it for the next.
// Why not a Map keyed by job id: a long-lived Map that gains and loses an entry per job rehashes
// its table every few operations, and V8 allocates the new table where the old one lives, in the
// old generation. At 10,000 jobs/s that was ~3 MiB/s of old-generation garbage, kept until the
// next full GC (docs/performance.md, worker step 11). Slots allocate nothing once warm.

export class SlotArray<T> {
  private readonly items: (T | undefined)[] = [];
  private readonly free: number[] = [];
  private count = 0;

  get size(): number {
    return this.count;
  }

  /** Stores `value`; its slot, for remove(). */
  add(value: T): number {
    const slot = this.free.pop() ?? this.items.length;
    this.items[slot] = value;
    this.count++;
    return slot;
  }

  /** Frees `slot`; a slot already free stays as it is. */
  remove(slot: number): void {
    if (this.items[slot] === undefined) return;
    this.items[slot] = undefined;
    this.free.push(slot);
    this.count--;
  }

  /** The first value `match` accepts (a scan: for rare lookups, not the per-job path). */
  find(match: (value: T) => boolean): T | undefined {
    for (const v of this.items) if (v !== undefined && match(v)) return v;
    return undefined;
  }

  /** The values held now, in slot order. */
  values(): T[] {
    return this.items.filter((v): v is T => v !== undefined);
  }
}

// The leases the heartbeat thread renews, and the worker's busy/idle report, in shared memory.
// Why not messages: a postMessage per job (hold, drop, status) costs a structured clone and a
// wake-up of the thread, which at concurrency 1 was most of the worker's per-job overhead. And a
// lease written here is visible to the thread at its next beat even when the main thread then
// blocks its event loop (a CPU-bound handler), where a message would wait for the loop.
//
// The main thread is the only writer; the thread reads the whole table at the start of each beat.
// Each entry is guarded by a sequence word (a seqlock): odd while the main thread writes it, bumped
// to the next even number after, so a reader that sees the same even word before and after
// reading the entry has read it whole. An entry that does not fit (table full, id or token too
// long) is not written: hold() returns NO_SLOT and the caller sends it as a message instead, so no
// lease is ever silently left unrenewed.

/** Job ids are at most 200 characters (assertJobId); longer ones go by message. */
export const MAX_ID_UNITS = 200;
/** Fencing tokens are INCR counters. */
export const MAX_TOKEN_UNITS = 32;

const ENTRY_INTS = 4; // seq, held, id length, token length
const ENTRY_UNITS = MAX_ID_UNITS + MAX_TOKEN_UNITS;
const STATUS_INTS = 4; // busy, slots, draining, median job ms
/** A reader gives up on an entry being written after this many tries (and keeps what it read before). */
const READ_TRIES = 64;

/** hold()'s answer for a lease the table cannot take. */
export const NO_SLOT = -1;

export interface TableLease {
  id: string;
  token: string;
  renewUntil: number;
}

/** Table size for a worker of this concurrency: a job being settled and a newly claimed one may overlap. */
export function leaseTableSlots(concurrency: number): number {
  return Math.max(1, concurrency) * 2 + 8;
}

export class LeaseTable {
  readonly slots: number;
  readonly buffer: SharedArrayBuffer;
  private readonly status: Int32Array;
  private readonly ints: Int32Array;
  private readonly until: Float64Array;
  private readonly units: Uint16Array;
  // Main-thread (writer) bookkeeping: the slots no lease holds.
  private readonly free: number[] = [];
  // Reader bookkeeping: the last whole read of each entry, by its sequence word.
  private readonly seen: { seq: number; lease: TableLease | undefined }[] = [];

  /** A new table (`slots` entries), or a view of one made elsewhere (`buffer`). */
  constructor(slots: number, buffer?: SharedArrayBuffer) {
    this.slots = slots;
    const untilOffset = (STATUS_INTS + slots * ENTRY_INTS) * 4; // a multiple of 8 (STATUS_INTS and ENTRY_INTS are even)
    const unitsOffset = untilOffset + slots * 8;
    this.buffer = buffer ?? new SharedArrayBuffer(unitsOffset + slots * ENTRY_UNITS * 2);
    this.status = new Int32Array(this.buffer, 0, STATUS_INTS);
    this.ints = new Int32Array(this.buffer, STATUS_INTS * 4, slots * ENTRY_INTS);
    this.until = new Float64Array(this.buffer, untilOffset, slots);
    this.units = new Uint16Array(this.buffer, unitsOffset, slots * ENTRY_UNITS);
    for (let i = slots - 1; i >= 0; i--) this.free.push(i);
    for (let i = 0; i < slots; i++) this.seen.push({ seq: 0, lease: undefined });
  }

  // ---- writer (main thread) ----

  /**
   * Hold the lease of job `id`: the entry's slot, for drop(). NO_SLOT when it does not fit (table
   * full, id or token too long): the caller must pass it on another way. The caller keeps the
   * slot (no id → slot map here: see slotArray.ts for why).
   */
  hold(id: string, token: string, renewUntil: number): number {
    if (id.length > MAX_ID_UNITS || token.length > MAX_TOKEN_UNITS) return NO_SLOT;
    const slot = this.free.pop();
    if (slot === undefined) return NO_SLOT;
    const base = slot * ENTRY_INTS;
    Atomics.add(this.ints, base, 1); // odd: being written
    const u = slot * ENTRY_UNITS;
    for (let i = 0; i < id.length; i++) this.units[u + i] = id.charCodeAt(i);
    for (let i = 0; i < token.length; i++) this.units[u + MAX_ID_UNITS + i] = token.charCodeAt(i);
    this.until[slot] = renewUntil;
    this.ints[base + 1] = 1;
    this.ints[base + 2] = id.length;
    this.ints[base + 3] = token.length;
    Atomics.add(this.ints, base, 1); // even: whole
    return slot;
  }

  /** Drop the lease hold() put in `slot`. Once per hold: the slot may hold another job's lease after. */
  drop(slot: number): void {
    const base = slot * ENTRY_INTS;
    if (slot < 0 || slot >= this.slots || this.ints[base + 1] === 0) return;
    Atomics.add(this.ints, base, 1);
    this.ints[base + 1] = 0;
    Atomics.add(this.ints, base, 1);
    this.free.push(slot);
  }

  setStatus(busy: number, slots: number, draining: boolean): void {
    Atomics.store(this.status, 0, busy);
    Atomics.store(this.status, 1, slots);
    Atomics.store(this.status, 2, draining ? 1 : 0);
  }

  /** The median duration of recent completed jobs (jobDurations.ts), for the heartbeat's report. */
  setJobP50(ms: number): void {
    Atomics.store(this.status, 3, Math.min(ms, 2 ** 31 - 1));
  }

  // ---- reader (heartbeat thread) ----

  readStatus(): { busy: number; slots: number; draining: boolean; jobP50Ms: number } {
    return {
      busy: Atomics.load(this.status, 0),
      slots: Atomics.load(this.status, 1),
      draining: Atomics.load(this.status, 2) === 1,
      jobP50Ms: Atomics.load(this.status, 3),
    };
  }

  /** Every held lease. An entry unchanged since the last read is not decoded again. */
  read(): TableLease[] {
    const out: TableLease[] = [];
    for (let slot = 0; slot < this.slots; slot++) {
      const lease = this.readEntry(slot);
      if (lease) out.push(lease);
    }
    return out;
  }

  private readEntry(slot: number): TableLease | undefined {
    const base = slot * ENTRY_INTS;
    const seen = this.seen[slot]!;
    for (let tries = 0; tries < READ_TRIES; tries++) {
      const seq = Atomics.load(this.ints, base);
      if (seq === seen.seq) return seen.lease;
      if ((seq & 1) !== 0) continue; // being written
      let lease: TableLease | undefined;
      if (this.ints[base + 1] === 1) {
        const idLen = Math.min(this.ints[base + 2]!, MAX_ID_UNITS);
        const tokenLen = Math.min(this.ints[base + 3]!, MAX_TOKEN_UNITS);
        const u = slot * ENTRY_UNITS;
        lease = {
          id: String.fromCharCode(...this.units.subarray(u, u + idLen)),
          token: String.fromCharCode(...this.units.subarray(u + MAX_ID_UNITS, u + MAX_ID_UNITS + tokenLen)),
          renewUntil: this.until[slot]!,
        };
      }
      if (Atomics.load(this.ints, base) !== seq) continue; // overwritten while read
      seen.seq = seq;
      seen.lease = lease;
      return lease;
    }
    // The writer is mid-write every time we looked (it was paused): keep what we read before. At
    // worst that renews a lease just dropped, which the renewal script refuses by its token.
    return seen.lease;
  }
}

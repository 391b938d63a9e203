// Batched complete-and-claim: the completions that finish in the same turn of the event loop
// go to Redis in one settle_jobs call, which also claims for the slots they free (River's batch
// completer, BullMQ's moveToFinished with fetch-next — for many jobs at once). A batch closes at
// the next setImmediate — once the callbacks that are ready now have run (the handlers a claim
// reply started), so nothing waits for a timer — or at once when every running job is in it
// (nothing else could join: a lone job at concurrency 1 skips even the setImmediate).
// Two calls in flight: a large batch sent while no other call is out goes as two halves, the
// second one turn of the event loop later, so Redis runs one half while the worker runs the jobs
// the other half claimed (docs/performance.md, "Two settle calls in flight").
import type { ClaimedJob, Consumer, Lease, Settlement, SettleOutcome } from "../queue/index.ts";

/** One job's share of a batch: its own outcome and the claimed jobs it starts when it ends. */
export interface BatchedSettle {
  outcome: SettleOutcome;
  jobs: ClaimedJob[];
}

/** What the slot loop lends the batcher: how many jobs n completions may claim, and the reservation. */
export interface BatchSlots {
  /** How many jobs the completion of `n` running jobs may claim now (0: none, e.g. while draining). */
  forCompletions(n: number): number;
  /**
   * Hold `n` free slots for a call in flight; `claiming`: it claims jobs (a drain waits for its
   * reply, so what it claimed is not abandoned). Returns the release.
   */
  reserve(n: number, claiming: boolean): () => void;
  /** Jobs running now, those waiting to be settled included. */
  running(): number;
}

interface Pending {
  job: Lease;
  settlement: Settlement;
  resolve: (r: BatchedSettle) => void;
  reject: (err: unknown) => void;
}

/**
 * The smallest batch split in two: halves of 4 already gained at concurrency 8; smaller ones are
 * not measured (docs/performance.md, worker step 8).
 */
export const SPLIT_MIN = 8;

export class SettleBatcher {
  private pending: Pending[] = [];
  /** settle_jobs calls sent and not answered yet. */
  private inFlight = 0;
  private scheduled: NodeJS.Immediate | undefined;
  private readonly consumer: Consumer;
  private readonly slots: BatchSlots;
  /** Bound once: setImmediate with a fresh closure per tick would allocate for nothing. */
  private readonly flushNow = () => void this.flush();

  constructor(consumer: Consumer, slots: BatchSlots) {
    this.consumer = consumer;
    this.slots = slots;
  }

  /** Settle `job` with the others finishing in this tick; resolves with its own outcome. */
  settle(job: Lease, settlement: Settlement): Promise<BatchedSettle> {
    return new Promise((resolve, reject) => {
      this.pending.push({ job, settlement, resolve, reject });
      if (this.pending.length >= this.slots.running()) void this.flush();
      else this.scheduled ??= setImmediate(this.flushNow);
    });
  }

  private async flush(): Promise<void> {
    if (this.scheduled) clearImmediate(this.scheduled);
    this.scheduled = undefined;
    const all = this.pending;
    this.pending = [];
    // One batch goes to one place: settlements to different next queues (not made by the
    // worker, which has one), or checked against different contracts of it, are sent apart.
    for (const batch of groupByDestination(all)) {
      if (this.inFlight > 0 || batch.length < SPLIT_MIN) {
        await this.send(batch);
        continue;
      }
      const half = batch.length >> 1;
      const first = this.send(batch.slice(0, half));
      // A write of its own, after Redis has started on the first: sent together, Redis would run
      // both before answering either.
      await new Promise<void>((resolve) => setImmediate(resolve));
      await Promise.all([first, this.send(batch.slice(half))]);
    }
  }

  private async send(batch: Pending[]): Promise<void> {
    this.inFlight++;
    const claim = this.slots.forCompletions(batch.length);
    // The finishing jobs' own slots are still counted as running; only the rest is reserved.
    const release = this.slots.reserve(Math.max(0, claim - batch.length), claim > 0);
    try {
      const r = await this.consumer.settleMany(batch, claim);
      // Claimed jobs take the freed slots one each, in order; any beyond go with the last.
      for (let i = 0; i < batch.length; i++) {
        const jobs = i < batch.length - 1 ? r.jobs.slice(i, i + 1) : r.jobs.slice(i);
        batch[i]!.resolve({ outcome: r.outcomes[i]!, jobs });
      }
    } catch (err) {
      for (const p of batch) p.reject(err);
    } finally {
      this.inFlight--;
      release();
    }
  }
}

function groupByDestination(all: Pending[]): Pending[][] {
  const first = destination(all[0]);
  if (all.every((p) => destination(p) === first)) return [all];
  const groups = new Map<string | undefined, Pending[]>();
  for (const p of all) {
    const key = destination(p);
    const g = groups.get(key);
    if (g) g.push(p);
    else groups.set(key, [p]);
  }
  return [...groups.values()];
}

/** A settle call's place: the next queue and the hash its data was checked against (one per call). */
function destination(p: Pending | undefined): string | undefined {
  const next = p?.settlement.next;
  return next && `${next.queue}\u0000${next.contract ?? ""}`;
}

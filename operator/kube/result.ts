// What a reconcile asks of its work queue when it returns — the meaning, written once:
//   Result.done()             the object is where it should be; nothing to do until the next
//                             event (a watch event, a periodic relist, a poll that enqueues).
//   Result.requeueAfter(ms)   re-check after `ms` even without an event (a cooldown ending, a
//                             problem worth retrying slowly). An earlier pending re-check wins.
//   a thrown error            a transient failure: retry soon, with per-key exponential backoff
//                             under the queue's overall rate limit; success resets the backoff.
// A NotLeaderError (a write refused on a standby) is neither: the new leader re-checks every key.

export interface Result {
  /** Re-check the key after this many ms; absent = only on the next event. */
  readonly requeueAfterMs?: number;
}

export const Result = {
  done(): Result {
    return {};
  },

  requeueAfter(ms: number): Result {
    return { requeueAfterMs: Math.max(0, ms) };
  },

  /** The result that re-checks first (steps of one reconcile each ask; the earliest holds). */
  sooner(a: Result, b: Result): Result {
    if (a.requeueAfterMs === undefined) return b;
    if (b.requeueAfterMs === undefined) return a;
    return a.requeueAfterMs <= b.requeueAfterMs ? a : b;
  },

  isDone(r: Result): boolean {
    return r.requeueAfterMs === undefined;
  },
};

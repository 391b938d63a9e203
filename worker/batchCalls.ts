// Batch calls (docs/batches.md): each claimed job still runs its own execution (execution.ts:
// lease, attempts, contract check, settle), but its handler call joins a batch — up to `size`
// jobs in one handler.batch() call, made once `minSize` are waiting or `waitMs` passed since the
// first, with at most `concurrency` calls at once. Each job's promise gets its own outcome.
import type { Logger } from "pino";
import type { BatchConfig } from "./config.ts";
import { JobTimeoutError } from "./errors.ts";
import { HandlerError, type Handler, type HandlerContext, type JobView } from "./handlers/index.ts";

/** The job as the batch sees it: enough to time it out, and whether it was aborted meanwhile. */
export interface BatchedJob {
  timeoutMs: number;
  aborted: boolean;
  abortReason?: unknown;
}

interface Member<J extends BatchedJob> {
  job: J;
  view: JobView;
  ctx: HandlerContext;
  /** performance.now() when it joined. */
  at: number;
  resolve: (value: unknown) => void;
  reject: (err: unknown) => void;
}

export type BatchFn = NonNullable<Handler["batch"]>;

export class BatchCalls<J extends BatchedJob> {
  private readonly fn: BatchFn;
  private readonly config: BatchConfig;
  private readonly concurrency: number;
  private readonly killGraceMs: number;
  private readonly log: Logger;
  /** A call's timeout passed: abort each of its jobs (their kill grace, then a timeout failure). */
  private readonly timedOut: (job: J, reason: JobTimeoutError) => void;
  private pending: Member<J>[] = [];
  private calls = 0;
  private scheduled = false;
  private waitTimer: NodeJS.Timeout | undefined;
  /** Draining: no job waits for others any more. */
  private flushing = false;
  /** Told each call's job count as it starts (the jobs-per-call histogram). */
  private readonly onCall: (jobs: number) => void;

  constructor(opts: {
    fn: BatchFn;
    config: BatchConfig;
    concurrency: number;
    killGraceMs: number;
    log: Logger;
    timedOut: (job: J, reason: JobTimeoutError) => void;
    onCall?: (jobs: number) => void;
  }) {
    this.onCall = opts.onCall ?? (() => {});
    this.fn = opts.fn;
    this.config = opts.config;
    this.concurrency = opts.concurrency;
    this.killGraceMs = opts.killGraceMs;
    this.log = opts.log;
    this.timedOut = opts.timedOut;
  }

  /** The job's handler outcome: its result, or its error (the call's error when the call threw). */
  run(job: J, view: JobView, ctx: HandlerContext): Promise<unknown> {
    return new Promise((resolve, reject) => {
      this.pending.push({ job, view, ctx, at: performance.now(), resolve, reject });
      // A full batch goes at once; otherwise the jobs of the same claim, which start one after
      // another within this turn of the event loop, are gathered first.
      if (this.pending.length >= this.config.size) this.dispatch();
      else this.schedule();
    });
  }

  /** The worker drains: jobs claimed go in the calls they can make now, without waiting for more. */
  flush(): void {
    this.flushing = true;
    this.dispatch();
  }

  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      this.dispatch();
    });
  }

  private dispatch(): void {
    clearTimeout(this.waitTimer);
    this.waitTimer = undefined;
    // Cancelled, handed back or lease lost while waiting: not sent, and not counted toward minSize.
    if (this.pending.some((m) => m.job.aborted))
      this.pending = this.pending.filter((m) => {
        if (m.job.aborted) m.reject(m.job.abortReason);
        return !m.job.aborted;
      });
    const { size, minSize, waitMs } = this.config;
    while (this.calls < this.concurrency && this.pending.length > 0) {
      const waited = performance.now() - this.pending[0]!.at;
      if (this.pending.length < minSize && waited < waitMs && !this.flushing) {
        this.waitTimer = setTimeout(() => this.dispatch(), Math.ceil(waitMs - waited));
        return;
      }
      void this.call(this.pending.splice(0, size));
    }
  }

  private async call(members: Member<J>[]): Promise<void> {
    this.calls++;
    this.onCall(members.length);
    // The call's slot frees when it ends, or once it timed out and the kill grace passed: a hung
    // call is given up on (its jobs fail as timed out) and must not hold a slot for ever.
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      this.calls--;
      if (this.pending.length > 0) this.schedule();
    };
    const controller = new AbortController();
    const timeoutMs = Math.min(...members.map((m) => m.job.timeoutMs));
    let grace: NodeJS.Timeout | undefined;
    const timer = setTimeout(() => {
      const reason = new JobTimeoutError(
        `batch call of ${members.length} job(s) exceeded its timeout of ${timeoutMs}ms (the shortest of its jobs' timeouts)`,
      );
      controller.abort(reason);
      for (const m of members) this.timedOut(m.job, reason);
      grace = setTimeout(release, this.killGraceMs);
    }, timeoutMs);
    let answer: unknown;
    try {
      answer = await this.fn(
        members.map((m) => m.view),
        { signal: controller.signal, log: this.log, contexts: members.map((m) => m.ctx) },
      );
    } catch (err) {
      // A thrown call fails every job of it; each is retried (or not) on its own.
      for (const m of members) m.reject(err);
      return;
    } finally {
      clearTimeout(timer);
      clearTimeout(grace);
      release();
    }
    if (!Array.isArray(answer) || answer.length !== members.length) {
      const got = Array.isArray(answer) ? `${answer.length} outcome(s)` : `a ${describe(answer)}`;
      const err = new HandlerError(
        `batch handler answered ${got} for ${members.length} job(s): it must return an array with one outcome per job, in order`,
        { retryable: true },
      );
      for (const m of members) m.reject(err);
      return;
    }
    for (let i = 0; i < members.length; i++) {
      const outcome: unknown = answer[i];
      if (outcome instanceof Error) members[i]!.reject(outcome);
      else members[i]!.resolve(outcome);
    }
  }
}

function describe(value: unknown): string {
  if (value === null) return "null";
  return typeof value === "object" ? "non-array object" : typeof value;
}

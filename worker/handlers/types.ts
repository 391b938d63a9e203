// What a stage handler sees, whatever its kind.
import type { Logger } from "pino";

/** The job as handed to a handler: a fresh object per execution. */
export interface JobView {
  id: string;
  queue: string;
  data: unknown;
  /** 1-based attempt number. */
  attempt: number;
  maxAttempts: number;
  /** Unique per start of this job (the lease's fencing token). */
  executionId: string;
  createdAt: number;
}

/**
 * The worker's logger for this job (`ctx.log.info(…)`: stdout), also callable: `ctx.log("text")`
 * appends a line to the job's own log (kept in Redis, capped; `conveyor job <id>` shows it).
 */
export type JobLogger = Logger & ((message: string) => void);

export interface HandlerContext {
  /** Aborted on timeout, hand-back at the drain deadline, or lease loss. `signal.reason` says which. */
  signal: AbortSignal;
  log: JobLogger;
  /** Report progress (0..1) with an optional message. */
  progress(fraction: number, message?: string): void;
  /**
   * The handler callback of this execution, for handlers outside this process (http, command):
   * they report progress and log lines through it. See worker/handlerCallback.ts.
   */
  callback?: { url: string; token: string };
}

export interface Handler {
  readonly kind: string;
  run(job: JobView, ctx: HandlerContext): Promise<unknown>;
  close?(): Promise<void>;
}

export type HandlerSpec =
  { kind: "module"; path: string } | { kind: "http"; url: string } | { kind: "command"; argv: string[] };

/**
 * Failure classification. A handler marks an error final with `retryable: false` (any error
 * object with that property), so bad input is dead-lettered at once instead of burning attempts.
 */
export class HandlerError extends Error {
  override name = "HandlerError";
  readonly retryable: boolean;
  constructor(message: string, opts: { retryable: boolean; cause?: unknown }) {
    super(message, { cause: opts.cause });
    this.retryable = opts.retryable;
  }
}

export function isRetryable(err: unknown): boolean {
  return !(typeof err === "object" && err !== null && (err as { retryable?: unknown }).retryable === false);
}

/**
 * A failure of something the handler depends on (a database, an LLM API), marked by the
 * handler with `dependencyFailure: true`. The job is deferred without an attempt and, after
 * several in a row, the worker's circuit breaker pauses claiming.
 */
/** A handler outside the process (http, command) marks a dependency failure this way. */
export function dependencyFailure(err: HandlerError): HandlerError {
  return Object.assign(err, { dependencyFailure: true });
}

export function isDependencyFailure(err: unknown): boolean {
  return (
    typeof err === "object" &&
    err !== null &&
    (err as { dependencyFailure?: unknown }).dependencyFailure === true
  );
}

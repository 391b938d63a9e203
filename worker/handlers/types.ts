// What a stage handler sees, whatever its kind.
import type { Logger } from "pino";
import type { AttemptError, ParentOutcome } from "../../queue/index.ts";

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
  /** The job's task name; absent when the job names none. */
  task?: string;
  /**
   * The stage's earlier failed attempts, oldest first (the last 5, each at most 2 KiB): what went
   * wrong before — an exception, an invalid result and its violations (`details`), a timeout,
   * a hand-back, a stall. [] on a first attempt.
   */
  previousErrors: AttemptError[];
  /** A flow job's parents' outcomes by key, `{id, result}`, `{id, ref, bytes}` (a large result: ctx.parentResult) or `{id, error}` (docs/flows.md); absent otherwise. */
  parents?: Record<string, ParentOutcome>;
}

/**
 * The worker's logger for this job (`ctx.log.info(…)`: stdout), also callable: `ctx.log("text")`
 * appends a line to the job's own log (kept in Redis, capped; `conveyor job <id>` shows it).
 */
export type JobLogger = Logger & ((message: string) => void);

export interface HandlerContext {
  /** The job's earlier failed attempts (JobView.previousErrors). */
  previousErrors: AttemptError[];
  /** A flow job's parents' outcomes by key (JobView.parents); absent for a job without parents. */
  parents?: Record<string, ParentOutcome>;
  /**
   * Parent `key`'s result: the inline one, or a large one fetched from Redis by its reference
   * (docs/flows.md, "Large results"). Rejects (ParentResultError) for a key that is not a parent,
   * a parent that ended with an error, or a result no longer kept.
   */
  parentResult(key: string): Promise<unknown>;
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
  /**
   * For a job with `uses`: per resource, the key id the claim granted it (docs/budgets.md). The
   * handler maps the id to a credential: on Kubernetes the file
   * `$CONVEYOR_RESOURCES_DIR/<resource>/<id>` the operator mounts from the pool's Secret.
   */
  resources: Readonly<Record<string, { key: string }>>;
  /**
   * Report what the job actually used so far, per resource and unit (totals, e.g.
   * `{openai: {tokens: 980}}`; `requests` too when it made more than one): the key's window is
   * corrected by the difference from what was reserved.
   */
  usage(used: Record<string, Record<string, number>>): void;
}

/** What a batch call gets besides its jobs (docs/batches.md). */
export interface BatchContext {
  /** Aborted when the call's timeout (the shortest of its jobs' timeouts) passes. */
  signal: AbortSignal;
  log: Logger;
  /** Per job, in the order of the jobs: its own ctx (progress, ctx.log lines, resources, signal). */
  contexts: HandlerContext[];
}

/**
 * A batch call's answer for one job: its result, or an Error that fails that job alone
 * (`retryable: false`: dead at once).
 */
export type BatchOutcome = unknown;

export interface Handler {
  readonly kind: string;
  /**
   * The task names this handler serves, when it knows them (a module's `tasks` export): a bounded
   * set, so the worker's job metrics carry them. Other kinds leave it out.
   */
  readonly tasks?: readonly string[];
  run(job: JobView, ctx: HandlerContext): Promise<unknown>;
  /**
   * Run several jobs in one call: one outcome per job, in order. A throw fails every job of the
   * call. Only kinds that can take batches have it.
   */
  batch?(jobs: JobView[], ctx: BatchContext): Promise<BatchOutcome[]>;
  close?(): Promise<void>;
}

export type { HandlerSpec } from "../../lib/workerContract.ts";

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

/** The longest foreign stack (a Python traceback) a job's error keeps: its last characters. */
export const MAX_FOREIGN_STACK_CHARS = 16 * 1024;
/** The longest foreign error message a job's error keeps. */
export const MAX_FOREIGN_MESSAGE_CHARS = 4000;

/**
 * A handler in another language (an http sidecar, a command, a Python process) reports a failure
 * as the JSON envelope `{"name", "message", "stack"}`, stack being its own traceback. This makes
 * it the HandlerError the job's stored error is read from: that name as its type, that message,
 * that stack (never the worker's), the stack cut to its last MAX_FOREIGN_STACK_CHARS characters
 * (the innermost frames and the exception line are at its end). `body` is the envelope or its
 * JSON text; null when it is not one (the caller reports the failure its own way). `kindLabel`
 * names the handler ("handler sidecar") in a stack the handler did not send.
 */
export function foreignError(
  body: unknown,
  kindLabel: string,
  opts: { retryable?: boolean } = {},
): HandlerError | null {
  let value = body;
  if (typeof value === "string") {
    try {
      value = JSON.parse(value);
    } catch {
      return null;
    }
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) return null;
  const { name, message, stack } = value as { name?: unknown; message?: unknown; stack?: unknown };
  if (typeof name !== "string" || name.trim() === "" || typeof message !== "string") return null;
  const type = name.trim().slice(0, 200);
  const text =
    message.length > MAX_FOREIGN_MESSAGE_CHARS ? `${message.slice(0, MAX_FOREIGN_MESSAGE_CHARS)}…` : message;
  const err = new HandlerError(text, { retryable: opts.retryable ?? true });
  err.name = type;
  err.stack =
    typeof stack === "string" && stack.trim() !== ""
      ? stack.length > MAX_FOREIGN_STACK_CHARS
        ? `…${stack.slice(-MAX_FOREIGN_STACK_CHARS)}`
        : stack
      : `${type}: ${text}\n    (raised in the ${kindLabel}, which sent no stack)`;
  return err;
}

/**
 * The process running the handler died under the job (a `python:` handler's interpreter crashed
 * or was killed): no outcome is written, the worker stops renewing the lease, and the sweeper
 * redelivers the job as a stall once it lapses — counted as one, dead-lettered past maxStalls,
 * as when a worker dies.
 */
export class HandlerStalledError extends HandlerError {
  override name = "HandlerStalledError";
  readonly stalled = true;
  constructor(message: string) {
    super(message, { retryable: true });
  }
}

export function isStalled(err: unknown): err is HandlerStalledError {
  return err instanceof HandlerStalledError;
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

/**
 * A provider refused for its rate limit (an HTTP 429): the key the job was granted for
 * `resource` (the job's only resource when left out) is sidelined for every worker for
 * `retryAfterMs`, and the job goes back to waiting without using an attempt.
 */
export class RateLimitedError extends Error {
  override name = "RateLimitedError";
  readonly rateLimited: { retryAfterMs: number; resource?: string };
  constructor(message: string, opts: { retryAfterMs?: number; resource?: string } = {}) {
    super(message);
    const retryAfterMs = opts.retryAfterMs ?? DEFAULT_RETRY_AFTER_MS;
    if (!(Number.isFinite(retryAfterMs) && retryAfterMs >= 0))
      throw new RangeError(`retryAfterMs must be a number ≥ 0, got ${retryAfterMs}`);
    this.rateLimited = { retryAfterMs, ...(opts.resource !== undefined ? { resource: opts.resource } : {}) };
  }
}

/** How long a key is sidelined when the provider gave no retry-after. */
export const DEFAULT_RETRY_AFTER_MS = 60_000;

/** The rate-limit mark of a thrown value (any object with `rateLimited: {retryAfterMs}`), or null. */
export function rateLimitOf(err: unknown): { retryAfterMs: number; resource?: string } | null {
  if (typeof err !== "object" || err === null) return null;
  const r = (err as { rateLimited?: unknown }).rateLimited;
  if (typeof r !== "object" || r === null) return null;
  const { retryAfterMs, resource } = r as { retryAfterMs?: unknown; resource?: unknown };
  return {
    retryAfterMs:
      typeof retryAfterMs === "number" && Number.isFinite(retryAfterMs) && retryAfterMs >= 0
        ? retryAfterMs
        : DEFAULT_RETRY_AFTER_MS,
    ...(typeof resource === "string" ? { resource } : {}),
  };
}

/** An HTTP Retry-After (seconds or an HTTP date) in ms, or undefined. */
export function parseRetryAfter(value: string | null | undefined, now = Date.now()): number | undefined {
  if (!value) return undefined;
  const v = value.trim();
  if (/^\d+(\.\d+)?$/.test(v)) return Math.round(Number(v) * 1000);
  const at = Date.parse(v);
  return Number.isFinite(at) ? Math.max(0, at - now) : undefined;
}

/** The environment variable that carries a resource's granted key id to a command handler. */
export function resourceEnvName(resource: string): string {
  return `CONVEYOR_RESOURCE_${resource.toUpperCase().replace(/[^A-Z0-9]/g, "_")}_KEY`;
}

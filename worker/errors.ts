// Errors the worker itself raises, and how any thrown value becomes a stored error.
import type { AttemptErrorKind, SerializedError } from "../queue/index.ts";

/** The job's own timeout elapsed: retryable, like any transient failure. */
export class JobTimeoutError extends Error {
  override name = "JobTimeoutError";
  readonly kind = "timeout";
}
/** The job was handed back at the drain deadline; another worker runs it. */
export class HandedBackError extends Error {
  override name = "HandedBackError";
}
/** The lease moved to another worker (this one stalled); any result here is fenced off. */
export class LeaseLostError extends Error {
  override name = "LeaseLostError";
}
/** The job was cancelled (`conveyor cancel`): the handler is aborted, its result refused. */
export class JobCancelledError extends Error {
  override name = "JobCancelledError";
  readonly retryable = false;
}
/** The job's data is not JSON: retrying cannot help. */
export class MalformedJobError extends Error {
  override name = "MalformedJobError";
  readonly retryable = false;
}

/**
 * How a failed attempt is recorded in the job's `errors` (queue/attemptErrors.ts): the error's
 * `kind` when it is `timeout` or `invalid-result` (a result the contract refused), else
 * `exception`; an invalid result's `details` (its violations) and `rejected` result (the JSON
 * text, or the value). Never throws.
 */
export function attemptFailureOf(err: unknown): {
  kind: AttemptErrorKind;
  details?: unknown[];
  rejected?: string;
} {
  const kind = read(() => (err as { kind?: unknown } | null)?.kind);
  if (kind === "timeout") return { kind };
  if (kind !== "invalid-result") return { kind: "exception" };
  const details = read(() => (err as { details?: unknown }).details);
  let rejected = read(() => (err as { rejected?: unknown }).rejected);
  if (rejected !== undefined && typeof rejected !== "string") {
    try {
      rejected = JSON.stringify(rejected);
    } catch {
      rejected = undefined;
    }
  }
  return {
    kind,
    ...(Array.isArray(details) ? { details } : {}),
    ...(typeof rejected === "string" ? { rejected } : {}),
  };
}

/**
 * Anything a handler throws — Errors, strings, undefined, objects — as a stored error. Never
 * throws itself, whatever it is given: a throwing `message`/`name`/`stack` getter, a throwing
 * `toString` or `toJSON`, a null-prototype object (no `toString` at all), a cycle, a Proxy.
 */
export function serializeError(err: unknown): SerializedError {
  try {
    if (err instanceof Error) {
      const code = read(() => (err as { code?: unknown }).code);
      const name = read(() => err.name);
      const message = read(() => err.message);
      const stack = read(() => err.stack);
      return {
        name: typeof name === "string" && name !== "" ? name : "Error",
        message:
          typeof message === "string"
            ? message
            : `(the error's message could not be read: ${describe(message)})`,
        stack: typeof stack === "string" ? stack : undefined,
        ...(typeof code === "string" ? { code } : {}),
      };
    }
    return {
      name: "NonErrorThrown",
      message: `handler threw a non-Error value: ${describe(err).slice(0, 1000)}`,
    };
  } catch {
    return { name: "NonErrorThrown", message: "handler threw a value that cannot be described" };
  }
}

const UNREADABLE = Symbol("unreadable");

/** A property read that may throw (a hostile getter, a Proxy trap). */
function read(get: () => unknown): unknown {
  try {
    return get();
  } catch {
    return UNREADABLE;
  }
}

/** Text for any value: JSON when it has some, else String(), else its type tag. */
function describe(value: unknown): string {
  if (value === UNREADABLE) return "its getter threw";
  if (typeof value === "string") return value;
  try {
    const json = JSON.stringify(value);
    if (typeof json === "string") return json;
  } catch {
    // a cycle, a BigInt, a throwing toJSON: fall through
  }
  try {
    return String(value);
  } catch {
    // no toString (null prototype) or a throwing one
  }
  try {
    return Object.prototype.toString.call(value);
  } catch {
    return typeof value;
  }
}

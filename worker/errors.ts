// Errors the worker itself raises, and how any thrown value becomes a stored error.
import type { SerializedError } from "../queue/index.ts";

/** The job's own timeout elapsed: retryable, like any transient failure. */
export class JobTimeoutError extends Error {
  override name = "JobTimeoutError";
}
/** The job was handed back at the drain deadline; another worker runs it. */
export class HandedBackError extends Error {
  override name = "HandedBackError";
}
/** The lease moved to another worker (this one stalled); any result here is fenced off. */
export class LeaseLostError extends Error {
  override name = "LeaseLostError";
}
/** The job's data is not JSON: retrying cannot help. */
export class MalformedJobError extends Error {
  override name = "MalformedJobError";
  readonly retryable = false;
}

/** Anything a handler throws — Errors, strings, undefined, objects — as a stored error. */
export function serializeError(err: unknown): SerializedError {
  if (err instanceof Error) {
    const code = (err as { code?: unknown }).code;
    return { name: err.name || "Error", message: err.message, stack: err.stack, ...(typeof code === "string" ? { code } : {}) };
  }
  let message: string;
  try {
    message = typeof err === "string" ? err : (JSON.stringify(err) ?? String(err));
  } catch {
    message = String(err);
  }
  return { name: "NonErrorThrown", message: `handler threw a non-Error value: ${message.slice(0, 1000)}` };
}

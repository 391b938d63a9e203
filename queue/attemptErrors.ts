// The failed attempts a job's next attempt is told about (`previousErrors`): the job record's
// `errors`, kept by the scripts (queue/scripts/includes/attemptErrors.lua; docs/protocol.md,
// "Attempt errors").

/** How an attempt ended without success. */
export type AttemptErrorKind = "exception" | "invalid-result" | "timeout" | "handed-back" | "stalled";

export const ATTEMPT_ERROR_KINDS: readonly AttemptErrorKind[] = [
  "exception",
  "invalid-result",
  "timeout",
  "handed-back",
  "stalled",
];

/** Failed attempts a job keeps (the last ones), and the most bytes of JSON each takes. */
export const ATTEMPT_ERRORS_KEPT = 5;
export const ATTEMPT_ERROR_MAX_BYTES = 2048;

/** One failed attempt, as the job's `errors` keeps it. */
export interface AttemptError {
  /** The attempt's number (1-based, within the current stage). */
  attempt: number;
  kind: AttemptErrorKind;
  /** What went wrong, cut to keep the entry within ATTEMPT_ERROR_MAX_BYTES. */
  message: string;
  /** When the attempt ended (ms since epoch). */
  at: number;
  /** For `invalid-result`: the contract's violations (queue/contracts.ts, Violation[]). */
  details?: unknown[];
}

/**
 * A job record's `errors` text as AttemptErrors, oldest first; [] for '' or anything that is not
 * such a list (a record written by hand): a handler is never refused for it.
 */
export function parseAttemptErrors(text: string | undefined): AttemptError[] {
  if (!text) return [];
  let list: unknown;
  try {
    list = JSON.parse(text);
  } catch {
    return [];
  }
  if (!Array.isArray(list)) return [];
  const out: AttemptError[] = [];
  for (const e of list) {
    if (typeof e !== "object" || e === null) continue;
    const { attempt, kind, message, at, details, error } = e as Record<string, unknown>;
    out.push({
      attempt: typeof attempt === "number" ? attempt : 0,
      kind: ATTEMPT_ERROR_KINDS.includes(kind as AttemptErrorKind) ? (kind as AttemptErrorKind) : "exception",
      // (an entry of the older form {attempt, token, at, error: {message}} reads as an exception)
      message:
        typeof message === "string"
          ? message
          : typeof (error as { message?: unknown } | undefined)?.message === "string"
            ? (error as { message: string }).message
            : "",
      at: typeof at === "number" ? at : 0,
      ...(Array.isArray(details) ? { details } : {}),
    });
  }
  return out;
}

// What the scripts' replies mean, in one place: the codes a settle script returns become a
// typed outcome, and the error replies a script raises (`ERR_<CODE> message`) become typed errors.

/** A job bigger than the producer's limit (enqueue_jobs' ERR_PAYLOAD_TOO_LARGE). */
export class PayloadTooLargeError extends Error {
  override name = "PayloadTooLargeError";
}

/**
 * The queue's contract in force is not the one the caller checked its jobs against (enqueue_jobs'
 * ERR_CONTRACT_CHANGED): nothing was written; `inForce` is the hash in force ('' = none).
 */
export class ContractChangedError extends Error {
  override name = "ContractChangedError";
  readonly inForce: string;
  constructor(message: string) {
    super(`the queue's contract changed (in force: ${message.trim() || "none"})`);
    this.inForce = message.trim();
  }
}

/**
 * A flow refused before anything was written: a cycle, an unknown or repeated key, a bad option
 * (Producer.enqueueFlow's checks, or enqueue_flow's ERR_INVALID_FLOW).
 */
export class InvalidFlowError extends Error {
  override name = "InvalidFlowError";
}

/** The error replies scripts raise, by code. */
const SCRIPT_ERRORS: Record<string, new (message: string) => Error> = {
  ERR_PAYLOAD_TOO_LARGE: PayloadTooLargeError,
  ERR_CONTRACT_CHANGED: ContractChangedError,
  ERR_INVALID_FLOW: InvalidFlowError,
};

/** A script's error reply as its typed error (the code stripped from the message); other errors as they are. */
export function scriptError(err: unknown): unknown {
  if (!(err instanceof Error)) return err;
  // (a reply may end at its code: ERR_CONTRACT_CHANGED with no contract in force)
  const m = /\b(ERR_[A-Z_]+)(?: (.*))?$/s.exec(err.message);
  const Type = m ? SCRIPT_ERRORS[m[1]!] : undefined;
  return Type ? new Type(m![2] ?? "") : err;
}

/**
 * How a settle script (complete_job, advance_job, release_job) ended: `settled` (1); `fenced`
 * (0): the caller's lease token is no longer the job's, so nothing was written — another worker
 * owns the job now; `cancelled` (-1): the job was cancelled while it ran, its result is refused.
 */
export type SettleOutcome = "settled" | "fenced" | "cancelled";

export function settleOutcome(code: unknown): SettleOutcome {
  switch (Number(code)) {
    case 1:
      return "settled";
    case 0:
      return "fenced";
    case -1:
      return "cancelled";
    default:
      throw new Error(`unexpected settle reply ${JSON.stringify(code)}`);
  }
}

/**
 * Error replies that come back however often the same write is tried again, by their code (the
 * reply's first word): a key of the wrong type (WRONGTYPE), a full Redis that evicts nothing
 * (OOM), an ACL or password refusal (NOPERM, NOAUTH, WRONGPASS), and ERR — a command or script
 * error (an unknown command, a Lua runtime error). Everything else is transient: no reply at all
 * (connection lost, timeout), a server loading, busy, failing over or short of replicas (LOADING,
 * BUSY, TRYAGAIN, CLUSTERDOWN, MASTERDOWN, READONLY, NOREPLICAS), a script the server lost
 * (NOSCRIPT: the client loads it again).
 */
const PERMANENT_REPLIES = new Set(["WRONGTYPE", "OOM", "NOPERM", "NOAUTH", "WRONGPASS", "ERR"]);

/** The code of a Redis error reply that retrying cannot get past (see PERMANENT_REPLIES), else undefined. */
export function permanentReplyCode(err: unknown): string | undefined {
  if (!(err instanceof Error) || err.name !== "ReplyError") return undefined;
  const code = /^\S+/.exec(err.message)?.[0];
  return code !== undefined && PERMANENT_REPLIES.has(code) ? code : undefined;
}

// The stage's contract at settle: a handler's result is checked against the stage's result
// schema (its task's), and a result handed to the next stage against that stage's data schema,
// before anything is written. A refusal is a failed attempt of kind `invalid-result` (retried
// with backoff like any failure); the refused result is kept on the job as `rejected`.
import {
  describeViolation,
  type ClaimedJob,
  type CompiledContract,
  type ContractCache,
  type Violation,
} from "../queue/index.ts";

/** How much of a refused result the job keeps (`rejected`), in bytes of its JSON text. */
export const REJECTED_MAX_BYTES = 64 * 1024;
/** Violations named in the attempt's message (all of them are in its details). */
const NAMED_IN_MESSAGE = 3;

/** A result the contract refused: a failed attempt of kind `invalid-result`, its violations as details. */
export class ResultContractError extends Error {
  override name = "ResultContractError";
  readonly kind = "invalid-result";
  readonly details: Violation[];
  /** The refused result as JSON text, cut at REJECTED_MAX_BYTES. */
  readonly rejected: string;
  constructor(what: string, violations: Violation[], encodedResult: string) {
    const named = violations.slice(0, NAMED_IN_MESSAGE).map(describeViolation).join("; ");
    const more =
      violations.length > NAMED_IN_MESSAGE ? `; and ${violations.length - NAMED_IN_MESSAGE} more` : "";
    super(`${what}: ${named}${more}`);
    // (where in the worker the check ran says nothing to the handler's author)
    this.stack = `${this.name}: ${this.message}`;
    this.details = violations;
    this.rejected = cutRejected(encodedResult);
  }
}

/** JSON text cut to REJECTED_MAX_BYTES of UTF-8 (a cut text is no longer JSON: it is for reading). */
export function cutRejected(text: string): string {
  // (a string of at most max/3 UTF-16 units is at most max bytes: no need to count)
  if (text.length <= REJECTED_MAX_BYTES / 3 || Buffer.byteLength(text) <= REJECTED_MAX_BYTES) return text;
  return Buffer.from(text)
    .subarray(0, REJECTED_MAX_BYTES)
    .toString()
    .replace(/\uFFFD$/, "");
}

/** The job's task name, when it names one (the claim reply's `task`; '' = none). */
export function taskOf(job: ClaimedJob): string | undefined {
  const task = (job as ClaimedJob & { task?: unknown }).task;
  return typeof task === "string" && task !== "" ? task : undefined;
}

/**
 * The contract of `queue` when its hash in force is `hash` ('' or absent: none) as the cache
 * holds it, without reading anything; undefined when the cache holds another (read it again:
 * `cache.ensure(queue, hash)`).
 */
export function cachedContract(
  cache: ContractCache,
  queue: string,
  hash: string | undefined,
): CompiledContract | null | undefined {
  if (!hash) return null;
  const known = cache.known(queue);
  return known && known.hash === hash ? known : undefined;
}

/** The violations of `result` against the stage's result schema (its task's); undefined when it keeps it. */
export function resultProblem(
  contract: CompiledContract | null,
  result: unknown,
  encoded: string,
  task: string | undefined,
): ResultContractError | undefined {
  if (!contract || !contract.checks("result", task)) return undefined;
  const violations = contract.checkResult(result, task);
  if (violations.length === 0) return undefined;
  return new ResultContractError("result breaks the contract", violations, encoded);
}

/** The violations of `data` (the result handed over) against the next stage's data schema; undefined when it keeps it. */
export function nextDataProblem(
  contract: CompiledContract | null,
  nextQueue: string,
  data: unknown,
  encoded: string,
  task: string | undefined,
): ResultContractError | undefined {
  if (!contract || !contract.checks("data", task)) return undefined;
  const violations = contract.checkData(data, task);
  if (violations.length === 0) return undefined;
  return new ResultContractError(
    `result breaks the data contract of the next stage ${nextQueue}`,
    violations,
    encoded,
  );
}

/**
 * The violations of a fan-out's children against the next stage's data schema, each pointer
 * under the child's place in the result (`/$conveyor/fanOut/<i>`); undefined when all keep it.
 */
export function childrenDataProblem(
  contract: CompiledContract | null,
  nextQueue: string,
  children: unknown[],
  encoded: string,
  task: string | undefined,
): ResultContractError | undefined {
  if (!contract || !contract.checks("data", task)) return undefined;
  const violations: Violation[] = [];
  children.forEach((child, i) => {
    for (const v of contract.checkData(child, task))
      violations.push({ ...v, pointer: `/$conveyor/fanOut/${i}${v.pointer}` });
  });
  if (violations.length === 0) return undefined;
  return new ResultContractError(
    `fan-out children break the data contract of the next stage ${nextQueue}`,
    violations,
    encoded,
  );
}

/**
 * A fan-out's join job: made in Redis by its last child's finish (`<parent>:join`, data
 * `{parent, results}`), so no producer checked its data. Its stage's worker checks it instead.
 */
export function isJoinJob(job: ClaimedJob, data: unknown): boolean {
  if (!job.id.endsWith(":join") || typeof data !== "object" || data === null) return false;
  const { parent, results } = data as { parent?: unknown; results?: unknown };
  return parent === job.id.slice(0, -":join".length) && Array.isArray(results);
}

/** Join data the stage's data contract refuses: it cannot change, so the job is dead at once. */
export class JoinDataContractError extends Error {
  override name = "JoinDataContractError";
  readonly retryable = false;
  constructor(queue: string, violations: Violation[]) {
    const named = violations.slice(0, NAMED_IN_MESSAGE).map(describeViolation).join("; ");
    const more =
      violations.length > NAMED_IN_MESSAGE ? `; and ${violations.length - NAMED_IN_MESSAGE} more` : "";
    super(`the fan-out's join data breaks the data contract of ${queue}: ${named}${more}`);
    this.stack = `${this.name}: ${this.message}`;
  }
}

/** A join's data against its stage's data schema; undefined when it keeps it (or none is set). */
export function joinDataProblem(
  contract: CompiledContract | null,
  queue: string,
  data: unknown,
): JoinDataContractError | undefined {
  if (!contract || !contract.checks("data")) return undefined;
  const violations = contract.checkData(data);
  return violations.length === 0 ? undefined : new JoinDataContractError(queue, violations);
}

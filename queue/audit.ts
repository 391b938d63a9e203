// Changes made outside the job API — the CLI writing Redis directly, the operator's own
// decisions — go to the audit trail through the pipeline's capped stream `<P>audit`: an entry
// before the change (a change whose entry cannot be written is not made) and one with its
// outcome after. The job API drains the stream into PostgreSQL's `conveyor_audit`, keyed by the
// first entry's id, so a row is written once however often it is read (api/auditDrain.ts).
// Nothing here runs per job.
import { hostname, userInfo } from "node:os";
import { PipelineKeys } from "./keys.ts";
import type { RedisClient } from "./scripts.ts";

/** The stream keeps about this many entries (two per change) while no job API drains it. */
export const AUDIT_STREAM_MAXLEN = 100_000;

const SECRET = /token|secret|password|authorization|apikey|api_key|credential/i;

/** Parameters as kept: any field named like a secret removed, at any depth. */
export function redact(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(redact);
  if (value === null || typeof value !== "object") return value;
  return Object.fromEntries(
    Object.entries(value as Record<string, unknown>).map(([k, v]) => [
      k,
      SECRET.test(k) ? "[removed]" : redact(v),
    ]),
  );
}

export interface AuditedChange {
  pipeline: string;
  /** Who: `cli:<user>@<host>` (or CONVEYOR_AUDIT_ACTOR), `operator:<service account>`. */
  actor: string;
  verb: "operate" | "admin";
  /** The operation, named like the job API's (pause, cancelJob, purgeDead, …). */
  operation: string;
  /** `<queue> [group:<g>] [job:<id>] [schedule:<s>]`, or `pipeline:<p> …` for a pipeline's settings. */
  target: string;
  params: Record<string, unknown>;
  /** Where from: the host for the CLI, the pod for the operator. */
  client?: string | null;
}

/** The CLI's actor: CONVEYOR_AUDIT_ACTOR, else the OS user and host. */
export function cliActor(env: NodeJS.ProcessEnv = process.env): string {
  if (env.CONVEYOR_AUDIT_ACTOR) return env.CONVEYOR_AUDIT_ACTOR;
  let user = env.USER ?? "unknown";
  try {
    user = userInfo().username;
  } catch {
    // no passwd entry (a container's arbitrary uid): $USER or "unknown"
  }
  return `cli:${user}@${hostname()}`;
}

/** The operator's actor: `operator:system:serviceaccount:<namespace>:<name>` as far as it is known. */
export function operatorActor(env: NodeJS.ProcessEnv = process.env): string {
  const ns = env.POD_NAMESPACE ?? env.CONVEYOR_NAMESPACE;
  const sa = env.SERVICE_ACCOUNT_NAME ?? env.CONVEYOR_SERVICE_ACCOUNT;
  return ns && sa ? `operator:system:serviceaccount:${ns}:${sa}` : "operator";
}

function fields(c: AuditedChange, at: number): string[] {
  return [
    "actor",
    c.actor,
    "verb",
    c.verb,
    "operation",
    c.operation,
    "target",
    c.target,
    "params",
    JSON.stringify(redact(c.params)),
    "client",
    c.client ?? hostname(),
    "at",
    String(at),
  ];
}

export interface AuditOutcome {
  /** 200 when the change was made, else the error's status (500 when it names none). */
  status: number;
  jobs: number | null;
  result: unknown;
}

/**
 * Run `change` between its two audit entries. The first is written before: when it cannot be,
 * nothing changes (the error is thrown). `outcome` reads the jobs touched from the result.
 */
export async function audited<T>(
  redis: RedisClient,
  c: AuditedChange,
  change: () => Promise<T>,
  outcome: (result: T) => { jobs?: number | null; result?: unknown } = () => ({}),
): Promise<T> {
  const key = new PipelineKeys(c.pipeline).audit;
  const at = Date.now();
  const base = fields(c, at);
  const add = (...f: string[]) =>
    redis.xadd(key, "MAXLEN", "~", String(AUDIT_STREAM_MAXLEN), "*", ...f) as Promise<string>;
  let id: string;
  try {
    id = await add("kind", "begin", ...base);
  } catch (err) {
    throw new Error(`nothing changed: the audit entry could not be written (${(err as Error).message})`, {
      cause: err,
    });
  }
  const finish = (o: AuditOutcome) =>
    add("kind", "end", "of", id, ...base, ...outcomeFields(o)).catch(() => {
      // The change is made; its row keeps status null (as the API's when its outcome is lost).
    });
  let result: T;
  try {
    result = await change();
  } catch (err) {
    const status = Number((err as { status?: unknown }).status);
    await finish({
      status: Number.isInteger(status) && status >= 400 ? status : 500,
      jobs: 0,
      result: { error: (err as Error).message },
    });
    throw err;
  }
  const o = outcome(result);
  await finish({ status: 200, jobs: o.jobs ?? null, result: o.result ?? null });
  return result;
}

/**
 * A decision already carried out (the operator's: a promotion, a rollback, a finalized layout)
 * as one entry with its outcome. Throws when it cannot be written; the caller logs it.
 */
export async function recordAudit(redis: RedisClient, c: AuditedChange, o: AuditOutcome): Promise<void> {
  await redis.xadd(
    new PipelineKeys(c.pipeline).audit,
    "MAXLEN",
    "~",
    String(AUDIT_STREAM_MAXLEN),
    "*",
    "kind",
    "done",
    ...fields(c, Date.now()),
    ...outcomeFields(o),
  );
}

/** An outcome as the stream entry's fields (the API's drain reads them back by these names). */
function outcomeFields(o: AuditOutcome): string[] {
  return [
    "status",
    String(o.status),
    "jobs",
    o.jobs === null ? "" : String(o.jobs),
    "result",
    JSON.stringify(redact(o.result) ?? null),
  ];
}

// The CLI's changes to Redis in the audit trail (queue/audit.ts): who is the OS user and host,
// or CONVEYOR_AUDIT_ACTOR (a CI job, a shared admin host).
import type { AuditedChange } from "../queue/index.ts";
import type { RedisClient } from "../queue/index.ts";

export async function auditedCli<T>(
  redis: RedisClient,
  change: Omit<AuditedChange, "actor" | "client">,
  run: () => Promise<T>,
  outcome?: (result: T) => { jobs?: number | null; result?: unknown },
): Promise<T> {
  const { audited, cliActor } = await import("../queue/index.ts");
  return audited(redis, { ...change, actor: cliActor() }, run, outcome);
}

/** The pipeline of a queue `p/…`. */
export const pipelineOfQueue = (queue: string) => queue.split("/")[0]!;

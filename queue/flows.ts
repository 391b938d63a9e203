// Flows, the read and cancel side (docs/flows.md): a flow's jobs and their states, and cancel.
// The write side is Producer.enqueueFlow.
import { assertJobId, PIPELINES_KEY, pipelineOf, PipelineKeys } from "./keys.ts";
import type { ParentOutcome } from "./types.ts";
import * as gateway from "./gateway.ts";
import type { RedisClient } from "./scripts.ts";
import { CANCELLED_RETENTION_SECONDS } from "./control.ts";

export interface FlowJobState {
  key: string;
  id: string;
  /** `waiting-children`, ready, delayed, active, completed, dead, cancelled…; `gone` once its record was reclaimed. */
  state: string;
  queue: string;
  /** The parents' keys. */
  parents: string[];
  /** What it does when a parent dies or is cancelled: fail (the default), continue or ignore. */
  onParentFailure: FlowPolicy;
  /** For a job waiting for its parents: how many have not ended yet. */
  pending?: number;
  /** Why it was cancelled, when a parent's end cancelled it. */
  reason?: string;
}

export type FlowPolicy = "fail" | "continue" | "ignore";

export interface FlowView {
  id: string;
  pipeline: string;
  createdAt: number;
  /** Jobs by state. */
  counts: Record<string, number>;
  jobs: FlowJobState[];
}

/** A view of a flow's jobs: sorted by key, counted by state (whichever store they were read from). */
export function flowViewOf(id: string, pipeline: string, createdAt: number, jobs: FlowJobState[]): FlowView {
  const counts: Record<string, number> = {};
  for (const j of jobs) counts[j.state] = (counts[j.state] ?? 0) + 1;
  jobs.sort((a, b) => a.key.localeCompare(b.key));
  return { id, pipeline, createdAt, counts, jobs };
}

export const policyOf = (s: string | null | undefined): FlowPolicy =>
  s === "continue" || s === "ignore" ? s : "fail";

export interface FlowCancelResult {
  id: string;
  outcome: "cancelled" | "notFound";
  /** Jobs this cancelled (finished ones are left as they are). */
  jobsCancelled: number;
  total: number;
}

export interface FlowRepairResult {
  id: string;
  outcome: "repaired" | "notFound";
  /** Ended jobs whose dependents were told now (ended by a worker of a release before flows). */
  jobsTold: number;
  /** Ended jobs whose record was already reclaimed: their dependents cannot be told. */
  jobsGone: number;
  total: number;
}

/** A parent's result could not be read: it ended without one, is not a parent, or is gone. */
export class ParentResultError extends Error {
  override name = "ParentResultError";
}

/**
 * The result of parent `key` from a claimed flow job's `parents` (ClaimedJob.parents; `queue`
 * the job's queue): the inline one, else the one its `ref` names, read from the flow's hash
 * (kept 7 days after the flow's last job ended). A ParentResultError when the key is not among
 * the parents (or was left out by `ignore`), the parent ended with an error, or the result is
 * no longer in Redis.
 */
export async function fetchParentResult(
  redis: RedisClient,
  queue: string,
  parents: Record<string, ParentOutcome> | undefined,
  key: string,
): Promise<unknown> {
  const outcome = parents && Object.hasOwn(parents, key) ? parents[key] : undefined;
  if (!outcome)
    throw new ParentResultError(`no parent ${JSON.stringify(key)} among this job's parents' outcomes`);
  if (outcome.error !== undefined)
    throw new ParentResultError(`parent ${key} (${outcome.id}) ended without a result: ${outcome.error}`);
  if (outcome.ref === undefined) return outcome.result;
  const at = outcome.ref.indexOf(":");
  const flowId = outcome.ref.slice(0, at);
  if (at <= 0 || outcome.ref.slice(at + 1) !== key)
    throw new ParentResultError(`parent ${key}: bad reference ${JSON.stringify(outcome.ref)}`);
  const text = await redis.hget(new PipelineKeys(pipelineOf(queue)).flow(flowId), `r:${key}`);
  if (text === null)
    throw new ParentResultError(
      `parent ${key} (${outcome.id}): its result is no longer in Redis (flow ${flowId})`,
    );
  return (JSON.parse(text) as { result: unknown }).result;
}

/** The pipelines to look in: the one given (a pipeline or one of its queues), else every known one. */
async function pipelinesOf(redis: RedisClient, pipeline?: string): Promise<string[]> {
  return pipeline ? [pipeline.split("/")[0]!] : redis.smembers(PIPELINES_KEY);
}

/** A flow's jobs, their states and parents, and the counts by state; null when no pipeline has it. */
export async function flowView(redis: RedisClient, id: string, pipeline?: string): Promise<FlowView | null> {
  assertJobId(id);
  for (const p of await pipelinesOf(redis, pipeline)) {
    const keys = new PipelineKeys(p);
    const all = await redis.hgetall(keys.flow(id));
    if (Object.keys(all).length === 0) continue;
    const members = Object.entries(all)
      .filter(([f]) => f.startsWith("k:"))
      .map(([f, jobId]) => ({ key: f.slice(2), id: jobId }));
    const jobs: FlowJobState[] = [];
    // (in runs, pipelined: a flow is up to 10,000 jobs)
    for (let i = 0; i < members.length; i += 500) {
      const run = members.slice(i, i + 500);
      const pipe = redis.pipeline();
      for (const m of run)
        pipe.hmget(keys.job(m.id), "state", "queue", "parents", "pending", "cancelReason", "onParentFailure");
      const replies = (await pipe.exec()) ?? [];
      run.forEach((m, k) => {
        const [err, f] = replies[k] ?? [null, []];
        const [state, queue, parents, pending, reason, policy] = (err ? [] : (f as (string | null)[])) ?? [];
        const job: FlowJobState = {
          key: m.key,
          id: m.id,
          state: state ?? "gone",
          queue: queue ?? "",
          parents: parents ? parents.split(" ") : [],
          onParentFailure: policyOf(policy),
        };
        if (state === "waiting-children" && pending != null) job.pending = Number(pending);
        if (reason) job.reason = reason;
        jobs.push(job);
      });
    }
    return flowViewOf(id, p, Number(all.createdAt ?? 0), jobs);
  }
  return null;
}

/** Cancel every unfinished job of a flow (cancel_flow.lua); running ones are aborted at their next heartbeat. */
export async function cancelFlow(
  redis: RedisClient,
  id: string,
  opts: { pipeline?: string; retentionSeconds?: number } = {},
): Promise<FlowCancelResult> {
  assertJobId(id);
  for (const p of await pipelinesOf(redis, opts.pipeline)) {
    const { cancelled: n, total } = await gateway.cancelFlow(redis, {
      pipeline: new PipelineKeys(p),
      id,
      now: Date.now(),
      retentionSeconds: opts.retentionSeconds ?? CANCELLED_RETENTION_SECONDS,
    });
    if (n >= 0) return { id, outcome: "cancelled", jobsCancelled: n, total };
  }
  return { id, outcome: "notFound", jobsCancelled: 0, total: 0 };
}

/**
 * Tell the dependents of a flow's jobs that ended without telling them (flow_repair.lua): what a
 * worker of a release before flows leaves behind. Jobs already told are left alone.
 */
export async function repairFlow(
  redis: RedisClient,
  id: string,
  opts: { pipeline?: string } = {},
): Promise<FlowRepairResult> {
  assertJobId(id);
  for (const p of await pipelinesOf(redis, opts.pipeline)) {
    const { told, gone, total } = await gateway.flowRepair(redis, {
      pipeline: new PipelineKeys(p),
      id,
      now: Date.now(),
    });
    if (told >= 0) return { id, outcome: "repaired", jobsTold: told, jobsGone: gone, total };
  }
  return { id, outcome: "notFound", jobsTold: 0, jobsGone: 0, total: 0 };
}

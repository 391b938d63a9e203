// What the operator writes into a polled pool's Redis, over the poll's connection: queue control,
// the resources' keys and limits, job records switched on, the contract, cordons. The poll loop
// (backlog.ts) owns the connections and the samples; it calls these for the reconcile and the
// scaler. A write that changes what the sample shows updates the sample at once, so the next
// reconcile does not write it again.
import {
  finalizeLayout as moveLayout,
  layoutStatus,
  pipelineOf,
  readLayout,
  readerFields,
  READERS_KEY,
  QueueAdmin,
  QueueKeys,
  enableRecords as switchRecordsOn,
  setContract,
  setResource,
  readVersionCounters,
  waitUntilReady,
  type Contract,
  type VersionCounters,
  type RateLimit,
  type RedisClient,
  type ResourceKeySpec,
  type ResourceState,
  type QueueControlState,
  type FinalizeResult,
  type LayoutInForce,
  type LayoutStatus,
  type WorkerReport,
} from "../../queue/index.ts";
import { operatorActor, recordAudit, type AuditedChange, type AuditOutcome } from "../../queue/index.ts";
import { withTimeout } from "./redisConnections.ts";

/** What the operator decided, as the audit trail keeps it (the pipeline and who are added). */
export type OperatorDecision = Omit<AuditedChange, "pipeline" | "actor" | "client">;

/**
 * One of the operator's own changes into the audit stream of the queue's pipeline (queue/audit.ts):
 * who is `operator:system:serviceaccount:<namespace>:<name>`, from where the pod's name.
 */
export async function auditDecision(
  client: RedisClient,
  queue: string,
  d: OperatorDecision,
  outcome: AuditOutcome,
  env: NodeJS.ProcessEnv = process.env,
): Promise<void> {
  await recordAudit(
    client,
    {
      ...d,
      pipeline: pipelineOf(queue),
      actor: operatorActor(env),
      client: env.POD_NAME ?? env.HOSTNAME ?? null,
    },
    outcome,
  );
}

/** auditDecision on a polled pool's connection. */
export async function audit(p: PolledPool, d: OperatorDecision, outcome: AuditOutcome, timeoutMs: number) {
  await withTimeout(auditDecision(p.client, p.target.queue, d, outcome), timeoutMs, "audit");
}

/** A resource as the operator writes it: spec.resources with limits parsed, the ceiling a fraction. */
export interface ResourceBudgetSpec {
  name: string;
  ceiling: number;
  keys: ResourceKeySpec[];
}

/** A polled pool as these writes see it: its queue, its connection and its latest sample. */
export interface PolledPool {
  target: { queue: string; url: string };
  client: RedisClient;
  sample?: { control?: QueueControlState; resources?: ResourceState[] };
}

/** Worker busy/idle reports of the pool's queue (for pod-deletion-cost). */
export function workers(p: PolledPool, timeoutMs: number): Promise<WorkerReport[]> {
  return withTimeout(new QueueAdmin(p.client).workers(p.target.queue), timeoutMs, "worker reports");
}

/** Cordon exactly `pods` of the pool's queue until `untilMs`: they claim nothing new (none: lift it). */
export async function cordon(
  p: PolledPool,
  pods: readonly string[],
  untilMs: number,
  timeoutMs: number,
): Promise<void> {
  await withTimeout(new QueueAdmin(p.client).setCordon(p.target.queue, pods, untilMs), timeoutMs, "cordon");
}

/**
 * Switch job records on for the pool's pipeline (queue/records.ts: nothing is written when they
 * are on); whether this call switched them.
 */
export async function enableRecords(p: PolledPool, timeoutMs: number): Promise<boolean> {
  await waitUntilReady(p.client, p.target.url, timeoutMs); // a new pool's connection may be opening
  return withTimeout(switchRecordsOn(p.client, p.target.queue), timeoutMs, "records");
}

/** Write spec.paused / spec.rateLimit into the pool's Redis (the spec wins while set). */
export async function applyControl(
  p: PolledPool,
  change: { paused?: boolean; rateLimit?: RateLimit },
  timeoutMs: number,
): Promise<void> {
  const admin = new QueueAdmin(p.client);
  const q = p.target.queue;
  if (change.paused !== undefined)
    await withTimeout(change.paused ? admin.pause(q) : admin.resume(q), timeoutMs, "pause");
  if (change.rateLimit) await withTimeout(admin.setRateLimit(q, change.rateLimit), timeoutMs, "rate limit");
  if (p.sample?.control) p.sample.control = { ...p.sample.control, ...change };
}

/**
 * Write spec.resources into the pool's pipeline (key ids and limits only: never a credential);
 * the sample's resources follow at once.
 */
export async function applyResources(
  p: PolledPool,
  budgets: ResourceBudgetSpec[],
  timeoutMs: number,
): Promise<void> {
  for (const b of budgets) {
    await withTimeout(
      setResource(p.client, p.target.queue, b.name, b.keys, { ceiling: b.ceiling }),
      timeoutMs,
      "resource",
    );
    const have = p.sample?.resources;
    if (!have) continue;
    p.sample!.resources = [...have.filter((r) => r.name !== b.name), asWritten(b, have)];
  }
}

/** The resource as the sample shows it once `b` is written: its usage kept, its keys and limits `b`'s. */
function asWritten(b: ResourceBudgetSpec, have: ResourceState[]): ResourceState {
  const known = have.find((r) => r.name === b.name);
  const keys = b.keys.map((k) => {
    const old = known?.keys.find((x) => x.id === k.id);
    return {
      id: k.id,
      limits: k.limits.map((l) => {
        const used = old?.limits.find((x) => x.unit === l.unit)?.used ?? 0;
        return { ...l, used, utilization: used / l.max };
      }),
      benchedUntil: old?.benchedUntil ?? null,
      admitted: old?.admitted ?? 0,
    };
  });
  return { pipeline: "", waiting: 0, waitingByQueue: {}, ...known, name: b.name, ceiling: b.ceiling, keys };
}

/** Every template version's outcome counters on the pool's queue (rollouts). */
export async function versionCounters(
  p: PolledPool,
  timeoutMs: number,
): Promise<Map<string, VersionCounters>> {
  await waitUntilReady(p.client, p.target.url, timeoutMs);
  return withTimeout(readVersionCounters(p.client, p.target.queue), timeoutMs, "version counters");
}

/** The hash and source of the contract in force on the pool's queue (null: none). */
export async function contractInForce(
  p: PolledPool,
  timeoutMs: number,
): Promise<{ hash: string; source: string } | null> {
  await waitUntilReady(p.client, p.target.url, timeoutMs); // a new pool's connection may be opening
  const [hash, source] = await withTimeout(
    p.client.hmget(new QueueKeys(p.target.queue).contract, "hash", "source"),
    timeoutMs,
    "contract",
  );
  return hash ? { hash, source: source ?? "" } : null;
}

/** Set the pool's queue's contract (checked and compiled again by setContract). */
export async function publishContract(
  p: PolledPool,
  contract: Contract,
  source: string,
  timeoutMs: number,
): Promise<void> {
  await withTimeout(setContract(p.client, p.target.queue, contract, source), timeoutMs, "contract");
}

/**
 * Delete the pool's queue's contract if `source` set it (one set since by the CLI or another
 * pool stays); whether it was deleted. Read, then delete: a contract set between the two by
 * someone else is lost (spec.contract removed while a user sets one by hand).
 */
export async function deleteContractOf(p: PolledPool, source: string, timeoutMs: number): Promise<boolean> {
  const k = new QueueKeys(p.target.queue).contract;
  const setBy = await withTimeout(p.client.hget(k, "source"), timeoutMs, "contract");
  if (setBy !== source) return false;
  return (await withTimeout(p.client.del(k), timeoutMs, "contract")) > 0;
}

/** The layout in force of the pool's pipeline (one HGETALL). */
export function layoutInForce(p: PolledPool, timeoutMs: number): Promise<LayoutInForce> {
  return withTimeout(readLayout(p.client, pipelineOf(p.target.queue)), timeoutMs, "layout");
}

/** The pool's pipeline's layout and live readers (a SCAN for its queues' worker reports). */
export function pipelineLayout(p: PolledPool, timeoutMs: number): Promise<LayoutStatus> {
  return withTimeout(layoutStatus(p.client, pipelineOf(p.target.queue)), timeoutMs, "layout status");
}

/** Finalize the pool's pipeline's layout (refused, FinalizeRefusedError, while a live reader is behind). */
export function finalizeLayout(p: PolledPool, by: string, timeoutMs: number): Promise<FinalizeResult> {
  return withTimeout(moveLayout(p.client, pipelineOf(p.target.queue), { by }), timeoutMs, "layout finalize");
}

/** This operator's report as a reader of the layouts, in the pool's Redis. */
export async function reportReader(p: PolledPool, id: string, timeoutMs: number): Promise<void> {
  await withTimeout(
    p.client.hset(READERS_KEY, id, JSON.stringify({ kind: "operator", ...readerFields(), seen: Date.now() })),
    timeoutMs,
    "layout reader report",
  );
}

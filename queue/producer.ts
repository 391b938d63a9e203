// Producers enqueue jobs: one script call per batch, atomic per batch.
import {
  assertJobId,
  assertQueueName,
  InvalidNameError,
  newJobId,
  pipelineOf,
  PIPELINES_KEY,
  PipelineKeys,
  QUEUES_KEY,
  QueueKeys,
} from "./keys.ts";
import type { RedisClient } from "./scripts.ts";
import type { DurabilityOptions } from "./durability.ts";
import * as gateway from "./gateway.ts";
import type { EnqueueRecord } from "./gateway.ts";
import { tracingActive } from "../lib/tracingSwitch.ts";
import { endSpan, startSendSpan } from "./tracing.ts";
import { ContractChangedError, InvalidFlowError, PayloadTooLargeError } from "./scriptReplies.ts";
import {
  ContractCache,
  ContractViolationError,
  TASK_NAME_PATTERN,
  type CompiledContract,
  type JobViolations,
} from "./contracts.ts";
import {
  NOTIFY_EVENTS,
  type Dedupe,
  type EnqueueOptions,
  type EnqueueResult,
  type FlowEnqueued,
  type FlowJob,
  type FlowOptions,
  type JobNotify,
  type NotifyEvent,
} from "./types.ts";
import { assertGroup, InvalidGroupError } from "./groups.ts";
import { checkUses, InvalidResourceError, type ResourceUses } from "./resources.ts";
import { JobWaiter, type WaitOptions, type WaitResult, type WaitTarget } from "./waiter.ts";
import { assertLayoutReadable } from "./layout.ts";

export const DEFAULT_MAX_PAYLOAD_BYTES = 512 * 1024;
export const DEFAULT_ATTEMPTS = 3;
export const IDEMPOTENCY_TTL_SECONDS = 24 * 3600;
/** Jobs per script call in bulk enqueue: large enough to amortise, small enough not to block Redis. */
const BULK_CHUNK = 500;
/** How long a producer trusts the layout in force it read (a finalize is seen within it). */
const LAYOUT_RECHECK_MS = 30_000;
/** Longest dedupe key, and window (7 days). */
export const DEDUPE_KEY_MAX = 500;
export const DEDUPE_WINDOW_MAX_MS = 7 * 24 * 3_600_000;

export class InvalidJobError extends Error {
  override name = "InvalidJobError";
}

/** Most jobs in one flow, and parents of one job. */
export const FLOW_MAX_JOBS = 10_000;
export const FLOW_MAX_PARENTS = 10_000;
const FLOW_KEY = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,99}$/;
const FLOW_POLICIES = new Set(["fail", "continue", "ignore"]);
/** Job options a flow job takes; the others are refused by name (FLOW_REFUSED says why). */
const FLOW_JOB_FIELDS = new Set([
  "key",
  "queue",
  "data",
  "parents",
  "onParentFailure",
  "priority",
  "attempts",
  "timeoutMs",
  "group",
  "task",
  "delayMs",
  "uses",
  "notify",
]);
const FLOW_REFUSED: Record<string, string> = {
  dedupe:
    "dedupe is not supported in a flow: a debounced or throttled job would stand in for another flow's job, whose dependents wait in that flow",
  idempotencyKey:
    "idempotencyKey is not supported on a flow job: give the flow one (enqueueFlow(pipeline, jobs, {idempotencyKey}))",
  id: "id is not supported in a flow: a flow's job ids are generated (the reply gives each by key)",
  contentHash: "contentHash is not supported in a flow: a flow job's result is its dependents' input",
};
/** A flow's idempotency key: 1..200 characters. */
const FLOW_IDEMPOTENCY_KEY_MAX = 200;

export interface ProducerOptions extends DurabilityOptions {
  maxPayloadBytes?: number;
}

export interface JobToEnqueue extends EnqueueOptions {
  data: unknown;
}

export type { EnqueueRecord } from "./gateway.ts";

export class Producer {
  private readonly redis: RedisClient;
  private readonly maxPayloadBytes: number;
  private readonly durability: DurabilityOptions;
  /** When each pipeline's layout in force was last read (LAYOUT_RECHECK_MS). */
  private readonly layoutReadAt = new Map<string, number>();

  /**
   * This release writes the first layout: a pipeline whose layout in force is newer refuses the
   * enqueue (LayoutRefusedError) instead of writing jobs its readers would misread. Read once per
   * pipeline and then every LAYOUT_RECHECK_MS.
   */
  private async checkLayout(pipeline: string): Promise<void> {
    const at = this.layoutReadAt.get(pipeline);
    if (at !== undefined && Date.now() - at < LAYOUT_RECHECK_MS) return;
    await assertLayoutReadable(this.redis, pipeline);
    this.layoutReadAt.set(pipeline, Date.now());
  }

  /** Queues this producer has registered (pipeline and queue sets): once per process and queue. */
  private readonly registered = new Set<string>();
  /**
   * The queues' contracts as last seen. A queue not seen yet is sent as having none: the enqueue
   * script refuses a hash that is not the one in force, so a queue without a contract costs
   * no command, and one with a contract one refused call and one read, once.
   */
  private readonly contracts: ContractCache;

  constructor(redis: RedisClient, opts: ProducerOptions = {}) {
    this.redis = redis;
    this.maxPayloadBytes = opts.maxPayloadBytes ?? DEFAULT_MAX_PAYLOAD_BYTES;
    this.durability = { durability: opts.durability, replicaTimeoutMs: opts.replicaTimeoutMs };
    this.contracts = new ContractCache(redis);
  }

  /** One reader of the event streams for all of this producer's waits (queue/waiter.ts). */
  private waiter: JobWaiter | undefined;

  /**
   * Waits until each job has ended (completed at its last stage, dead, cancelled or deleted) or
   * `timeoutMs` passes: the ended ones in `jobs`, the others' ids in `open` (docs/flows.md).
   */
  async waitFor(targets: readonly WaitTarget[], opts: WaitOptions = {}): Promise<WaitResult> {
    this.waiter ??= new JobWaiter(this.redis);
    return this.waiter.wait(targets, opts);
  }

  async enqueue(queue: string, data: unknown, opts: EnqueueOptions = {}): Promise<EnqueueResult> {
    const [result] = await this.enqueueMany(queue, [{ ...opts, data }]);
    return result!;
  }

  async enqueueMany(queue: string, jobs: JobToEnqueue[]): Promise<EnqueueResult[]> {
    assertQueueName(queue);
    const keys = new QueueKeys(queue);
    const encoded = jobs.map((job, i) => this.encode(job, i));
    const cached = this.contracts.known(queue);
    if (cached) {
      try {
        checkContract(queue, cached, jobs, encoded, 0);
      } catch (err) {
        // A refusal is checked against the contract in force: the cached one may be out of date.
        if (!(err instanceof ContractViolationError)) throw err;
        const inForce = await this.contracts.refresh(queue);
        if (inForce?.hash === cached.hash) throw err;
        checkContract(queue, inForce, jobs, encoded, 0);
      }
    }
    // A PRODUCER span per call while tracing is on; every job stores its context.
    const send = tracingActive()
      ? startSendSpan(
          queue,
          encoded.map((e) => e.id),
        )
      : null;
    if (send) for (const e of encoded) e.trace = send.field;
    let results: EnqueueResult[];
    try {
      results = await this.send(queue, keys, jobs, encoded);
    } catch (err) {
      if (send) endSpan(send.span, err);
      throw err;
    }
    send?.span.end();
    return results;
  }

  private async send(
    queue: string,
    keys: QueueKeys,
    jobs: JobToEnqueue[],
    encoded: EnqueueRecord[],
  ): Promise<EnqueueResult[]> {
    await this.register(keys);
    const results: EnqueueResult[] = [];
    let changed = false;
    for (let start = 0; start < encoded.length; start += BULK_CHUNK) {
      let reply: gateway.EnqueueReply;
      for (;;) {
        const contract = this.contracts.known(queue) ?? null;
        try {
          // With durability "replicated": a ReplicationError when no replica confirmed the batch
          // (enqueueing it again with the same ids creates nothing twice).
          reply = await gateway.enqueueJobs(this.redis, this.durability, {
            keys,
            now: Date.now(),
            maxPayloadBytes: this.maxPayloadBytes,
            idempotencyTtlSeconds: IDEMPOTENCY_TTL_SECONDS,
            records: encoded.slice(start, start + BULK_CHUNK),
            contractHash: contract?.hash ?? "",
          });
          break;
        } catch (err) {
          // The contract changed since it was read: read it, check the jobs not yet written again, retry once.
          if (!(err instanceof ContractChangedError) || changed) throw err;
          changed = true;
          checkContract(queue, await this.contracts.ensure(queue, err.inForce), jobs, encoded, start);
        }
      }
      for (const { id, code } of reply)
        results.push(code === 2 ? { id, created: false, replaced: true } : { id, created: code === 1 });
    }
    return results;
  }

  /**
   * Enqueue a flow (docs/flows.md): jobs across the queues of `pipeline`, each naming the keys
   * of its parents, written in one atomic script call — all or none. Checked first, nothing
   * written on a refusal (InvalidFlowError, InvalidJobError, ContractViolationError): the graph
   * (no cycle, every parent a key of the flow, keys unique, ≤ 10,000 jobs, ≤ 10,000 parents per
   * job), each job's queue (of this pipeline) and options, each job's data against its stage's
   * contract. A job with parents waits (state `waiting-children`) until they have all ended.
   */
  async enqueueFlow(pipeline: string, jobs: FlowJob[], options: FlowOptions = {}): Promise<FlowEnqueued> {
    const pk = new PipelineKeys(pipelineOf(pipeline));
    if (pk.pipeline !== pipeline)
      throw new InvalidFlowError(
        `a flow is enqueued into a pipeline, got the queue name ${JSON.stringify(pipeline)}`,
      );
    const { idempotencyKey } = options;
    if (
      idempotencyKey !== undefined &&
      (typeof idempotencyKey !== "string" ||
        idempotencyKey === "" ||
        idempotencyKey.length > FLOW_IDEMPOTENCY_KEY_MAX)
    )
      throw new InvalidFlowError(
        `idempotencyKey must be a string of 1..${FLOW_IDEMPOTENCY_KEY_MAX} characters, got ${JSON.stringify(idempotencyKey)}`,
      );
    const order = flowOrder(pipeline, jobs);
    const flowId = newJobId();
    const ids: Record<string, string> = {};
    const encoded = new Map<FlowJob, EnqueueRecord>();
    for (const job of order) {
      const id = newJobId();
      ids[job.key] = id;
      const { key } = job;
      const opts: JobToEnqueue = { id, data: job.data };
      if (job.priority !== undefined) opts.priority = job.priority;
      if (job.attempts !== undefined) opts.attempts = job.attempts;
      if (job.timeoutMs !== undefined) opts.timeoutMs = job.timeoutMs;
      if (job.group !== undefined) opts.group = job.group;
      if (job.task !== undefined) opts.task = job.task;
      if (job.delayMs !== undefined) opts.delayMs = job.delayMs;
      if (job.uses !== undefined) opts.uses = job.uses;
      if (job.notify !== undefined) opts.notify = job.notify;
      try {
        encoded.set(job, this.encode(opts, 0));
      } catch (err) {
        if (err instanceof InvalidJobError || err instanceof PayloadTooLargeError)
          throw new InvalidJobError(`flow job ${key}: ${err.message.replace(`job ${id}: `, "")}`, {
            cause: err,
          });
        throw err;
      }
    }
    const queues = [...new Set(order.map((j) => j.queue))];
    const queueKeys = queues.map((q) => new QueueKeys(q));
    const checkAll = async (refresh: boolean) => {
      for (const queue of queues) {
        const contract = refresh ? await this.contracts.refresh(queue) : await this.contracts.get(queue);
        const mine = order.filter((j) => j.queue === queue);
        checkContract(
          queue,
          contract,
          mine.map((j) => ({ ...j, id: j.key })),
          mine.map((j) => encoded.get(j)!),
          0,
        );
      }
    };
    await checkAll(false);
    await Promise.all(queueKeys.map((k) => this.register(k)));
    const fields = ["id", "key", "queue", "data"];
    const optional = [
      "priority",
      "attempts",
      "timeoutMs",
      "trace",
      "group",
      "task",
      "delayMs",
      "uses",
      "notify",
      "parents",
      "onParentFailure",
    ];
    const values = order.map((job) => {
      const r = encoded.get(job)!;
      return {
        id: r.id,
        key: job.key,
        queue: job.queue,
        data: r.data,
        priority: r.priority,
        attempts: r.attempts,
        timeoutMs: r.timeoutMs,
        trace: r.trace,
        group: r.group,
        task: r.task,
        delayMs: r.delayMs,
        uses: r.uses,
        notify: r.notify,
        parents: job.parents && job.parents.length > 0 ? job.parents.join(" ") : undefined,
        onParentFailure: job.onParentFailure,
      } as Record<string, string | number | undefined>;
    });
    for (const f of optional) if (values.some((v) => v[f] !== undefined)) fields.push(f);
    const rows = values.map((v) => fields.map((f) => v[f] ?? ""));
    for (let attempt = 0; ; attempt++) {
      try {
        const reply = await gateway.enqueueFlow(this.redis, this.durability, {
          pipeline: pk,
          flowId,
          now: Date.now(),
          maxPayloadBytes: this.maxPayloadBytes,
          queues: queueKeys.map((k) => ({
            keys: k,
            contractHash: this.contracts.known(k.queue)?.hash ?? "",
          })),
          fields,
          rows,
          idempotencyKey,
        });
        if (reply.created) return { flowId, ids, created: true };
        // (the key named a flow written before: its ids, in the order the jobs were sent)
        const first: Record<string, string> = {};
        order.forEach((job, i) => (first[job.key] = reply.ids[i]!));
        return { flowId: reply.flowId, ids: first, created: false };
      } catch (err) {
        // A contract changed since it was read: read them again, check again, retry once.
        if (!(err instanceof ContractChangedError) || attempt > 0) throw err;
        await checkAll(true);
      }
    }
  }

  private encode(job: JobToEnqueue, index: number): EnqueueRecord {
    const id = job.id ?? newJobId();
    assertJobId(id);
    const data = encodeData(job, index);
    const bytes = Buffer.byteLength(data);
    if (bytes > this.maxPayloadBytes) {
      throw new PayloadTooLargeError(
        `job ${id} is ${bytes} bytes, limit ${this.maxPayloadBytes} (store large inputs elsewhere and enqueue a reference)`,
      );
    }
    const priority = job.priority ?? 0;
    const attempts = job.attempts ?? DEFAULT_ATTEMPTS;
    check(
      Number.isInteger(priority) && priority >= 0 && priority <= 1000,
      `priority must be an integer 0..1000, got ${priority}`,
    );
    check(
      Number.isInteger(attempts) && attempts >= 1 && attempts <= 1000,
      `attempts must be an integer 1..1000, got ${attempts}`,
    );
    if (job.group !== undefined) {
      try {
        assertGroup(job.group);
      } catch (err) {
        const which = job.id !== undefined ? `job ${job.id}` : `job at index ${index}`;
        if (err instanceof InvalidGroupError) throw new InvalidJobError(`${which}: ${err.message}`);
        throw err;
      }
    }
    const dedupe = job.dedupe === undefined ? "" : encodeDedupe(job, index);
    let uses: ResourceUses | undefined;
    try {
      uses = checkUses(job.uses);
    } catch (err) {
      const which = job.id !== undefined ? `job ${job.id}` : `job at index ${index}`;
      if (err instanceof InvalidResourceError) throw new InvalidJobError(`${which}: ${err.message}`);
      throw err;
    }
    const delayMs = job.delayMs ?? 0;
    const timeoutMs = job.timeoutMs ?? 0;
    check(Number.isFinite(delayMs) && delayMs >= 0, `delay must be ≥ 0, got ${delayMs}`);
    check(Number.isFinite(timeoutMs) && timeoutMs >= 0, `timeout must be ≥ 0, got ${timeoutMs}`);
    if (job.task !== undefined && (typeof job.task !== "string" || !TASK_NAME_PATTERN.test(job.task))) {
      const which = job.id !== undefined ? `job ${job.id}` : `job at index ${index}`;
      throw new InvalidJobError(
        `${which}: task must be 1..100 characters of A-Z a-z 0-9 . _ - starting with a letter or digit, got ${JSON.stringify(job.task)}`,
      );
    }
    const notify = job.notify === undefined ? undefined : checkJobNotify(job.notify, index, job.id);
    const record: EnqueueRecord = { id, data, attempts };
    if (priority !== 0) record.priority = priority;
    if (delayMs > 0) record.delayMs = Math.round(delayMs);
    if (timeoutMs > 0) record.timeoutMs = Math.round(timeoutMs);
    if (job.idempotencyKey) record.idempotencyKey = job.idempotencyKey;
    if (job.contentHash) record.contentHash = job.contentHash;
    if (job.group !== undefined) record.group = job.group;
    if (dedupe) record.dedupe = dedupe;
    if (uses) record.uses = JSON.stringify(uses);
    if (job.task !== undefined) record.task = job.task;
    if (notify) record.notify = JSON.stringify(notify);
    return record;
  }

  private async register(keys: QueueKeys): Promise<void> {
    await this.checkLayout(keys.pipeline);
    if (this.registered.has(keys.queue)) return;
    // Two keys in two slots (Redis Cluster): two commands, not a transaction.
    await Promise.all([
      this.redis.sadd(PIPELINES_KEY, keys.pipeline),
      this.redis.sadd(QUEUES_KEY, keys.queue),
    ]);
    this.registered.add(keys.queue);
  }
}

/**
 * Checks the jobs from `from` on against the queue's contract (null: none, nothing to do); every
 * job that breaks it is reported in one ContractViolationError and nothing is written. The data
 * is checked as its JSON text parses — what a worker will see.
 */
function checkContract(
  queue: string,
  contract: CompiledContract | null,
  jobs: readonly JobToEnqueue[],
  encoded: readonly EnqueueRecord[],
  from: number,
): void {
  if (!contract) return;
  const bad: JobViolations[] = [];
  for (let i = from; i < jobs.length; i++) {
    const task = jobs[i]!.task;
    if (!contract.checks("data", task)) continue;
    const violations = contract.checkData(JSON.parse(encoded[i]!.data), task);
    if (violations.length === 0) continue;
    const id = jobs[i]!.id;
    bad.push({
      index: i,
      ...(id !== undefined ? { id } : {}),
      ...(task !== undefined ? { task } : {}),
      side: "data",
      violations,
    });
  }
  if (bad.length > 0) throw new ContractViolationError(queue, contract.hash, bad);
}

/**
 * The job's data as JSON text. Refused (InvalidJobError naming the job by id, or by index when
 * the id is generated) when JSON has no text for it — undefined, a function, a Symbol — or
 * JSON.stringify throws (a BigInt, a cycle, a throwing toJSON); so a batch fails before any of
 * it reaches Redis.
 */
function encodeData(job: JobToEnqueue, index: number): string {
  const which = job.id !== undefined ? `job ${job.id}` : `job at index ${index}`;
  if (job.data === undefined) throw new InvalidJobError(`${which}: data is required (any JSON value)`);
  let data: string | undefined;
  try {
    data = JSON.stringify(job.data);
  } catch (err) {
    let why = "JSON.stringify threw";
    try {
      if (err instanceof Error) why = err.message.split("\n")[0]!;
    } catch {
      // a toJSON that threw an Error whose message cannot be read: keep the generic reason
    }
    throw new InvalidJobError(`${which}: data is not JSON-serializable: ${why}`, { cause: err });
  }
  if (typeof data !== "string")
    throw new InvalidJobError(`${which}: data is not JSON-serializable (a ${typeof job.data})`);
  return data;
}

/** `<mode>:<windowMs>:<key>` as enqueue_jobs takes it; an InvalidJobError naming the field otherwise. */
function encodeDedupe(job: JobToEnqueue, index: number): string {
  const which = job.id !== undefined ? `job ${job.id}` : `job at index ${index}`;
  const d = job.dedupe as Partial<Dedupe> | null;
  if (typeof d !== "object" || d === null)
    throw new InvalidJobError(`${which}: dedupe must be {key, mode, windowMs}`);
  if (d.mode !== "debounce" && d.mode !== "throttle")
    throw new InvalidJobError(
      `${which}: dedupe.mode must be debounce or throttle, got ${JSON.stringify(d.mode)}`,
    );
  if (typeof d.key !== "string" || d.key === "" || d.key.length > DEDUPE_KEY_MAX)
    throw new InvalidJobError(`${which}: dedupe.key must be a string of 1..${DEDUPE_KEY_MAX} characters`);
  const w = d.windowMs;
  if (typeof w !== "number" || !Number.isInteger(w) || w < 1 || w > DEDUPE_WINDOW_MAX_MS)
    throw new InvalidJobError(
      `${which}: dedupe.windowMs must be an integer 1..${DEDUPE_WINDOW_MAX_MS}, got ${w}`,
    );
  if (d.mode === "debounce" && (job.delayMs ?? 0) > 0)
    throw new InvalidJobError(`${which}: a debounced job waits dedupe.windowMs; delayMs must be 0`);
  return `${d.mode}:${w}:${d.key}`;
}

function check(ok: boolean, message: string): asserts ok {
  if (!ok) throw new InvalidJobError(message);
}

/**
 * The flow's jobs in an order where each job's parents come before it (what enqueue_flow
 * takes), after checking the graph and each job's shape; an InvalidFlowError naming the first
 * problem otherwise (a cycle by the keys on it).
 */
export function flowOrder(pipeline: string, jobs: readonly FlowJob[]): FlowJob[] {
  if (!Array.isArray(jobs) || jobs.length === 0) throw new InvalidFlowError("a flow needs at least one job");
  if (jobs.length > FLOW_MAX_JOBS)
    throw new InvalidFlowError(`a flow has at most ${FLOW_MAX_JOBS} jobs, got ${jobs.length}`);
  const byKey = new Map<string, FlowJob>();
  jobs.forEach((job, i) => {
    if (typeof job !== "object" || job === null)
      throw new InvalidFlowError(`flow job at index ${i} is not an object`);
    if (typeof job.key !== "string" || !FLOW_KEY.test(job.key))
      throw new InvalidFlowError(
        `flow job at index ${i}: key must be 1..100 characters of A-Z a-z 0-9 . _ : - starting with a letter or digit, got ${JSON.stringify(job.key)}`,
      );
    const which = `flow job ${job.key}`;
    if (byKey.has(job.key)) throw new InvalidFlowError(`${which}: duplicate key`);
    byKey.set(job.key, job);
    for (const f of Object.keys(job))
      if (!FLOW_JOB_FIELDS.has(f))
        throw new InvalidFlowError(
          `${which}: ${
            FLOW_REFUSED[f] ??
            `${f} is not supported in a flow (key, queue, data, parents, onParentFailure, priority, attempts, timeoutMs, group, task, delayMs, uses, notify)`
          }`,
        );
    try {
      assertQueueName(job.queue);
    } catch (err) {
      if (err instanceof InvalidNameError) throw new InvalidFlowError(`${which}: ${err.message}`);
      throw err;
    }
    if (pipelineOf(job.queue) !== pipeline)
      throw new InvalidFlowError(
        `${which}: queue ${job.queue} is not of pipeline ${pipeline} (a flow lives in one pipeline: its stages share one Redis slot)`,
      );
    if (job.onParentFailure !== undefined && !FLOW_POLICIES.has(job.onParentFailure))
      throw new InvalidFlowError(
        `${which}: onParentFailure must be fail, continue or ignore, got ${JSON.stringify(job.onParentFailure)}`,
      );
    const parents = job.parents ?? [];
    if (!Array.isArray(parents)) throw new InvalidFlowError(`${which}: parents must be an array of keys`);
    if (parents.length > FLOW_MAX_PARENTS)
      throw new InvalidFlowError(`${which}: at most ${FLOW_MAX_PARENTS} parents, got ${parents.length}`);
    if (new Set(parents).size !== parents.length)
      throw new InvalidFlowError(`${which}: a parent is listed twice`);
  });
  // Kahn's order; what is left over lies on or behind a cycle.
  const waiting = new Map<string, number>();
  const children = new Map<string, string[]>();
  for (const job of jobs) {
    for (const p of job.parents ?? []) {
      if (!byKey.has(p))
        throw new InvalidFlowError(
          `flow job ${job.key}: parent ${JSON.stringify(p)} is not a key of this flow`,
        );
      if (p === job.key) throw new InvalidFlowError(`flow job ${job.key}: a job cannot be its own parent`);
      const c = children.get(p);
      if (c) c.push(job.key);
      else children.set(p, [job.key]);
    }
    waiting.set(job.key, (job.parents ?? []).length);
  }
  const order: FlowJob[] = [];
  const ready = jobs.filter((j) => waiting.get(j.key) === 0).map((j) => j.key);
  while (ready.length > 0) {
    const key = ready.pop()!;
    order.push(byKey.get(key)!);
    for (const c of children.get(key) ?? []) {
      const left = waiting.get(c)! - 1;
      waiting.set(c, left);
      if (left === 0) ready.push(c);
    }
  }
  if (order.length < jobs.length) {
    const stuck = jobs.filter((j) => waiting.get(j.key)! > 0).map((j) => j.key);
    throw new InvalidFlowError(
      `the flow has a cycle: ${stuck.slice(0, 10).join(", ")}${stuck.length > 10 ? ", …" : ""} wait for each other`,
    );
  }
  return order;
}

/** A job's `notify` option, checked: an http(s) URL and events among completed, dead, cancelled. */
export function checkJobNotify(notify: unknown, index: number, id?: string): JobNotify {
  const which = id !== undefined ? `job ${id}` : `job at index ${index}`;
  const n = notify as Partial<JobNotify> | null;
  if (typeof n !== "object" || n === null || Array.isArray(n))
    throw new InvalidJobError(`${which}: notify must be an object {url, events}`);
  let url: URL | undefined;
  try {
    url = typeof n.url === "string" ? new URL(n.url) : undefined;
  } catch {
    url = undefined;
  }
  if (!url || (url.protocol !== "https:" && url.protocol !== "http:") || /\s/.test(String(n.url)))
    throw new InvalidJobError(
      `${which}: notify.url must be an http:// or https:// URL, got ${JSON.stringify(n.url)}`,
    );
  const extra = Object.keys(n).filter((k) => k !== "url" && k !== "events");
  if (extra.length > 0)
    throw new InvalidJobError(
      `${which}: notify takes url and events only (the secret is the pool's), got ${extra.join(", ")}`,
    );
  const events = n.events ?? ["completed", "dead", "cancelled"];
  if (
    !Array.isArray(events) ||
    events.length === 0 ||
    events.some((e) => !(NOTIFY_EVENTS as readonly string[]).includes(e as string))
  )
    throw new InvalidJobError(
      `${which}: notify.events must be a non-empty list of ${NOTIFY_EVENTS.join(", ")}, got ${JSON.stringify(n.events)}`,
    );
  return { url: String(n.url), events: [...new Set(events)] as NotifyEvent[] };
}

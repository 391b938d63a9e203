// The one place the TypeScript clients call the Lua scripts: a function per script that takes its
// inputs by name, builds KEYS and ARGV in the order the script reads them (each order written
// here once, beside the script's header) and hands back its reply by name. Callers never build
// KEYS or ARGV (docs/protocol.md, "How the scripts are called").
import { runDurableScript, type DurabilityOptions } from "./durability.ts";
import type { PipelineKeys, QueueKeys } from "./keys.ts";
import { runScript, type RedisClient, type ScriptArg } from "./scripts.ts";

/** `durability` undefined: the call is never WAITed on (the scripts a caller may repeat). */
function call<T>(
  redis: RedisClient,
  durability: DurabilityOptions | undefined,
  name: Parameters<typeof runScript>[1],
  keys: string[],
  args: ScriptArg[],
): Promise<T> {
  return durability
    ? runDurableScript<T>(redis, durability, name, keys, args)
    : runScript<T>(redis, name, keys, args);
}

/**
 * A call's settings or a job's fields as the scripts take them: one named record, JSON
 * (includes/wire.lua). An undefined field is left out: the script's default. A lone surrogate
 * becomes U+FFFD, as it does in a plain argument: cjson refuses its `\udXXX` escape.
 */
function wireRecord(
  fields: Record<string, string | number | boolean | readonly string[] | undefined>,
): string {
  for (const k in fields) {
    const v = fields[k];
    if (typeof v === "string" && !v.isWellFormed()) fields[k] = v.toWellFormed();
  }
  return JSON.stringify(fields);
}

// ES2024's string methods, in Node from 20 on, which the library package's lib list (es2023,
// packages/queue/tsconfig.json) does not declare.
declare global {
  interface String {
    isWellFormed(): boolean;
    toWellFormed(): string;
  }
}

/** A script's named reply — name/value pairs, an absent field left out — as an object. */
function named<T>(pairs: unknown[]): T {
  const out: Record<string, unknown> = {};
  for (let i = 0; i < pairs.length; i += 2) out[String(pairs[i])] = pairs[i + 1];
  return out as T;
}

// ---- The claim and settles (the worker's calls) ----

/**
 * claim_jobs' KEYS by name, in the order the script reads them (CLAIM_KEYS in
 * queue/scripts/includes/claimKeys.lua; complete-and-claim names the same keys itself).
 */
export const CLAIM_KEYS = [
  "ready",
  "delayed",
  "inflight",
  "dead",
  "counts",
  "fence",
  "wake",
  "outbox",
  "meta",
  "contract",
] as const satisfies readonly (keyof QueueKeys)[];

const claimKeyLists = new WeakMap<QueueKeys, string[]>();
function claimKeys(k: QueueKeys): string[] {
  let list = claimKeyLists.get(k);
  if (!list) claimKeyLists.set(k, (list = CLAIM_KEYS.map((name) => k[name])));
  return list;
}

/** The claim's reply (claim_jobs, and the claim part of settle_jobs): docs/protocol.md, "The claim reply". */
export interface ClaimReply {
  /** Empty, or the per-job field names ('id,token,data,…') then each job's values. */
  jobs: string[];
  /** When the next delayed job or rate window is due, on the caller's clock; -1: none. */
  nextDueMs: number;
  /** > 0: start each job within this many ms of sending the call, or hand it back unstarted. */
  startSlackMs: number;
  /** The layout in force when newer than the caller reads: the claim took nothing. */
  refusedLayout?: number;
}

function claimReply(jobs: string[], nextDueMs: number, slack?: number, refused?: number): ClaimReply {
  return {
    jobs,
    nextDueMs,
    startSlackMs: slack ?? 0,
    ...(refused ? { refusedLayout: refused } : {}),
  };
}

export interface ClaimArgs {
  keys: QueueKeys;
  now: number;
  leaseMs: number;
  count: number;
  workerId: string;
  /** The newest layout the caller reads. */
  readsLayout: number;
}

export async function claimJobs(redis: RedisClient, a: ClaimArgs): Promise<ClaimReply> {
  const k = a.keys;
  const r = named<{ jobs: string[]; nextDueMs: number; startSlackMs: number; refusedLayout?: number }>(
    await runScript<unknown[]>(redis, "claim_jobs", claimKeys(k), [
      wireRecord({
        jobPrefix: k.jobPrefix,
        queue: k.queue,
        now: a.now,
        leaseMs: a.leaseMs,
        count: a.count,
        workerId: a.workerId,
        readsLayout: a.readsLayout,
      }),
    ]),
  );
  return claimReply(r.jobs, r.nextDueMs, r.startSlackMs, r.refusedLayout);
}

/** One job of a settle_jobs call. */
export interface SettleJob {
  id: string;
  token: string;
  /** The result's JSON text. */
  result: string;
  contentHash: string;
  resultTtlSeconds: number;
  reused: boolean;
  /** With a next queue: the next stage's input (JSON), its content hash, its trace ('' = the job's own). */
  next?: { data: string; contentHash: string; trace: string };
}

export interface SettleArgs extends Omit<ClaimArgs, "count"> {
  retentionSeconds: number;
  /** The next stage every job hands over to, and the hash of its contract the data was checked against. */
  next?: { keys: QueueKeys; contract: string };
  /** Jobs to claim for the freed slots (0: none). */
  claim: number;
  templateVersion: string;
  jobs: readonly SettleJob[];
}

export interface SettleReply extends ClaimReply {
  /** Per job in order: 1 settled, 0 fenced, -1 cancelled meanwhile. */
  codes: number[];
}

const completeKeyLists = new WeakMap<QueueKeys, string[]>();

export async function settleJobs(
  redis: RedisClient,
  durability: DurabilityOptions,
  a: SettleArgs,
): Promise<SettleReply> {
  const k = a.keys;
  let keys: string[];
  if (a.next) {
    const nk = a.next.keys;
    keys = [k.inflight, k.counts, k.outbox, k.meta, nk.ready, nk.counts, nk.wake, nk.contract];
  } else {
    keys = completeKeyLists.get(k) ?? [k.inflight, k.counts, k.outbox, k.meta];
    completeKeyLists.set(k, keys);
  }
  // The optional job fields no job of the call has are left out of jobFields.
  let hash = false;
  let ttl = false;
  let reused = false;
  let nextHash = false;
  let nextTrace = false;
  for (const j of a.jobs) {
    hash ||= j.contentHash !== "";
    ttl ||= j.resultTtlSeconds !== 0;
    reused ||= j.reused;
    nextHash ||= !!j.next?.contentHash;
    nextTrace ||= !!j.next?.trace;
  }
  const jobFields = ["id", "token"];
  if (hash) jobFields.push("contentHash");
  if (ttl) jobFields.push("resultTtlSeconds");
  if (reused) jobFields.push("reused");
  if (nextHash) jobFields.push("nextContentHash");
  if (nextTrace) jobFields.push("nextTrace");
  const args: ScriptArg[] = [
    wireRecord({
      jobPrefix: k.jobPrefix,
      queue: k.queue,
      now: a.now,
      jobFields,
      retentionSeconds: a.retentionSeconds || undefined,
      nextQueue: a.next?.keys.queue,
      claim: a.claim || undefined,
      leaseMs: a.claim ? a.leaseMs : undefined,
      workerId: a.claim ? a.workerId : undefined,
      contract: a.next?.contract || undefined,
      templateVersion: a.templateVersion || undefined,
      readsLayout: a.readsLayout,
    }),
  ];
  // (plain arguments: a lone surrogate becomes U+FFFD on the way, as in any argument)
  for (const j of a.jobs) {
    args.push(j.id, j.token);
    if (hash) args.push(j.contentHash);
    if (ttl) args.push(j.resultTtlSeconds);
    if (reused) args.push(j.reused ? "1" : "");
    if (nextHash) args.push(j.next?.contentHash ?? "");
    if (nextTrace) args.push(j.next?.trace ?? "");
    args.push(j.result);
    if (a.next) args.push(j.next!.data);
  }
  const r = named<{
    codes: number[];
    jobs: string[];
    nextDueMs: number;
    startSlackMs: number;
    refusedLayout?: number;
  }>(await call<unknown[]>(redis, durability, "settle_jobs", keys, args));
  return { codes: r.codes, ...claimReply(r.jobs, r.nextDueMs, r.startSlackMs, r.refusedLayout) };
}

export interface RenewArgs {
  keys: QueueKeys;
  now: number;
  leaseMs: number;
  workerId: string;
  /** The worker's report (JSON) for `<Q>workers` ('' = none) and its pod ('' = none: no cordon check). */
  report: string;
  pod: string;
  leases: readonly { id: string; token: string }[];
}

export interface RenewReply {
  lost: string[];
  cancelled: string[];
  /** '' or the end (ms) of the pod's cordon. */
  cordonedUntil: string;
}

export async function renewLeases(redis: RedisClient, a: RenewArgs): Promise<RenewReply> {
  const k = a.keys;
  const args: ScriptArg[] = [
    wireRecord({
      jobPrefix: k.jobPrefix,
      now: a.now,
      leaseMs: a.leaseMs,
      workerId: a.workerId,
      workerInfo: a.report || undefined,
      pod: a.pod || undefined,
    }),
  ];
  for (const l of a.leases) args.push(l.id, l.token);
  const r = named<{ lost: string[]; cancelled: string[]; cordonedUntil?: string }>(
    await runScript<unknown[]>(redis, "renew_leases", [k.inflight, k.workers, k.cordon], args),
  );
  return { lost: r.lost, cancelled: r.cancelled, cordonedUntil: r.cordonedUntil ?? "" };
}

export interface FanOutArgs {
  keys: QueueKeys;
  id: string;
  token: string;
  now: number;
  next: QueueKeys;
  joinQueue: string;
  joinTrace: string;
  /** The children's inputs (JSON) and, when given, one trace each. */
  children: readonly string[];
  childTraces: readonly string[];
  contract: string;
}

/** fan_out's reply: the children's number, -1 the lease was lost, -2 the job was cancelled. */
export function fanOut(redis: RedisClient, durability: DurabilityOptions, a: FanOutArgs): Promise<number> {
  const k = a.keys;
  const n = a.next;
  return call<number>(
    redis,
    durability,
    "fan_out",
    [k.inflight, k.counts, k.outbox, k.meta, n.ready, n.counts, n.wake, k.seq, n.contract],
    [
      wireRecord({
        jobPrefix: k.jobPrefix,
        queue: k.queue,
        id: a.id,
        token: a.token,
        now: a.now,
        nextQueue: n.queue,
        joinQueue: a.joinQueue,
        children: a.children.length,
        joinTrace: a.joinTrace || undefined,
        traced: a.childTraces.length > 0 || undefined,
        contract: a.contract || undefined,
      }),
      ...a.children,
      ...a.childTraces,
    ],
  );
}

export interface ProgressArgs {
  keys: QueueKeys;
  id: string;
  token: string;
  now: number;
  fraction: number;
  message: string;
}

/** True when recorded; false when the lease was lost. */
export async function reportProgress(redis: RedisClient, a: ProgressArgs): Promise<boolean> {
  const k = a.keys;
  const ok = await runScript<number>(
    redis,
    "report_progress",
    [k.outbox, k.meta],
    [
      wireRecord({
        jobPrefix: k.jobPrefix,
        queue: k.queue,
        id: a.id,
        token: a.token,
        now: a.now,
        // (stored as the text it is sent as)
        fraction: String(a.fraction),
        message: a.message || undefined,
      }),
    ],
  );
  return ok === 1;
}

export interface AppendLogArgs {
  keys: QueueKeys;
  id: string;
  token: string;
  now: number;
  /** The line's JSON text. */
  line: string;
  maxLines: number;
  ttlSeconds: number;
}

/** True when appended; false when the lease was lost. */
export async function appendLog(redis: RedisClient, a: AppendLogArgs): Promise<boolean> {
  const k = a.keys;
  const ok = await runScript<number>(
    redis,
    "append_log",
    [k.logs(a.id)],
    [
      wireRecord({
        jobPrefix: k.jobPrefix,
        id: a.id,
        token: a.token,
        now: a.now,
        maxLines: a.maxLines,
        ttlSeconds: a.ttlSeconds,
      }),
      a.line,
    ],
  );
  return ok === 1;
}

export interface FailArgs {
  keys: QueueKeys;
  id: string;
  token: string;
  now: number;
  /** The error's JSON text. */
  error: string;
  retryDelayMs: number;
  retryable: boolean;
  kind: string;
  /** JSON, '' = none. */
  details: string;
  /** The rejected result's JSON text, '' = none. */
  rejected: string;
  templateVersion: string;
}

/** fail_job's reply: retry, dead, lost or cancelled. */
export function failJob<T extends string>(
  redis: RedisClient,
  durability: DurabilityOptions,
  a: FailArgs,
): Promise<T> {
  const k = a.keys;
  return call<T>(
    redis,
    durability,
    "fail_job",
    [k.inflight, k.delayed, k.dead, k.counts, k.outbox, k.meta],
    [
      wireRecord({
        jobPrefix: k.jobPrefix,
        queue: k.queue,
        id: a.id,
        token: a.token,
        now: a.now,
        error: a.error,
        retryDelayMs: a.retryDelayMs || undefined,
        retryable: a.retryable || undefined,
        kind: a.kind || undefined,
        details: a.details || undefined,
        rejected: a.rejected || undefined,
        templateVersion: a.templateVersion || undefined,
      }),
    ],
  );
}

export interface ReleaseArgs {
  keys: QueueKeys;
  id: string;
  token: string;
  now: number;
  reason: string;
  cause: string;
  /** A rate-limited hand-back: the resource's key admits nothing until `untilMs`. */
  bench?: { resource: string; key: string; untilMs: number };
  /** '' = none. */
  templateVersion: string;
}

/** release_job's code: 1 released, 0 fenced, -1 cancelled. */
export function releaseJob(redis: RedisClient, a: ReleaseArgs): Promise<number> {
  const k = a.keys;
  const args = [
    wireRecord({
      jobPrefix: k.jobPrefix,
      queue: k.queue,
      id: a.id,
      token: a.token,
      now: a.now,
      reason: a.reason,
      cause: a.cause,
      resource: a.bench?.resource,
      key: a.bench?.key,
      benchUntilMs: a.bench?.untilMs,
      templateVersion: a.templateVersion || undefined,
    }),
  ];
  return runScript<number>(
    redis,
    "release_job",
    [k.inflight, k.ready, k.counts, k.wake, k.outbox, k.meta],
    args,
  );
}

export async function reclaimFinished(
  redis: RedisClient,
  a: { keys: QueueKeys; now: number; limit: number },
): Promise<{ reclaimed: number; more: boolean }> {
  const r = named<{ reclaimed: number; more: number }>(
    await runScript<unknown[]>(
      redis,
      "reclaim_finished",
      [a.keys.finished],
      [wireRecord({ jobPrefix: a.keys.jobPrefix, now: a.now, limit: a.limit })],
    ),
  );
  return { reclaimed: Number(r.reclaimed), more: Number(r.more) === 1 };
}

/** sweep_leases' settings by name (fields of its record and of poll_queues'). */
export interface SweepSettings {
  maxStalls: number;
  limit: number;
  lockMs: number;
  workerStaleMs: number;
  gapMs: number;
  graceMs: number;
}

/** sweep_leases' keys, in its order (poll_queues takes the same 11 per queue). */
export function sweepKeys(k: QueueKeys): string[] {
  return [
    k.inflight,
    k.ready,
    k.dead,
    k.counts,
    k.wake,
    k.outbox,
    k.meta,
    k.sweepLock,
    k.delayed,
    k.workers,
    k.sweeper,
  ];
}

/** sweep_leases' reply: requeued (-1: another sweeper held the mutex), dead-lettered, grace left (ms). */
export interface SweepReply {
  requeued: number;
  dead: number;
  graceLeftMs: number;
}

export async function sweepLeases(
  redis: RedisClient,
  a: { keys: QueueKeys; now: number; settings: SweepSettings },
): Promise<SweepReply> {
  const k = a.keys;
  const s = a.settings;
  const r = named<SweepReply>(
    await runScript<unknown[]>(redis, "sweep_leases", sweepKeys(k), [
      wireRecord({
        jobPrefix: k.jobPrefix,
        queue: k.queue,
        now: a.now,
        maxStalls: s.maxStalls,
        limit: s.limit,
        lockMs: s.lockMs,
        workerStaleMs: s.workerStaleMs,
        gapMs: s.gapMs || undefined,
        graceMs: s.graceMs || undefined,
      }),
    ]),
  );
  return { requeued: Number(r.requeued), dead: Number(r.dead), graceLeftMs: Number(r.graceLeftMs) };
}

// ---- Counts and the operator's poll ----

/** backlog_counts' reply by name (poll_queues' counts of a queue). */
export interface CountsReply {
  ready: number;
  delayed: number;
  dueDelayed: number;
  inflight: number;
  dead: number;
  completed: number;
  enqueued: number;
  waitingForBudget: number;
  ended: number;
  runMs: number;
  waitingChildren: number;
  /** Absent when nothing ready has a createdAt. */
  oldestReadyAt?: number;
}

export async function backlogCounts(
  redis: RedisClient,
  a: { keys: QueueKeys; now: number },
): Promise<CountsReply> {
  const k = a.keys;
  return named<CountsReply>(
    await runScript<unknown[]>(
      redis,
      "backlog_counts",
      [k.ready, k.delayed, k.inflight, k.dead, k.counts],
      [wireRecord({ jobPrefix: k.jobPrefix, now: a.now })],
    ),
  );
}

/**
 * A queue's part of a poll_queues call — its 11 keys and 2 arguments — made once: a caller that
 * polls the same queues again keeps it (the keys are most of what a poll would otherwise build).
 */
export interface PolledQueue {
  queue: string;
  keys: string[];
  args: string[];
}

export function polledQueue(k: QueueKeys): PolledQueue {
  return { queue: k.queue, keys: sweepKeys(k), args: [k.jobPrefix, k.queue] };
}

/** A queue's poll_queues reply: its counts, control and (when asked) sweep, or why a part failed. */
export interface PollReply extends Partial<CountsReply> {
  paused?: number;
  /** The rate limit as stored, `<max>/<windowMs>`. */
  rate?: string;
  groupedWaiting?: number;
  sweep?: SweepReply;
  /** The counts' read failed (a key of the wrong type): its message. */
  error?: string;
  sweepError?: string;
}

/** One poll_queues call for `queues` (all on one node): per queue its reply by name. */
export async function pollQueues(
  redis: RedisClient,
  a: { now: number; sweep: boolean; settings: SweepSettings; queues: readonly PolledQueue[] },
): Promise<PollReply[]> {
  const keys: string[] = [];
  const s = a.settings;
  const args: ScriptArg[] = [
    wireRecord(
      a.sweep
        ? {
            now: a.now,
            sweep: true,
            maxStalls: s.maxStalls,
            limit: s.limit,
            lockMs: s.lockMs,
            workerStaleMs: s.workerStaleMs,
            gapMs: s.gapMs || undefined,
            graceMs: s.graceMs || undefined,
          }
        : { now: a.now },
    ),
  ];
  for (const q of a.queues) {
    keys.push(...q.keys);
    args.push(...q.args);
  }
  const replies = await runScript<unknown[][]>(redis, "poll_queues", keys, args);
  return replies.map((pairs) => {
    const r = named<PollReply & { sweep?: unknown[] }>(pairs);
    return r.sweep ? { ...r, sweep: named<SweepReply>(r.sweep) } : r;
  });
}

// ---- Admin ----

export async function promoteJob<O extends string>(
  redis: RedisClient,
  a: { keys: QueueKeys; id: string; now: number },
): Promise<{ outcome: O; state: string }> {
  const k = a.keys;
  const r = named<{ outcome: O; state?: string }>(
    await runScript<unknown[]>(
      redis,
      "promote_job",
      [k.delayed, k.ready, k.wake, k.outbox, k.meta],
      [wireRecord({ jobPrefix: k.jobPrefix, id: a.id, queue: k.queue, now: a.now })],
    ),
  );
  return { outcome: r.outcome, state: r.state ?? "" };
}

/** Per id in order: its outcome and the state it was in ('' when none). */
export async function deleteJobs<O extends string>(
  redis: RedisClient,
  a: { keys: QueueKeys; ids: readonly string[]; now: number },
): Promise<{ id: string; outcome: O; state: string }[]> {
  const k = a.keys;
  const replies = await runScript<unknown[][]>(
    redis,
    "delete_jobs",
    [k.ready, k.delayed, k.dead, k.counts, k.outbox, k.meta],
    [
      wireRecord({
        jobPrefix: k.jobPrefix,
        idempotencyPrefix: k.idempotencyPrefix,
        queue: k.queue,
        now: a.now,
      }),
      ...a.ids,
    ],
  );
  return replies.map((pairs) => {
    const r = named<{ id: string; outcome: O; state?: string }>(pairs);
    return { id: r.id, outcome: r.outcome, state: r.state ?? "" };
  });
}

/** Moves these dead jobs back to ready, or (no `ids`) up to `limit` of the oldest; returns how many moved. */
export function retryDead(
  redis: RedisClient,
  a: { keys: QueueKeys; now: number } & ({ ids: readonly string[] } | { limit: number }),
): Promise<number> {
  const k = a.keys;
  const args: ScriptArg[] =
    "ids" in a
      ? [wireRecord({ jobPrefix: k.jobPrefix, queue: k.queue, now: a.now }), ...a.ids]
      : [wireRecord({ jobPrefix: k.jobPrefix, queue: k.queue, now: a.now, limit: a.limit })];
  return runScript<number>(redis, "retry_dead", [k.dead, k.ready, k.counts, k.wake, k.outbox, k.meta], args);
}

/** Deletes up to `limit` dead jobs; returns how many. */
export async function purgeDead(redis: RedisClient, a: { keys: QueueKeys; limit: number }): Promise<number> {
  const r = named<{ purged: number }>(
    await runScript<unknown[]>(
      redis,
      "purge_dead",
      [a.keys.dead],
      [wireRecord({ jobPrefix: a.keys.jobPrefix, limit: a.limit })],
    ),
  );
  return Number(r.purged);
}

/** Moves the layout in force forward (layout_finalize.lua); the layout in force before the call. */
export async function layoutFinalize(
  redis: RedisClient,
  a: { keys: PipelineKeys; to: number; firstVersion: string; at: number; by: string; queues: string[] },
): Promise<number> {
  const r = named<{ previous: number }>(
    await runScript<unknown[]>(
      redis,
      "layout_finalize",
      [a.keys.layout, a.keys.meta],
      [
        wireRecord({ to: a.to, firstVersion: a.firstVersion, finalizedAt: a.at, finalizedBy: a.by }),
        ...a.queues,
      ],
    ),
  );
  return Number(r.previous);
}

/** 1 when this call switched records on, 0 when they were on. */
export async function recordsEnable(
  redis: RedisClient,
  a: { keys: PipelineKeys; group: string },
): Promise<number> {
  const r = named<{ switched: number }>(
    await runScript<unknown[]>(
      redis,
      "records_enable",
      [a.keys.outbox, a.keys.meta],
      [wireRecord({ group: a.group })],
    ),
  );
  return Number(r.switched);
}

// ---- Schedules, groups, resources ----

/** 1 when the schedule existed. */
export async function scheduleRemove(
  redis: RedisClient,
  a: { keys: QueueKeys; name: string },
): Promise<number> {
  const r = named<{ existed: number }>(
    await runScript<unknown[]>(
      redis,
      "schedule_remove",
      [a.keys.schedules, a.keys.delayed],
      [wireRecord({ jobPrefix: a.keys.jobPrefix, name: a.name })],
    ),
  );
  return Number(r.existed);
}

/** 1 when the tick was put in line, 0 when it was already. */
export function scheduleTick(
  redis: RedisClient,
  a: { keys: QueueKeys; now: number; name: string; version: string | number; tick: number },
): Promise<number> {
  const k = a.keys;
  return runScript<number>(
    redis,
    "schedule_tick",
    [k.schedules, k.ready, k.delayed, k.counts, k.wake, k.outbox, k.meta, k.seq],
    [
      wireRecord({
        jobPrefix: k.jobPrefix,
        queue: k.queue,
        now: a.now,
        name: a.name,
        version: a.version === "" ? undefined : String(a.version),
        tick: a.tick,
      }),
    ],
  );
}

export async function groupControl(
  redis: RedisClient,
  a: { keys: QueueKeys; action: string; group: string; value: string },
): Promise<number> {
  const k = a.keys;
  // ('' is how callers say every group, or remove the setting: left out of the record)
  const r = named<{ regrouped: number }>(
    await runScript<unknown[]>(
      redis,
      "group_control",
      [k.groupControl, k.groupWaiting, k.groupRing, k.wake],
      [wireRecord({ action: a.action, group: a.group || undefined, value: a.value || undefined })],
    ),
  );
  return Number(r.regrouped);
}

export interface GroupAdmissionReply {
  waiting: number;
  sum: number;
  scanned: number;
  ring: number;
}

export async function groupAdmission(
  redis: RedisClient,
  a: { keys: QueueKeys; enough: number; scanLimit: number },
): Promise<GroupAdmissionReply> {
  const k = a.keys;
  const r = named<{ waiting: number; admissible: number; scanned: number; ring: number }>(
    await runScript<unknown[]>(
      redis,
      "group_admission",
      [k.groupRing, k.groupWaiting, k.groupRunning, k.groupControl],
      [wireRecord({ enough: a.enough, scanLimit: a.scanLimit })],
    ),
  );
  return {
    waiting: Number(r.waiting),
    sum: Number(r.admissible),
    scanned: Number(r.scanned),
    ring: Number(r.ring),
  };
}

/** `keys`: each key's id and its limits as `unit=max/windowMs,…`. */
export async function resourceSet(
  redis: RedisClient,
  a: {
    pipeline: PipelineKeys;
    name: string;
    ceiling: string;
    keys: readonly { id: string; limits: string }[];
  },
): Promise<void> {
  const args: string[] = [wireRecord({ ceiling: a.ceiling })];
  for (const key of a.keys) args.push(key.id, key.limits);
  await runScript(redis, "resource_set", [a.pipeline.resource(a.name), a.pipeline.resources], args);
}

export async function resourceRemove(
  redis: RedisClient,
  a: { pipeline: PipelineKeys; name: string },
): Promise<boolean> {
  const r = named<{ existed: number }>(
    await runScript<unknown[]>(
      redis,
      "resource_remove",
      [a.pipeline.resource(a.name), a.pipeline.resources],
      [],
    ),
  );
  return Number(r.existed) === 1;
}

/**
 * Corrects the window of a key a claim granted at `at` by `deltas` (unit → amount; the queue's
 * budget waits are woken when it frees room), or benches the key until `benchUntilMs`.
 */
export async function resourceUsage(
  redis: RedisClient,
  a: { pipeline: PipelineKeys; name: string; key: string; at: number; now: number } & (
    { queue: QueueKeys; deltas: readonly [string, number][] } | { benchUntilMs: number }
  ),
): Promise<void> {
  const keys = [a.pipeline.resource(a.name)];
  const benchUntilMs = "benchUntilMs" in a ? a.benchUntilMs : undefined;
  const args: string[] = [wireRecord({ key: a.key, at: a.at, now: a.now, benchUntilMs })];
  if (!("benchUntilMs" in a)) {
    keys.push(a.queue.groupBudget);
    for (const [unit, delta] of a.deltas) args.push(unit, String(delta));
  }
  await runScript(redis, "resource_usage", keys, args);
}

// ---- Cancel and job states ----

export async function cancelJob<O extends string>(
  redis: RedisClient,
  a: { pipeline: PipelineKeys; id: string; now: number; retentionSeconds: number },
): Promise<{ outcome: O; state: string; queue: string; jobsCancelled: number }> {
  const p = a.pipeline;
  const r = named<{ outcome: O; state?: string; queue?: string; jobsCancelled: number }>(
    await runScript<unknown[]>(
      redis,
      "cancel_job",
      [p.outbox, p.meta],
      [
        wireRecord({
          jobPrefix: p.jobPrefix,
          id: a.id,
          now: a.now,
          retentionSeconds: a.retentionSeconds || undefined,
        }),
      ],
    ),
  );
  return {
    outcome: r.outcome,
    state: r.state ?? "",
    queue: r.queue ?? "",
    jobsCancelled: Number(r.jobsCancelled),
  };
}

/**
 * A job_states reply for one key: `type` when it is not a hash (`none`: no such key), else the
 * fields read that the record has and, asked `whole` for an ended job, its whole record.
 */
export interface JobStateReply {
  type?: string;
  fields: Record<string, string>;
  record?: Record<string, string>;
}

/** Per id in order: `fields` of its record (`whole`: an ended job's every field). */
export async function jobStates(
  redis: RedisClient,
  a: { pipeline: PipelineKeys; ids: readonly string[]; whole: boolean; fields: readonly string[] },
): Promise<JobStateReply[]> {
  const replies = await runScript<unknown[][]>(
    redis,
    "job_states",
    a.ids.map((id) => a.pipeline.job(id)),
    [wireRecord({ whole: a.whole || undefined }), ...a.fields],
  );
  return replies.map((pairs) => {
    const { type, record, ...fields } = named<Record<string, string> & { type?: string; record?: string[] }>(
      pairs,
    );
    const out: JobStateReply = { fields };
    if (type !== undefined) out.type = type;
    if (record) out.record = named<Record<string, string>>(record);
    return out;
  });
}

// ---- Enqueue ----

/**
 * One job as enqueue_jobs takes it: a named record whose absent fields are their defaults
 * (docs/protocol.md, "Enqueueing from another language"). A new job field is one line here and
 * in OPTIONAL_FIELDS, and the script's reading of it.
 */
export interface EnqueueRecord {
  id: string;
  /** The data's JSON text. */
  data: string;
  priority?: number;
  delayMs?: number;
  attempts?: number;
  timeoutMs?: number;
  idempotencyKey?: string;
  contentHash?: string;
  /** The W3C trace context of the enqueue. */
  trace?: string;
  group?: string;
  /** `<debounce|throttle>:<windowMs>:<key>`. */
  dedupe?: string;
  /** JSON {resource: {unit: amount}}. */
  uses?: string;
  /** The job's task name. */
  task?: string;
  /** JSON {url, events} (docs/notifications.md). */
  notify?: string;
}

const OPTIONAL_FIELDS = [
  "priority",
  "delayMs",
  "attempts",
  "timeoutMs",
  "idempotencyKey",
  "contentHash",
  "trace",
  "group",
  "dedupe",
  "uses",
  "task",
  "notify",
] as const satisfies readonly (keyof EnqueueRecord)[];

/**
 * The names of the fields these records have (`id`, `data` first; a field none of them has is not
 * sent) and, after enqueue_jobs' call record, each record's values in that order.
 */
function enqueueRecordArgs(records: readonly EnqueueRecord[]): { fields: string[]; values: ScriptArg[] } {
  const fields: (keyof EnqueueRecord)[] = ["id", "data"];
  for (const f of OPTIONAL_FIELDS) if (records.some((r) => r[f] !== undefined)) fields.push(f);
  const values: ScriptArg[] = [];
  for (const r of records) for (const f of fields) values.push(r[f] ?? "");
  return { fields, values };
}

/** enqueue_jobs' KEYS, in the script's order. */
export function enqueueJobsKeys(k: QueueKeys): string[] {
  return [k.ready, k.delayed, k.counts, k.wake, k.outbox, k.meta, k.seq, k.contract];
}

/** Per job in order: its id and 1 created, 0 an existing job (known id or key), 2 replaced (debounce). */
export type EnqueueReply = { id: string; code: number }[];

export async function enqueueJobs(
  redis: RedisClient,
  durability: DurabilityOptions,
  a: {
    keys: QueueKeys;
    now: number;
    maxPayloadBytes: number;
    idempotencyTtlSeconds: number;
    records: readonly EnqueueRecord[];
    /** The hash of the contract the records were checked against ('' = none). */
    contractHash: string;
  },
): Promise<EnqueueReply> {
  const k = a.keys;
  const { fields, values } = enqueueRecordArgs(a.records);
  const record = wireRecord({
    jobPrefix: k.jobPrefix,
    idempotencyPrefix: k.idempotencyPrefix,
    queue: k.queue,
    now: a.now,
    maxPayloadBytes: a.maxPayloadBytes,
    idempotencyTtlSeconds: a.idempotencyTtlSeconds,
    jobFields: fields,
    contract: a.contractHash || undefined,
  });
  const r = named<{ ids: string[]; codes: number[] }>(
    await call<unknown[]>(redis, durability, "enqueue_jobs", enqueueJobsKeys(k), [record, ...values]),
  );
  return r.ids.map((id, i) => ({ id: String(id), code: Number(r.codes[i]) }));
}

/**
 * enqueue_flow: `fields` names the per-job fields, each of `rows` one job's values in that order;
 * `queues` the flow's queues, each with the hash of its contract the jobs were checked against.
 */
export async function enqueueFlow(
  redis: RedisClient,
  durability: DurabilityOptions,
  a: {
    pipeline: PipelineKeys;
    flowId: string;
    now: number;
    maxPayloadBytes: number;
    queues: readonly { keys: QueueKeys; contractHash: string }[];
    fields: readonly string[];
    rows: readonly (readonly ScriptArg[])[];
    /** The flow's idempotency key: a flow written before under it is returned, nothing written. */
    idempotencyKey?: string;
  },
): Promise<{ created: true } | { created: false; flowId: string; ids: string[] }> {
  const p = a.pipeline;
  const keys = [p.outbox, p.meta, p.seq, p.flow(a.flowId)];
  for (const { keys: k } of a.queues) keys.push(k.ready, k.delayed, k.counts, k.wake, k.contract);
  if (a.idempotencyKey !== undefined) keys.push(p.flowIdempotency(a.idempotencyKey));
  const contractHashes: Record<string, string> = {};
  for (const q of a.queues) if (q.contractHash) contractHashes[q.keys.queue] = q.contractHash;
  const args: ScriptArg[] = [
    JSON.stringify({
      jobPrefix: p.jobPrefix,
      flowId: a.flowId,
      now: a.now,
      maxPayloadBytes: a.maxPayloadBytes,
      queues: a.queues.map((q) => q.keys.queue),
      contractHashes: Object.keys(contractHashes).length > 0 ? contractHashes : undefined,
      jobFields: a.fields,
    }),
  ];
  for (const row of a.rows) args.push(...row);
  const r = named<{ written?: number; flowId?: string; ids?: string[] }>(
    await call<unknown[]>(redis, durability, "enqueue_flow", keys, args),
  );
  if (r.flowId === undefined) return { created: true };
  // (a flow written before under the key: its id, and each job's id in the call's order)
  return { created: false, flowId: String(r.flowId), ids: (r.ids ?? []).map(String) };
}

/** cancel_flow: the jobs it cancelled (-1: no such flow here) and the flow's size. */
export async function cancelFlow(
  redis: RedisClient,
  a: { pipeline: PipelineKeys; id: string; now: number; retentionSeconds: number },
): Promise<{ cancelled: number; total: number }> {
  const p = a.pipeline;
  const r = named<{ cancelled: number; total: number }>(
    await runScript<unknown[]>(
      redis,
      "cancel_flow",
      [p.outbox, p.meta, p.flow(a.id)],
      [wireRecord({ jobPrefix: p.jobPrefix, now: a.now, retentionSeconds: a.retentionSeconds || undefined })],
    ),
  );
  return { cancelled: Number(r.cancelled), total: Number(r.total) };
}

/** flow_repair: the dependents told, the jobs gone (-1 told: no such flow here) and the flow's size. */
export async function flowRepair(
  redis: RedisClient,
  a: { pipeline: PipelineKeys; id: string; now: number },
): Promise<{ told: number; gone: number; total: number }> {
  const p = a.pipeline;
  const r = named<{ told: number; gone: number; total: number }>(
    await runScript<unknown[]>(
      redis,
      "flow_repair",
      [p.flow(a.id)],
      [wireRecord({ jobPrefix: p.jobPrefix, now: a.now, id: a.id })],
    ),
  );
  return { told: Number(r.told), gone: Number(r.gone), total: Number(r.total) };
}

// ---- The job API ----

/** token_rate: one request of a rate-limited API token, admitted or not (GCRA on Redis' clock). */
export async function tokenRate(
  redis: RedisClient,
  a: { key: string; max: number; perMs: number },
): Promise<{ admitted: boolean; retryAfterMs: number }> {
  const r = named<{ admitted: number; retryAfterMs?: number }>(
    await runScript<unknown[]>(redis, "token_rate", [a.key], [wireRecord({ max: a.max, windowMs: a.perMs })]),
  );
  return { admitted: Number(r.admitted) === 1, retryAfterMs: Number(r.retryAfterMs ?? 0) };
}

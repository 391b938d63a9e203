// Outbox entries → typed events → per-row patches. The Lua scripts in queue/scripts append one
// stream entry per transition (see `record` in queue/scripts/includes/record.lua); this file is the only place that
// knows their fields. A batch is folded into at most one patch per job and one per execution,
// in stream order, so one multi-row upsert per table writes the whole batch.

export const EVENT_TYPES = [
  "enqueued",
  "started",
  "progress",
  "completed",
  "retried",
  "dead",
  "handedBack",
  "deferred",
  "stalled",
  "cancelled",
  "promoted",
  "deleted",
] as const;
export type EventType = (typeof EVENT_TYPES)[number];
/** Entries that change nothing recorded: acknowledged and skipped (none at present). */
export const IGNORED_TYPES: readonly string[] = [];

/** A raw stream entry as XREADGROUP/XAUTOCLAIM return it (fields null when the entry was trimmed). */
export type RawEntry = [id: string, fields: string[] | null];

export interface OutboxEvent {
  pipeline: string;
  /** Stream entry id (`ms-seq`). */
  streamId: string;
  /** The stream position as a decimal integer (ms·10²⁰ + seq): comparable in PostgreSQL. */
  version: string;
  type: EventType;
  id: string;
  queue: string;
  at: number;
  fields: Record<string, string>;
}

export class MalformedEventError extends Error {
  override name = "MalformedEventError";
  /** Set when the entry is well-formed but of a type this version does not know. */
  readonly unknownType: string | undefined;
  constructor(message: string, unknownType?: string) {
    super(message);
    this.unknownType = unknownType;
  }
}

const SEQ_SCALE = 10n ** 20n; // a stream id's sequence part is < 2^64 < 10^20

export function streamVersion(streamId: string): string {
  const m = /^(\d+)-(\d+)$/.exec(streamId);
  if (!m) throw new MalformedEventError(`bad stream id ${JSON.stringify(streamId)}`);
  return (BigInt(m[1]!) * SEQ_SCALE + BigInt(m[2]!)).toString();
}

/** The stream id's millisecond part: when Redis appended the entry. */
export function streamTime(streamId: string): number {
  return Number(streamId.slice(0, streamId.indexOf("-")));
}

// PostgreSQL text cannot hold NUL; payloads written straight into Redis might.
function clean(s: string): string {
  return s.includes("\u0000") ? s.replaceAll("\u0000", "\uFFFD") : s;
}

/** The event of an entry, or null for entries that record nothing (IGNORED_TYPES). */
export function parseEntry(pipeline: string, [streamId, list]: RawEntry): OutboxEvent | null {
  const version = streamVersion(streamId);
  if (!list) throw new MalformedEventError(`entry ${streamId} has no fields`);
  const fields: Record<string, string> = {};
  for (let i = 0; i + 1 < list.length; i += 2) fields[list[i]!] = clean(list[i + 1]!);
  const type = fields.type as EventType;
  if (fields.type !== undefined && IGNORED_TYPES.includes(fields.type)) return null;
  if (!EVENT_TYPES.includes(type))
    throw new MalformedEventError(
      `entry ${streamId}: unknown type ${JSON.stringify(fields.type)}`,
      String(fields.type),
    );
  const id = fields.id;
  const queue = fields.queue;
  const at = Number(fields.at);
  if (!id) throw new MalformedEventError(`entry ${streamId}: no job id`);
  if (!queue) throw new MalformedEventError(`entry ${streamId}: no queue`);
  if (!Number.isFinite(at) || at <= 0)
    throw new MalformedEventError(`entry ${streamId}: bad time ${JSON.stringify(fields.at)}`);
  return { pipeline, streamId, version, type, id, queue, at, fields };
}

/** A value set by an event at a stream position. */
export interface Versioned<T> {
  value: T;
  v: string;
}

export type JobState =
  | "queued"
  | "waiting-children"
  | "delayed"
  | "active"
  | "retrying"
  | "completed"
  | "dead"
  | "cancelled"
  | "deleted";

/** The latest progress report of a job's latest execution. */
export interface Progress {
  fraction: number | null;
  message: string | null;
  at: number | null;
}

/** Set when a job's history starts: its first enqueue, the job that fanned it out and the producer's idempotency key (if any). */
export interface Origin {
  createdAt: number | null;
  parentId: string | null;
  idempotencyKey?: string | null;
  /** A flow job's flow (docs/flows.md): from its enqueue entry. */
  flow?: FlowOrigin | null;
  /** The job's group (docs/protocol.md, "Groups"), or null: from its enqueue entry. */
  group?: string | null;
}

/** A flow job's place in its flow: the parents as keys and as ids, in the same order. */
export interface FlowOrigin {
  id: string;
  key: string;
  parents: string[];
  parentIds: string[];
  onParentFailure: string | null;
}

const words = (s: string | undefined) => (s ? s.split(" ").filter((w) => w !== "") : []);

function flowOrigin(f: Record<string, string>): FlowOrigin | null {
  if (!f.flow) return null;
  return {
    id: f.flow,
    key: f.flowKey ?? "",
    parents: words(f.parents),
    parentIds: words(f.parentIds),
    onParentFailure: f.onParentFailure || null,
  };
}

/** What a batch does to one conveyor_jobs row. */
export interface JobPatch {
  pipeline: string;
  id: string;
  // Set by every transition (version v_event); progress reports leave them alone (see progress()).
  queue: string;
  state: JobState;
  deadReason: string | null;
  finishedAt: number | null;
  /** When a delayed or retrying job becomes ready (the entry's `due`). */
  dueAt: number | null;
  updatedAt: number;
  lastEvent: string;
  v: string;
  // Set by some events, each with the version of the event that set it.
  data?: Versioned<string | null>;
  result?: Versioned<string | null>;
  error?: Versioned<string | null>;
  attempts?: Versioned<number>;
  maxAttempts?: Versioned<number | null>;
  stalls?: Versioned<number>;
  origin?: Versioned<Origin>;
  startedAt?: Versioned<number | null>;
  progress?: Versioned<Progress>;
  /** The job's task name: from an entry that carries `task` (a start, an enqueue). */
  task?: Versioned<string | null>;
}

export type AttemptOutcome =
  "running" | "completed" | "retried" | "dead" | "handedBack" | "deferred" | "stalled" | "cancelled";

/** What a batch does to one conveyor_attempts row (one execution = one lease token). */
export interface AttemptPatch {
  pipeline: string;
  jobId: string;
  execution: string;
  queue: string;
  worker: string | null;
  attempt: number | null;
  startedAt: number | null;
  // The end of the execution, with the version of the event that ended it.
  outcome: AttemptOutcome;
  finishedAt: number | null;
  error: string | null;
  reason: string | null;
  /** Completed with a result reused from an earlier run of the same input (content hash). */
  reused: boolean | null;
  vEnd: string | null;
}

function int(s: string | undefined): number | null {
  if (s === undefined || s === "") return null;
  const n = Number(s);
  return Number.isSafeInteger(n) ? n : null;
}

function errorMessage(errorJson: string | undefined): string | null {
  if (!errorJson) return null;
  try {
    const e = JSON.parse(errorJson) as { message?: unknown };
    return typeof e?.message === "string" ? e.message : null;
  } catch {
    return errorJson;
  }
}

/** A progress fraction (0..1) as the entry carries it, or null when it is not one (the report's message is still kept). */
function fraction(s: string | undefined): number | null {
  if (s === undefined || s.trim() === "") return null;
  const n = Number(s);
  return Number.isFinite(n) && n >= 0 && n <= 1 ? n : null;
}

const STATE: Record<Exclude<EventType, "progress">, JobState> = {
  enqueued: "queued",
  started: "active",
  completed: "completed",
  retried: "retrying",
  dead: "dead",
  handedBack: "queued",
  deferred: "queued",
  stalled: "queued",
  cancelled: "cancelled",
  promoted: "queued",
  deleted: "deleted",
};

/**
 * Where an enqueued entry comes from (`from`): nothing (a producer's enqueue: a new job), `dead`
 * (a dead-letter retry), `fan-in` (the join `<parent>:join`), the parent's id (a fan-out child
 * `<parent>:<n>`), or the previous queue (a stage hand-over: same job, next stage). A fan-out
 * child is told from a hand-over by its id, and a queue name of the pipeline always means a
 * hand-over.
 */
function enqueueOrigin(e: OutboxEvent): { newHistory: boolean; parentId: string | null } {
  const from = e.fields.from;
  if (!from) return { newHistory: true, parentId: null };
  if (from === "fan-in" && e.id.endsWith(":join"))
    return { newHistory: true, parentId: e.id.slice(0, -":join".length) };
  if (from === "dead") return { newHistory: false, parentId: null };
  // A flow job written waiting for its parents: its history starts here.
  if (from === "flow" && e.fields.state === "waiting-children") return { newHistory: true, parentId: null };
  const isQueue = from === e.pipeline || from.startsWith(`${e.pipeline}/`);
  if (!isQueue && e.id.startsWith(`${from}:`) && /^[1-9]\d*$/.test(e.id.slice(from.length + 1)))
    return { newHistory: true, parentId: from };
  return { newHistory: false, parentId: null };
}

// Progress reports are not transitions: they never set the v_event group of an existing row.
// A row that no transition has reached yet (its enqueue and start are in another recorder's
// batch, or were made before records were on) still needs one, so a report creates it with a
// placeholder at a version below every transition's — any transition replaces it — and above
// the placeholders of earlier reports, so the result does not depend on the delivery order.
const PLACEHOLDER_OFFSET = 10n ** 40n; // > any stream version (ms < 10^14 → version < 10^34)

function isPlaceholder(p: JobPatch): boolean {
  return p.v.startsWith("-");
}

function progress(p: JobPatch | undefined, e: OutboxEvent): JobPatch {
  const f = e.fields;
  const patch: JobPatch =
    p && !isPlaceholder(p)
      ? { ...p }
      : {
          ...(p ?? { pipeline: e.pipeline, id: e.id }),
          queue: e.queue,
          state: "active", // only the holder of a lease reports progress
          deadReason: null,
          finishedAt: null,
          dueAt: null,
          updatedAt: e.at,
          lastEvent: e.streamId,
          v: (BigInt(e.version) - PLACEHOLDER_OFFSET).toString(),
        };
  patch.progress = {
    value: { fraction: fraction(f.progress), message: f.message || null, at: e.at },
    v: e.version,
  };
  return patch;
}

function applyToJob(p: JobPatch | undefined, e: OutboxEvent): JobPatch {
  if (e.type === "progress") return progress(p, e);
  const f = e.fields;
  const v = e.version;
  const set = <T>(value: T): Versioned<T> => ({ value, v });
  // (a flow job released with a delay is `promoted` with a `due`)
  const due = e.type === "enqueued" || e.type === "retried" || e.type === "promoted" ? int(f.due) : null;
  const patch: JobPatch = {
    ...(p ?? { pipeline: e.pipeline, id: e.id }),
    queue: e.queue,
    state:
      (e.type === "enqueued" || e.type === "promoted") && due !== null
        ? "delayed"
        : e.type === "enqueued" && f.state === "waiting-children"
          ? "waiting-children"
          : STATE[e.type],
    deadReason:
      e.type === "dead"
        ? f.reason || errorMessage(f.error) || "dead"
        : e.type === "deleted"
          ? f.reason || null
          : null,
    // A deleted job keeps when it finished (the entry carries it); one that never ran ends now.
    finishedAt:
      e.type === "dead" || e.type === "completed" || e.type === "cancelled"
        ? e.at
        : e.type === "deleted"
          ? (int(f.finishedAt) ?? e.at)
          : null,
    dueAt: due,
    updatedAt: e.at,
    lastEvent: e.streamId,
    v,
  } as JobPatch;
  const noProgress = set<Progress>({ fraction: null, message: null, at: null });
  switch (e.type) {
    case "enqueued": {
      patch.data = set(f.data ?? null);
      patch.attempts = set(0);
      patch.stalls = set(0);
      patch.startedAt = set(null);
      patch.progress = noProgress;
      const origin = enqueueOrigin(e);
      const maxAttempts = int(f.attempts);
      if (maxAttempts !== null || origin.newHistory) patch.maxAttempts = set(maxAttempts);
      if (origin.newHistory) {
        // A new job (or an id reused after its record expired), a fan-out child, or a join: a new history.
        const flow = flowOrigin(f);
        patch.origin = set({
          createdAt: e.at,
          parentId: origin.parentId,
          idempotencyKey: f.key || null,
          group: f.group || null,
          ...(flow ? { flow } : {}),
        });
        patch.result = set(null);
        patch.error = set(null);
        patch.task = set(f.task || null);
      } else if (f.task) patch.task = set(f.task);
      break;
    }
    case "started": {
      const attempt = int(f.attempt);
      if (attempt !== null) patch.attempts = set(attempt);
      if (f.task) patch.task = set(f.task);
      patch.startedAt = set(e.at);
      patch.progress = noProgress; // a new execution reports afresh
      break;
    }
    case "completed":
      patch.result = set(f.result ?? null);
      // A job that succeeded has no error as its outcome; its failed attempts keep theirs.
      patch.error = set(null);
      break;
    case "retried":
    case "dead": {
      const attempt = int(f.attempt);
      if (attempt !== null) patch.attempts = set(attempt);
      if (f.error !== undefined) patch.error = set(f.error);
      break;
    }
    case "stalled": {
      const stalls = int(f.stalls);
      if (stalls !== null) patch.stalls = set(stalls);
      break;
    }
    case "handedBack":
    case "deferred":
    case "cancelled":
    case "promoted":
    case "deleted":
      break;
  }
  return patch;
}

function applyToAttempt(p: AttemptPatch | undefined, e: OutboxEvent, token: string): AttemptPatch {
  const f = e.fields;
  const a: AttemptPatch = p ?? {
    pipeline: e.pipeline,
    jobId: e.id,
    execution: token,
    queue: e.queue,
    worker: null,
    attempt: null,
    startedAt: null,
    outcome: "running",
    finishedAt: null,
    error: null,
    reason: null,
    reused: null,
    vEnd: null,
  };
  a.attempt ??= int(f.attempt);
  if (e.type === "started") {
    a.queue = e.queue;
    a.worker = f.worker ?? null;
    a.startedAt = e.at;
    a.attempt = int(f.attempt) ?? a.attempt;
  } else {
    a.outcome = e.type as AttemptOutcome;
    a.finishedAt = e.at;
    a.error = f.error ?? null;
    a.reason = f.reason ?? (e.type === "stalled" ? "lease expired" : null);
    a.reused = e.type === "completed" && f.reused !== undefined ? f.reused === "1" : null;
    a.vEnd = e.version;
  }
  return a;
}

/** What a batch does to one conveyor_stages row: a stage's input (enqueued) or result (completed). */
export interface StagePatch {
  pipeline: string;
  jobId: string;
  queue: string;
  data?: Versioned<string | null>;
  result?: Versioned<string | null>;
}

function applyToStage(p: StagePatch | undefined, e: OutboxEvent): StagePatch {
  const s: StagePatch = p ?? { pipeline: e.pipeline, jobId: e.id, queue: e.queue };
  if (e.type === "enqueued") s.data = { value: e.fields.data ?? null, v: e.version };
  else s.result = { value: e.fields.result ?? null, v: e.version };
  return s;
}

export interface FoldedBatch {
  jobs: JobPatch[];
  attempts: AttemptPatch[];
  stages: StagePatch[];
}

/**
 * Fold events (in stream order) into one patch per job and per execution. A handler's many
 * progress reports in one batch become one patch, so they cost one row update, not one each.
 */
export function foldEvents(events: readonly OutboxEvent[]): FoldedBatch {
  const jobs = new Map<string, JobPatch>();
  const attempts = new Map<string, AttemptPatch>();
  const stages = new Map<string, StagePatch>();
  for (const e of events) {
    const jk = `${e.pipeline}\u0000${e.id}`;
    jobs.set(jk, applyToJob(jobs.get(jk), e));
    const token = e.fields.token;
    if (e.type !== "enqueued" && e.type !== "progress" && token) {
      const ak = `${jk}\u0000${token}`;
      attempts.set(ak, applyToAttempt(attempts.get(ak), e, token));
    }
    if (e.type === "enqueued" || e.type === "completed") {
      const sk = `${jk}\u0000${e.queue}`;
      stages.set(sk, applyToStage(stages.get(sk), e));
    }
  }
  // A stable key order keeps concurrent recorders from deadlocking on each other's rows.
  const byKey = <T>(m: Map<string, T>) =>
    [...m.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, v]) => v);
  return { jobs: byKey(jobs), attempts: byKey(attempts), stages: byKey(stages) };
}

// Outbox entries → typed events → per-row patches. The Lua scripts in queue/scripts append one
// stream entry per transition (see `record` in _prelude.lua); this file is the only place that
// knows their fields. A batch is folded into at most one patch per job and one per execution,
// in stream order, so one multi-row upsert per table writes the whole batch.

export const EVENT_TYPES = ["enqueued", "started", "completed", "retried", "dead", "handedBack", "deferred", "stalled"] as const;
export type EventType = (typeof EVENT_TYPES)[number];
/** Entries that change nothing recorded (progress reports): acknowledged and skipped. */
export const IGNORED_TYPES: readonly string[] = ["progress"];

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
  if (!EVENT_TYPES.includes(type)) throw new MalformedEventError(`entry ${streamId}: unknown type ${JSON.stringify(fields.type)}`, String(fields.type));
  const id = fields.id;
  const queue = fields.queue;
  const at = Number(fields.at);
  if (!id) throw new MalformedEventError(`entry ${streamId}: no job id`);
  if (!queue) throw new MalformedEventError(`entry ${streamId}: no queue`);
  if (!Number.isFinite(at) || at <= 0) throw new MalformedEventError(`entry ${streamId}: bad time ${JSON.stringify(fields.at)}`);
  return { pipeline, streamId, version, type, id, queue, at, fields };
}

/** A value set by an event at a stream position. */
export interface Versioned<T> {
  value: T;
  v: string;
}

export type JobState = "queued" | "active" | "retrying" | "completed" | "dead";

/** What a batch does to one conveyor_jobs row. */
export interface JobPatch {
  pipeline: string;
  id: string;
  // Set by every event (version v_event).
  queue: string;
  state: JobState;
  deadReason: string | null;
  finishedAt: number | null;
  updatedAt: number;
  lastEvent: string;
  v: string;
  // Set by some events, each with the version of the event that set it.
  data?: Versioned<string | null>;
  result?: Versioned<string | null>;
  error?: Versioned<string | null>;
  attempts?: Versioned<number>;
  stalls?: Versioned<number>;
  createdAt?: Versioned<number | null>;
  startedAt?: Versioned<number | null>;
}

export type AttemptOutcome = "running" | "completed" | "retried" | "dead" | "handedBack" | "deferred" | "stalled";

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

const STATE: Record<EventType, JobState> = {
  enqueued: "queued",
  started: "active",
  completed: "completed",
  retried: "retrying",
  dead: "dead",
  handedBack: "queued",
  deferred: "queued",
  stalled: "queued",
};

function applyToJob(p: JobPatch | undefined, e: OutboxEvent): JobPatch {
  const f = e.fields;
  const v = e.version;
  const set = <T>(value: T): Versioned<T> => ({ value, v });
  const patch: JobPatch = {
    ...(p ?? { pipeline: e.pipeline, id: e.id }),
    queue: e.queue,
    state: STATE[e.type],
    deadReason: e.type === "dead" ? (f.reason || errorMessage(f.error) || "dead") : null,
    finishedAt: e.type === "dead" || e.type === "completed" ? e.at : null,
    updatedAt: e.at,
    lastEvent: e.streamId,
    v,
  } as JobPatch;
  switch (e.type) {
    case "enqueued":
      patch.data = set(f.data ?? null);
      patch.attempts = set(0);
      patch.stalls = set(0);
      patch.startedAt = set(null);
      if (!f.from) {
        // A new job (or an id reused after its record expired): a new history.
        patch.createdAt = set(e.at);
        patch.result = set(null);
        patch.error = set(null);
      }
      break;
    case "started": {
      const attempt = int(f.attempt);
      if (attempt !== null) patch.attempts = set(attempt);
      patch.startedAt = set(e.at);
      break;
    }
    case "completed":
      patch.result = set(f.result ?? null);
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

export interface FoldedBatch {
  jobs: JobPatch[];
  attempts: AttemptPatch[];
}

/** Fold events (in stream order) into one patch per job and per execution. */
export function foldEvents(events: readonly OutboxEvent[]): FoldedBatch {
  const jobs = new Map<string, JobPatch>();
  const attempts = new Map<string, AttemptPatch>();
  for (const e of events) {
    const jk = `${e.pipeline}\u0000${e.id}`;
    jobs.set(jk, applyToJob(jobs.get(jk), e));
    const token = e.fields.token;
    if (e.type !== "enqueued" && token) {
      const ak = `${jk}\u0000${token}`;
      attempts.set(ak, applyToAttempt(attempts.get(ak), e, token));
    }
  }
  // A stable key order keeps concurrent recorders from deadlocking on each other's rows.
  const byKey = <T>(m: Map<string, T>) => [...m.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, v]) => v);
  return { jobs: byKey(jobs), attempts: byKey(attempts) };
}

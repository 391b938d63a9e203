// The Redis key layout. Every key of a queue carries its pipeline's hash tag, so all keys of
// a pipeline (its stages, their jobs) live in one Redis Cluster slot and every script,
// stage-to-stage advance included, stays atomic on a cluster. See docs/protocol.md.
import { randomBytes } from "node:crypto";

export const KEY_ROOT = "cvy";
/** A global set of known pipelines, so a job can be found from its id alone. */
export const PIPELINES_KEY = `${KEY_ROOT}:pipelines`;
/** A global set of known queues (registered once per producer process and queue), for listings. */
export const QUEUES_KEY = `${KEY_ROOT}:queues`;
/** The pub/sub channel the operator leaves in a sleeping queue's doorbell (docs/protocol.md, "Doorbell"). */
export const DOORBELL_CHANNEL = `${KEY_ROOT}:doorbell`;

const QUEUE_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,99}(\/[A-Za-z0-9][A-Za-z0-9._-]{0,99})?$/;
const JOB_ID = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,199}$/;

export class InvalidNameError extends Error {
  override name = "InvalidNameError";
}

/**
 * A queue is `stage` or `pipeline/stage`. Stages of one pipeline share its hash tag, which
 * is what lets a job move from `docs/ocr` to `docs/embed` atomically.
 */
export function assertQueueName(queue: string): void {
  if (!QUEUE_NAME.test(queue)) {
    throw new InvalidNameError(
      `invalid queue name ${JSON.stringify(queue)}: use letters, digits, '.', '_', '-', optionally as 'pipeline/stage'`,
    );
  }
}

const ID_ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
/** Characters of a generated job id: 20 of 62 (119 random bits). */
export const GENERATED_ID_LENGTH = 20;

/**
 * A new job id: 20 random base-62 characters. Shorter than a UUID's 36 because a waiting job
 * carries its id twice or more (its key, its ready-line entry; a prioritised job's sorted-set
 * element and dict entry): every character is paid per waiting job (docs/performance.md,
 * "Bytes per waiting job").
 */
export function newJobId(): string {
  let id = "";
  while (id.length < GENERATED_ID_LENGTH) {
    // (bytes of 248 and above are dropped, so every character is equally likely)
    for (const b of randomBytes(32))
      if (b < 248 && id.length < GENERATED_ID_LENGTH) id += ID_ALPHABET[b % 62];
  }
  return id;
}

export function assertJobId(id: string): void {
  if (!JOB_ID.test(id)) {
    throw new InvalidNameError(
      `invalid job id ${JSON.stringify(id)}: use letters, digits, '.', '_', ':', '-' (at most 200)`,
    );
  }
}

export function pipelineOf(queue: string): string {
  assertQueueName(queue);
  return queue.split("/")[0]!;
}

/** Keys shared by all stages of one pipeline. */
export class PipelineKeys {
  readonly pipeline: string;
  readonly prefix: string;
  constructor(pipeline: string) {
    this.pipeline = pipeline;
    this.prefix = `${KEY_ROOT}:{${pipeline}}:`;
  }
  get jobPrefix(): string {
    return `${this.prefix}job:`;
  }
  job(id: string): string {
    return `${this.jobPrefix}${id}`;
  }
  /** Transactional record of transitions, drained into PostgreSQL. */
  get outbox(): string {
    return `${this.prefix}outbox`;
  }
  /** Pipeline settings written by workers (e.g. `records` = outbox on). */
  get meta(): string {
    return `${this.prefix}meta`;
  }
  get seq(): string {
    return `${this.prefix}seq`;
  }
  get fence(): string {
    return `${this.prefix}fence`;
  }
  /** A job's log lines (handlers' ctx.log), capped and expiring. */
  /** A waiting job's data longer than 64 B, until it is claimed (docs/protocol.md, "Job record fields"). */
  data(id: string): string {
    return `${this.prefix}data:${id}`;
  }
  logs(id: string): string {
    return `${this.prefix}logs:${id}`;
  }
}

/** Keys of one queue (one stage). */
export class QueueKeys extends PipelineKeys {
  readonly queue: string;
  constructor(queue: string) {
    super(pipelineOf(queue));
    this.queue = queue;
  }
  private part(name: string): string {
    return `${this.prefix}q:${this.queue}:${name}`;
  }
  /** Prioritised ready jobs (priority ≠ 0): a sorted set by score. */
  get ready(): string {
    return this.part("ready");
  }
  /** Ready jobs of priority 0 in FIFO order: a list (docs/protocol.md, "Ready jobs"). */
  get line(): string {
    return this.part("line");
  }
  /** How many entries of `line` are stale (their job was cancelled or deleted while waiting). */
  get lineStale(): string {
    return this.part("lineStale");
  }
  get delayed(): string {
    return this.part("delayed");
  }
  get inflight(): string {
    return this.part("inflight");
  }
  get dead(): string {
    return this.part("dead");
  }
  /** Finished jobs kept for retention, by when they are due to be reclaimed (sorted set; docs/protocol.md, "Retention"). */
  get finished(): string {
    return this.part("finished");
  }
  get counts(): string {
    return this.part("counts");
  }
  get wake(): string {
    return this.part("wake");
  }
  /** Set by the operator while the queue's pool is at zero: the pub/sub channel a wake rings once (docs/protocol.md, "Doorbell"). */
  get doorbell(): string {
    return this.part("doorbell");
  }
  get workers(): string {
    return this.part("workers");
  }
  /** Set by the operator while a scale-in waits for busy pods: pod → until (ms), pods to claim nothing new (docs/protocol.md, "Cordon"). */
  get cordon(): string {
    return this.part("cordon");
  }
  get sweepLock(): string {
    return this.part("sweep");
  }
  /** The sweeper's state: `sweptAt` (last call, Redis clock), `graceUntil` after an outage, its settings. */
  get sweeper(): string {
    return this.part("sweeper");
  }
  get events(): string {
    return this.part("events");
  }
  /** Schedules: `<name>` → spec (JSON), `next:<name>` → the next tick enqueued (ms). */
  get schedules(): string {
    return this.part("schedules");
  }
  get idempotencyPrefix(): string {
    return this.part("idem:");
  }
  /** Debounce and throttle keys (docs/protocol.md, "Debounce and throttle"): `<prefix><key>` → job id. */
  get dedupePrefix(): string {
    return this.part("dd:");
  }
  /** Groups (docs/protocol.md, "Groups"): the ring of groups that may be served next (sorted set by turn). */
  get groupRing(): string {
    return this.part("gring");
  }
  /** Group → its waiting jobs (field '' = all groups together). */
  get groupWaiting(): string {
    return this.part("gwaiting");
  }
  /** The groups with waiting jobs, by name (a sorted set, score 0), for listings. */
  get groupNames(): string {
    return this.part("gnames");
  }
  /** Group → its jobs holding a lease. */
  get groupRunning(): string {
    return this.part("grunning");
  }
  /** Group limits: `concurrency` (every group), `concurrency:<g>`, `paused:<g>`. */
  get groupControl(): string {
    return this.part("gcontrol");
  }
  /** Group → the resource it waits for, while it waits in the ring for budget (docs/protocol.md, "Resources"). */
  get groupBudget(): string {
    return this.part("gbudget");
  }
  /** One group's priority-0 waiting jobs (FIFO list). */
  groupLine(group: string): string {
    return this.part(`g:${group}:line`);
  }
  /** One group's rate-limit window log (`time:starts,…`), expiring a window after its last start. */
  groupRateLog(group: string): string {
    return this.part(`g:${group}:rlog`);
  }
  /** One group's prioritised waiting jobs (sorted set by score). */
  groupReady(group: string): string {
    return this.part(`g:${group}:ready`);
  }
  /** A stage result stored for reuse under its input's content hash. */
  result(contentHash: string): string {
    return `${this.prefix}result:${this.queue}:${contentHash}`;
  }
}

/** Stage chaining needs both queues in one slot: the same pipeline. */
export function assertSamePipeline(from: string, to: string): void {
  if (pipelineOf(from) !== pipelineOf(to)) {
    throw new InvalidNameError(
      `cannot chain ${from} → ${to}: stages of one pipeline must share its prefix (e.g. 'docs/ocr' → 'docs/embed')`,
    );
  }
}

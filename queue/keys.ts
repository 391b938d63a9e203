// Names and the Redis key layout. Every key of a queue carries its pipeline's hash tag, so all
// keys of a pipeline (its stages, their jobs) live in one Redis Cluster slot and every script,
// stage-to-stage advance included, stays atomic on a cluster. The layout itself is one table,
// queue/keyTable.ts, generated into TypeScript, Lua and Python. See docs/protocol.md.
import { randomBytes } from "node:crypto";

import { GLOBAL_KEYS, PipelineKeyLayout, QueueKeyLayout } from "./keys.generated.ts";
import { JOB_ID_PATTERN, KEY_ROOT, QUEUE_NAME_PATTERN } from "./keyTable.ts";

export { KEY_ROOT };
export const PIPELINES_KEY = GLOBAL_KEYS.pipelines;
export const QUEUES_KEY = GLOBAL_KEYS.queues;
/** Prefix of the job API's per-token request counters (api/tokenRate.ts). */
export const TOKEN_RATE_PREFIX = GLOBAL_KEYS.tokenRatePrefix;
/** docs/protocol.md, "Doorbell". */
export const DOORBELL_CHANNEL = GLOBAL_KEYS.doorbellChannel;

const QUEUE_NAME = new RegExp(QUEUE_NAME_PATTERN);
const JOB_ID = new RegExp(JOB_ID_PATTERN);

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

/** Keys shared by all stages of one pipeline (the layout: queue/keyTable.ts). */
export class PipelineKeys extends PipelineKeyLayout {}

/** Keys of one queue (one stage); the name is checked. */
export class QueueKeys extends QueueKeyLayout {
  constructor(queue: string) {
    super(pipelineOf(queue), queue);
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

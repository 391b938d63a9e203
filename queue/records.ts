// Job records' switch in Redis (docs/records.md, "When records switch on"): while a pipeline's
// `<P>meta` `records` is 1, the queue scripts append every transition to its outbox, which the
// recorders drain into PostgreSQL. Whoever knows a pipeline will be recorded switches it on
// before its first job: the operator, the job API, `conveyor records enable`, a recorder.
import { PipelineKeys, pipelineOf } from "./keys.ts";
import * as gateway from "./gateway.ts";
import type { RedisClient } from "./scripts.ts";

/** The consumer group every recorder of a pipeline shares. */
export const RECORDER_GROUP = "conveyor-records";

/**
 * Switch job records on for the pipeline of `pipelineOrQueue` (`docs` or `docs/ocr`): one
 * script call, idempotent, writing nothing when they are on. Returns whether this call switched
 * them on. Throws InvalidNameError for a malformed name.
 */
export async function enableRecords(redis: RedisClient, pipelineOrQueue: string): Promise<boolean> {
  const keys = new PipelineKeys(pipelineOf(pipelineOrQueue));
  const switched = await gateway.recordsEnable(redis, { keys, group: RECORDER_GROUP });
  return Number(switched) === 1;
}

export interface RecordsStatus {
  pipeline: string;
  /** The scripts append every transition to the outbox. */
  on: boolean;
  /** Entries waiting in the outbox (not yet recorded). */
  outbox: number;
  /** Of those, read by a recorder and not yet acknowledged. */
  pending: number;
  /** Consumers in the recorders' group: recorders running (or stopped uncleanly); 0 without the group. */
  recorders: number;
  /** When the oldest waiting entry was written (ms), null when none waits. */
  oldestAt: number | null;
}

/** Whether records are on for the pipeline of `pipelineOrQueue`, and how its outbox stands (one transaction). */
export async function recordsStatus(redis: RedisClient, pipelineOrQueue: string): Promise<RecordsStatus> {
  const pipeline = pipelineOf(pipelineOrQueue);
  const keys = new PipelineKeys(pipeline);
  const replies = await redis
    .multi()
    .hget(keys.meta, "records")
    .xlen(keys.outbox)
    .xinfo("GROUPS", keys.outbox)
    .xrange(keys.outbox, "-", "+", "COUNT", 1)
    .exec();
  if (!replies) throw new Error(`records status of ${pipeline}: transaction aborted`);
  const [[, on], [lenErr, len], [groupsErr, groups], [, first]] = replies as [
    [unknown, string | null],
    [Error | null, number],
    [Error | null, unknown[][] | null],
    [unknown, [string, string[]][] | null],
  ];
  if (lenErr) throw lenErr;
  // (XINFO GROUPS fails on a missing outbox: no group then)
  const group = groupsErr ? undefined : (groups ?? []).map(fields).find((g) => g.name === RECORDER_GROUP);
  const oldest = first?.[0]?.[0];
  return {
    pipeline,
    on: on === "1",
    outbox: Number(len),
    pending: Number(group?.pending ?? 0),
    recorders: Number(group?.consumers ?? 0),
    oldestAt: oldest ? Number(oldest.split("-")[0]) : null,
  };
}

function fields(list: unknown[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (let i = 0; i + 1 < list.length; i += 2) out[String(list[i])] = list[i + 1];
  return out;
}

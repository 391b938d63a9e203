// The outbox stream's Redis side for the recorder: its consumer group and reply shapes.
import { RECORDER_GROUP, type RedisClient } from "../queue/index.ts";
import type { RawEntry } from "./events.ts";

export { RECORDER_GROUP };

export async function createGroup(redis: RedisClient, stream: string): Promise<void> {
  try {
    // From the stream's beginning: entries written before the group existed are recorded too.
    await redis.xgroup("CREATE", stream, RECORDER_GROUP, "0", "MKSTREAM");
  } catch (err) {
    if (!String((err as Error).message).includes("BUSYGROUP")) throw err;
  }
}

/** A Redis reply of alternating names and values (XINFO) as an object. */
export function fieldMap(list: unknown[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (let i = 0; i + 1 < list.length; i += 2) out[String(list[i])] = list[i + 1];
  return out;
}

/** The entries of an XREADGROUP reply for one stream. */
export function readReply(reply: unknown): RawEntry[] {
  if (!reply) return [];
  const streams = reply as [string, RawEntry[]][];
  return streams[0]?.[1] ?? [];
}

export function isNoGroup(err: unknown): boolean {
  return String((err as Error)?.message).includes("NOGROUP");
}

// A job's notification deliveries as the worker's sender keeps them (worker/notify.ts,
// docs/notifications.md), for `conveyor job` and the API.
import { PipelineKeys } from "./keys.ts";
import type { RedisClient } from "./scripts.ts";

/** One delivery (a notify stream entry to one destination), as `notified:<id>` keeps it (JSON). */
export interface Delivery {
  url: string;
  event: string;
  state: "delivered" | "retrying" | "failed";
  attempts: number;
  firstAt: number;
  lastAt: number;
  nextAt?: number;
  /** The last answer's HTTP status, or 0 when there was none. */
  status: number;
  /** The last answer's first bytes, or why there was none (refused, timeout, connection error). */
  answer: string;
}

/** A job's deliveries, oldest first. */
export async function readDeliveries(redis: RedisClient, pipeline: string, id: string): Promise<Delivery[]> {
  const all = await redis.hgetall(new PipelineKeys(pipeline).notified(id));
  return Object.entries(all)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .flatMap(([, v]) => {
      try {
        return [JSON.parse(v) as Delivery];
      } catch {
        // (a field not written by a sender: shown as nothing rather than failing the whole read)
        return [];
      }
    });
}

// A handler fans out by returning `{"$conveyor": {"fanOut": [child, …], "join": "pipeline/stage"}}`:
// each child becomes a job of the pool's next stage, and the join stage gets one job with every
// child's result once all have finished. Plain JSON, so http and command handlers can do it too.
import { assertSamePipeline } from "../queue/index.ts";
import { HandlerError } from "./handlers/index.ts";

export interface FanOutRequest {
  children: unknown[];
  join: string;
}

const MAX_CHILDREN = 100_000;

export function fanOutRequest(
  result: unknown,
  queue: string,
  nextQueue: string | undefined,
): FanOutRequest | null {
  if (typeof result !== "object" || result === null || !("$conveyor" in result)) return null;
  const spec = (result as { $conveyor: unknown }).$conveyor as { fanOut?: unknown; join?: unknown } | null;
  const fail = (message: string) => new HandlerError(`invalid fan-out: ${message}`, { retryable: false });
  if (typeof spec !== "object" || spec === null || !Array.isArray(spec.fanOut))
    throw fail('expected {"$conveyor": {"fanOut": [...], "join": "pipeline/stage"}}');
  if (!nextQueue) throw fail("this pool has no next stage (nextQueue) for the children");
  if (typeof spec.join !== "string") throw fail('"join" must name the join stage');
  if (spec.fanOut.length > MAX_CHILDREN) throw fail(`at most ${MAX_CHILDREN} children`);
  try {
    assertSamePipeline(queue, spec.join);
  } catch (err) {
    throw fail((err as Error).message);
  }
  return { children: spec.fanOut, join: spec.join };
}

// A flow as the job records keep it (migration 9): the same view `flowView` (queue/flows.ts)
// reads from Redis, for the flows Redis has let go. GET /flows/{id} and `conveyor flow
// --database` both read it here.
import { flowViewOf, policyOf, type FlowJobState, type FlowView } from "../queue/index.ts";
import type { RecordsQueries } from "./queries.ts";

/** The flow's recorded jobs as a FlowView (the records' states), or null when they have none of it. */
export async function recordedFlow(
  queries: Pick<RecordsQueries, "flowJobs">,
  id: string,
  pipeline?: string,
): Promise<FlowView | null> {
  const rows = (await queries.flowJobs(id)).filter((r) => !pipeline || r.pipeline === pipeline);
  if (rows.length === 0) return null;
  const jobs = rows.map((r): FlowJobState => ({
    key: r.key,
    id: r.id,
    state: r.state,
    queue: r.queue,
    parents: r.parents,
    onParentFailure: policyOf(r.onParentFailure),
    ...(r.deadReason ? { reason: r.deadReason } : {}),
  }));
  const created = Math.min(...rows.map((r) => r.createdAt ?? Infinity));
  return flowViewOf(id, rows[0]!.pipeline, Number.isFinite(created) ? created : 0, jobs);
}

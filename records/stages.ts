// The stages of one job as the records know them, joined with what Redis holds now. Redis keeps
// a job's current stage and, of each earlier one, only its attempts (docs/protocol.md,
// "Stages"); what an earlier stage received and returned is in conveyor_stages, its executions
// in conveyor_attempts. GET /jobs/{id} and `conveyor job --database` read them through here.
import type pg from "pg";
import type { JobStage } from "../queue/index.ts";

/** One stage from the records: its input and result, and its executions summed up. */
export interface RecordedStage {
  queue: string;
  data: string | null;
  result: string | null;
  /** Executions that ended failed or completed (stalls and hand-backs are not attempts). */
  attempts: number;
  /** The last failed attempt's error, unless the stage then completed. */
  error: string | null;
  completed: boolean;
  startedAt: number | null;
  finishedAt: number | null;
}

/** Rows of conveyor_stages and conveyor_attempts for one job, in the order it reached them. */
export async function recordedStages(
  db: Pick<pg.Pool, "query">,
  pipeline: string,
  id: string,
): Promise<RecordedStage[]> {
  const { rows } = await db.query<{
    queue: string;
    data: string | null;
    result: string | null;
    attempts: number;
    error: string | null;
    completed: boolean;
    started: string | null;
    finished: string | null;
  }>(
    `WITH s AS (
       SELECT queue, data, result, COALESCE(v_data, v_result) AS v
       FROM conveyor_stages WHERE pipeline = $1 AND job_id = $2),
     a AS (
       SELECT queue,
         count(*) FILTER (WHERE outcome IN ('completed', 'retried', 'dead'))::int AS attempts,
         bool_or(outcome = 'completed') AS completed,
         (array_agg(left(error, 4000) ORDER BY finished_at DESC)
            FILTER (WHERE outcome IN ('retried', 'dead')))[1] AS error,
         min(started_at) AS started_at, max(finished_at) AS finished_at
       FROM conveyor_attempts WHERE pipeline = $1 AND job_id = $2 GROUP BY queue)
     SELECT COALESCE(s.queue, a.queue) AS queue, s.data, s.result,
       COALESCE(a.attempts, 0) AS attempts, COALESCE(a.completed, false) AS completed,
       CASE WHEN a.completed THEN NULL ELSE a.error END AS error,
       (extract(epoch FROM a.started_at) * 1000)::bigint::text AS started,
       (extract(epoch FROM a.finished_at) * 1000)::bigint::text AS finished
     FROM s FULL JOIN a ON a.queue = s.queue
     ORDER BY s.v NULLS LAST, a.started_at NULLS LAST LIMIT 100`,
    [pipeline, id],
  );
  return rows.map((r) => ({
    queue: r.queue,
    data: r.data,
    result: r.result,
    attempts: r.attempts,
    error: r.error,
    completed: r.completed,
    startedAt: r.started === null ? null : Number(r.started),
    finishedAt: r.finished === null ? null : Number(r.finished),
  }));
}

/** A stage of the joined view; `data` only when the records have it. */
export interface StageView extends JobStage {
  data?: string;
}

/**
 * One list of stages from Redis (`live`, null when the record is gone) and the records: the
 * records' order, then stages only Redis knows (the records may lag). Redis is right about
 * attempts and state now; the records add what an earlier stage received and returned.
 * `state`: the job's state, for a last stage Redis no longer holds.
 */
export function joinStages(live: JobStage[] | null, recorded: RecordedStage[], state: string): StageView[] {
  const fromRedis = new Map((live ?? []).map((s) => [s.queue, s]));
  const out: StageView[] = recorded.map((r, i) => {
    const last = i === recorded.length - 1;
    const view: StageView = {
      queue: r.queue,
      state: r.completed || !last ? "completed" : state,
      attempts: r.attempts,
    };
    if (r.data !== null) view.data = r.data;
    if (r.result !== null) view.result = r.result;
    if (r.error !== null) view.error = r.error;
    if (r.startedAt !== null) view.startedAt = r.startedAt;
    if (r.finishedAt !== null) view.finishedAt = r.finishedAt;
    const now = fromRedis.get(r.queue);
    if (now) {
      fromRedis.delete(r.queue);
      view.state = now.state;
      view.attempts = now.attempts;
      for (const k of ["result", "error", "startedAt", "finishedAt"] as const)
        if (now[k] !== undefined) (view as unknown as Record<string, unknown>)[k] = now[k];
      if (now.state !== "completed") delete view.result;
      if (now.error === undefined && now.state === "completed") delete view.error;
    }
    return view;
  });
  for (const s of live ?? []) if (fromRedis.has(s.queue)) out.push({ ...s });
  return out;
}

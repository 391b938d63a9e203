// Reads of the PostgreSQL job records (the tables of migrations.ts) for the job API: pages of a
// queue's jobs (newest first, keyset on (updated_at, id), never OFFSET), search by id or
// payload/result field, one job's executions and children, and per-minute rates. Every query is
// served by an index of migrations.ts.
import type pg from "pg";
import { recordedStages, type RecordedStage } from "./stages.ts";

export interface JobRow {
  id: string;
  pipeline: string;
  queue: string;
  state: string;
  attempts: number;
  maxAttempts: number | null;
  stalls: number;
  createdAt: string | null;
  startedAt: string | null;
  finishedAt: string | null;
  updatedAt: string;
  dueAt: string | null;
  progress: number | null;
  progressMessage: string | null;
  deadReason: string | null;
  parentId: string | null;
  idempotencyKey: string | null;
  /** The job's task name, if it names one. */
  task: string | null;
  /** The job's group, or null (records from before migration 11 have none). */
  group: string | null;
  lastEvent: string;
}

/** One job of a flow as the records keep it (migration 9). */
export interface FlowJobRow {
  id: string;
  pipeline: string;
  queue: string;
  state: string;
  key: string;
  parents: string[];
  parentIds: string[];
  onParentFailure: string | null;
  deadReason: string | null;
  createdAt: number | null;
}

/** The most jobs a flow has (docs/flows.md). */
export const FLOW_MAX_JOBS = 10_000;

/** Where a page ends: (updated_at as PostgreSQL prints it, id) of its last row. */
export type RecordsPosition = [string, string];

export interface RecordsPage {
  items: JobRow[];
  /** Where the next (older) page starts; null on the last page. */
  next: RecordsPosition | null;
}

/** A query value PostgreSQL cannot read (a forged position's time): the caller's mistake. */
export class RecordsQueryError extends Error {
  override name = "RecordsQueryError";
}

const ROW = `id, pipeline, queue, state, attempts, max_attempts AS "maxAttempts", stalls,
  created_at AS "createdAt", started_at AS "startedAt", finished_at AS "finishedAt",
  updated_at AS "updatedAt", due_at AS "dueAt",
  progress, progress_message AS "progressMessage",
  dead_reason AS "deadReason", parent_id AS "parentId",
  idempotency_key AS "idempotencyKey", task, job_group AS "group", last_event AS "lastEvent",
  updated_at::text AS cursor_at`;

/** The dashboard's state names → the records' (a waiting job is `queued` there). */
const STATE_IN_RECORDS: Record<string, string> = { ready: "queued" };

/** Whether `v` is a RecordsPosition a page handed out (its time as PostgreSQL prints it). */
export const isRecordsPosition = (v: unknown[]): v is RecordsPosition =>
  typeof v[0] === "string" &&
  /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d{1,6})?[+-]\d\d(:\d\d)?$/.test(v[0]) &&
  typeof v[1] === "string" &&
  v[1].length <= 200;

/**
 * A job's last progress report is shown only while it runs: a finished (or waiting) job's last
 * report of 50 % is not where it is now.
 */
export function progressWhile<T>(state: string, value: T): T | null {
  return state === "active" ? value : null;
}

function withoutStaleProgress<T extends JobRow>(row: T): T {
  row.progress = progressWhile(row.state, row.progress);
  row.progressMessage = progressWhile(row.state, row.progressMessage);
  return row;
}

function page(rows: (JobRow & { cursor_at?: string })[], limit: number): RecordsPage {
  const more = rows.length > limit;
  const items = rows.slice(0, limit).map(withoutStaleProgress);
  const last = items.at(-1) as (JobRow & { cursor_at?: string }) | undefined;
  const next: RecordsPosition | null = more && last ? [last.cursor_at!, last.id] : null;
  for (const r of items) delete (r as { cursor_at?: string }).cursor_at;
  return { items, next };
}

/** `a.b=value` → {a: {b: value}} for jsonb containment; the value is JSON when it parses (1, true, "x"). */
export function containment(path: string[], raw: string): unknown {
  let value: unknown = raw;
  try {
    value = JSON.parse(raw);
  } catch {
    // plain text
  }
  return path.reduceRight<unknown>((inner, key) => ({ [key]: inner }), value);
}

export interface MinuteStats {
  minute: number;
  completed: number;
  failed: number;
  p50: number | null;
  p95: number | null;
}

const MINUTE = 60_000;

/** The windows a queue's per-minute stats cover (`?window=`), in minutes. */
export const STATS_WINDOWS = { "15m": 15, "1h": 60, "6h": 360 } as const;
export type StatsWindow = keyof typeof STATS_WINDOWS;

/**
 * The `count` minutes up to and including `now`'s, oldest first: the minutes that have rows take
 * them, the others are zero. A chart of one minute of data still spans the window.
 */
export function recentMinutes(rows: readonly MinuteStats[], now: number, count = 60): MinuteStats[] {
  const byMinute = new Map(rows.map((r) => [r.minute, r]));
  const last = Math.floor(now / MINUTE) * MINUTE;
  return Array.from({ length: count }, (_, i) => {
    const minute = last - (count - 1 - i) * MINUTE;
    return byMinute.get(minute) ?? { minute, completed: 0, failed: 0, p50: null, p95: null };
  });
}

export class RecordsQueries {
  private readonly pool: pg.Pool;
  constructor(pool: pg.Pool) {
    this.pool = pool;
  }

  async close(): Promise<void> {
    await this.pool.end();
  }

  private async rows<T extends pg.QueryResultRow>(sql: string, params: unknown[]): Promise<T[]> {
    try {
      return (await this.pool.query<T>(sql, params)).rows;
    } catch (err) {
      // Class 22 (data exception): a value PostgreSQL cannot read.
      const code = (err as { code?: string }).code ?? "";
      if (code.startsWith("22")) throw new RecordsQueryError((err as Error).message, { cause: err });
      throw err;
    }
  }

  async listJobs(opts: {
    queue: string;
    state: string;
    after?: RecordsPosition;
    limit: number;
    from?: number;
    to?: number;
    /** Only these groups' jobs (index conveyor_jobs_group_recent). */
    groups?: string[] | null;
  }): Promise<RecordsPage> {
    const where = ["queue = $1"];
    const params: unknown[] = [opts.queue];
    const add = (sql: string, v: unknown) => {
      params.push(v);
      where.push(sql.replace("?", `$${params.length}`));
    };
    if (opts.groups) add("job_group = ANY(?)", opts.groups);
    // `all` is what the queue holds or held; deleted jobs are listed only when asked for.
    if (opts.state === "all") where.push("state <> 'deleted'");
    else add("state = ?", STATE_IN_RECORDS[opts.state] ?? opts.state);
    if (opts.from !== undefined) add("updated_at >= to_timestamp(? / 1000.0)", opts.from);
    if (opts.to !== undefined) add("updated_at < to_timestamp(? / 1000.0)", opts.to);
    return this.jobPage(where, params, opts.after, opts.limit);
  }

  /** A page of jobs matching `where` (numbered after `params`), newest first, after `after`. */
  private async jobPage(
    where: string[],
    params: unknown[],
    after: RecordsPosition | undefined,
    limit: number,
  ): Promise<RecordsPage> {
    if (after) {
      params.push(...after);
      where.push(`(updated_at, id) < ($${params.length - 1}::timestamptz, $${params.length})`);
    }
    params.push(limit + 1);
    const rows = await this.rows<JobRow & { cursor_at: string }>(
      `SELECT ${ROW} FROM conveyor_jobs WHERE ${where.join(" AND ")}
       ORDER BY updated_at DESC, id DESC LIMIT $${params.length}`,
      params,
    );
    return page(rows, limit);
  }

  /** Jobs with this id (in any pipeline), newest first. */
  async byId(id: string, limit = 20): Promise<JobRow[]> {
    return this.rows<JobRow>(
      `SELECT ${ROW} FROM conveyor_jobs WHERE id = $1 ORDER BY updated_at DESC LIMIT $2`,
      [id, limit],
    );
  }

  /** Jobs enqueued with this idempotency key (in any queue), newest first. */
  async byIdempotencyKey(key: string, limit = 20): Promise<JobRow[]> {
    return this.rows<JobRow>(
      `SELECT ${ROW} FROM conveyor_jobs WHERE idempotency_key = $1 ORDER BY updated_at DESC LIMIT $2`,
      [key, limit],
    );
  }

  /** Jobs of this task (in any queue), newest first (index conveyor_jobs_task_recent). */
  async byTask(task: string, limit = 20): Promise<JobRow[]> {
    return this.rows<JobRow>(
      `SELECT ${ROW} FROM conveyor_jobs WHERE task = $1 ORDER BY updated_at DESC, id DESC LIMIT $2`,
      [task, limit],
    );
  }

  /** A flow's jobs by key (index conveyor_jobs_flow); empty when the records have none of it. */
  async flowJobs(flowId: string, limit = FLOW_MAX_JOBS): Promise<FlowJobRow[]> {
    const rows = await this.rows<
      Omit<FlowJobRow, "parents" | "parentIds" | "createdAt"> & {
        parents: string | null;
        parentIds: string | null;
        createdAt: string | null;
      }
    >(
      `SELECT id, pipeline, queue, state, flow_key AS key, flow_parents AS parents,
         flow_parent_ids AS "parentIds", flow_policy AS "onParentFailure", dead_reason AS "deadReason",
         (extract(epoch FROM created_at) * 1000)::float8 AS "createdAt"
       FROM conveyor_jobs WHERE flow_id = $1 ORDER BY flow_key LIMIT $2`,
      [flowId, limit],
    );
    const words = (s: string | null) => (s ? s.split(" ").filter((w) => w !== "") : []);
    return rows.map((r) => ({
      ...r,
      parents: words(r.parents),
      parentIds: words(r.parentIds),
      createdAt: r.createdAt === null ? null : Math.round(Number(r.createdAt)),
    }));
  }

  /** `field=value` on the payload or result (JSON containment, GIN index), newest first. */
  async byField(opts: {
    part?: "data" | "result";
    path: string[];
    value: string;
    after?: RecordsPosition;
    limit: number;
    queues?: string[] | null;
    groups?: string[] | null;
  }): Promise<RecordsPage> {
    const doc = JSON.stringify(containment(opts.path, opts.value));
    const parts = opts.part ? [opts.part] : ["data", "result"];
    const params: unknown[] = [doc];
    const matches = parts.map((p) => `conveyor_try_jsonb(${p}) @> $1::jsonb`).join(" OR ");
    // What any stage received or returned (a job that moved on keeps its first payload there);
    // a UNION, not an OR, so each side is a GIN index scan.
    const where = [
      `(pipeline, id) IN (SELECT pipeline, id FROM conveyor_jobs WHERE ${matches}
         UNION SELECT pipeline, job_id FROM conveyor_stages WHERE ${matches})`,
    ];
    if (opts.queues) {
      params.push(opts.queues);
      where.push(`queue = ANY($${params.length})`);
    }
    if (opts.groups) {
      params.push(opts.groups);
      where.push(`job_group = ANY($${params.length})`);
    }
    return this.jobPage(where, params, opts.after, opts.limit);
  }

  /** Finished jobs (completed, dead, cancelled) per queue and group, of these groups in these queues. */
  async groupOutcomes(
    queues: string[],
    groups: string[],
  ): Promise<{ queue: string; group: string; completed: number; dead: number; cancelled: number }[]> {
    const rows = await this.rows<{ queue: string; group: string; state: string; n: string }>(
      `SELECT queue, job_group AS "group", state, count(*) AS n FROM conveyor_jobs
       WHERE queue = ANY($1) AND job_group = ANY($2) AND state IN ('completed', 'dead', 'cancelled')
       GROUP BY 1, 2, 3`,
      [queues, groups],
    );
    const out = new Map<
      string,
      { queue: string; group: string; completed: number; dead: number; cancelled: number }
    >();
    for (const r of rows) {
      const key = `${r.queue}\u0000${r.group}`;
      const o = out.get(key) ?? { queue: r.queue, group: r.group, completed: 0, dead: 0, cancelled: 0 };
      o[r.state as "completed" | "dead" | "cancelled"] = Number(r.n);
      out.set(key, o);
    }
    return [...out.values()];
  }

  /** The latest changed jobs of these groups in these queues, newest first. */
  async groupRecent(queues: string[], groups: string[], limit: number): Promise<JobRow[]> {
    const rows = await this.rows<JobRow & { cursor_at?: string }>(
      `SELECT ${ROW} FROM conveyor_jobs WHERE queue = ANY($1) AND job_group = ANY($2) AND state <> 'deleted'
       ORDER BY updated_at DESC, id DESC LIMIT $3`,
      [queues, groups, limit],
    );
    return page(rows, limit).items;
  }

  async job(
    pipeline: string,
    id: string,
  ): Promise<
    | (JobRow & {
        data: string | null;
        result: string | null;
        error: string | null;
        flowId: string | null;
        flowKey: string | null;
      })
    | null
  > {
    const rows = await this.rows<
      JobRow & {
        data: string | null;
        result: string | null;
        error: string | null;
        flowId: string | null;
        flowKey: string | null;
      }
    >(
      `SELECT ${ROW}, data, result, error, flow_id AS "flowId", flow_key AS "flowKey"
       FROM conveyor_jobs WHERE pipeline = $1 AND id = $2`,
      [pipeline, id],
    );
    const row = rows[0];
    if (row) delete (row as { cursor_at?: string }).cursor_at;
    return row ?? null;
  }

  async executions(pipeline: string, id: string): Promise<Record<string, unknown>[]> {
    return this.rows(
      `SELECT execution, queue, worker, attempt, started_at AS "startedAt", finished_at AS "finishedAt",
         outcome, left(error, 4000) AS error, reason, reused
       FROM conveyor_attempts WHERE pipeline = $1 AND job_id = $2
       ORDER BY started_at NULLS LAST, execution LIMIT 200`,
      [pipeline, id],
    );
  }

  /** Each stage's input, result, attempts and times, in the order the job reached them. */
  async stages(pipeline: string, id: string): Promise<RecordedStage[]> {
    return recordedStages(this.pool, pipeline, id);
  }

  async children(
    pipeline: string,
    id: string,
    limit = 100,
  ): Promise<{ id: string; queue: string; state: string }[]> {
    return this.rows(
      `SELECT id, queue, state FROM conveyor_jobs WHERE pipeline = $1 AND parent_id = $2 ORDER BY id LIMIT $3`,
      [pipeline, id, limit],
    );
  }

  /** Per minute over the last hour: finished executions by outcome, p50/p95 duration (ms). */
  async minuteStats(queue: string, window: StatsWindow = "1h", now = Date.now()): Promise<MinuteStats[]> {
    const minutes = STATS_WINDOWS[window];
    const rows = await this.rows<{
      minute: string;
      completed: string;
      failed: string;
      p50: number | null;
      p95: number | null;
    }>(
      `SELECT (extract(epoch FROM date_trunc('minute', finished_at)) * 1000)::bigint::text AS minute,
         count(*) FILTER (WHERE outcome = 'completed')::text AS completed,
         count(*) FILTER (WHERE outcome IN ('retried', 'dead'))::text AS failed,
         percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM finished_at - started_at) * 1000) AS p50,
         percentile_cont(0.95) WITHIN GROUP (ORDER BY extract(epoch FROM finished_at - started_at) * 1000) AS p95
       FROM conveyor_attempts
       WHERE queue = $1 AND finished_at IS NOT NULL AND finished_at > now() - make_interval(mins => $2)
       GROUP BY 1 ORDER BY 1`,
      [queue, minutes],
    );
    return recentMinutes(
      rows.map((r) => ({
        minute: Number(r.minute),
        completed: Number(r.completed),
        failed: Number(r.failed),
        p50: r.p50 === null ? null : Math.round(r.p50),
        p95: r.p95 === null ? null : Math.round(r.p95),
      })),
      now,
      minutes,
    );
  }
}

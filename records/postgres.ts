// PostgreSQL side of the job records: the connection pool, migrations, and the idempotent,
// order-independent write of one folded batch in one transaction.
import pg from "pg";
import { MIGRATIONS, MIGRATION_LOCK_KEY, type Migration } from "./migrations.ts";
import type { AttemptPatch, FoldedBatch, JobPatch, StagePatch } from "./events.ts";

export const DEFAULT_MAX_CONNECTIONS = 5;

export interface PoolOptions {
  /** At most this many connections (DESIGN §3: 5 per worker). */
  maxConnections?: number;
  /** Abort a query that has not answered after this long (a hung server must not hang the recorder). */
  queryTimeoutMs?: number;
  connectTimeoutMs?: number;
  applicationName?: string;
}

/** `postgres://user:***@host/db`: safe for logs. */
export function describeDatabaseUrl(url: string): string {
  return url.replace(/\/\/([^:@/]*):[^@/]*@/, "//$1:***@");
}

export function createPool(database: string | pg.PoolConfig, opts: PoolOptions = {}): pg.Pool {
  const config: pg.PoolConfig =
    typeof database === "string" ? { connectionString: database } : { ...database };
  const pool = new pg.Pool({
    ...config,
    max: opts.maxConnections ?? config.max ?? DEFAULT_MAX_CONNECTIONS,
    connectionTimeoutMillis: opts.connectTimeoutMs ?? 5_000,
    query_timeout: opts.queryTimeoutMs ?? 30_000,
    idleTimeoutMillis: 30_000,
    keepAlive: true,
    application_name: opts.applicationName ?? config.application_name ?? "conveyor-recorder",
  });
  // An idle client whose server went away emits 'error' on the pool; unhandled, it would kill
  // the worker. The next query fails (and is handled) instead.
  pool.on("error", () => {});
  // A checked-out client (mid-transaction) whose server dies emits 'error' on the client
  // itself, where the pool's handler does not reach: without a listener it would kill the
  // worker. The pending query rejects, and the recorder's retry handles it.
  pool.on("connect", (client) => client.on("error", () => {}));
  return pool;
}

/**
 * BEGIN, `body`, COMMIT; on an error ROLLBACK and rethrow. A ROLLBACK that fails too leaves the
 * connection mid-transaction: `onRollbackFailed` lets the caller release it as broken.
 */
async function transaction(
  client: pg.PoolClient,
  body: () => Promise<void>,
  onRollbackFailed: () => void = () => {},
): Promise<void> {
  await client.query("BEGIN");
  try {
    await body();
    await client.query("COMMIT");
  } catch (err) {
    await client.query("ROLLBACK").catch(onRollbackFailed);
    throw err;
  }
}

/** Apply every migration not applied yet; returns the ids applied by this call. */
export async function migrate(
  pool: pg.Pool,
  migrations: readonly Migration[] = MIGRATIONS,
): Promise<number[]> {
  const applied: number[] = [];
  const client = await pool.connect();
  let broken = false;
  try {
    // Fast path, no lock and no DDL: everything is applied already (the usual start). This also
    // lets a user without CREATE on the schema run once an owner has migrated.
    const table = await client.query<{ t: string | null }>(
      "SELECT to_regclass('conveyor_migrations')::text AS t",
    );
    if (table.rows[0]?.t) {
      const known = await client.query<{ id: number }>("SELECT id FROM conveyor_migrations");
      const done = new Set(known.rows.map((r) => r.id));
      if (migrations.every((m) => done.has(m.id))) return applied;
    }
    for (const m of migrations) {
      await transaction(client, async () => {
        // Transaction-scoped: released by COMMIT/ROLLBACK, also when the connection dies.
        await client.query("SELECT pg_advisory_xact_lock($1)", [MIGRATION_LOCK_KEY.toString()]);
        await client.query(`CREATE TABLE IF NOT EXISTS conveyor_migrations (
          id integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`);
        const done = await client.query("SELECT 1 FROM conveyor_migrations WHERE id = $1", [m.id]);
        if (done.rowCount === 0) {
          await client.query(m.sql);
          await client.query("INSERT INTO conveyor_migrations (id, name) VALUES ($1, $2)", [m.id, m.name]);
          applied.push(m.id);
        }
      });
    }
  } catch (err) {
    broken = true;
    throw err;
  } finally {
    client.release(broken);
  }
  return applied;
}

// Upserts whose SET clauses keep, per column group, the value from the newest event.
const newer = (v: string, t: string) =>
  `(excluded.${v} IS NOT NULL AND (${t}.${v} IS NULL OR excluded.${v} > ${t}.${v}))`;
const pick = (col: string, v: string, t: string) =>
  `${col} = CASE WHEN ${newer(v, t)} THEN excluded.${col} ELSE ${t}.${col} END`;
const latest = (v: string, t: string) => `${v} = GREATEST(${t}.${v}, excluded.${v})`;

const JOB_GROUPS: [string[], string][] = [
  [["queue", "state", "dead_reason", "finished_at", "due_at", "updated_at", "last_event"], "v_event"],
  [["data"], "v_data"],
  [["result"], "v_result"],
  [["error"], "v_error"],
  [["attempts"], "v_attempts"],
  [["max_attempts"], "v_max_attempts"],
  [["stalls"], "v_stalls"],
  [
    [
      "created_at",
      "parent_id",
      "idempotency_key",
      "flow_id",
      "flow_key",
      "flow_parents",
      "flow_parent_ids",
      "flow_policy",
      "job_group",
    ],
    "v_created",
  ],
  [["started_at"], "v_started"],
  [["progress", "progress_message", "progress_at"], "v_progress"],
  [["task"], "v_task"],
];

const ts = (c: string) => `to_timestamp(${c} / 1000.0)`;

/** A conveyor_jobs column as one unnest() array: its element type, how it is inserted, and its value per patch. */
interface JobColumn {
  name: string;
  type: string;
  insert?: string;
  get: (r: JobPatch) => unknown;
}

const time = (name: string, get: (r: JobPatch) => number | null | undefined): JobColumn => ({
  name,
  type: "float8",
  insert: ts(name),
  get: (r) => get(r) ?? null,
});

const JOB_COLUMNS: JobColumn[] = [
  { name: "pipeline", type: "text", get: (r) => r.pipeline },
  { name: "id", type: "text", get: (r) => r.id },
  { name: "queue", type: "text", get: (r) => r.queue },
  { name: "state", type: "text", get: (r) => r.state },
  { name: "dead_reason", type: "text", get: (r) => r.deadReason },
  time("finished_at", (r) => r.finishedAt),
  time("due_at", (r) => r.dueAt),
  time("updated_at", (r) => r.updatedAt),
  { name: "last_event", type: "text", get: (r) => r.lastEvent },
  { name: "v_event", type: "numeric", get: (r) => r.v },
  { name: "data", type: "text", get: (r) => r.data?.value ?? null },
  { name: "v_data", type: "numeric", get: (r) => r.data?.v ?? null },
  { name: "result", type: "text", get: (r) => r.result?.value ?? null },
  { name: "v_result", type: "numeric", get: (r) => r.result?.v ?? null },
  { name: "error", type: "text", get: (r) => r.error?.value ?? null },
  { name: "v_error", type: "numeric", get: (r) => r.error?.v ?? null },
  { name: "attempts", type: "int", insert: "COALESCE(attempts, 0)", get: (r) => r.attempts?.value ?? null },
  { name: "v_attempts", type: "numeric", get: (r) => r.attempts?.v ?? null },
  { name: "max_attempts", type: "int", get: (r) => r.maxAttempts?.value ?? null },
  { name: "v_max_attempts", type: "numeric", get: (r) => r.maxAttempts?.v ?? null },
  { name: "stalls", type: "int", insert: "COALESCE(stalls, 0)", get: (r) => r.stalls?.value ?? null },
  { name: "v_stalls", type: "numeric", get: (r) => r.stalls?.v ?? null },
  time("created_at", (r) => r.origin?.value.createdAt),
  { name: "parent_id", type: "text", get: (r) => r.origin?.value.parentId ?? null },
  { name: "idempotency_key", type: "text", get: (r) => r.origin?.value.idempotencyKey ?? null },
  { name: "flow_id", type: "text", get: (r) => r.origin?.value.flow?.id ?? null },
  { name: "flow_key", type: "text", get: (r) => r.origin?.value.flow?.key ?? null },
  // (space-separated: keys and ids have no spaces, and unnest takes no ragged arrays)
  { name: "flow_parents", type: "text", get: (r) => r.origin?.value.flow?.parents.join(" ") ?? null },
  { name: "flow_parent_ids", type: "text", get: (r) => r.origin?.value.flow?.parentIds.join(" ") ?? null },
  { name: "flow_policy", type: "text", get: (r) => r.origin?.value.flow?.onParentFailure ?? null },
  { name: "job_group", type: "text", get: (r) => r.origin?.value.group ?? null },
  { name: "v_created", type: "numeric", get: (r) => r.origin?.v ?? null },
  time("started_at", (r) => r.startedAt?.value),
  { name: "v_started", type: "numeric", get: (r) => r.startedAt?.v ?? null },
  { name: "progress", type: "real", get: (r) => r.progress?.value.fraction ?? null },
  { name: "progress_message", type: "text", get: (r) => r.progress?.value.message ?? null },
  time("progress_at", (r) => r.progress?.value.at),
  { name: "v_progress", type: "numeric", get: (r) => r.progress?.v ?? null },
  { name: "task", type: "text", get: (r) => r.task?.value ?? null },
  { name: "v_task", type: "numeric", get: (r) => r.task?.v ?? null },
];

const jobNames = JOB_COLUMNS.map((c) => c.name).join(", ");

const UPSERT_JOBS = `
INSERT INTO conveyor_jobs AS j (${jobNames})
SELECT ${JOB_COLUMNS.map((c) => c.insert ?? c.name).join(", ")}
FROM unnest(${JOB_COLUMNS.map((c, i) => `$${i + 1}::${c.type}[]`).join(", ")})
  AS t(${jobNames})
ON CONFLICT (pipeline, id) DO UPDATE SET
  ${JOB_GROUPS.flatMap(([cols, v]) => [...cols.map((c) => pick(c, v, "j")), latest(v, "j")]).join(",\n  ")}`;

const UPSERT_ATTEMPTS = `
INSERT INTO conveyor_attempts AS a (pipeline, job_id, execution, queue, worker, attempt, started_at, finished_at, outcome, error, reason, reused, v_end)
SELECT pipeline, job_id, execution, queue, worker, attempt, ${ts("started_at")}, ${ts("finished_at")}, outcome, error, reason, reused, v_end
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::int[], $7::float8[], $8::float8[], $9::text[],
  $10::text[], $11::text[], $12::boolean[], $13::numeric[])
  AS t(pipeline, job_id, execution, queue, worker, attempt, started_at, finished_at, outcome, error, reason, reused, v_end)
ON CONFLICT (pipeline, job_id, execution) DO UPDATE SET
  worker = COALESCE(excluded.worker, a.worker),
  attempt = COALESCE(excluded.attempt, a.attempt),
  started_at = COALESCE(excluded.started_at, a.started_at),
  ${["outcome", "finished_at", "error", "reason", "reused"].map((c) => pick(c, "v_end", "a")).join(",\n  ")},
  ${latest("v_end", "a")}`;

const UPSERT_STAGES = `
INSERT INTO conveyor_stages AS s (pipeline, job_id, queue, data, result, v_data, v_result)
SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::numeric[], $7::numeric[])
ON CONFLICT (pipeline, job_id, queue) DO UPDATE SET
  ${pick("data", "v_data", "s")}, ${latest("v_data", "s")},
  ${pick("result", "v_result", "s")}, ${latest("v_result", "s")}`;

function column<T, R>(rows: readonly T[], f: (row: T) => R): R[] {
  return rows.map(f);
}

function jobParams(rows: readonly JobPatch[]): unknown[] {
  return JOB_COLUMNS.map((c) => column(rows, c.get));
}

// In UPSERT_ATTEMPTS' column order.
const ATTEMPT_FIELDS = [
  ...["pipeline", "jobId", "execution", "queue", "worker", "attempt", "startedAt", "finishedAt"],
  ...["outcome", "error", "reason", "reused", "vEnd"],
] as const satisfies readonly (keyof AttemptPatch)[];

function attemptParams(rows: readonly AttemptPatch[]): unknown[] {
  return ATTEMPT_FIELDS.map((f) => column(rows, (r) => r[f]));
}

function stageParams(rows: readonly StagePatch[]): unknown[] {
  return [
    column(rows, (r) => r.pipeline),
    column(rows, (r) => r.jobId),
    column(rows, (r) => r.queue),
    column(rows, (r) => r.data?.value ?? null),
    column(rows, (r) => r.result?.value ?? null),
    column(rows, (r) => r.data?.v ?? null),
    column(rows, (r) => r.result?.v ?? null),
  ];
}

/** Write one folded batch in one transaction. Replays and out-of-order batches are harmless. */
export async function writeBatch(pool: pg.Pool, batch: FoldedBatch): Promise<void> {
  if (batch.jobs.length === 0 && batch.attempts.length === 0) return;
  const client = await pool.connect();
  let broken = false;
  try {
    await transaction(
      client,
      async () => {
        if (batch.jobs.length > 0) await client.query(UPSERT_JOBS, jobParams(batch.jobs));
        if (batch.attempts.length > 0) await client.query(UPSERT_ATTEMPTS, attemptParams(batch.attempts));
        if (batch.stages.length > 0) await client.query(UPSERT_STAGES, stageParams(batch.stages));
      },
      () => (broken = true),
    );
  } catch (err) {
    if (!isDataError(err)) broken = true;
    throw err;
  } finally {
    client.release(broken);
  }
}

function sqlState(err: unknown): string | undefined {
  const code = (err as { code?: unknown })?.code;
  return typeof code === "string" && /^[0-9A-Z]{5}$/.test(code) ? code : undefined;
}

/**
 * An error caused by the rows themselves (bad data, a violated constraint, a statement too
 * large): retrying the same batch cannot succeed. Everything else — refused or dropped
 * connections, shutdowns, timeouts, deadlocks, serialization failures, a missing table —
 * is treated as an outage and retried, so nothing is ever dropped because the database was away.
 */
export function isDataError(err: unknown): boolean {
  const state = sqlState(err);
  if (!state) return false;
  return state.startsWith("22") || state.startsWith("23") || state.startsWith("54");
}

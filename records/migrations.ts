// Schema of the job records, as an ordered list of migrations. Each is applied once, in its
// own transaction, under a transaction-scoped advisory lock, so any number of workers can
// start at the same time against the same database. Never edit a released migration: append.
//
// Merge bookkeeping. Several recorders drain one outbox concurrently, so the events of one
// job can reach PostgreSQL out of order (and twice, after a crash). Every column group of a
// job row carries the outbox stream position (`v_*`, the entry id `ms-seq` as the number
// ms·10²⁰ + seq) of the event that last set it; an event changes a group only when it is
// newer. The final row is therefore the same whatever the delivery order or repetition.

export interface Migration {
  id: number;
  name: string;
  sql: string;
}

export const MIGRATIONS: readonly Migration[] = [
  {
    id: 1,
    name: "jobs and attempts",
    sql: `
CREATE TABLE conveyor_jobs (
  pipeline     text        NOT NULL,
  id           text        NOT NULL,
  queue        text        NOT NULL,
  state        text        NOT NULL CHECK (state IN ('queued', 'active', 'retrying', 'completed', 'dead')),
  data         text,
  result       text,
  error        text,
  dead_reason  text,
  attempts     integer     NOT NULL DEFAULT 0,
  stalls       integer     NOT NULL DEFAULT 0,
  created_at   timestamptz,
  started_at   timestamptz,
  finished_at  timestamptz,
  updated_at   timestamptz NOT NULL,
  last_event   text        NOT NULL,
  v_event      numeric     NOT NULL,
  v_data       numeric,
  v_result     numeric,
  v_error      numeric,
  v_attempts   numeric,
  v_stalls     numeric,
  v_created    numeric,
  v_started    numeric,
  PRIMARY KEY (pipeline, id)
);
CREATE INDEX conveyor_jobs_state ON conveyor_jobs (pipeline, state, updated_at);

CREATE TABLE conveyor_attempts (
  pipeline     text        NOT NULL,
  job_id       text        NOT NULL,
  execution    text        NOT NULL,
  queue        text        NOT NULL,
  worker       text,
  attempt      integer,
  started_at   timestamptz,
  finished_at  timestamptz,
  outcome      text        NOT NULL CHECK (outcome IN ('running', 'completed', 'retried', 'dead', 'handedBack', 'deferred', 'stalled')),
  error        text,
  reason       text,
  reused       boolean,
  v_end        numeric,
  PRIMARY KEY (pipeline, job_id, execution)
);
`,
  },
  {
    // Progress reports, max attempts and due times, fan-out parents, and the state `delayed`.
    // Adding nullable columns without defaults rewrites nothing; the new CHECK only widens the
    // old one (PostgreSQL's own name for migration 1's column constraint).
    id: 2,
    name: "progress, max attempts, due times, fan-out parents",
    sql: `
ALTER TABLE conveyor_jobs
  ADD COLUMN max_attempts     integer,
  ADD COLUMN due_at           timestamptz,
  ADD COLUMN parent_id        text,
  ADD COLUMN progress         real,
  ADD COLUMN progress_message text,
  ADD COLUMN progress_at      timestamptz,
  ADD COLUMN v_max_attempts   numeric,
  ADD COLUMN v_progress       numeric,
  DROP CONSTRAINT conveyor_jobs_state_check,
  ADD CONSTRAINT conveyor_jobs_state_check CHECK (state IN ('queued', 'delayed', 'active', 'retrying', 'completed', 'dead'));
CREATE INDEX conveyor_jobs_parent ON conveyor_jobs (pipeline, parent_id) WHERE parent_id IS NOT NULL;
`,
  },
  {
    // Queue control: a job (and the execution running when it happened) can end `cancelled`.
    id: 3,
    name: "cancelled jobs and executions",
    sql: `
ALTER TABLE conveyor_jobs
  DROP CONSTRAINT conveyor_jobs_state_check,
  ADD CONSTRAINT conveyor_jobs_state_check CHECK (state IN ('queued', 'delayed', 'active', 'retrying', 'completed', 'dead', 'cancelled'));
ALTER TABLE conveyor_attempts
  DROP CONSTRAINT conveyor_attempts_outcome_check,
  ADD CONSTRAINT conveyor_attempts_outcome_check CHECK (outcome IN ('running', 'completed', 'retried', 'dead', 'handedBack', 'deferred', 'stalled', 'cancelled'));
`,
  },
  {
    // What the dashboard reads: a job by id alone, a queue's jobs newest first (cursor paging on
    // (updated_at, id)), payload/result containment search, and per-minute rates and durations.
    // conveyor_try_jsonb: a payload that is not JSON (written straight into Redis) indexes as
    // NULL instead of failing the recorder's insert; only objects and arrays are indexed.
    id: 4,
    name: "dashboard read indexes",
    sql: `
CREATE OR REPLACE FUNCTION conveyor_try_jsonb(t text) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $fn$
BEGIN
  IF t IS NULL OR left(ltrim(t), 1) NOT IN ('{', '[') THEN RETURN NULL; END IF;
  RETURN t::jsonb;
EXCEPTION WHEN others THEN
  RETURN NULL;
END
$fn$;
CREATE INDEX conveyor_jobs_id ON conveyor_jobs (id);
CREATE INDEX conveyor_jobs_queue_recent ON conveyor_jobs (queue, updated_at DESC, id DESC);
CREATE INDEX conveyor_jobs_queue_state_recent ON conveyor_jobs (queue, state, updated_at DESC, id DESC);
CREATE INDEX conveyor_jobs_data_json ON conveyor_jobs USING gin (conveyor_try_jsonb(data) jsonb_path_ops);
CREATE INDEX conveyor_jobs_result_json ON conveyor_jobs USING gin (conveyor_try_jsonb(result) jsonb_path_ops);
CREATE INDEX conveyor_attempts_queue_finished ON conveyor_attempts (queue, finished_at) WHERE finished_at IS NOT NULL;
`,
  },
  {
    // Search by idempotency key after its Redis key expired: the enqueue event carries the key
    // (one field more in an entry already written, no extra Redis command).
    id: 5,
    name: "idempotency keys",
    sql: `
ALTER TABLE conveyor_jobs ADD COLUMN IF NOT EXISTS idempotency_key text;
CREATE INDEX IF NOT EXISTS conveyor_jobs_idempotency_key ON conveyor_jobs (idempotency_key) WHERE idempotency_key IS NOT NULL;
`,
  },
  {
    // Bulk delete from the dashboard (queue/scripts/delete_jobs.lua): the row stays, marked
    // `deleted`, so "what happened to job X" still has an answer.
    id: 6,
    name: "deleted jobs",
    sql: `
ALTER TABLE conveyor_jobs
  DROP CONSTRAINT conveyor_jobs_state_check,
  ADD CONSTRAINT conveyor_jobs_state_check CHECK (state IN ('queued', 'delayed', 'active', 'retrying', 'completed', 'dead', 'cancelled', 'deleted'));
`,
  },
  {
    // What each stage of a pipeline job received and returned: the job row holds only the
    // current stage's input and the last result, so a job that moved on was no longer found by
    // its original payload. One row per (job, stage queue), searchable like the job's own.
    id: 7,
    name: "stage inputs and results",
    sql: `
CREATE TABLE conveyor_stages (
  pipeline  text    NOT NULL,
  job_id    text    NOT NULL,
  queue     text    NOT NULL,
  data      text,
  result    text,
  v_data    numeric,
  v_result  numeric,
  PRIMARY KEY (pipeline, job_id, queue)
);
CREATE INDEX conveyor_stages_data_json ON conveyor_stages USING gin (conveyor_try_jsonb(data) jsonb_path_ops);
CREATE INDEX conveyor_stages_result_json ON conveyor_stages USING gin (conveyor_try_jsonb(result) jsonb_path_ops);
`,
  },
  {
    // A job's task name (queue/attemptErrors.ts's model: the job record's `task`), from the
    // events that carry it; searchable per queue (`task:<name>` in the search box).
    id: 8,
    name: "job tasks",
    sql: `
ALTER TABLE conveyor_jobs ADD COLUMN IF NOT EXISTS task text, ADD COLUMN IF NOT EXISTS v_task numeric;
CREATE INDEX IF NOT EXISTS conveyor_jobs_task_recent ON conveyor_jobs (task, updated_at DESC, id DESC) WHERE task IS NOT NULL;
`,
  },
  {
    // A flow job's flow, key, parents (keys and ids, space-separated, in the same order) and
    // policy, from its enqueue entry: the flow's history is searchable after Redis let it go.
    // A job waiting for its parents is recorded as `waiting-children`.
    id: 9,
    name: "flows",
    sql: `
ALTER TABLE conveyor_jobs
  ADD COLUMN IF NOT EXISTS flow_id text,
  ADD COLUMN IF NOT EXISTS flow_key text,
  ADD COLUMN IF NOT EXISTS flow_parents text,
  ADD COLUMN IF NOT EXISTS flow_parent_ids text,
  ADD COLUMN IF NOT EXISTS flow_policy text,
  DROP CONSTRAINT conveyor_jobs_state_check,
  ADD CONSTRAINT conveyor_jobs_state_check CHECK (state IN ('queued', 'waiting-children', 'delayed', 'active', 'retrying', 'completed', 'dead', 'cancelled', 'deleted'));
CREATE INDEX IF NOT EXISTS conveyor_jobs_flow ON conveyor_jobs (flow_id, flow_key) WHERE flow_id IS NOT NULL;
`,
  },
  {
    // Who changed what through the job API (api/audit.ts): a row is written before the change and
    // its outcome after, so a change whose row cannot be written is not made.
    id: 10,
    name: "audit trail",
    sql: `
CREATE TABLE conveyor_audit (
  id         bigserial   PRIMARY KEY,
  at         timestamptz NOT NULL DEFAULT now(),
  token      text        NOT NULL,
  verb       text        NOT NULL,
  operation  text        NOT NULL,
  target     text        NOT NULL,
  params     jsonb       NOT NULL,
  client     text,
  status     integer,
  jobs       integer,
  result     jsonb
);
CREATE INDEX conveyor_audit_at ON conveyor_audit (at DESC, id DESC);
`,
  },
  {
    // A job's group, from its enqueue entry (with its origin: v_created): a group-scoped token
    // finds its tenant's jobs, counts and search hits in the records after Redis let them go.
    id: 11,
    name: "job groups",
    sql: `
ALTER TABLE conveyor_jobs ADD COLUMN IF NOT EXISTS job_group text;
CREATE INDEX IF NOT EXISTS conveyor_jobs_group_recent
  ON conveyor_jobs (queue, job_group, updated_at DESC, id DESC) WHERE job_group IS NOT NULL;
`,
  },
  {
    // Changes made outside the job API arrive through a Redis stream (queue/audit.ts): a row is
    // keyed by the change's first entry, so a redelivered entry writes nothing new.
    id: 12,
    name: "audit entries from the CLI and the operator",
    sql: `
ALTER TABLE conveyor_audit ADD COLUMN IF NOT EXISTS source text;
CREATE UNIQUE INDEX IF NOT EXISTS conveyor_audit_source ON conveyor_audit (source) WHERE source IS NOT NULL;
`,
  },
];

/** Key of the advisory lock that serialises migrations (ASCII "cvy-migr"). */
export const MIGRATION_LOCK_KEY = 0x6376792d6d696772n;

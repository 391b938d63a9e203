// Every route of `conveyor api` in one table: method, path template, what it does, and the JSON
// Schemas of its path parameters, query and body. The router validates each request against
// these schemas before a handler runs, and an OpenAPI document can be generated from the same
// table. Handlers live in api/routes/*, keyed by the route's name.

import type { Verb } from "./tokens.ts";
import { JOB_ID_PATTERN, QUEUE_NAME_PATTERN } from "../queue/keyTable.ts";

export type JsonSchema = Record<string, unknown>;

/**
 * What a named token needs for a route (api/access.ts checks it before the handler runs).
 * `target`: where the route's queue is — the `{queue}` path parameter (or `queue` query), the
 * queue of the job `{id}`, or none (a list the handler filters to the token's queues).
 * `groups`: how a token limited to groups is held to them — the `{group}` path parameter, the
 * enqueued jobs' `group`, the job's own group, the group of each job the body's `ids` names
 * (none named: refused), the handler filters the rows, the object is the
 * queue's and not a tenant's (a contract), or the route shows or changes a whole queue and is
 * refused.
 */
export interface RouteAccess {
  verb: Verb;
  target: "queue" | "job" | "list";
  groups: "path" | "body" | "job" | "ids" | "filter" | "shared" | "refuse";
}

export interface RouteDefinition {
  name: string;
  method: "GET" | "POST" | "PUT" | "DELETE";
  /** `/queues/{queue}/jobs`: a `{param}` is one path segment, percent-decoded. */
  path: string;
  summary: string;
  tag: "auth" | "queues" | "jobs" | "search" | "events" | "pools" | "resources" | "health" | "meta";
  query?: JsonSchema;
  body?: JsonSchema;
  /** No credentials needed (health, signing in). */
  public?: boolean;
  /** Every route that is not public has one. */
  access?: RouteAccess;
}

// (the grammar of names is the key table's: queue/keyTable.ts)
const QUEUE_PATTERN = QUEUE_NAME_PATTERN;
const queueName = { type: "string", pattern: QUEUE_PATTERN, description: "stage or pipeline/stage" };
const limit = { type: "integer", minimum: 1, maximum: 200, default: 50 };
const cursor = { type: "string", maxLength: 300, description: "opaque; from the previous page's next" };
const time = { type: "integer", minimum: 0, description: "ms since epoch" };

const query = (properties: Record<string, JsonSchema>, required: string[] = []): JsonSchema => ({
  type: "object",
  properties,
  required,
  additionalProperties: false,
});

/** Jobs per batch enqueue call: one enqueue_jobs script call, so a batch is enqueued atomically. */
/** A group's limits and settings, its own or the default of every group (null removes one). */
const GROUP_LIMITS: JsonSchema = {
  type: "object",
  properties: {
    concurrency: {
      type: ["integer", "null"],
      minimum: 1,
      maximum: 1000000,
      description: "at most this many of the group's jobs run at once; null removes it",
    },
    rate: {
      type: ["string", "null"],
      maxLength: 100,
      description: 'at most this many starts per period, "10/s"; null removes it',
    },
    weight: {
      type: ["integer", "null"],
      minimum: 1,
      maximum: 1000,
      description: "one group only: it takes this many turns per round of the round-robin; null = 1",
    },
    onDead: {
      enum: ["block", "continue", null],
      description:
        "what a dead job does to its group: block pauses it until the job is retried, continue (the default) runs the next; null removes the setting",
    },
  },
  additionalProperties: false,
};

export const MAX_BATCH_JOBS = 500;

/**
 * A job envelope (queue/envelope.ts ENVELOPE_FIELDS): the router names a wrong field before
 * parseEnvelope and the producer check the rest (payload size, id shape).
 */
export const JOB_ENVELOPE: JsonSchema = {
  type: "object",
  properties: {
    data: { description: "any JSON value; the handler's input" },
    id: {
      type: "string",
      pattern: JOB_ID_PATTERN,
      description: "stable job id; enqueueing an existing id is a no-op",
    },
    idempotencyKey: {
      type: "string",
      maxLength: 500,
      description: "a second enqueue with the same key (within 24 h) returns the first job",
    },
    priority: { type: "integer", minimum: 0, maximum: 1000, description: "higher runs first; default 0" },
    delayMs: { type: "number", minimum: 0, description: "run no earlier than this many ms from now" },
    attempts: { type: "integer", minimum: 1, maximum: 1000, description: "total attempts; default 3" },
    timeoutMs: { type: "number", minimum: 0, description: "per-job handler timeout; 0 = the worker's" },
    contentHash: { type: "string", maxLength: 500, description: "for result reuse (docs/protocol.md)" },
    group: {
      type: "string",
      minLength: 1,
      maxLength: 128,
      description:
        "the job's group (tenant, customer, key; at most 128 UTF-8 bytes): groups are served round-robin, each may have a concurrency limit (docs/protocol.md, Groups)",
    },
    dedupe: {
      type: "object",
      description:
        "debounce: while the job enqueued with this key waits, it takes this data and waits windowMs again (one run per burst, latest data; outcome replaced); throttle: the first job of a window runs, the rest are existing (docs/protocol.md, Debounce and throttle)",
      properties: {
        key: { type: "string", minLength: 1, maxLength: 500 },
        mode: { enum: ["debounce", "throttle"] },
        windowMs: { type: "integer", minimum: 1, maximum: 604800000 },
      },
      required: ["key", "mode", "windowMs"],
      additionalProperties: false,
    },
    task: {
      type: "string",
      pattern: "^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$",
      description:
        "the job's task: which of the stage's handlers runs it, and which schemas of the queue's contract its data and result are checked against",
    },
    uses: {
      type: "object",
      maxProperties: 8,
      additionalProperties: {
        type: "object",
        additionalProperties: { type: "integer", minimum: 0 },
      },
      description:
        'what the job uses of its pipeline\'s resources, e.g. {"openai": {"tokens": 1200}} (an estimate; 1 request implied): it starts only when a key has room (docs/budgets.md)',
    },
  },
  required: ["data"],
  additionalProperties: false,
};

/** A stage's contract (queue/contracts.ts Contract): each schema is compiled when it is set. */
const CONTRACT_SCHEMAS = {
  data: { description: "the JSON Schema (2020-12, or draft-07 by its $schema) of the jobs' data" },
  result: { description: "the JSON Schema of the jobs' results" },
};
export const CONTRACT: JsonSchema = {
  type: "object",
  properties: {
    ...CONTRACT_SCHEMAS,
    tasks: {
      type: "object",
      description: "per task name: its own data and result schemas (a job must name one of them, or none)",
      propertyNames: { pattern: "^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$" },
      additionalProperties: { type: "object", properties: CONTRACT_SCHEMAS, additionalProperties: false },
    },
  },
  additionalProperties: false,
};

/** Job states a page can filter on (history from PostgreSQL, live ones from Redis). */
export const LIST_STATES = [
  "all",
  "ready",
  "queued",
  "delayed",
  "active",
  "retrying",
  "completed",
  "dead",
  "cancelled",
  "deleted",
] as const;

export const ROUTES: readonly RouteDefinition[] = [
  { name: "health", method: "GET", path: "/healthz", summary: "liveness", tag: "health", public: true },
  {
    name: "metrics",
    access: { verb: "admin", target: "list", groups: "refuse" },
    method: "GET",
    path: "/metrics",
    summary: "Prometheus metrics of this process (conveyor_api_errors_total, process and Node.js)",
    tag: "meta",
  },
  {
    name: "openapi",
    method: "GET",
    path: "/openapi.json",
    summary: "this document (public: it describes routes, never data)",
    tag: "meta",
    public: true,
  },
  {
    name: "session",
    method: "GET",
    path: "/auth/session",
    summary: "whether this browser is signed in, and what the server allows (read-only, queues, pools)",
    tag: "auth",
    public: true,
  },
  {
    name: "signIn",
    method: "POST",
    path: "/auth/session",
    summary: "exchange the API token for an HttpOnly, SameSite=Strict session cookie",
    tag: "auth",
    public: true,
    body: {
      type: "object",
      properties: { token: { type: "string", minLength: 1, maxLength: 4096 } },
      required: ["token"],
      additionalProperties: false,
    },
  },
  {
    name: "signOut",
    method: "DELETE",
    path: "/auth/session",
    summary: "end the session",
    tag: "auth",
    public: true,
  },
  {
    name: "listQueues",
    access: { verb: "read", target: "list", groups: "refuse" },
    method: "GET",
    path: "/queues",
    summary: "every queue with its live counts",
    tag: "queues",
  },
  {
    name: "queueCounts",
    access: { verb: "read", target: "queue", groups: "refuse" },
    method: "GET",
    path: "/queues/{queue}",
    summary: "live counts of one queue",
    tag: "queues",
  },
  {
    name: "enqueue",
    access: { verb: "enqueue", target: "queue", groups: "body" },
    method: "POST",
    path: "/queues/{queue}/jobs",
    summary: "enqueue a job: 202 with a status URL",
    tag: "jobs",
    body: JOB_ENVELOPE,
  },
  {
    name: "enqueueBatch",
    access: { verb: "enqueue", target: "queue", groups: "body" },
    method: "POST",
    path: "/queues/{queue}/jobs/batch",
    summary: `enqueue up to ${MAX_BATCH_JOBS} jobs in one atomic call; each job's outcome (created, or the existing job for a known id or key)`,
    tag: "jobs",
    body: {
      type: "object",
      properties: { jobs: { type: "array", items: JOB_ENVELOPE, minItems: 1, maxItems: MAX_BATCH_JOBS } },
      required: ["jobs"],
      additionalProperties: false,
    },
  },
  {
    name: "getContract",
    access: { verb: "read", target: "queue", groups: "shared" },
    method: "GET",
    path: "/queues/{queue}/contract",
    summary:
      "the queue's contract in force: JSON Schemas of its jobs' data and results, per task (404: none)",
    tag: "queues",
  },
  {
    name: "putContract",
    access: { verb: "admin", target: "queue", groups: "refuse" },
    method: "PUT",
    path: "/queues/{queue}/contract",
    summary:
      "set the queue's contract: every enqueue is checked against it from now on (jobs already waiting are not); 400 names a schema that does not compile",
    tag: "queues",
    body: CONTRACT,
  },
  {
    name: "deleteContract",
    access: { verb: "admin", target: "queue", groups: "refuse" },
    method: "DELETE",
    path: "/queues/{queue}/contract",
    summary: "remove the queue's contract",
    tag: "queues",
  },
  {
    name: "listJobs",
    access: { verb: "read", target: "queue", groups: "refuse" },
    method: "GET",
    path: "/queues/{queue}/jobs",
    summary: "a page of the queue's jobs, newest first (cursor paging)",
    tag: "jobs",
    query: query({ state: { enum: LIST_STATES, default: "all" }, cursor, limit, from: time, to: time }),
  },
  {
    name: "queueStats",
    access: { verb: "read", target: "queue", groups: "refuse" },
    method: "GET",
    path: "/queues/{queue}/stats",
    summary:
      "jobs completed and failed, and p50/p95 duration, per minute over the last 15 minutes, hour (default) or 6 hours",
    tag: "queues",
    query: query({ window: { enum: ["15m", "1h", "6h"], default: "1h" } }), // records/queries.ts STATS_WINDOWS
  },
  {
    name: "queueWorkers",
    access: { verb: "read", target: "queue", groups: "refuse" },
    method: "GET",
    path: "/queues/{queue}/workers",
    summary: "live workers from their heartbeats",
    tag: "queues",
  },
  {
    name: "pause",
    access: { verb: "operate", target: "queue", groups: "refuse" },
    method: "POST",
    path: "/queues/{queue}/pause",
    summary: "pause claiming",
    tag: "queues",
  },
  {
    name: "resume",
    access: { verb: "operate", target: "queue", groups: "refuse" },
    method: "POST",
    path: "/queues/{queue}/resume",
    summary: "resume claiming",
    tag: "queues",
  },
  {
    name: "setRateLimit",
    access: { verb: "operate", target: "queue", groups: "refuse" },
    method: "PUT",
    path: "/queues/{queue}/rate-limit",
    summary: 'at most this many jobs started per period: {"limit": "20/s"}, null removes it',
    tag: "queues",
    body: {
      type: "object",
      properties: { limit: { type: ["string", "null"], maxLength: 100 } },
      required: ["limit"],
      additionalProperties: false,
    },
  },
  {
    name: "removeRateLimit",
    access: { verb: "operate", target: "queue", groups: "refuse" },
    method: "DELETE",
    path: "/queues/{queue}/rate-limit",
    summary: "remove the rate limit",
    tag: "queues",
  },
  {
    name: "listGroups",
    access: { verb: "read", target: "queue", groups: "filter" },
    method: "GET",
    path: "/queues/{queue}/groups",
    summary:
      "the queue's groups: waiting and running jobs, limits, paused; most waiting first (with top or search: a bounded read, each group's oldest waiting job too)",
    tag: "queues",
    query: query({
      top: {
        type: "integer",
        minimum: 1,
        maximum: 200,
        description: "only the groups with the most waiting jobs (a bounded read)",
      },
      search: {
        type: "string",
        minLength: 1,
        maxLength: 128,
        description: "groups whose name starts with this (the exact name first)",
      },
    }),
  },
  {
    name: "groupJobs",
    access: { verb: "read", target: "queue", groups: "path" },
    method: "GET",
    path: "/queues/{queue}/groups/{group}/jobs",
    summary: "one group's next waiting jobs (in the order they will run) and its running ones",
    tag: "queues",
    query: query({ limit }),
  },
  {
    name: "pauseGroup",
    access: { verb: "operate", target: "queue", groups: "path" },
    method: "POST",
    path: "/queues/{queue}/groups/{group}/pause",
    summary: "pause one group: its jobs wait, the others go on",
    tag: "queues",
  },
  {
    name: "resumeGroup",
    access: { verb: "operate", target: "queue", groups: "path" },
    method: "POST",
    path: "/queues/{queue}/groups/{group}/resume",
    summary: "resume one group",
    tag: "queues",
  },
  {
    name: "setGroupLimit",
    access: { verb: "operate", target: "queue", groups: "path" },
    method: "PUT",
    path: "/queues/{queue}/groups/{group}/limit",
    summary: 'one group\'s own limits: {"concurrency": 2, "rate": "10/s"} (null removes one)',
    tag: "queues",
    body: GROUP_LIMITS,
  },
  {
    name: "setDefaultGroupLimit",
    access: { verb: "operate", target: "queue", groups: "refuse" },
    method: "PUT",
    path: "/queues/{queue}/group-limit",
    summary: "the limits of every group without its own (null removes one)",
    tag: "queues",
    body: GROUP_LIMITS,
  },
  {
    name: "listSchedules",
    access: { verb: "read", target: "queue", groups: "refuse" },
    method: "GET",
    path: "/queues/{queue}/schedules",
    summary: "the queue's schedules and their next run",
    tag: "queues",
  },
  {
    name: "putSchedule",
    access: { verb: "operate", target: "queue", groups: "refuse" },
    method: "PUT",
    path: "/queues/{queue}/schedules/{schedule}",
    summary: 'add or replace a schedule: {"every": "5m"} or {"cron": "0 * * * *", "tz": "Europe/Berlin"}',
    tag: "queues",
    body: {
      type: "object",
      properties: {
        every: { type: "string" },
        cron: { type: "string" },
        tz: { type: "string" },
        data: { description: "the job data each run enqueues" },
        attempts: { type: "number" },
      },
      additionalProperties: false,
    },
  },
  {
    name: "deleteSchedule",
    access: { verb: "operate", target: "queue", groups: "refuse" },
    method: "DELETE",
    path: "/queues/{queue}/schedules/{schedule}",
    summary: "remove a schedule",
    tag: "queues",
  },
  {
    name: "listDead",
    access: { verb: "read", target: "queue", groups: "refuse" },
    method: "GET",
    path: "/queues/{queue}/dead",
    summary: "dead letters, oldest first: id, when, reason, attempts, last error",
    tag: "queues",
    query: query({ limit: { ...limit, maximum: 1000 } }),
  },
  {
    name: "retryDead",
    access: { verb: "operate", target: "queue", groups: "ids" },
    method: "POST",
    path: "/queues/{queue}/dead/retry",
    summary: "move dead jobs back to ready (all, or the given ids)",
    tag: "queues",
    body: {
      type: "object",
      properties: { ids: { type: "array", items: { type: "string", maxLength: 200 }, maxItems: 1000 } },
      additionalProperties: false,
    },
  },
  {
    name: "purgeDead",
    access: { verb: "admin", target: "queue", groups: "refuse" },
    method: "DELETE",
    path: "/queues/{queue}/dead",
    summary: "delete every dead job",
    tag: "queues",
  },
  {
    name: "bulkCancel",
    access: { verb: "operate", target: "queue", groups: "ids" },
    method: "POST",
    path: "/queues/{queue}/cancel",
    summary: "cancel the given jobs",
    tag: "jobs",
    body: {
      type: "object",
      properties: {
        ids: { type: "array", items: { type: "string", maxLength: 200 }, minItems: 1, maxItems: 1000 },
      },
      required: ["ids"],
      additionalProperties: false,
    },
  },
  {
    name: "bulkDelete",
    access: { verb: "admin", target: "queue", groups: "ids" },
    method: "POST",
    path: "/queues/{queue}/delete",
    summary:
      "delete the given jobs (waiting, delayed, dead, completed or cancelled) in one atomic call; a running job is refused: cancel it first",
    tag: "jobs",
    body: {
      type: "object",
      properties: {
        ids: {
          type: "array",
          items: { type: "string", pattern: JOB_ID_PATTERN },
          minItems: 1,
          maxItems: 1000,
        },
      },
      required: ["ids"],
      additionalProperties: false,
    },
  },
  {
    name: "jobStatus",
    access: { verb: "read", target: "job", groups: "job" },
    method: "GET",
    path: "/jobs/{id}",
    summary:
      "state, progress, attempts, result or error; with `wait`, a long poll: answers when the job has ended (completed at its last stage, dead, cancelled) or `wait` has passed",
    tag: "jobs",
    query: query({
      queue: queueName,
      wait: {
        type: "string",
        pattern: "^\\d+(\\.\\d+)?(ms|s|m|h)?$",
        description:
          "wait up to this long (250ms, 30s, 1m; a bare number is seconds; at most 60s) for the job to end",
      },
    }),
  },
  {
    name: "jobDetail",
    access: { verb: "read", target: "job", groups: "job" },
    method: "GET",
    path: "/jobs/{id}/detail",
    summary: "everything about one job: record, executions, events, children, payload (truncated)",
    tag: "jobs",
    query: query({ queue: queueName }),
  },
  {
    name: "jobPayload",
    access: { verb: "read", target: "job", groups: "job" },
    method: "GET",
    path: "/jobs/{id}/payload",
    summary: "the job's full data, result or error as a download",
    tag: "jobs",
    query: query({ queue: queueName, part: { enum: ["data", "result", "error"], default: "data" } }),
  },
  {
    name: "jobLogs",
    access: { verb: "read", target: "job", groups: "job" },
    method: "GET",
    path: "/jobs/{id}/logs",
    summary: "log lines the handler wrote (ctx.log)",
    tag: "jobs",
    query: query({ queue: queueName }),
  },
  {
    name: "retryJob",
    access: { verb: "operate", target: "job", groups: "job" },
    method: "POST",
    path: "/jobs/{id}/retry",
    summary: "retry a dead job",
    tag: "jobs",
    query: query({ queue: queueName }, ["queue"]),
  },
  {
    name: "cancelJob",
    access: { verb: "operate", target: "job", groups: "job" },
    method: "POST",
    path: "/jobs/{id}/cancel",
    summary: "cancel a job (never retried)",
    tag: "jobs",
    query: query({ queue: queueName }),
  },
  {
    name: "promoteJob",
    access: { verb: "operate", target: "job", groups: "job" },
    method: "POST",
    path: "/jobs/{id}/promote",
    summary: "run a delayed job now",
    tag: "jobs",
    query: query({ queue: queueName }),
  },
  {
    name: "flow",
    // (a flow's jobs may be many groups': a token limited to groups is refused, one limited to
    // queues sees the flow's jobs in them)
    access: { verb: "read", target: "list", groups: "refuse" },
    method: "GET",
    path: "/flows/{id}",
    summary:
      "a flow's jobs (key, id, queue, state, parents, policy) and their counts by state; from Redis while it has the flow, then from the records",
    tag: "jobs",
    query: query({
      pipeline: {
        type: "string",
        pattern: "^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$",
        description: "the flow's pipeline (default: looked up)",
      },
    }),
  },
  {
    name: "groupsOverview",
    access: { verb: "read", target: "list", groups: "filter" },
    method: "GET",
    path: "/groups",
    summary:
      "a tenant's view: its groups in every queue it may see (waiting, running, limits, paused; completed, dead and cancelled from the records) and their latest jobs; no queue-wide number",
    tag: "queues",
    query: query({
      groups: {
        type: "string",
        minLength: 1,
        maxLength: 2000,
        description:
          "groups, comma-separated (default: the token's; required for a token not limited to groups)",
      },
    }),
  },
  {
    name: "search",
    access: { verb: "read", target: "list", groups: "filter" },
    method: "GET",
    path: "/search",
    summary: "find jobs by id, idempotency key, task:<name>, flow:<id>, or field=value on payload/result",
    tag: "search",
    query: query({ q: { type: "string", minLength: 1, maxLength: 500 }, limit, cursor }, ["q"]),
  },
  {
    name: "events",
    access: { verb: "read", target: "list", groups: "filter" },
    method: "GET",
    path: "/events",
    summary: "Server-Sent Events: every queue transition, live (Last-Event-ID resumes)",
    tag: "events",
    query: query({ queue: queueName }),
  },
  {
    name: "listResources",
    access: { verb: "read", target: "list", groups: "refuse" },
    method: "GET",
    path: "/resources",
    summary:
      "resources (API keys with budgets) of the pipelines this server shows: each key's use of each limit, benches, jobs waiting for budget, and the last hour's utilization",
    tag: "resources",
  },
  {
    name: "pipelineLayout",
    access: { verb: "read", target: "list", groups: "refuse" },
    method: "GET",
    path: "/pipelines/{pipeline}/layout",
    summary:
      "the pipeline's layout in force, the newest every live worker, operator and job API reads, and each reader's version and layouts (docs/protocol.md, Layout versions)",
    tag: "queues",
  },
  {
    name: "audit",
    access: { verb: "admin", target: "list", groups: "refuse" },
    method: "GET",
    path: "/audit",
    summary:
      "the audit trail, newest first: every state change through the API with its token, verb, target, parameters (secrets removed), client and outcome",
    tag: "meta",
    query: query({
      since: time,
      token: { type: "string", pattern: "^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$", description: "a token's name" },
      verb: { enum: ["operate", "admin"] },
      target: {
        type: "string",
        maxLength: 300,
        pattern: "^[^\\u0000-\\u001f]*$",
        description: "a queue, or the start of a target",
      },
      limit: { ...limit, maximum: 1000, default: 100 },
    }),
  },
  {
    name: "listPools",
    access: { verb: "read", target: "list", groups: "refuse" },
    method: "GET",
    path: "/pools",
    summary: "WorkerPools and their status",
    tag: "pools",
  },
  {
    name: "poolDetail",
    access: { verb: "read", target: "list", groups: "refuse" },
    method: "GET",
    path: "/pools/{namespace}/{name}",
    summary:
      "one WorkerPool: status, scale decisions (Events), pods, its canary rollout with both versions' figures and samples",
    tag: "pools",
  },
];

/** Path parameter schemas, by name (every route uses the same meaning for a name). */
export const PARAMS: Record<string, JsonSchema> = {
  queue: queueName,
  pipeline: {
    type: "string",
    pattern: "^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$",
    description: "a pipeline: a queue name's part before '/'",
  },
  id: { type: "string", pattern: JOB_ID_PATTERN },
  namespace: { type: "string", pattern: "^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$" },
  name: { type: "string", pattern: "^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$" },
  /** Checked by the schedule store, whose message names the rule. */
  schedule: { type: "string" },
  /** Any string of 1..128 UTF-8 bytes (queue/groups.ts checks the bytes). */
  group: { type: "string", minLength: 1, maxLength: 128 },
};

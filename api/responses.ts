// What every route answers on success, as JSON Schemas keyed by route name (the requests are in
// api/definitions.ts). api/openapi.ts puts both into the OpenAPI document, and the API tests
// validate real replies against it; api/openapi.test.ts checks every route has an entry here.
// Error replies are not listed per route: every 4xx/5xx is the one ErrorBody shape (api/http.ts).
import { LIST_STATES, type JsonSchema } from "./definitions.ts";

export interface RouteResponse {
  status: number;
  description: string;
  /** JSON body; absent with `content` for other media types. */
  schema?: JsonSchema;
  /** Non-JSON replies (SSE, downloads): media type → schema. */
  content?: Record<string, JsonSchema>;
  headers?: Record<string, JsonSchema & { description: string }>;
}

const str = { type: "string" };
const int = { type: "integer" };
const bool = { type: "boolean" };
const num = { type: "number" };
const nullable = (s: JsonSchema): JsonSchema => ({ anyOf: [s, { type: "null" }] });
const isoTime = { type: "string", format: "date-time" };
const any = {};
const ref = (name: string): JsonSchema => ({ $ref: `#/components/schemas/${name}` });

/** An object whose listed fields are all present; more fields may follow in later versions. */
const obj = (properties: Record<string, JsonSchema>, optional: string[] = []): JsonSchema => ({
  type: "object",
  properties,
  required: Object.keys(properties).filter((k) => !optional.includes(k)),
});

/** Shared shapes, under components.schemas. */
export const SCHEMAS: Record<string, JsonSchema> = {
  Error: {
    type: "object",
    description:
      "Every 4xx and 5xx reply. `error` is the reason for a person, `code` is for programs " +
      "(invalid_json, unknown_field, missing_field, invalid_field, too_many_items, body_too_large, " +
      "payload_too_large, contract_violation (422, with jobs: see ContractViolation), invalid_contract, " +
      "unauthorized, forbidden, not_found, method_not_allowed, conflict, layout_refused (409: the pipeline's layout in force is newer than this server writes), …), " +
      "`field` the input at fault as <where>.<path> (body.jobs.3.priority, query.limit, path.queue, " +
      "header.Last-Event-ID) or null.",
    properties: { error: str, code: str, field: { type: ["string", "null"] } },
    required: ["error", "code", "field"],
    additionalProperties: false,
  },
  ContractViolation: {
    type: "object",
    description:
      "422: jobs whose data breaks the queue's contract, one entry per bad job (index: its place in the request); nothing was enqueued",
    properties: {
      error: str,
      code: { const: "contract_violation" },
      field: { type: ["string", "null"] },
      jobs: {
        type: "array",
        items: obj(
          {
            index: int,
            id: str,
            task: str,
            side: { enum: ["data", "result"] },
            violations: {
              type: "array",
              items: obj(
                {
                  pointer: { ...str, description: "JSON pointer into the data ('' = the whole value)" },
                  rule: {
                    ...str,
                    description: "the schema keyword that failed (required, type, format, task, …)",
                  },
                  message: str,
                  value: { ...str, description: "the offending value as JSON, cut to 80 characters" },
                },
                ["value"],
              ),
            },
          },
          ["id", "task"],
        ),
      },
    },
    required: ["error", "code", "field", "jobs"],
    additionalProperties: false,
  },
  QueueSummary: obj({
    queue: str,
    ready: int,
    delayed: int,
    inflight: int,
    completed: int,
    dead: int,
    cancelled: int,
    backlog: int,
    waitingForBudget: {
      type: "integer",
      description: "waiting jobs no resource key can pay for now (docs/budgets.md): not in ready or backlog",
    },
    paused: bool,
    rateLimit: { type: ["string", "null"] },
    schedules: int,
    oldestWaitingMs: { type: ["integer", "null"] },
    workers: int,
    served: {
      type: "boolean",
      description:
        "false while no worker has ever claimed from the queue nor reports serving it: a typo in a queue name, or a pool not deployed",
    },
  }),
  AttemptError: {
    ...obj(
      {
        attempt: int,
        kind: { type: "string", enum: ["exception", "invalid-result", "timeout", "handed-back", "stalled"] },
        message: str,
        at: { type: "integer", description: "when the attempt ended, ms since epoch" },
        details: {
          type: "array",
          description: "for invalid-result: the contract's violations {pointer, rule, message, value?}",
        },
      },
      ["details"],
    ),
    description:
      "one failed attempt of the job's current stage, as its next attempt is told (previousErrors)",
  },
  JobStage: {
    ...obj(
      {
        queue: str,
        state: {
          type: "string",
          description: "`completed` for an earlier stage, the job's state for its current one",
        },
        attempts: {
          type: "integer",
          description:
            "attempts of this stage that ran to an outcome (failed or succeeded); stalls and hand-backs are apart",
        },
        result: any,
        error: { description: "the last failed attempt's error, unless the stage then succeeded" },
        startedAt: isoTime,
        finishedAt: isoTime,
      },
      ["result", "error", "startedAt", "finishedAt"],
    ),
    description:
      "One stage of a job, in the order it reached them, the current one last. Without the records (PostgreSQL) an earlier stage has no result: Redis keeps only its attempts.",
  },
  JobListItem: obj(
    {
      id: str,
      queue: str,
      state: str,
      attempts: int,
      maxAttempts: { type: ["integer", "null"] },
      createdAt: nullable(str),
      startedAt: nullable(str),
      progress: { type: ["number", "null"] },
      deadReason: { type: ["string", "null"] },
      group: { type: ["string", "null"], description: "the job's group (live ready jobs), or null" },
      updatedAt: { type: "string", description: "when the job last changed (from the records only)" },
    },
    ["startedAt", "progress", "deadReason", "group", "updatedAt"],
  ),
  GroupState: obj(
    {
      group: str,
      waiting: int,
      running: int,
      concurrency: {
        type: ["integer", "null"],
        description: "its limit (its own, else the default); null = none",
      },
      override: { type: "boolean", description: "whether the limit is the group's own" },
      rate: { type: ["string", "null"], description: 'its rate limit, "10/s" (its own, else the default)' },
      paused: bool,
      oldestCreatedAt: {
        type: ["integer", "null"],
        description: "with top or search: when the group's next job was enqueued (ms since epoch)",
      },
      weight: { type: "integer", description: "turns per round of the round-robin" },
      onDead: { enum: ["block", "continue"], description: "what a dead job does to the group" },
      blockedBy: {
        type: ["string", "null"],
        description: "the dead job that paused the group (onDead block)",
      },
    },
    ["oldestCreatedAt", "weight", "onDead", "blockedBy"],
  ),
  Resource: obj({
    pipeline: str,
    name: str,
    ceiling: { type: "number", description: "admission stops at this fraction of each limit" },
    waiting: { type: "integer", description: "jobs waiting for its budget, all queues of the pipeline" },
    waitingByQueue: { type: "object", additionalProperties: int },
    keys: {
      type: "array",
      items: obj({
        id: str,
        benchedUntil: { type: ["number", "null"], description: "ms since epoch; null when not benched" },
        admitted: { type: "integer", description: "jobs admitted on the key, lifetime" },
        limits: {
          type: "array",
          items: obj({
            unit: str,
            max: num,
            windowMs: num,
            used: num,
            utilization: { type: "number", description: "used / max in the window ending now" },
          }),
        },
      }),
    },
    history: {
      type: "array",
      description: "samples of the last hour, oldest first (every API replica samples into Redis)",
      items: obj({
        at: num,
        keys: {
          type: "object",
          description: "key id → unit → utilization",
          additionalProperties: { type: "object", additionalProperties: num },
        },
        benched: { type: "array", items: str },
      }),
    },
  }),
  Schedule: obj(
    {
      name: str,
      every: str,
      cron: str,
      tz: str,
      data: any,
      attempts: int,
      nextRun: nullable(isoTime),
    },
    ["every", "cron", "tz", "attempts", "data"],
  ),
  JobLogLine: {
    ...obj({ at: num, message: str }),
    additionalProperties: false,
    description: "a line a handler logged; at is ms since epoch (the execution id stays server-side)",
  },
  Notification: {
    ...obj({
      event: { enum: ["completed", "dead", "cancelled"] },
      url: str,
      state: { enum: ["delivered", "retrying", "failed"] },
      attempts: int,
      status: { ...int, description: "the last answer's HTTP status, 0 when there was none" },
      answer: {
        ...str,
        description: "the last answer's first 200 characters, or why there was none (refused, timeout, …)",
      },
      firstAt: isoTime,
      lastAt: isoTime,
      nextAt: { ...nullable(isoTime), description: "while retrying: when the next attempt is due" },
    }),
    description:
      "one notification of the job to one destination (docs/notifications.md), as the workers' sender keeps it for 7 days after its last attempt",
  },
  DeadJob: obj({ id: str, deadAt: num, reason: str, attemptsMade: int, error: str }, ["error"]),
  SearchHit: obj({
    id: str,
    queue: str,
    state: str,
    matched: { enum: ["id", "idempotencyKey", "task", "flow", "data", "result", "data or result"] },
    createdAt: nullable(str),
    updatedAt: nullable(str),
  }),
  JobEvent: {
    ...obj({ type: str, id: str, queue: str, at: { type: "number", description: "ms since epoch" } }),
    description:
      "The data of an SSE `job` event: the queue stream entry's fields (never the lease token). " +
      "The SSE id is the stream entry id; send it back as Last-Event-ID to resume.",
  },
  GapEvent: {
    ...obj({
      queue: str,
      after: { type: "string", description: "the Last-Event-ID the client sent" },
      reason: {
        enum: ["trimmed", "truncated"],
        description:
          "trimmed: the stream may have dropped events after that id (it keeps about 10,000); " +
          "truncated: more than 1,000 followed it and only the first 1,000 are replayed",
      },
    }),
    description: "The data of an SSE `gap` event: some events of this queue are missing; reload its view.",
  },
  Shown: {
    description: "a payload as shown: the value when small, else its first 64 KiB as text",
    anyOf: [
      { type: "null" },
      obj({ value: any, bytes: int, truncated: { const: false } }),
      obj({ text: str, bytes: int, truncated: { const: true } }),
    ],
  },
};

const queueAnd = (properties: Record<string, JsonSchema>, optional: string[] = []): JsonSchema =>
  obj({ queue: str, ...properties }, optional);
const ok = (description: string, schema: JsonSchema, status = 200): RouteResponse[] => [
  { status, description, schema },
];
const page = (item: JsonSchema) => ({
  items: { type: "array", items: item },
  next: { type: ["string", "null"] },
});

/**
 * `conveyor api --durability replicated`: the primary applied the enqueue but no replica confirmed
 * it in time, so it may not survive a failover (code `replication_unconfirmed`, `Retry-After`).
 */
const CONTRACT_REFUSED: RouteResponse = {
  status: 422,
  description:
    "the queue's contract refuses some jobs' data (code contract_violation); nothing of the request was enqueued",
  schema: ref("ContractViolation"),
};

const STORED_CONTRACT = queueAnd({
  hash: { ...str, description: "the contract's content hash" },
  contract: { type: "object" },
  source: { ...str, description: "who set it: cli, api, operator:<namespace>/<pool>" },
  updatedAt: { ...num, description: "ms since epoch" },
});

const REPLICATION_UNCONFIRMED: RouteResponse = {
  status: 503,
  description:
    "with --durability replicated: no replica confirmed the enqueue in time (code replication_unconfirmed); the job may or may not survive a failover — enqueue again with the same id (idempotent)",
  schema: ref("Error"),
  headers: { "Retry-After": { type: "string", description: "seconds before trying again" } },
};

export const RESPONSES: Record<string, RouteResponse[]> = {
  health: ok("alive", obj({ ok: { const: true } })),
  metrics: [
    {
      status: 200,
      description: "the Prometheus text exposition format",
      content: { "text/plain": { type: "string" } },
    },
  ],
  openapi: ok("this document", { type: "object", required: ["openapi", "paths"] }),
  session: ok(
    "the session and what the server allows",
    obj({
      authRequired: bool,
      authenticated: bool,
      readOnly: bool,
      queues: {
        type: ["array", "null"],
        items: str,
        description: "the allow-list; null: every queue, or the caller is not signed in",
      },
      history: bool,
      pools: bool,
      token: {
        type: ["string", "null"],
        description: "the signed-in token's name (api-token: CONVEYOR_API_TOKEN)",
      },
      scopes: {
        description: "what the token covers; null: everything (CONVEYOR_API_TOKEN, or not signed in)",
        anyOf: [
          { type: "null" },
          obj({
            pipelines: { type: ["array", "null"], items: str },
            queues: { type: ["array", "null"], items: str },
            groups: { type: ["array", "null"], items: str },
            verbs: { type: "array", items: { enum: ["read", "enqueue", "operate", "admin"] } },
          }),
        ],
      },
    }),
  ),
  signIn: [
    {
      status: 200,
      description: "signed in; the session cookie is set",
      schema: obj({ authenticated: bool }),
      headers: { "Set-Cookie": { type: "string", description: "the HttpOnly session cookie" } },
    },
  ],
  signOut: ok("signed out", obj({ authenticated: { const: false } })),
  audit: ok(
    "audit rows, newest first",
    obj({
      items: {
        type: "array",
        items: obj({
          id: str,
          at: str,
          token: str,
          verb: str,
          operation: str,
          target: str,
          params: { type: "object" },
          client: { type: ["string", "null"] },
          status: { type: ["integer", "null"], description: "null: the outcome was not written" },
          jobs: { type: ["integer", "null"], description: "jobs the change touched, when it counts them" },
          result: {},
        }),
      },
    }),
  ),
  listQueues: ok("every queue", obj({ queues: { type: "array", items: ref("QueueSummary") } })),
  queueCounts: ok("the queue's counts", {
    allOf: [ref("QueueSummary"), obj({ dueDelayed: int })],
  }),
  enqueue: [
    {
      status: 202,
      description: "accepted; poll the status URL",
      schema: obj({ id: str, created: bool, replaced: bool, status: str }, ["replaced"]),
      headers: { Location: { type: "string", description: "the status URL" } },
    },
    CONTRACT_REFUSED,
    REPLICATION_UNCONFIRMED,
  ],
  enqueueBatch: ok(
    "every job enqueued, in one atomic call; each job's outcome in request order",
    obj({
      queue: str,
      created: int,
      existing: int,
      replaced: int,
      jobs: {
        type: "array",
        items: obj({
          index: int,
          id: str,
          outcome: { enum: ["created", "existing", "replaced"] },
          status: str,
        }),
      },
    }),
    202,
  ).concat(CONTRACT_REFUSED, REPLICATION_UNCONFIRMED),
  getContract: ok("the contract in force", STORED_CONTRACT),
  putContract: ok("the contract now in force", STORED_CONTRACT),
  deleteContract: ok("removed (deleted: false when there was none)", queueAnd({ deleted: bool })),
  listJobs: ok(
    "a page of jobs, newest first",
    obj({
      queue: str,
      state: { enum: LIST_STATES },
      source: { enum: ["redis", "records"] },
      ...page(ref("JobListItem")),
    }),
  ),
  queueStats: ok(
    "per-minute throughput and durations (empty without PostgreSQL)",
    queueAnd({
      history: bool,
      window: { enum: ["15m", "1h", "6h"] },
      minutes: {
        type: "array",
        items: obj({
          minute: num,
          completed: int,
          failed: int,
          p50: { type: ["number", "null"] },
          p95: { type: ["number", "null"] },
        }),
      },
    }),
  ),
  queueWorkers: ok(
    "live workers",
    queueAnd({
      workers: {
        type: "array",
        items: obj(
          {
            id: str,
            pod: str,
            slots: int,
            busy: int,
            free: int,
            draining: bool,
            jobP50Ms: num,
            seen: num,
            lastSeenMs: num,
          },
          ["jobP50Ms"],
        ),
      },
    }),
  ),
  pause: ok("paused", queueAnd({ paused: { const: true } })),
  resume: ok("resumed", queueAnd({ paused: { const: false } })),
  setRateLimit: ok("the limit now in force", queueAnd({ rateLimit: { type: ["string", "null"] } })),
  removeRateLimit: ok("no limit", queueAnd({ rateLimit: { type: "null" } })),
  listGroups: ok(
    "the queue's groups",
    queueAnd(
      {
        defaultConcurrency: { type: ["integer", "null"] },
        defaultRate: { type: ["string", "null"] },
        waiting: int,
        groups: { type: "array", items: ref("GroupState") },
        groupsWaiting: { ...int, description: "with top or search: the groups that have waiting jobs" },
      },
      ["groupsWaiting"],
    ),
  ),
  groupJobs: ok(
    "the group's next waiting jobs, then its running ones",
    queueAnd({
      group: str,
      waiting: int,
      running: int,
      jobs: {
        type: "array",
        items: obj({
          id: str,
          state: { enum: ["ready", "active"] },
          createdAt: { type: ["integer", "null"], description: "ms since epoch" },
          priority: int,
        }),
      },
      runningComplete: {
        ...bool,
        description: "false: the queue runs more jobs than were looked at for this group's",
      },
    }),
  ),
  pauseGroup: ok("the group now", { allOf: [queueAnd({}), ref("GroupState")] }),
  resumeGroup: ok("the group now", { allOf: [queueAnd({}), ref("GroupState")] }),
  setGroupLimit: ok("the group now", { allOf: [queueAnd({}), ref("GroupState")] }),
  setDefaultGroupLimit: ok(
    "the defaults now in force",
    queueAnd({
      defaultConcurrency: { type: ["integer", "null"] },
      defaultRate: { type: ["string", "null"] },
      defaultOnDead: { enum: ["block", "continue"] },
    }),
  ),
  listSchedules: ok(
    "the queue's schedules",
    queueAnd({ schedules: { type: "array", items: ref("Schedule") } }),
  ),
  putSchedule: ok("the schedule as stored", { allOf: [queueAnd({}), ref("Schedule")] }),
  deleteSchedule: ok("removed", queueAnd({ name: str, removed: { const: true } })),
  listDead: ok(
    "dead letters, oldest first",
    queueAnd({ total: int, dead: { type: "array", items: ref("DeadJob") } }),
  ),
  retryDead: ok("how many went back to ready", queueAnd({ retried: int })),
  purgeDead: ok("how many were deleted", queueAnd({ purged: int })),
  bulkCancel: ok("how many were cancelled", queueAnd({ cancelled: int })),
  bulkDelete: ok(
    "how many were deleted; the jobs refused (running, or a fan-out parent waiting for its children) and the ids that are no job of this queue",
    queueAnd({
      deleted: int,
      refused: { type: "array", items: obj({ id: str, state: str, reason: str }) },
      notFound: { type: "array", items: str },
    }),
  ),
  jobStatus: ok(
    "the job's state",
    obj({
      id: str,
      queue: str,
      state: str,
      progress: { type: ["number", "null"] },
      progressMessage: { type: ["string", "null"] },
      attempts: int,
      maxAttempts: int,
      result: any,
      error: any,
      deadReason: { type: ["string", "null"] },
      task: { type: ["string", "null"], description: "the job's task name, if it names one" },
      previousErrors: {
        type: "array",
        items: ref("AttemptError"),
        description: "the current stage's last failed attempts (up to 5), oldest first",
      },
      rejected: {
        description: "the last result the stage's contract refused (JSON, cut at 64 KiB), or null",
      },
      stages: { type: "array", items: ref("JobStage") },
    }),
  ),
  jobDetail: ok(
    "everything known about the job",
    obj({
      id: str,
      queue: str,
      pipeline: str,
      state: str,
      progress: { type: ["number", "null"] },
      progressMessage: { type: ["string", "null"] },
      attempts: int,
      maxAttempts: { type: ["integer", "null"] },
      stalls: int,
      priority: { type: ["integer", "null"], description: "while the job is in Redis" },
      createdAt: nullable(str),
      startedAt: nullable(str),
      finishedAt: nullable(str),
      deadReason: { type: ["string", "null"] },
      worker: { type: ["string", "null"], description: "the worker running it now" },
      parentId: { type: ["string", "null"], description: "the fan-out parent (from the records)" },
      idempotencyKey: { type: ["string", "null"], description: "the producer's idempotency key, if any" },
      task: { type: ["string", "null"], description: "the job's task name, if it names one" },
      flow: {
        ...nullable(obj({ id: str, key: str })),
        description: "the flow the job belongs to and its key there (GET /flows/{id}), or null",
      },
      data: ref("Shown"),
      result: ref("Shown"),
      error: ref("Shown"),
      previousErrors: {
        type: "array",
        items: ref("AttemptError"),
        description:
          "the current stage's last failed attempts (up to 5, while the job is in Redis), oldest first",
      },
      rejected: { ...ref("Shown"), description: "the last result the stage's contract refused" },
      executions: {
        type: "array",
        description: "every execution the records hold (none without PostgreSQL), oldest first",
        items: obj(
          {
            execution: str,
            queue: str,
            worker: { type: ["string", "null"] },
            attempt: { type: ["integer", "null"] },
            startedAt: nullable(str),
            finishedAt: nullable(str),
            outcome: str,
            error: { type: ["string", "null"] },
            reason: { type: ["string", "null"] },
            reused: { type: ["boolean", "null"] },
          },
          ["queue", "reused"],
        ),
      },
      stages: {
        type: "array",
        description: "as GET /jobs/{id} gives them, with `data`, `result` and `error` as Shown payloads",
        items: obj(
          {
            queue: str,
            state: str,
            attempts: int,
            data: ref("Shown"),
            result: ref("Shown"),
            error: ref("Shown"),
            startedAt: isoTime,
            finishedAt: isoTime,
          },
          ["startedAt", "finishedAt"],
        ),
      },
      events: {
        type: "array",
        items: {
          ...obj(
            {
              eventId: str,
              type: str,
              at: { type: "string", description: "ms since epoch, as text" },
              source: {
                const: "records",
                description: "filled from the records: the stream no longer holds it",
              },
            },
            ["at", "source"],
          ),
          additionalProperties: { description: "the entry's other fields (progress, reason, …)" },
        },
      },
      eventsTrimmed: {
        type: "boolean",
        description:
          "the job is older than the queue's event stream reaches: earlier entries come from the records",
      },
      children: { type: "array", items: obj({ id: str, queue: str, state: str }) },
      logs: { type: "array", items: ref("JobLogLine") },
      notifications: {
        type: "array",
        items: ref("Notification"),
        description: "the job's completion notifications, oldest first (empty when it has none)",
      },
      sources: obj({ redis: bool, records: bool }),
      actions: obj({ retry: bool, cancel: bool, promote: bool }),
    }),
  ),
  jobPayload: [
    {
      status: 200,
      description: "the full JSON text of the job's data, result or error (an attachment)",
      content: { "application/json": any },
    },
  ],
  jobLogs: ok(
    "the lines the job's handlers logged, oldest first (empty once the log expired)",
    obj({ id: str, queue: str, logs: { type: "array", items: ref("JobLogLine") } }),
  ),
  retryJob: ok("back in ready", obj({ id: str, queue: str, retried: { const: true } })),
  cancelJob: ok(
    "cancelled (a finished job is a 409)",
    obj({
      id: str,
      outcome: { const: "cancelled" },
      state: str,
      queue: str,
      jobsCancelled: int,
    }),
  ),
  promoteJob: ok("runs now", obj({ id: str, queue: str, promoted: { const: true } })),
  flow: ok(
    "the flow's jobs, sorted by key",
    obj({
      id: str,
      pipeline: str,
      createdAt: nullable(isoTime),
      source: {
        enum: ["redis", "records"],
        description:
          "redis: live; records: Redis no longer has the flow (the records' states: queued for ready)",
      },
      counts: { type: "object", additionalProperties: int, description: "jobs by state" },
      jobs: {
        type: "array",
        items: obj(
          {
            key: str,
            id: str,
            queue: str,
            state: {
              ...str,
              description:
                "waiting-children, ready, active, completed, dead, cancelled, …; gone once its record was reclaimed",
            },
            parents: { type: "array", items: str, description: "the parents' keys" },
            onParentFailure: { enum: ["fail", "continue", "ignore"] },
            pending: { ...int, description: "waiting for its parents: how many have not ended yet" },
            reason: { ...str, description: "why it was cancelled or died" },
          },
          ["pending", "reason"],
        ),
      },
    }),
  ),
  groupsOverview: ok(
    "the groups' state per queue and their latest jobs",
    obj({
      groups: { type: "array", items: str },
      items: {
        type: "array",
        items: {
          allOf: [
            obj({ queue: str }),
            ref("GroupState"),
            obj({
              completed: {
                type: ["integer", "null"],
                description: "from the records (null without PostgreSQL)",
              },
              dead: { type: ["integer", "null"] },
              cancelled: { type: ["integer", "null"] },
            }),
          ],
        },
        description: "one per queue and group that has jobs waiting, running or recorded",
      },
      recent: {
        type: ["array", "null"],
        items: ref("JobListItem"),
        description: "the groups' latest changed jobs (from the records; null without PostgreSQL)",
      },
    }),
  ),
  search: ok(
    "matching jobs",
    obj({ q: str, kind: { enum: ["id", "field", "task", "flow"] }, ...page(ref("SearchHit")) }),
  ),
  events: [
    {
      status: 200,
      description:
        "a Server-Sent Events stream: `job` events (data: JobEvent, id: the stream entry id), " +
        "`queues` events (data: the queue names), `gap` events (data: GapEvent; on resume, before " +
        "a queue's events, when its stream no longer holds all events after Last-Event-ID) and " +
        "`: ping` comments every 15 s. The reply starts once the server follows every queue.",
      content: { "text/event-stream": { type: "string" } },
    },
  ],
  listResources: ok(
    "every resource, by pipeline and name",
    obj({ resources: { type: "array", items: ref("Resource") } }),
  ),
  pipelineLayout: ok(
    "the layout in force and its live readers",
    obj(
      {
        pipeline: str,
        inForce: int,
        firstVersion: str,
        finalizedAt: num,
        newestReadable: int,
        readers: {
          type: "array",
          items: obj(
            {
              kind: { enum: ["worker", "operator", "api"] },
              id: str,
              version: str,
              layouts: obj({ min: int, max: int }),
              queue: str,
              pod: str,
              seen: num,
            },
            ["version", "queue", "pod"],
          ),
        },
      },
      ["firstVersion", "finalizedAt"],
    ),
  ),
  listPools: ok("WorkerPools and their status", obj({ pools: { type: "array", items: { type: "object" } } })),
  poolDetail: ok("one WorkerPool", { type: "object" }),
};

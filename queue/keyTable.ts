// The Redis key layout: the one table that queue/keys.generated.ts, queue/scripts/includes/keys.lua
// and clients/python/conveyor/_keys_generated.py are generated from (`npm run gen:keys`;
// queue/keyTable.test.ts fails when one is stale). docs/protocol.md, "Keys", explains each.
//
// A pattern is relative to its scope's prefix: `P` = `cvy:{<pipeline>}:` (the pipeline's hash tag,
// so every key of a pipeline lives in one Redis Cluster slot) and `Q` = `P` + `q:<queue>:`.
// `{name}` is a parameter; `{queue}` in a pipeline key is the queue's own name.

export const KEY_ROOT = "cvy";

/** `stage` or `pipeline/stage`: letters, digits, '.', '_', '-'; each part at most 100. */
export const QUEUE_NAME_PATTERN = "^[A-Za-z0-9][A-Za-z0-9._-]{0,99}(/[A-Za-z0-9][A-Za-z0-9._-]{0,99})?$";
/** A job id: letters, digits, '.', '_', ':', '-'; at most 200. */
export const JOB_ID_PATTERN = "^[A-Za-z0-9][A-Za-z0-9._:-]{0,199}$";

export interface KeySpec {
  /** camelCase; the Python name is its snake_case. */
  name: string;
  scope: "global" | "pipeline" | "queue";
  pattern: string;
  doc: string;
}

export const KEY_TABLE: readonly KeySpec[] = [
  {
    name: "pipelines",
    scope: "global",
    pattern: "pipelines",
    doc: "Every known pipeline (a set), so a job can be found from its id alone.",
  },
  {
    name: "queues",
    scope: "global",
    pattern: "queues",
    doc: "Every known queue (a set), registered once per producer process and queue, for listings.",
  },
  {
    name: "doorbellChannel",
    scope: "global",
    pattern: "doorbell",
    doc: "The pub/sub channel the operator leaves in a sleeping queue's doorbell.",
  },
  {
    name: "readers",
    scope: "global",
    pattern: "readers",
    doc: "Operators' and job APIs' reports (id → JSON: kind, version, the layouts they read, seen), for `conveyor layout status`.",
  },
  {
    name: "tokenRatePrefix",
    scope: "global",
    pattern: "tokenrate:",
    doc: "Prefix of the job API's per-token rate state (`tokenrate:<token>`: the token's theoretical arrival time, expiring when it has passed).",
  },

  {
    name: "jobPrefix",
    scope: "pipeline",
    pattern: "job:",
    doc: "The prefix of every job hash of the pipeline.",
  },
  { name: "job", scope: "pipeline", pattern: "job:{id}", doc: "A job's hash." },
  {
    name: "outbox",
    scope: "pipeline",
    pattern: "outbox",
    doc: "Transactional record of transitions, drained into PostgreSQL.",
  },
  {
    name: "audit",
    scope: "pipeline",
    pattern: "audit",
    doc: "Changes made outside the job API (the CLI, the operator), a capped stream the job API drains into PostgreSQL's audit trail.",
  },
  {
    name: "notify",
    scope: "pipeline",
    pattern: "notify",
    doc: "Completion notifications to send (docs/notifications.md): one entry per ended job whose pool or own `notify` asks for it; a consumer group `notify:<queue>` per queue.",
  },
  {
    name: "notified",
    scope: "pipeline",
    pattern: "notified:{id}",
    doc: "A job's notification deliveries: `<entry> <url>` → JSON state, attempts, last answer (expires 7 days after the last attempt).",
  },
  {
    name: "meta",
    scope: "pipeline",
    pattern: "meta",
    doc: "Pipeline settings (e.g. `records` = outbox on, `groups:<queue>`, `notify:<queue>` = the events the queue's pool notifies, `layout` = the layout in force, mirrored for the claim).",
  },
  {
    name: "layout",
    scope: "pipeline",
    pattern: "layout",
    doc: "The layout in force (a hash): `inForce` (absent: 1), `firstVersion` (the first release that reads it), `finalizedAt`, `finalizedBy`.",
  },
  { name: "seq", scope: "pipeline", pattern: "seq", doc: "The sequence that orders jobs of equal priority." },
  { name: "fence", scope: "pipeline", pattern: "fence", doc: "The counter that issues fencing tokens." },
  {
    name: "data",
    scope: "pipeline",
    pattern: "data:{id}",
    doc: "A waiting job's data longer than 64 B, until it is claimed.",
  },
  {
    name: "logs",
    scope: "pipeline",
    pattern: "logs:{id}",
    doc: "A job's log lines (handlers' ctx.log), capped and expiring.",
  },
  {
    name: "malformed",
    scope: "pipeline",
    pattern: "malformed:{id}",
    doc: "A job key that was not a hash, kept 7 days for inspection.",
  },
  {
    name: "fanIn",
    scope: "pipeline",
    pattern: "fanin:{parent}",
    doc: "A fan-out's join: children done, their results, the join's settings.",
  },
  {
    name: "flow",
    scope: "pipeline",
    pattern: "flow:{id}",
    doc: "A flow (docs/flows.md): `k:<key>` → job id, the outcomes its dependents read (`r:<key>`, `e:<key>`), `open`, `total`.",
  },
  {
    name: "flowIdempotency",
    scope: "pipeline",
    pattern: "flowidem:{key}",
    doc: "A flow's idempotency key → the flow's id, for 24 hours (docs/flows.md).",
  },
  {
    name: "result",
    scope: "pipeline",
    pattern: "result:{queue}:{contentHash}",
    doc: "A stage result stored for reuse under its input's content hash.",
  },
  {
    name: "resource",
    scope: "pipeline",
    pattern: "res:{name}",
    doc: "A resource: its keys, their limits and window logs.",
  },
  { name: "resources", scope: "pipeline", pattern: "resources", doc: "The pipeline's resources, by name." },
  {
    name: "resourceHistory",
    scope: "pipeline",
    pattern: "reshist:{name}",
    doc: "A resource's usage history, for the dashboard.",
  },

  {
    name: "ready",
    scope: "queue",
    pattern: "ready",
    doc: "Prioritised ready jobs (priority ≠ 0): a sorted set by score.",
  },
  { name: "line", scope: "queue", pattern: "line", doc: "Ready jobs of priority 0 in FIFO order: a list." },
  {
    name: "lineStale",
    scope: "queue",
    pattern: "lineStale",
    doc: "How many entries of `line` are stale (their job was cancelled or deleted while waiting).",
  },
  {
    name: "delayed",
    scope: "queue",
    pattern: "delayed",
    doc: "Delayed jobs and retries, by when they are due (sorted set).",
  },
  {
    name: "inflight",
    scope: "queue",
    pattern: "inflight",
    doc: "Jobs holding a lease, by lease deadline (sorted set).",
  },
  { name: "dead", scope: "queue", pattern: "dead", doc: "Dead letters, by when they died (sorted set)." },
  {
    name: "finished",
    scope: "queue",
    pattern: "finished",
    doc: "Finished jobs kept for retention, by when they are due to be reclaimed (sorted set).",
  },
  {
    name: "counts",
    scope: "queue",
    pattern: "counts",
    doc: "Counters (enqueued, completed, failed, …) and queue control (pause, rate limit).",
  },
  {
    name: "versions",
    scope: "queue",
    pattern: "versions",
    doc: "Outcome counters per worker template version, `<version>:<counter>` (rollouts: docs/rollouts.md).",
  },
  {
    name: "rolloutHistory",
    scope: "queue",
    pattern: "rollouthist",
    doc: "Samples of both versions' counters during a canary rollout, by time bucket, for the dashboard.",
  },
  { name: "wake", scope: "queue", pattern: "wake", doc: "The list a blocked claimer waits on for new work." },
  {
    name: "doorbell",
    scope: "queue",
    pattern: "doorbell",
    doc: "Set by the operator while the queue's pool is at zero: the pub/sub channel a wake rings once.",
  },
  {
    name: "workers",
    scope: "queue",
    pattern: "workers",
    doc: "The workers' heartbeat reports: worker → JSON.",
  },
  {
    name: "cordon",
    scope: "queue",
    pattern: "cordon",
    doc: "Set by the operator while a scale-in waits for busy pods: pod → until (ms).",
  },
  { name: "sweepLock", scope: "queue", pattern: "sweep", doc: "The sweeper's short mutex." },
  {
    name: "sweeper",
    scope: "queue",
    pattern: "sweeper",
    doc: "The sweeper's state: `sweptAt` (Redis clock), `graceUntil` after an outage, its settings.",
  },
  { name: "events", scope: "queue", pattern: "events", doc: "The queue's event stream." },
  {
    name: "contract",
    scope: "queue",
    pattern: "contract",
    doc: "The stage's contract (a hash): `hash` (its content hash), `body` (JSON Schemas of its data, result and tasks), `source`, `updatedAt`.",
  },
  {
    name: "schedules",
    scope: "queue",
    pattern: "schedules",
    doc: "Schedules: `<name>` → spec (JSON), `next:<name>` → the next tick enqueued (ms).",
  },
  {
    name: "idempotencyPrefix",
    scope: "queue",
    pattern: "idem:",
    doc: "Producer idempotency keys: `<prefix><key>` → job id.",
  },
  {
    name: "dedupePrefix",
    scope: "queue",
    pattern: "dd:",
    doc: "Debounce and throttle keys: `<prefix><key>` → job id.",
  },
  {
    name: "groupRing",
    scope: "queue",
    pattern: "gring",
    doc: "The ring of groups that may be served next (sorted set by turn).",
  },
  { name: "groupTurns", scope: "queue", pattern: "gturns", doc: "The ring's turn counter." },
  {
    name: "groupWaiting",
    scope: "queue",
    pattern: "gwaiting",
    doc: "Group → its waiting jobs (field '' = all groups together).",
  },
  {
    name: "groupNames",
    scope: "queue",
    pattern: "gnames",
    doc: "The groups with waiting jobs, by name (a sorted set, score 0), for listings.",
  },
  { name: "groupRunning", scope: "queue", pattern: "grunning", doc: "Group → its jobs holding a lease." },
  {
    name: "groupControl",
    scope: "queue",
    pattern: "gcontrol",
    doc: "Group limits: `concurrency` (every group), `concurrency:<g>`, `paused:<g>`, rates.",
  },
  {
    name: "groupBudget",
    scope: "queue",
    pattern: "gbudget",
    doc: "Group → the resource it waits for, while it waits in the ring for budget.",
  },
  {
    name: "groupLine",
    scope: "queue",
    pattern: "g:{group}:line",
    doc: "One group's priority-0 waiting jobs (FIFO list).",
  },
  {
    name: "groupReady",
    scope: "queue",
    pattern: "g:{group}:ready",
    doc: "One group's prioritised waiting jobs (sorted set by score).",
  },
  {
    name: "groupRateLog",
    scope: "queue",
    pattern: "g:{group}:rlog",
    doc: "One group's rate-limit window log (`time:starts,…`), expiring a window after its last start.",
  },
];

/** The parameters of a pattern, in order (`{queue}` of a pipeline key excepted: it is the queue's own). */
export function keyParams(spec: KeySpec): string[] {
  return [...spec.pattern.matchAll(/\{(\w+)\}/g)].map((m) => m[1]!).filter((p) => p !== "queue");
}

// Worker configuration from flags and environment. Every bad value stops the process at start
// with a message naming the flag or variable — never a worker that half-runs.
import { hostname } from "node:os";
import { DURATION_HELP } from "../lib/duration.ts";
import { readFileSync } from "node:fs";
import {
  bool,
  choice,
  duration,
  file,
  int,
  list,
  OptionError,
  readOptions,
  type Options,
  settingsHelp,
  str,
  type Settings,
} from "../lib/options.ts";
import { DATABASE_URL_SETTING, LOG_LEVEL_SETTING, REDIS_URL_SETTING } from "../lib/settings.ts";
import {
  assertQueueName,
  assertSamePipeline,
  DURABILITY_SETTING,
  NOTIFY_EVENTS,
  parseRedisUrl,
  REPLICA_TIMEOUT_SETTING,
  type Durability,
  type NotifyEvent,
} from "../queue/index.ts";
import { DEFAULT_OUTBOX_MAX_BYTES } from "../records/index.ts";
import {
  parseHandler,
  TEMPLATE_VERSION_PATTERN,
  MAX_BATCH_SIZE,
  WORKER_ENV,
  WORKER_PORT,
  type HandlerSpec,
} from "../lib/workerContract.ts";
import { allowList, type NotifyConfig } from "./notify.ts";

export interface WorkerConfig {
  queue: string;
  nextQueue?: string;
  handler: HandlerSpec;
  redisUrl: string;
  databaseUrl?: string;
  /** Handler calls at once: single jobs, or batches of up to batch.size jobs each. */
  concurrency: number;
  /**
   * Batch calls (docs/batches.md): up to `size` jobs per handler call, made once `minSize` are
   * waiting or `waitMs` passed since the first. Absent: one job per call.
   */
  batch?: BatchConfig;
  /** Lease length; the heartbeat renews at a third of it. */
  leaseMs: number;
  /** Default per-job timeout (a job may carry its own). */
  jobTimeoutMs: number;
  /** After a timeout abort, how long a handler may take to stop before it is abandoned/killed. */
  killGraceMs: number;
  /** Warm shutdown: how long to keep running jobs before handing them back. */
  drainMs: number;
  maxStalls: number;
  retentionSeconds: number;
  backoffBaseMs: number;
  backoffMaxMs: number;
  port: number;
  workerId: string;
  pod: string;
  logLevel: string;
  /** Recycling (0 = off): drain and exit after this many jobs. */
  maxJobs: number;
  /** Recycling (0 = off): drain and exit when RSS exceeds this many MiB. */
  maxMemoryMb: number;
  /** Result reuse for jobs carrying a content hash: how long a stage result is kept (0 = off). */
  resultTtlSeconds: number;
  /** Circuit breaker: consecutive dependency failures that pause claiming (0 = off). */
  circuitThreshold: number;
  /** Circuit breaker: first pause; doubles while the dependency stays down, up to 10×. */
  circuitBackoffMs: number;
  /** A command or python handler's environment keeps the worker's connection secrets (handlers/command.ts WORKER_SECRETS). */
  handlerCredentials: boolean;
  /** Job records: the outbox's byte budget in Redis; over it the oldest entries are shed. */
  outboxMaxBytes: number;
  /** "replicated": a settle is acknowledged only once a replica has it (WAIT); queue/durability.ts. */
  durability: Durability;
  /** How long a replicated settle waits for its replica (ms). */
  replicaTimeoutMs: number;
  /** Where the resources' credentials are mounted, `<dir>/<resource>/<key id>` (operator: spec.resources). */
  resourcesDir?: string;
  /** Completion notifications (docs/notifications.md); absent: this worker sends none. */
  notify?: NotifyConfig;
  /** The pod template's version: settles are counted per version (docs/rollouts.md). */
  templateVersion?: string;
}

export interface BatchConfig {
  size: number;
  minSize: number;
  waitMs: number;
}

export { MAX_BATCH_SIZE };

/** The jobs a worker holds at once: concurrency calls of batch.size jobs each (1 without batches). */
export function jobSlots(config: Pick<WorkerConfig, "concurrency" | "batch">): number {
  return config.concurrency * (config.batch?.size ?? 1);
}

const WEEK = "168h";
const YEAR = "8760h";

/** Every worker flag and its variable (lib/options.ts Setting). Flags win over the environment. */
export const WORKER_SETTINGS = {
  queue: str(WORKER_ENV.queue, { arg: "Q" }, "queue to work (required): 'stage' or 'pipeline/stage'"),
  handler: str(
    WORKER_ENV.handler,
    { arg: "H" },
    'module:/path/handler.js | http://127.0.0.1:8080/run | command:["prog","arg"] | python:module.path:function (required)',
  ),
  "next-queue": str(
    WORKER_ENV.nextQueue,
    { arg: "Q" },
    "next stage: a handler's result is enqueued there atomically",
  ),
  redis: REDIS_URL_SETTING,
  database: DATABASE_URL_SETTING,
  concurrency: int(
    WORKER_ENV.concurrency,
    { default: 1, min: 1, max: 10_000 },
    "handler calls at once in this process (with --batch-size: batch calls, each of up to that many jobs)",
  ),
  "batch-size": int(
    WORKER_ENV.batchSize,
    { default: 1, min: 1, max: MAX_BATCH_SIZE },
    "jobs per handler call: above 1 the handler gets batches (docs/batches.md)",
  ),
  "batch-min": int(
    WORKER_ENV.batchMin,
    { arg: "N", min: 1, max: MAX_BATCH_SIZE, defaultHelp: "1" },
    "a batch call starts once this many jobs are claimed (or --batch-wait passed); at most --batch-size",
  ),
  "batch-wait": duration(
    WORKER_ENV.batchWait,
    { default: "0ms", max: "1h" },
    "the longest a claimed job waits for --batch-min others before its batch call starts anyway",
  ),
  lease: duration("CONVEYOR_LEASE", { default: "30s", min: "100ms" }, "lease length, renewed every third"),
  "job-timeout": duration(
    WORKER_ENV.jobTimeout,
    { deprecatedEnv: WORKER_ENV.jobTimeoutSeconds, default: "5m", min: "1ms", max: WEEK },
    "default per-job timeout (a job may carry its own)",
  ),
  "kill-grace": duration(
    "CONVEYOR_KILL_GRACE",
    { default: "5s" },
    "time a timed-out handler gets to stop before it is abandoned",
  ),
  drain: duration(
    WORKER_ENV.drain,
    { deprecatedEnv: WORKER_ENV.drainSeconds, default: "25s", max: WEEK },
    "warm-shutdown drain before running jobs are handed back",
  ),
  "max-stalls": int("CONVEYOR_MAX_STALLS", { default: 2, max: 1000 }, "lease expiries before dead-lettering"),
  retention: duration(
    "CONVEYOR_RETENTION",
    { deprecatedEnv: "CONVEYOR_RETENTION_SECONDS", default: "1h", max: YEAR },
    "keep completed jobs in Redis (0 = delete at once)",
  ),
  "backoff-base": duration("CONVEYOR_BACKOFF_BASE", { default: "1s" }, "retry backoff base"),
  "backoff-max": duration("CONVEYOR_BACKOFF_MAX", { default: "5m" }, "retry backoff cap"),
  port: int(
    WORKER_ENV.port,
    { default: WORKER_PORT, max: 65535 },
    "/healthz /readyz /metrics port (0 = any)",
  ),
  "worker-id": str(
    "CONVEYOR_WORKER_ID",
    { arg: "ID", defaultHelp: "POD_NAME, else host-pid" },
    "this worker's name in leases and metrics",
  ),
  "max-jobs": int("CONVEYOR_MAX_JOBS", { default: 0 }, "recycle: drain and exit 0 after N jobs (0 = off)"),
  "max-memory": int(
    "CONVEYOR_MAX_MEMORY_MB",
    { arg: "MB", default: 0, max: 1_000_000 },
    "recycle: drain and exit 0 above this RSS in MiB (0 = off)",
  ),
  "result-ttl": duration(
    "CONVEYOR_RESULT_TTL",
    { deprecatedEnv: "CONVEYOR_RESULT_TTL_SECONDS", default: "24h", max: YEAR },
    "reuse a stage result for jobs with the same content hash (0 = off)",
  ),
  "circuit-threshold": int(
    "CONVEYOR_CIRCUIT_THRESHOLD",
    { default: 5, max: 1_000_000 },
    "consecutive dependency failures that pause claiming (0 = off)",
  ),
  "circuit-backoff": duration(
    "CONVEYOR_CIRCUIT_BACKOFF",
    { default: "30s" },
    "first pause of an open circuit, doubling up to 10x",
  ),
  "handler-credentials": bool(
    WORKER_ENV.handlerCredentials,
    { default: false },
    "a command or python handler's environment keeps REDIS_URL, REDIS_PASSWORD, DATABASE_URL",
  ),
  // At least 1 MiB: below that a few large results would shed each other at once.
  "outbox-max-bytes": int(
    WORKER_ENV.outboxMaxBytes,
    { default: DEFAULT_OUTBOX_MAX_BYTES, defaultHelp: `${DEFAULT_OUTBOX_MAX_BYTES} = 256 MiB`, min: 1 << 20 },
    "job records: Redis bytes the outbox may use while PostgreSQL is away; over it the oldest records are shed",
  ),
  durability: DURABILITY_SETTING,
  "resources-dir": str(
    WORKER_ENV.resourcesDir,
    { arg: "DIR" },
    "credentials of the resources' keys as files <DIR>/<resource>/<key id> (set by the operator from spec.resources)",
  ),
  "template-version": str(
    WORKER_ENV.templateVersion,
    { arg: "V" },
    "this worker's template version: its jobs' outcomes are counted per version (set by the operator for canary rollouts)",
  ),
  "replica-timeout": REPLICA_TIMEOUT_SETTING,
  notify: str(
    WORKER_ENV.notifyUrl,
    { arg: "URL" },
    "POST a signed notification there when a job ends in one of --notify-events (docs/notifications.md)",
  ),
  "notify-events": list(
    WORKER_ENV.notifyEvents,
    { defaultHelp: NOTIFY_EVENTS.join(",") },
    `the job ends --notify is told of: ${NOTIFY_EVENTS.join(", ")}`,
  ),
  "notify-secret-file": file(
    WORKER_ENV.notifySecretFile,
    {},
    "the HMAC key of Conveyor-Signature; needed by --notify and by jobs' own notify",
  ),
  "notify-allow": list(
    WORKER_ENV.notifyAllow,
    { arg: "CIDR,..." },
    "destinations allowed although loopback, link-local or private (refused otherwise)",
  ),
  "notify-retry-max": duration(
    "CONVEYOR_NOTIFY_RETRY_MAX",
    { default: "24h", min: "1ms", max: WEEK },
    "a notification that keeps failing is given up (marked failed) this long after its first attempt",
  ),
  "notify-retry-base": duration(
    "CONVEYOR_NOTIFY_RETRY_BASE",
    { default: "10s", min: "1ms", max: "1h" },
    "the first retry of a notification; each next one doubles, up to 1h",
  ),
  "notify-timeout": duration(
    "CONVEYOR_NOTIFY_TIMEOUT",
    { default: "10s", min: "10ms", max: "5m" },
    "one notification attempt's limit (connect, send, answer)",
  ),
  "log-level": LOG_LEVEL_SETTING,
} as const satisfies Settings;

export const WORKER_USAGE = `usage: conveyor worker [options]   (each option also reads the environment variable shown)
${settingsHelp(WORKER_SETTINGS)}
${DURATION_HELP}`;

export function loadWorkerConfig(argv: string[], env: NodeJS.ProcessEnv = process.env): WorkerConfig {
  const o = readOptions(argv, env, WORKER_SETTINGS, { usage: WORKER_USAGE });
  const { raw, guard, int, duration, seconds, required } = o;
  const queue = required("queue");
  guard("queue", assertQueueName);
  const nextQueue = raw("next-queue");
  if (nextQueue) guard("next-queue", (v) => assertSamePipeline(queue, v));
  const handler = guard("handler", parseHandler);
  if (!handler) required("handler");
  const redisUrl = o.str("redis")!;
  guard("redis", (v) => parseRedisUrl(v));
  const databaseUrl = guard("database", (v) => {
    if (!/^postgres(ql)?:\/\//.test(v)) throw new Error("expected postgres://user@host:5432/db");
    return v;
  });
  const pod = env[WORKER_ENV.podName] || hostname();
  const concurrency = int("concurrency");
  const batch = batchConfig(o);
  if (batch && concurrency * batch.size > 100_000)
    throw new OptionError(
      `${o.name("concurrency")} ${concurrency} × ${o.name("batch-size")} ${batch.size} = ${concurrency * batch.size} jobs held at once: at most 100000`,
    );
  return {
    queue,
    nextQueue,
    handler: handler!,
    redisUrl,
    databaseUrl,
    concurrency,
    ...(batch ? { batch } : {}),
    leaseMs: duration("lease"),
    jobTimeoutMs: duration("job-timeout"),
    killGraceMs: duration("kill-grace"),
    drainMs: duration("drain"),
    maxStalls: int("max-stalls"),
    retentionSeconds: seconds("retention"),
    backoffBaseMs: duration("backoff-base"),
    backoffMaxMs: duration("backoff-max"),
    port: int("port"),
    workerId: raw("worker-id") ?? (env[WORKER_ENV.podName] || `${hostname()}-${process.pid}`),
    pod,
    logLevel: o.choice("log-level"),
    maxJobs: int("max-jobs"),
    maxMemoryMb: int("max-memory"),
    resultTtlSeconds: seconds("result-ttl"),
    circuitThreshold: int("circuit-threshold"),
    circuitBackoffMs: duration("circuit-backoff"),
    handlerCredentials: o.bool("handler-credentials"),
    outboxMaxBytes: int("outbox-max-bytes"),
    durability: o.choice("durability") as Durability,
    replicaTimeoutMs: duration("replica-timeout"),
    resourcesDir: raw("resources-dir"),
    templateVersion: guard("template-version", (v) => {
      if (!TEMPLATE_VERSION_PATTERN.test(v)) throw new Error("expected 1 to 64 of A-Z a-z 0-9 . _ -");
      return v;
    }),
    ...notifyConfig(o),
  };
}

/** --notify and its companions; {} when this worker sends no notifications. */
function notifyConfig(o: Options<keyof typeof WORKER_SETTINGS>): { notify?: NotifyConfig } {
  const url = o.guard("notify", (v) => {
    let u: URL;
    try {
      u = new URL(v);
    } catch {
      throw new Error("expected an http:// or https:// URL");
    }
    if (u.protocol !== "http:" && u.protocol !== "https:")
      throw new Error("expected an http:// or https:// URL");
    return v;
  });
  const events = o.list("notify-events");
  const bad = events.find((e) => !(NOTIFY_EVENTS as readonly string[]).includes(e));
  if (bad !== undefined)
    throw new OptionError(
      `${o.name("notify-events")}: ${JSON.stringify(bad)} is not one of ${NOTIFY_EVENTS.join(", ")}`,
    );
  const allow = o.list("notify-allow");
  o.guard("notify-allow", () => allowList(allow));
  const secretFile = o.file("notify-secret-file");
  if (!secretFile) {
    const stray = url
      ? "notify"
      : events.length > 0
        ? "notify-events"
        : allow.length > 0
          ? "notify-allow"
          : undefined;
    if (stray)
      throw new OptionError(
        `${o.name(stray)} needs ${o.name("notify-secret-file")}: notifications are always signed`,
      );
    return {};
  }
  if (events.length > 0 && !url)
    throw new OptionError(
      `${o.name("notify-events")} is set but ${o.name("notify")} is not: the pool has no URL to notify`,
    );
  const secret = o.guard("notify-secret-file", (path) => {
    const text = readFileSync(path, "utf8").trim();
    if (text.length < 16)
      throw new Error(`${path} holds ${text.length} characters: a secret needs at least 16`);
    return text;
  })!;
  return {
    notify: {
      url,
      events: url ? ((events.length > 0 ? [...new Set(events)] : [...NOTIFY_EVENTS]) as NotifyEvent[]) : [],
      secret,
      allow,
      retryMaxMs: o.duration("notify-retry-max"),
      retryBaseMs: o.duration("notify-retry-base"),
      timeoutMs: o.duration("notify-timeout"),
    },
  };
}

/** --batch-size/--batch-min/--batch-wait; undefined for one job per call (size 1, the default). */
function batchConfig(o: Options<keyof typeof WORKER_SETTINGS>): BatchConfig | undefined {
  const size = o.int("batch-size");
  const minSize = o.maybeInt("batch-min");
  const waitMs = o.duration("batch-wait");
  if (size === 1) {
    // (a minimum or a wait without batches is a mistake, not a setting to ignore)
    const stray = minSize !== undefined && minSize > 1 ? "batch-min" : waitMs > 0 ? "batch-wait" : undefined;
    if (stray)
      throw new OptionError(
        `${o.name(stray)} is set but ${o.name("batch-size")} is 1: batches need a size above 1`,
      );
    return undefined;
  }
  if (minSize !== undefined && minSize > size)
    throw new OptionError(
      `${o.name("batch-min")} ${minSize} is more than ${o.name("batch-size")} ${size}: a batch never holds more than its size`,
    );
  // (without a wait the minimum never holds a call back: a mistake, not a setting to ignore)
  if (minSize !== undefined && minSize > 1 && waitMs === 0)
    throw new OptionError(
      `${o.name("batch-min")} ${minSize} needs ${o.name("batch-wait")}: how long a claimed job may wait for the others`,
    );
  return { size, minSize: minSize ?? 1, waitMs };
}

// Worker configuration from flags and environment. Every bad value stops the process at start
// with a message naming the flag or variable — never a worker that half-runs.
import { hostname } from "node:os";
import { DURATION_HELP } from "../lib/duration.ts";
import { readOptions, settingsHelp, type Settings } from "../lib/options.ts";
import { DATABASE_URL_SETTING, LOG_LEVEL_SETTING, REDIS_URL_SETTING } from "../lib/settings.ts";
import {
  assertQueueName,
  assertSamePipeline,
  DURABILITY_SETTING,
  parseRedisUrl,
  REPLICA_TIMEOUT_SETTING,
  type Durability,
} from "../queue/index.ts";
import { DEFAULT_OUTBOX_MAX_BYTES } from "../records/index.ts";
import { parseHandlerSpec, type HandlerSpec } from "./handlers/index.ts";

export interface WorkerConfig {
  queue: string;
  nextQueue?: string;
  handler: HandlerSpec;
  redisUrl: string;
  databaseUrl?: string;
  concurrency: number;
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
  /** A command handler's environment keeps the worker's connection secrets (handlers/command.ts WORKER_SECRETS). */
  handlerCredentials: boolean;
  /** Job records: the outbox's byte budget in Redis; over it the oldest entries are shed. */
  outboxMaxBytes: number;
  /** "replicated": a settle is acknowledged only once a replica has it (WAIT); queue/durability.ts. */
  durability: Durability;
  /** How long a replicated settle waits for its replica (ms). */
  replicaTimeoutMs: number;
}

const WEEK = "168h";
const YEAR = "8760h";

/** Every worker flag and its variable (lib/options.ts Setting). Flags win over the environment. */
export const WORKER_SETTINGS = {
  queue: {
    env: "CONVEYOR_QUEUE",
    kind: "string",
    arg: "Q",
    help: "queue to work (required): 'stage' or 'pipeline/stage'",
  },
  handler: {
    env: "CONVEYOR_HANDLER",
    kind: "string",
    arg: "H",
    help: 'module:/path/handler.js | http://127.0.0.1:8080/run | command:["prog","arg"] (required)',
  },
  "next-queue": {
    env: "CONVEYOR_NEXT_QUEUE",
    kind: "string",
    arg: "Q",
    help: "next stage: a handler's result is enqueued there atomically",
  },
  redis: REDIS_URL_SETTING,
  database: DATABASE_URL_SETTING,
  concurrency: {
    env: "CONVEYOR_CONCURRENCY",
    kind: "int",
    default: 1,
    min: 1,
    max: 10_000,
    help: "job slots in this process",
  },
  lease: {
    env: "CONVEYOR_LEASE",
    kind: "duration",
    default: "30s",
    min: "100ms",
    help: "lease length, renewed every third",
  },
  "job-timeout": {
    env: "CONVEYOR_JOB_TIMEOUT",
    deprecatedEnv: "CONVEYOR_JOB_TIMEOUT_SECONDS",
    kind: "duration",
    default: "5m",
    min: "1ms",
    max: WEEK,
    help: "default per-job timeout (a job may carry its own)",
  },
  "kill-grace": {
    env: "CONVEYOR_KILL_GRACE",
    kind: "duration",
    default: "5s",
    help: "time a timed-out handler gets to stop before it is abandoned",
  },
  drain: {
    env: "CONVEYOR_DRAIN",
    deprecatedEnv: "CONVEYOR_DRAIN_SECONDS",
    kind: "duration",
    default: "25s",
    max: WEEK,
    help: "warm-shutdown drain before running jobs are handed back",
  },
  "max-stalls": {
    env: "CONVEYOR_MAX_STALLS",
    kind: "int",
    default: 2,
    max: 1000,
    help: "lease expiries before dead-lettering",
  },
  retention: {
    env: "CONVEYOR_RETENTION",
    deprecatedEnv: "CONVEYOR_RETENTION_SECONDS",
    kind: "duration",
    default: "1h",
    max: YEAR,
    help: "keep completed jobs in Redis (0 = delete at once)",
  },
  "backoff-base": {
    env: "CONVEYOR_BACKOFF_BASE",
    kind: "duration",
    default: "1s",
    help: "retry backoff base",
  },
  "backoff-max": {
    env: "CONVEYOR_BACKOFF_MAX",
    kind: "duration",
    default: "5m",
    help: "retry backoff cap",
  },
  port: {
    env: "CONVEYOR_PORT",
    kind: "int",
    default: 9464,
    max: 65535,
    help: "/healthz /readyz /metrics port (0 = any)",
  },
  "worker-id": {
    env: "CONVEYOR_WORKER_ID",
    kind: "string",
    arg: "ID",
    defaultHelp: "POD_NAME, else host-pid",
    help: "this worker's name in leases and metrics",
  },
  "max-jobs": {
    env: "CONVEYOR_MAX_JOBS",
    kind: "int",
    default: 0,
    help: "recycle: drain and exit 0 after N jobs (0 = off)",
  },
  "max-memory": {
    env: "CONVEYOR_MAX_MEMORY_MB",
    kind: "int",
    arg: "MB",
    default: 0,
    max: 1_000_000,
    help: "recycle: drain and exit 0 above this RSS in MiB (0 = off)",
  },
  "result-ttl": {
    env: "CONVEYOR_RESULT_TTL",
    deprecatedEnv: "CONVEYOR_RESULT_TTL_SECONDS",
    kind: "duration",
    default: "24h",
    max: YEAR,
    help: "reuse a stage result for jobs with the same content hash (0 = off)",
  },
  "circuit-threshold": {
    env: "CONVEYOR_CIRCUIT_THRESHOLD",
    kind: "int",
    default: 5,
    max: 1_000_000,
    help: "consecutive dependency failures that pause claiming (0 = off)",
  },
  "circuit-backoff": {
    env: "CONVEYOR_CIRCUIT_BACKOFF",
    kind: "duration",
    default: "30s",
    help: "first pause of an open circuit, doubling up to 10x",
  },
  "handler-credentials": {
    env: "CONVEYOR_HANDLER_CREDENTIALS",
    kind: "bool",
    default: false,
    help: "a command handler's environment keeps REDIS_URL, REDIS_PASSWORD, DATABASE_URL",
  },
  "outbox-max-bytes": {
    env: "CONVEYOR_OUTBOX_MAX_BYTES",
    kind: "int",
    default: DEFAULT_OUTBOX_MAX_BYTES,
    defaultHelp: `${DEFAULT_OUTBOX_MAX_BYTES} = 256 MiB`,
    // At least 1 MiB: below that a few large results would shed each other at once.
    min: 1 << 20,
    help: "job records: Redis bytes the outbox may use while PostgreSQL is away; over it the oldest records are shed",
  },
  durability: DURABILITY_SETTING,
  "replica-timeout": REPLICA_TIMEOUT_SETTING,
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
  const handler = guard("handler", parseHandlerSpec);
  if (!handler) required("handler");
  const redisUrl = o.str("redis")!;
  guard("redis", (v) => parseRedisUrl(v));
  const databaseUrl = guard("database", (v) => {
    if (!/^postgres(ql)?:\/\//.test(v)) throw new Error("expected postgres://user@host:5432/db");
    return v;
  });
  const pod = env.POD_NAME || hostname();
  return {
    queue,
    nextQueue,
    handler: handler!,
    redisUrl,
    databaseUrl,
    concurrency: int("concurrency"),
    leaseMs: duration("lease"),
    jobTimeoutMs: duration("job-timeout"),
    killGraceMs: duration("kill-grace"),
    drainMs: duration("drain"),
    maxStalls: int("max-stalls"),
    retentionSeconds: seconds("retention"),
    backoffBaseMs: duration("backoff-base"),
    backoffMaxMs: duration("backoff-max"),
    port: int("port"),
    workerId: raw("worker-id") ?? (env.POD_NAME || `${hostname()}-${process.pid}`),
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
  };
}

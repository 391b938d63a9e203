// Worker configuration from flags and environment. Every bad value stops the process at start
// with a message naming the flag or variable — never a worker that half-runs.
import { hostname } from "node:os";
import { DURATION_HELP } from "../lib/duration.ts";
import { readOptions } from "../lib/options.ts";
import {
  assertQueueName,
  assertSamePipeline,
  DEFAULT_REPLICA_TIMEOUT_MS,
  parseDurability,
  parseRedisUrl,
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

const WEEK_MS = 7 * 24 * 3600 * 1000;
const YEAR_SECONDS = 365 * 24 * 3600;

/** Flag name → environment variable. Flags win over the environment. */
const SOURCES = {
  queue: "CONVEYOR_QUEUE",
  "next-queue": "CONVEYOR_NEXT_QUEUE",
  handler: "CONVEYOR_HANDLER",
  redis: "REDIS_URL",
  database: "DATABASE_URL",
  concurrency: "CONVEYOR_CONCURRENCY",
  lease: "CONVEYOR_LEASE",
  "job-timeout": "CONVEYOR_JOB_TIMEOUT_SECONDS",
  "kill-grace": "CONVEYOR_KILL_GRACE",
  drain: "CONVEYOR_DRAIN_SECONDS",
  "max-stalls": "CONVEYOR_MAX_STALLS",
  retention: "CONVEYOR_RETENTION_SECONDS",
  "backoff-base": "CONVEYOR_BACKOFF_BASE",
  "backoff-max": "CONVEYOR_BACKOFF_MAX",
  port: "CONVEYOR_PORT",
  "worker-id": "CONVEYOR_WORKER_ID",
  "log-level": "LOG_LEVEL",
  "max-jobs": "CONVEYOR_MAX_JOBS",
  "max-memory": "CONVEYOR_MAX_MEMORY_MB",
  "result-ttl": "CONVEYOR_RESULT_TTL_SECONDS",
  "circuit-threshold": "CONVEYOR_CIRCUIT_THRESHOLD",
  "circuit-backoff": "CONVEYOR_CIRCUIT_BACKOFF",
  "handler-credentials": "CONVEYOR_HANDLER_CREDENTIALS",
  "outbox-max-bytes": "CONVEYOR_OUTBOX_MAX_BYTES",
  durability: "CONVEYOR_DURABILITY",
  "replica-timeout": "CONVEYOR_REPLICA_TIMEOUT",
} as const;

export const WORKER_USAGE = `usage: conveyor worker [options]   (each option also reads the environment variable shown)
  --queue Q            CONVEYOR_QUEUE            queue to work (required): 'stage' or 'pipeline/stage'
  --handler H          CONVEYOR_HANDLER          module:/path/handler.js | http://127.0.0.1:8080/run | command:["prog","arg"] (required)
  --next-queue Q       CONVEYOR_NEXT_QUEUE       next stage: a handler's result is enqueued there atomically
  --redis URL          REDIS_URL                 redis://host:6379 (password via REDIS_PASSWORD)
  --database URL       DATABASE_URL              PostgreSQL for job records (optional)
  --concurrency N      CONVEYOR_CONCURRENCY      job slots in this process (default 1)
  --lease D            CONVEYOR_LEASE            lease length, renewed every third (default 30s)
  --job-timeout D      CONVEYOR_JOB_TIMEOUT_SECONDS  default per-job timeout (default 5m)
  --kill-grace D       CONVEYOR_KILL_GRACE       time a timed-out handler gets to stop (default 5s)
  --drain D            CONVEYOR_DRAIN_SECONDS    warm-shutdown drain before hand-back (default 25s)
  --max-stalls N       CONVEYOR_MAX_STALLS       lease expiries before dead-lettering (default 2)
  --retention D        CONVEYOR_RETENTION_SECONDS keep completed jobs in Redis (default 1h; 0 = delete at once)
  --backoff-base D     CONVEYOR_BACKOFF_BASE     retry backoff base (default 1s)
  --backoff-max D      CONVEYOR_BACKOFF_MAX      retry backoff cap (default 5m)
  --port N             CONVEYOR_PORT             /healthz /readyz /metrics port (default 9464; 0 = any)
  --worker-id ID       CONVEYOR_WORKER_ID        defaults to POD_NAME, else host-pid
  --max-jobs N         CONVEYOR_MAX_JOBS         recycle: drain and exit 0 after N jobs (default 0 = off)
  --max-memory MB      CONVEYOR_MAX_MEMORY_MB    recycle: drain and exit 0 above this RSS (default 0 = off)
  --result-ttl D       CONVEYOR_RESULT_TTL_SECONDS reuse a stage result for jobs with the same content hash (default 24h; 0 = off)
  --circuit-threshold N CONVEYOR_CIRCUIT_THRESHOLD consecutive dependency failures that pause claiming (default 5; 0 = off)
  --circuit-backoff D  CONVEYOR_CIRCUIT_BACKOFF  first pause of an open circuit, doubling up to 10x (default 30s)
  --handler-credentials CONVEYOR_HANDLER_CREDENTIALS a command handler's environment keeps REDIS_URL, REDIS_PASSWORD, DATABASE_URL (default false)
  --outbox-max-bytes N CONVEYOR_OUTBOX_MAX_BYTES job records: Redis bytes the outbox may use while PostgreSQL is away; over it the oldest records are shed (default 268435456 = 256 MiB)
  --durability M       CONVEYOR_DURABILITY       primary | replicated: settle only once a replica has it (WAIT; default primary)
  --replica-timeout D  CONVEYOR_REPLICA_TIMEOUT  replicated: how long a settle waits for its replica (default 2s)
  --log-level L        LOG_LEVEL                 trace|debug|info|warn|error (default info)
${DURATION_HELP}`;

export function loadWorkerConfig(argv: string[], env: NodeJS.ProcessEnv = process.env): WorkerConfig {
  const o = readOptions(argv, env, SOURCES, WORKER_USAGE, ["handler-credentials"]);
  const { raw, guard, int, duration, seconds, required } = o;
  const queue = required("queue");
  guard("queue", assertQueueName);
  const nextQueue = raw("next-queue");
  if (nextQueue) guard("next-queue", (v) => assertSamePipeline(queue, v));
  const handler = guard("handler", parseHandlerSpec);
  if (!handler) required("handler");
  const redisUrl = raw("redis") ?? "redis://127.0.0.1:6379";
  guard("redis", (v) => parseRedisUrl(v));
  const databaseUrl = guard("database", (v) => {
    if (!/^postgres(ql)?:\/\//.test(v)) throw new Error("expected postgres://user@host:5432/db");
    return v;
  });
  const leaseMs = duration("lease", 30_000, 100);
  const logLevel = o.logLevel("log-level");
  const pod = env.POD_NAME || hostname();
  return {
    queue,
    nextQueue,
    handler: handler!,
    redisUrl,
    databaseUrl,
    concurrency: int("concurrency", 1, 1, 10_000),
    leaseMs,
    jobTimeoutMs: duration("job-timeout", 300_000, 1, WEEK_MS),
    killGraceMs: duration("kill-grace", 5000),
    drainMs: duration("drain", 25_000, 0, WEEK_MS),
    maxStalls: int("max-stalls", 2, 0, 1000),
    retentionSeconds: seconds("retention", 3600, 0, YEAR_SECONDS),
    backoffBaseMs: duration("backoff-base", 1000),
    backoffMaxMs: duration("backoff-max", 300_000),
    port: int("port", 9464, 0, 65535),
    workerId: raw("worker-id") ?? (env.POD_NAME || `${hostname()}-${process.pid}`),
    pod,
    logLevel,
    maxJobs: int("max-jobs", 0, 0, Number.MAX_SAFE_INTEGER),
    maxMemoryMb: int("max-memory", 0, 0, 1_000_000),
    resultTtlSeconds: seconds("result-ttl", 86_400, 0, YEAR_SECONDS),
    circuitThreshold: int("circuit-threshold", 5, 0, 1_000_000),
    circuitBackoffMs: duration("circuit-backoff", 30_000),
    handlerCredentials: o.bool("handler-credentials", false),
    // At least 1 MiB: below that a few large results would shed each other at once.
    outboxMaxBytes: int("outbox-max-bytes", DEFAULT_OUTBOX_MAX_BYTES, 1 << 20, Number.MAX_SAFE_INTEGER),
    durability: guard("durability", (v) => parseDurability(v)) ?? "primary",
    replicaTimeoutMs: duration("replica-timeout", DEFAULT_REPLICA_TIMEOUT_MS, 1, 60_000),
  };
}

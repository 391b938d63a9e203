// `conveyor api`: the job API and the dashboard over HTTP. Every flag also reads a variable,
// so the chart (or any deployment) can configure it either way.
import type { ServerResponse } from "node:http";
import { startTracing, JOB_SAMPLER } from "../../lib/telemetry.ts";
import { bool, choice, duration, int, list, str } from "../../lib/options.ts";
import { DATABASE_URL_SETTING, LOG_LEVEL_SETTING } from "../../lib/settings.ts";
import {
  connectRedis,
  DURABILITY_SETTING,
  QueueAdmin,
  REPLICA_TIMEOUT_SETTING,
  type Durability,
} from "../../queue/index.ts";
import { COMMON, defineCommand, importOperatorPart, UsageError } from "../command.ts";

// Loaded on use, and named at the top level: tsc (5.9, ESM) leaves a `.ts` import() inside an
// object literal unrewritten, and the compiled CLI would look for .ts files dist/ does not have.
const apiServer = () => import("../../api/server.ts");
const logger = () => import("../../lib/logger.ts");
const records = () => import("../../records/index.ts");
const poolReader = () => import("../../operator/poolReader.ts");

export default defineCommand({
  name: "api",
  args: [],
  settings: {
    redis: COMMON.redis,
    port: int("CONVEYOR_API_PORT", { default: 8080, max: 65535 }, "HTTP port (0 = any free port)"),
    host: str("CONVEYOR_API_HOST", { arg: "ADDR", defaultHelp: "every address" }, "address to listen on"),
    "max-body": int(
      "CONVEYOR_API_MAX_BODY",
      { min: 1, defaultHelp: "1048576 = 1 MiB" },
      "largest request body in bytes",
    ),
    token: str(
      "CONVEYOR_API_TOKEN",
      { envOnly: true },
      "the bearer token callers present (from a Secret; at least 16 bytes); none: start only with --insecure-no-auth",
    ),
    "tokens-file": str(
      "CONVEYOR_API_TOKENS_FILE",
      { arg: "FILE" },
      "named tokens with scopes (YAML, from conveyor token create), read again whenever it changes",
    ),
    "audit-retention": duration(
      "CONVEYOR_API_AUDIT_RETENTION",
      { default: "2160h", min: "1h" },
      "audit rows older than this (2160h = 90 days) are deleted (with --database)",
    ),
    "read-only": bool("CONVEYOR_API_READ_ONLY", { default: false }, "refuse every mutating route (403)"),
    queues: list("CONVEYOR_API_QUEUES", { defaultHelp: "all" }, "the only queues the API shows and acts on"),
    database: DATABASE_URL_SETTING,
    kubernetes: choice(
      "CONVEYOR_API_KUBERNETES",
      { arg: "auto|off", choices: ["auto", "off"], default: "auto" },
      "read WorkerPools for the Pools page when a cluster is configured (auto), or never",
    ),
    dashboard: bool("CONVEYOR_API_DASHBOARD", { arg: "on|off", default: true }, "serve the dashboard"),
    "insecure-no-auth": bool(
      "CONVEYOR_API_INSECURE_NO_AUTH",
      { default: false },
      "start without a token: anyone who reaches the port may act (local use only)",
    ),
    durability: DURABILITY_SETTING,
    "replica-timeout": REPLICA_TIMEOUT_SETTING,
    "resource-sample": duration(
      "CONVEYOR_API_RESOURCE_SAMPLE",
      { default: "30s", min: "100ms", max: "10m" },
      "how often the resources' utilization is sampled into Redis for the dashboard's last hour",
    ),
    "rollout-sample": duration(
      "CONVEYOR_API_ROLLOUT_SAMPLE",
      { default: "10s", min: "100ms", max: "10m" },
      "how often the pools' canary rollouts in progress are sampled into Redis for the pool page's chart",
    ),
    "stop-grace": duration(
      "CONVEYOR_API_STOP_GRACE",
      { default: "10s", min: "0s", max: "10m" },
      "how long a stopping API answers the requests in flight (long polls included); keep it under the pod's termination grace",
    ),
    "log-level": LOG_LEVEL_SETTING,
  },
  async run(o) {
    const port = o.int("port");
    const readOnly = o.bool("read-only");
    const queues = o.list("queues");
    const kubernetes = o.choice("kubernetes");
    const dashboard = o.bool("dashboard");
    const insecureNoAuth = o.bool("insecure-no-auth");
    const maxBodyBytes = o.maybeInt("max-body");
    const token = o.raw("token");
    const logLevel = o.choice("log-level");
    const stopGraceMs = o.duration("stop-grace");
    const { startJobApi, InsecureConfigurationError } = await apiServer();
    const { createLogger } = await logger();
    const log = createLogger(logLevel, { component: "job-api" });
    const tracing = await startTracing({
      serviceName: "conveyor-api",
      defaultSampler: JOB_SAMPLER,
      warn: (m) => log.warn(m),
    });
    const redis = connectRedis(o.str("redis")!, {
      name: "conveyor-api",
      onError: (err) => log.warn({ err: err.message }, "Redis connection problem"),
    });
    const databaseUrl = o.raw("database");
    let database;
    if (databaseUrl) {
      const { createPool, migrate } = await records();
      database = createPool(databaseUrl, { applicationName: "conveyor-api", queryTimeoutMs: 10_000 });
      // The read indexes are a migration: applied here too, so history works before any worker ran.
      await migrate(database).catch((err: Error) =>
        log.warn({ err: err.message }, "job records: migrations not applied (read-only database user?)"),
      );
    }
    let pools = null;
    const kubeEnvironment = await importOperatorPart<typeof import("../../operator/kubeEnvironment.ts")>(
      "../operator/kubeEnvironment.ts",
    ).catch(() => null);
    if (kubernetes === "auto" && kubeEnvironment?.kubernetesConfigured()) {
      const { PoolReader } = await poolReader();
      pools = PoolReader.fromEnvironment(new QueueAdmin(redis));
    }
    let server;
    try {
      server = await startJobApi({
        redis,
        port,
        host: o.raw("host"),
        token,
        tokensFile: o.raw("tokens-file"),
        auditRetentionMs: o.duration("audit-retention"),
        maxBodyBytes,
        readOnly,
        queues,
        database,
        pools,
        dashboardDir: dashboard ? undefined : null,
        insecureNoAuth,
        resourceSampleMs: o.duration("resource-sample"),
        rolloutSampleMs: o.duration("rollout-sample"),
        durability: {
          durability: o.choice("durability") as Durability,
          replicaTimeoutMs: o.duration("replica-timeout"),
        },
        log,
      });
    } catch (err) {
      redis.disconnect();
      await database?.end();
      if (err instanceof InsecureConfigurationError) throw new UsageError(err.message);
      if ((err as Error).name === "TokensFileError") throw new UsageError((err as Error).message);
      throw err;
    }
    log.info(
      {
        port,
        auth: token || o.raw("tokens-file") ? "bearer" : "none",
        readOnly,
        queues: queues.length > 0 ? queues : "all",
        history: Boolean(database),
        pools: server.context.pools !== null,
      },
      "job API listening",
    );
    await new Promise<void>((resolve) => {
      // Event streams never end by themselves: ended at once. Other requests in flight (an enqueue
      // the client cannot otherwise tell applied or not) get their answers, for --stop-grace at
      // most, each with `connection: close`: a keep-alive client's next request then goes to a new
      // connection (the next API), not to this one until the grace runs out mid-request.
      const open = new Set<ServerResponse>();
      let stopping = false;
      const lastOnItsConnection = (res: ServerResponse) => {
        if (!res.headersSent) res.setHeader("connection", "close");
      };
      server.on("request", (req, res) => {
        if (stopping) lastOnItsConnection(res);
        open.add(res);
        res.once("close", () => open.delete(res));
      });
      const stop = () => {
        stopping = true;
        server.close(() => resolve());
        server.closeIdleConnections();
        for (const res of open)
          if (res.req.url?.startsWith("/events")) res.destroy();
          else lastOnItsConnection(res);
        setTimeout(() => server.closeAllConnections(), stopGraceMs).unref();
      };
      process.once("SIGTERM", stop);
      process.once("SIGINT", stop);
    });
    redis.disconnect();
    await tracing?.shutdown();
    return 0;
  },
});

// `conveyor api`: the job API and the dashboard over HTTP. Every flag also reads a variable,
// so the chart (or any deployment) can configure it either way.
import { startTracing, JOB_SAMPLER } from "../../lib/telemetry.ts";
import { DATABASE_URL_SETTING, LOG_LEVEL_SETTING } from "../../lib/settings.ts";
import {
  connectRedis,
  DURABILITY_SETTING,
  QueueAdmin,
  REPLICA_TIMEOUT_SETTING,
  type Durability,
} from "../../queue/index.ts";
import { COMMON, defineCommand, importOperatorPart, UsageError } from "../command.ts";

export default defineCommand({
  name: "api",
  synopsis:
    "  api [--port 8080] [--host 0.0.0.0] [--max-body N]  the job API and the dashboard over HTTP (bearer token from CONVEYOR_API_TOKEN)\n" +
    "      [--read-only] [--queues a,b] [--database URL] [--kubernetes auto|off] [--dashboard on|off] [--insecure-no-auth]\n" +
    "      [--durability primary|replicated] [--replica-timeout 2s]",
  positionals: false,
  settings: {
    redis: COMMON.redis,
    port: {
      env: "CONVEYOR_API_PORT",
      kind: "int",
      default: 8080,
      max: 65535,
      help: "HTTP port (0 = any free port)",
    },
    host: {
      env: "CONVEYOR_API_HOST",
      kind: "string",
      arg: "ADDR",
      defaultHelp: "every address",
      help: "address to listen on",
    },
    "max-body": {
      env: "CONVEYOR_API_MAX_BODY",
      kind: "int",
      min: 1,
      defaultHelp: "1048576 = 1 MiB",
      help: "largest request body in bytes",
    },
    token: {
      envOnly: true,
      env: "CONVEYOR_API_TOKEN",
      kind: "string",
      help: "the bearer token callers present (from a Secret; at least 16 bytes); none: start only with --insecure-no-auth",
    },
    "read-only": {
      env: "CONVEYOR_API_READ_ONLY",
      kind: "bool",
      default: false,
      help: "refuse every mutating route (403)",
    },
    queues: {
      env: "CONVEYOR_API_QUEUES",
      kind: "list",
      defaultHelp: "all",
      help: "the only queues the API shows and acts on",
    },
    database: DATABASE_URL_SETTING,
    kubernetes: {
      env: "CONVEYOR_API_KUBERNETES",
      kind: "choice",
      arg: "auto|off",
      choices: ["auto", "off"],
      default: "auto",
      help: "read WorkerPools for the Pools page when a cluster is configured (auto), or never",
    },
    dashboard: {
      env: "CONVEYOR_API_DASHBOARD",
      kind: "bool",
      arg: "on|off",
      default: true,
      help: "serve the dashboard",
    },
    "insecure-no-auth": {
      env: "CONVEYOR_API_INSECURE_NO_AUTH",
      kind: "bool",
      default: false,
      help: "start without a token: anyone who reaches the port may act (local use only)",
    },
    durability: DURABILITY_SETTING,
    "replica-timeout": REPLICA_TIMEOUT_SETTING,
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
    const { startJobApi, InsecureConfigurationError } = await import("../../api/server.ts");
    const { createLogger } = await import("../../lib/logger.ts");
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
      const { createPool, migrate } = await import("../../records/index.ts");
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
      const { PoolReader } = await import("../../operator/poolReader.ts");
      pools = PoolReader.fromEnvironment(new QueueAdmin(redis));
    }
    let server;
    try {
      server = await startJobApi({
        redis,
        port,
        host: o.raw("host"),
        token,
        maxBodyBytes,
        readOnly,
        queues,
        database,
        pools,
        dashboardDir: dashboard ? undefined : null,
        insecureNoAuth,
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
      throw err;
    }
    log.info(
      {
        port,
        auth: token ? "bearer" : "none",
        readOnly,
        queues: queues.length > 0 ? queues : "all",
        history: Boolean(database),
        pools: server.context.pools !== null,
      },
      "job API listening",
    );
    await new Promise<void>((resolve) => {
      const stop = () => {
        server.close(() => resolve());
        server.closeAllConnections(); // SSE streams never end by themselves
      };
      process.once("SIGTERM", stop);
      process.once("SIGINT", stop);
    });
    redis.disconnect();
    await tracing?.shutdown();
    return 0;
  },
});

// Settings more than one command reads, declared once (lib/options.ts Setting). Each command's
// own settings sit beside it: worker/config.ts, operator/config.ts, cli/commands/*.ts;
// cli/configuration.ts gathers them all into docs/configuration.md.
import { choice, int, LOG_LEVELS, str, type Setting } from "./options.ts";
import { WORKER_ENV } from "./workerContract.ts";

export const REDIS_URL_SETTING = str(
  WORKER_ENV.redisUrl,
  { arg: "URL", default: "redis://127.0.0.1:6379" },
  "Redis: redis://host:6379, rediss:// for TLS (password via REDIS_PASSWORD)",
);

export const DATABASE_URL_SETTING = str(
  WORKER_ENV.databaseUrl,
  { arg: "URL" },
  "PostgreSQL for job records: postgres://user@host:5432/db (optional)",
);

export const LOG_LEVEL_SETTING = choice(
  "LOG_LEVEL",
  { arg: "L", choices: LOG_LEVELS, default: "info" },
  "trace|debug|info|warn|error|fatal|silent",
);

/** `--json` on every command that prints a result. */
export const JSON_SETTING = {
  kind: "bool",
  default: false,
  help: "print JSON, one document per line",
} as const satisfies Setting;

/**
 * Variables read by more than one part, or by Node and the runtime, that are no command's flag.
 * Declared so the docs list them and the chart may set them (cli/configuration.test.ts).
 */
export const ENVIRONMENT = {
  "redis-password": str(
    WORKER_ENV.redisPassword,
    { envOnly: true },
    "Redis password when the URL has none (from a Secret in Kubernetes)",
  ),
  "pod-name": str(
    WORKER_ENV.podName,
    { envOnly: true },
    "the pod's name (downward API): the worker's id and the operator's identity in its Lease",
  ),
  "pod-namespace": str(
    "POD_NAMESPACE",
    { envOnly: true },
    "the operator's namespace when no service-account namespace file is mounted",
  ),
  "service-account-name": str(
    "SERVICE_ACCOUNT_NAME",
    { envOnly: true },
    "the operator's service account (downward API): names it in the audit trail",
  ),
  "node-options": str(
    WORKER_ENV.nodeOptions,
    { envOnly: true },
    "Node's own options; the chart sets heap and young-generation sizes",
  ),
  "malloc-arena-max": int(
    "MALLOC_ARENA_MAX",
    { envOnly: true },
    "glibc malloc arenas; the chart caps them to bound the operator's RSS",
  ),
  otel: str(
    "OTEL_*",
    { envOnly: true },
    "OpenTelemetry's standard variables: spans are exported when OTEL_TRACES_EXPORTER or an OTLP endpoint is set (docs/observability.md)",
  ),
} as const satisfies Record<string, Setting>;

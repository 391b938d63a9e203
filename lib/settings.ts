// Settings more than one command reads, declared once (lib/options.ts Setting). Each command's
// own settings sit beside it: worker/config.ts, operator/config.ts, cli/commands/*.ts;
// cli/configuration.ts gathers them all into docs/configuration.md.
import { LOG_LEVELS, type Setting } from "./options.ts";

export const REDIS_URL_SETTING = {
  env: "REDIS_URL",
  kind: "string",
  arg: "URL",
  default: "redis://127.0.0.1:6379",
  help: "Redis: redis://host:6379, rediss:// for TLS (password via REDIS_PASSWORD)",
} as const satisfies Setting;

export const DATABASE_URL_SETTING = {
  env: "DATABASE_URL",
  kind: "string",
  arg: "URL",
  help: "PostgreSQL for job records: postgres://user@host:5432/db (optional)",
} as const satisfies Setting;

export const LOG_LEVEL_SETTING = {
  env: "LOG_LEVEL",
  kind: "choice",
  arg: "L",
  choices: LOG_LEVELS,
  default: "info",
  help: "trace|debug|info|warn|error|fatal|silent",
} as const satisfies Setting;

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
  "redis-password": {
    envOnly: true,
    env: "REDIS_PASSWORD",
    kind: "string",
    help: "Redis password when the URL has none (from a Secret in Kubernetes)",
  },
  "pod-name": {
    envOnly: true,
    env: "POD_NAME",
    kind: "string",
    help: "the pod's name (downward API): the worker's id and the operator's identity in its Lease",
  },
  "pod-namespace": {
    envOnly: true,
    env: "POD_NAMESPACE",
    kind: "string",
    help: "the operator's namespace when no service-account namespace file is mounted",
  },
  "node-options": {
    envOnly: true,
    env: "NODE_OPTIONS",
    kind: "string",
    help: "Node's own options; the chart sets heap and young-generation sizes",
  },
  "malloc-arena-max": {
    envOnly: true,
    env: "MALLOC_ARENA_MAX",
    kind: "int",
    help: "glibc malloc arenas; the chart caps them to bound the operator's RSS",
  },
  otel: {
    envOnly: true,
    env: "OTEL_*",
    kind: "string",
    help: "OpenTelemetry's standard variables: spans are exported when OTEL_TRACES_EXPORTER or an OTLP endpoint is set (docs/observability.md)",
  },
} as const satisfies Record<string, Setting>;

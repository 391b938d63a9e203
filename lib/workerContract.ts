// The contract between the operator and the worker it deploys: the environment the operator
// writes and the worker reads, and the handler's encoding in CONVEYOR_HANDLER. Both sides import
// it, so a renamed variable or a new handler kind cannot reach one side only.
import { assertCallable } from "./pythonCallable.ts";

/**
 * The environment a command handler runs with (worker/handlers/command.ts), read by the Python
 * handler kit (generated into clients/python/conveyor/_keys_generated.py by `npm run gen:keys`).
 */
export const HANDLER_ENV = {
  jobId: "CONVEYOR_JOB_ID",
  queue: "CONVEYOR_QUEUE",
  attempt: "CONVEYOR_ATTEMPT",
  executionId: "CONVEYOR_EXECUTION_ID",
  task: "CONVEYOR_TASK",
  previousErrors: "CONVEYOR_PREVIOUS_ERRORS",
  parents: "CONVEYOR_PARENTS",
  resources: "CONVEYOR_RESOURCES",
  callbackUrl: "CONVEYOR_CALLBACK_URL",
  callbackToken: "CONVEYOR_CALLBACK_TOKEN",
  batch: "CONVEYOR_BATCH",
} as const;

/** The most jobs a batch call may carry (the worker's --batch-size, the pool's spec.batch). */
export const MAX_BATCH_SIZE = 10_000;

/** The worker's health and metrics port (/healthz /readyz /metrics), unless CONVEYOR_PORT says otherwise. */
export const WORKER_PORT = 9464;

/** The worker's environment variables the operator sets (the worker's settings read them). */
export const WORKER_ENV = {
  queue: "CONVEYOR_QUEUE",
  nextQueue: "CONVEYOR_NEXT_QUEUE",
  handler: "CONVEYOR_HANDLER",
  handlerCredentials: "CONVEYOR_HANDLER_CREDENTIALS",
  concurrency: "CONVEYOR_CONCURRENCY",
  batchSize: "CONVEYOR_BATCH_SIZE",
  batchMin: "CONVEYOR_BATCH_MIN",
  batchWait: "CONVEYOR_BATCH_WAIT",
  jobTimeout: "CONVEYOR_JOB_TIMEOUT",
  /** The former name of jobTimeout (seconds), still read by the worker and set by the operator. */
  jobTimeoutSeconds: "CONVEYOR_JOB_TIMEOUT_SECONDS",
  drain: "CONVEYOR_DRAIN",
  /** The former name of drain (seconds), still read by the worker and set by the operator. */
  drainSeconds: "CONVEYOR_DRAIN_SECONDS",
  port: "CONVEYOR_PORT",
  durability: "CONVEYOR_DURABILITY",
  resourcesDir: "CONVEYOR_RESOURCES_DIR",
  outboxMaxBytes: "CONVEYOR_OUTBOX_MAX_BYTES",
  notifyUrl: "CONVEYOR_NOTIFY_URL",
  notifyEvents: "CONVEYOR_NOTIFY_EVENTS",
  notifySecretFile: "CONVEYOR_NOTIFY_SECRET_FILE",
  notifyAllow: "CONVEYOR_NOTIFY_ALLOW",
  redisUrl: "REDIS_URL",
  redisPassword: "REDIS_PASSWORD",
  databaseUrl: "DATABASE_URL",
  podName: "POD_NAME",
  /** The hash of the pod template the operator deployed: settles are counted per version (rollouts). */
  templateVersion: "CONVEYOR_TEMPLATE_VERSION",
  nodeOptions: "NODE_OPTIONS",
} as const;

/** A template version as the worker takes it (a field-name part of `<queue>versions`). */
export const TEMPLATE_VERSION_PATTERN = /^[A-Za-z0-9._-]{1,64}$/;

/** The kinds of handler, in the order messages list them. */
export const HANDLER_KINDS = ["module", "http", "command", "python"] as const;

/** "exactly one of module, http, command or python" */
export const EXACTLY_ONE_HANDLER = `exactly one of ${HANDLER_KINDS.slice(0, -1).join(", ")} or ${HANDLER_KINDS.at(-1)}`;

/** What runs a job, as the worker holds it. */
export type HandlerSpec =
  | { kind: "module"; path: string }
  | { kind: "http"; url: string }
  | { kind: "command"; argv: string[] }
  | { kind: "python"; callable: string };

/** A WorkerPool's spec.handler: one field per kind. */
export interface HandlerFields {
  module?: string;
  http?: { port: number; path?: string };
  command?: string[];
  python?: { callable: string };
}

/** The handler a pool's spec.handler names; an error unless exactly one kind is set. */
export function handlerFromFields(h: HandlerFields): HandlerSpec {
  const set = HANDLER_KINDS.filter((k) => h[k] !== undefined);
  if (set.length !== 1) throw new Error(`${EXACTLY_ONE_HANDLER} must be set`);
  switch (set[0]) {
    case "module":
      return { kind: "module", path: h.module! };
    case "http":
      // The handler of an http pool is a sidecar in the same pod.
      return { kind: "http", url: `http://127.0.0.1:${h.http!.port}${h.http!.path ?? "/"}` };
    case "command":
      return { kind: "command", argv: h.command! };
    default:
      return { kind: "python", callable: h.python!.callable };
  }
}

/** CONVEYOR_HANDLER's value: module:/path, http://host:port/path, command:[...], python:module:function. */
export function encodeHandler(spec: HandlerSpec): string {
  switch (spec.kind) {
    case "module":
      return `module:${spec.path}`;
    case "http":
      return spec.url;
    case "command":
      return `command:${JSON.stringify(spec.argv)}`;
    case "python":
      return `python:${spec.callable}`;
  }
}

/** The handler CONVEYOR_HANDLER (or --handler) names; an error naming what is wrong otherwise. */
export function parseHandler(text: string): HandlerSpec {
  if (text.startsWith("module:")) {
    const path = text.slice("module:".length);
    if (!path) throw new Error("module: needs a path, e.g. module:/app/handler.js");
    return { kind: "module", path };
  }
  if (text.startsWith("http://") || text.startsWith("https://")) {
    try {
      new URL(text);
    } catch {
      throw new Error(`invalid handler URL ${JSON.stringify(text)}`);
    }
    return { kind: "http", url: text };
  }
  if (text.startsWith("command:")) {
    const rest = text.slice("command:".length).trim();
    let argv: unknown;
    try {
      argv = JSON.parse(rest);
    } catch {
      throw new Error(
        `command: takes a JSON array of arguments (no shell), e.g. command:["/usr/bin/convert","-"], got ${JSON.stringify(rest)}`,
      );
    }
    if (!Array.isArray(argv) || argv.length === 0 || !argv.every((a) => typeof a === "string")) {
      throw new Error("command: takes a non-empty JSON array of strings");
    }
    return { kind: "command", argv };
  }
  if (text.startsWith("python:")) {
    const callable = text.slice("python:".length).trim();
    assertCallable(callable);
    return { kind: "python", callable };
  }
  throw new Error(
    `unknown handler ${JSON.stringify(text)}: expected module:/path.js, http://host:port/path, command:["prog","arg"] or python:module.path:function`,
  );
}

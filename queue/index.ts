// The queue protocol's public surface, shared by producers, the worker, the operator and the CLI.
export * from "./keys.ts";
export * from "./keyTable.ts";
export * from "./types.ts";
export * from "./attemptErrors.ts";
export * from "./connection.ts";
export * from "./producer.ts";
export * from "./durability.ts";
export * from "./consumer.ts";
export * from "./scriptReplies.ts";
export * from "./admin.ts";
export * from "./backlogPoll.ts";
export * from "./control.ts";
export * from "./groups.ts";
export * from "./groupAdmission.ts";
export * from "./resources.ts";
export * from "./groupViews.ts";
export * from "./schedules.ts";
export * from "./records.ts";
export * from "./notifications.ts";
export * from "../lib/backoff.ts";
export * from "../lib/duration.ts";
export * from "./events.ts";
export * from "./envelope.ts";
export {
  scriptSource,
  resolveIncludes,
  dumpScripts,
  SCRIPT_NAMES,
  type ScriptName,
  type RedisClient,
} from "./scripts.ts";
// Tracing helpers are in queue/tracing.ts (`@conveyor-dev/queue/tracing`): their types are
// OpenTelemetry's, an optional peer; the switch is here.
export { enableTracing, tracingActive } from "../lib/tracingSwitch.ts";
export * from "./contracts.ts";
export * from "./flows.ts";
export * from "./waiter.ts";
export * from "./layout.ts";
export * from "./versions.ts";
export * from "./audit.ts";
export * from "./tokenRate.ts";

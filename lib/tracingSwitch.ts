// Whether Conveyor's spans are on in this process: set by lib/telemetry.ts when it installs the
// SDK, or by an application with its own SDK (enableTracing), read on the hot path. The flag
// lives on globalThis, not in this module: @conveyor-dev/conveyor and @conveyor-dev/queue each
// carry a copy of lib/, and the switch the worker turns on must be the one the library reads.
const ENABLED = Symbol.for("conveyor.tracing.enabled");
const flags = globalThis as { [ENABLED]?: boolean };

/**
 * True once tracing is on in this process: lib/telemetry.ts' startTracing() installed the SDK,
 * or an application with its own OpenTelemetry SDK called enableTracing().
 */
export function tracingActive(): boolean {
  return flags[ENABLED] === true;
}

/**
 * For applications with an OpenTelemetry SDK of their own: Conveyor's producer (and consumer)
 * spans go to the globally registered provider from now on. The spans use @opentelemetry/api,
 * an optional peer dependency of @conveyor-dev/queue that the SDK brings along.
 */
export function enableTracing(): void {
  flags[ENABLED] = true;
}

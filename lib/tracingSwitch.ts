// Whether Conveyor's spans are on in this process: set by lib/telemetry.ts when it installs the
// SDK, or by an application with its own SDK (queue's enableTracing), read on the hot path.
let enabled = false;

export function tracingEnabled(): boolean {
  return enabled;
}

export function markTracingEnabled(): void {
  enabled = true;
}

// The tracer of Conveyor's own spans when lib/telemetry.ts installed the lean recorder
// (lib/leanTracing.ts). On globalThis for the reason tracingSwitch.ts gives; kept apart from it
// because the library's main entry exports the switch, whose declarations must not need
// @opentelemetry/api (an optional peer dependency).
import type { Tracer } from "@opentelemetry/api";

const TRACER = Symbol.for("conveyor.tracing.tracer");
const slot = globalThis as { [TRACER]?: Tracer };

export function conveyorTracer(): Tracer | undefined {
  return slot[TRACER];
}

export function setConveyorTracer(tracer: Tracer | undefined): void {
  slot[TRACER] = tracer;
}

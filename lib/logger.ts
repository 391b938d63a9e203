// JSON logs to stdout (what `kubectl logs` shows), one line per event.
import { context, trace } from "@opentelemetry/api";
import { pino, type Logger } from "pino";

export function createLogger(level: string, base: Record<string, unknown>): Logger {
  return pino({
    level,
    base,
    mixin: traceIds,
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label) => ({ level: label }) },
  });
}

const NO_IDS = {};

/**
 * trace_id and span_id on every line logged inside a span. Without an OpenTelemetry SDK (no
 * OTEL_* export asked for) the API's context is always empty: no ids, nothing allocated.
 */
function traceIds(): object {
  const sc = trace.getSpanContext(context.active());
  return sc ? { trace_id: sc.traceId, span_id: sc.spanId } : NO_IDS;
}

// JSON logs to stdout (what `kubectl logs` shows), one line per event.
import { context, trace } from "@opentelemetry/api";
import { pino, type Logger } from "pino";

export function createLogger(
  level: string,
  base: Record<string, unknown>,
  // (synchronous by default: a line logged before a crash or an exit is never lost)
  destination: pino.DestinationStream = pino.destination({ dest: 1, sync: true }),
): Logger {
  return pino(
    {
      level,
      base,
      mixin: traceIds,
      // pino's default merge is Object.assign(mixin's object, line's fields): it would write every
      // line's fields into the shared NO_IDS, and each later line would carry them all.
      mixinMergeStrategy: (fields, ids) => (ids === NO_IDS ? fields : Object.assign(ids, fields)),
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
    },
    destination,
  );
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

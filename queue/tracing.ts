// OpenTelemetry tracing shared by producers, the worker and the operator. @opentelemetry/api
// is an optional peer dependency of @conveyor-dev/queue, loaded on first use: only while tracing
// is on (lib/tracingSwitch.ts) or when the worker reads a job's trace field. The SDK and the
// OTLP exporter are loaded by lib/telemetry.ts' startTracing() when the standard OTEL_*
// variables ask for export. Until then every helper here returns at once, so a process without
// tracing pays one boolean test per call. Applications import this module as
// `@conveyor-dev/queue/tracing` (the package's main entry point never names OpenTelemetry types).
// The trace context a job was created in travels in its record's `trace` field
// (docs/protocol.md#trace-context).
import type { Attributes, Context, Link, Span, Tracer } from "@opentelemetry/api";
import { requireOptional } from "../lib/optionalPackage.ts";
import { tracingActive } from "../lib/tracingSwitch.ts";

type OtelApi = typeof import("@opentelemetry/api");
let api: OtelApi | undefined;

/** The OpenTelemetry API; its state is global, so this copy sees the application's SDK. */
function otel(): OtelApi {
  return (api ??= requireOptional<OtelApi>("@opentelemetry/api", "Conveyor's tracing"));
}

/** The `messaging.system` of Conveyor's spans (the conventions allow a system's own name). */
export const MESSAGING_SYSTEM = "conveyor";
const TRACER_NAME = "conveyor";

let tracer: Tracer | undefined;

/** The Conveyor tracer of the global provider while tracing is on. */
export function activeTracer(): Tracer | undefined {
  if (!tracingActive()) return undefined;
  return (tracer ??= otel().trace.getTracer(TRACER_NAME));
}

// ---- the job record's trace field ------------------------------------------------------------
//   <traceparent>
//   [<tracestate>]              when the context has one
//   [link <traceparent>]...     a join job: one line per child it joins

/** The `trace` field value for a context: its W3C traceparent (and tracestate). */
export function traceFieldOf(ctx: Context): string {
  const carrier: Record<string, string> = {};
  otel().propagation.inject(ctx, carrier);
  if (!carrier.traceparent) return "";
  return carrier.tracestate ? `${carrier.traceparent}\n${carrier.tracestate}` : carrier.traceparent;
}

/** A span's context as a `trace` field value. */
export function traceFieldOfSpan(span: Span): string {
  const { context, trace } = otel();
  return traceFieldOf(trace.setSpan(context.active(), span));
}

export interface ParsedTraceField {
  /** The (remote) creation context, a parent for the spans of the job's executions. */
  context: Context;
  /** The creation context itself, then one per joined child: what the conventions link to. */
  links: Link[];
}

/** Parse a `trace` field; null when empty or not a valid W3C context. */
export function parseTraceField(field: string): ParsedTraceField | null {
  if (!field) return null;
  const lines = field.split("\n");
  const { context, propagation, trace } = otel();
  const carrier: Record<string, string> = { traceparent: lines[0]! };
  const links: Link[] = [];
  for (const line of lines.slice(1)) {
    if (line.startsWith("link ")) {
      const sc = trace.getSpanContext(propagation.extract(context.active(), { traceparent: line.slice(5) }));
      if (sc) links.push({ context: sc, attributes: { "conveyor.link": "joined-child" } });
    } else if (line) carrier.tracestate = line;
  }
  const ctx = propagation.extract(context.active(), carrier);
  const sc = trace.getSpanContext(ctx);
  if (!sc) return null;
  return { context: ctx, links: [{ context: sc, attributes: { "conveyor.link": "creation" } }, ...links] };
}

// ---- spans ---------------------------------------------------------------------------------

/** The messaging attributes every Conveyor span of a queue operation carries. */
export function messagingAttributes(
  operation: "send" | "process" | "settle",
  queue: string,
  extra: Attributes = {},
): Attributes {
  return {
    "messaging.system": MESSAGING_SYSTEM,
    "messaging.operation.type": operation,
    "messaging.operation.name": operation,
    "messaging.destination.name": queue,
    ...extra,
  };
}

/**
 * A PRODUCER `send {queue}` span for jobs being enqueued (one span per batch, as the
 * conventions allow), a child of `parent` (default: the active context). Returns the span and
 * the trace field its jobs store; null while tracing is off.
 */
export function startSendSpan(
  queue: string,
  ids: string[],
  parent?: Context,
): { span: Span; field: string } | null {
  const tracer = activeTracer();
  if (!tracer) return null;
  const attributes =
    ids.length === 1
      ? messagingAttributes("send", queue, { "messaging.message.id": ids[0]! })
      : messagingAttributes("send", queue, { "messaging.batch.message_count": ids.length });
  const { context, trace, SpanKind } = otel();
  const at = parent ?? context.active();
  const span = tracer.startSpan(`send ${queue}`, { kind: SpanKind.PRODUCER, attributes }, at);
  return { span, field: traceFieldOf(trace.setSpan(at, span)) };
}

/** End a span, marking it failed when `err` is given. */
export function endSpan(span: Span, err?: unknown): void {
  if (err !== undefined) {
    span.recordException(err instanceof Error ? err : String(err));
    span.setStatus({
      code: otel().SpanStatusCode.ERROR,
      message: err instanceof Error ? err.message : String(err),
    });
  }
  span.end();
}

/** W3C headers of the active context (for an HTTP call or a child process), or null. */
export function activeTraceHeaders(): { traceparent: string; tracestate?: string } | null {
  if (!tracingActive()) return null;
  const carrier: Record<string, string> = {};
  const { context, propagation } = otel();
  propagation.inject(context.active(), carrier);
  if (!carrier.traceparent) return null;
  return carrier.tracestate
    ? { traceparent: carrier.traceparent, tracestate: carrier.tracestate }
    : { traceparent: carrier.traceparent };
}

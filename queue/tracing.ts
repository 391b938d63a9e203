// OpenTelemetry tracing shared by producers, the worker and the operator. Only
// @opentelemetry/api is imported; the SDK and the OTLP exporter (optional dependencies) are
// loaded by lib/telemetry.ts' startTracing() when the standard OTEL_* variables ask for export.
// Until then every helper here returns at once, so a process without tracing pays one boolean
// test per call.
// The trace context a job was created in travels in its record's `trace` field
// (docs/protocol.md#trace-context).
import {
  context,
  propagation,
  trace,
  SpanKind,
  SpanStatusCode,
  type Attributes,
  type Context,
  type Link,
  type Span,
  type Tracer,
} from "@opentelemetry/api";
import { markTracingEnabled, tracingEnabled } from "../lib/tracingSwitch.ts";

/** The `messaging.system` of Conveyor's spans (the conventions allow a system's own name). */
export const MESSAGING_SYSTEM = "conveyor";
const TRACER_NAME = "conveyor";

let tracer: Tracer | undefined;

/**
 * True once tracing is on in this process: lib/telemetry.ts' startTracing() installed the SDK,
 * or an application with its own OpenTelemetry SDK called enableTracing().
 */
export function tracingActive(): boolean {
  return tracingEnabled();
}

/** The Conveyor tracer (from the global provider) while tracing is on. */
export function activeTracer(): Tracer | undefined {
  if (!tracingEnabled()) return undefined;
  return (tracer ??= trace.getTracer(TRACER_NAME));
}

/**
 * For applications with an OpenTelemetry SDK of their own: Conveyor's producer (and consumer)
 * spans go to the globally registered provider from now on.
 */
export function enableTracing(): void {
  markTracingEnabled();
}

// ---- the job record's trace field ------------------------------------------------------------
//   <traceparent>
//   [<tracestate>]              when the context has one
//   [link <traceparent>]...     a join job: one line per child it joins

/** The `trace` field value for a context: its W3C traceparent (and tracestate). */
export function traceFieldOf(ctx: Context): string {
  const carrier: Record<string, string> = {};
  propagation.inject(ctx, carrier);
  if (!carrier.traceparent) return "";
  return carrier.tracestate ? `${carrier.traceparent}\n${carrier.tracestate}` : carrier.traceparent;
}

/** A span's context as a `trace` field value. */
export function traceFieldOfSpan(span: Span): string {
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
  parent: Context = context.active(),
): { span: Span; field: string } | null {
  const tracer = activeTracer();
  if (!tracer) return null;
  const attributes =
    ids.length === 1
      ? messagingAttributes("send", queue, { "messaging.message.id": ids[0]! })
      : messagingAttributes("send", queue, { "messaging.batch.message_count": ids.length });
  const span = tracer.startSpan(`send ${queue}`, { kind: SpanKind.PRODUCER, attributes }, parent);
  return { span, field: traceFieldOf(trace.setSpan(parent, span)) };
}

/** End a span, marking it failed when `err` is given. */
export function endSpan(span: Span, err?: unknown): void {
  if (err !== undefined) {
    span.recordException(err instanceof Error ? err : String(err));
    span.setStatus({ code: SpanStatusCode.ERROR, message: err instanceof Error ? err.message : String(err) });
  }
  span.end();
}

/** W3C headers of the active context (for an HTTP call or a child process), or null. */
export function activeTraceHeaders(): { traceparent: string; tracestate?: string } | null {
  if (!tracingEnabled()) return null;
  const carrier: Record<string, string> = {};
  propagation.inject(context.active(), carrier);
  if (!carrier.traceparent) return null;
  return carrier.tracestate
    ? { traceparent: carrier.traceparent, tracestate: carrier.tracestate }
    : { traceparent: carrier.traceparent };
}

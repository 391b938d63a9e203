// The operator's spans (when the OTEL_* variables ask for export, see queue/tracing.ts): one
// `reconcile WorkerPool` span per reconcile and a `scale WorkerPool` span per scale decision
// written, a child of it. While tracing is off both helpers just run `fn`.
import { context, trace, SpanStatusCode, type Attributes, type Span } from "@opentelemetry/api";
import { activeTracer } from "../queue/tracing.ts";

/** Run `fn` inside a span named `name` (INTERNAL), ended with `fn`; an error marks it failed. */
export async function withSpan<T>(
  name: string,
  attributes: Attributes,
  fn: (span: Span | undefined) => Promise<T>,
): Promise<T> {
  const tracer = activeTracer();
  if (!tracer) return fn(undefined);
  const span = tracer.startSpan(name, { attributes });
  try {
    return await context.with(trace.setSpan(context.active(), span), () => fn(span));
  } catch (err) {
    span.recordException(err as Error);
    span.setStatus({ code: SpanStatusCode.ERROR, message: (err as Error).message });
    throw err;
  } finally {
    span.end();
  }
}

/** The attributes naming a pool on the operator's spans. */
export function poolAttributes(namespace: string, name: string): Attributes {
  return { "k8s.namespace.name": namespace, "conveyor.workerpool": name };
}

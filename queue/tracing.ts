// OpenTelemetry tracing shared by producers, the worker and the operator. Only
// @opentelemetry/api is imported; the SDK and the OTLP exporter (optional dependencies) are
// loaded by startTracing() when the standard OTEL_* variables ask for export. Until then every
// helper here returns at once, so a process without tracing pays one boolean test per call.
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

/** The `messaging.system` of Conveyor's spans (the conventions allow a system's own name). */
export const MESSAGING_SYSTEM = "conveyor";
const TRACER_NAME = "conveyor";

let tracer: Tracer | undefined;

/** True once startTracing() has installed an exporting SDK in this process. */
export function tracingActive(): boolean {
  return tracer !== undefined;
}

/** The Conveyor tracer while tracing is active. */
export function activeTracer(): Tracer | undefined {
  return tracer;
}

export interface TracingHandle {
  /** Flush what is buffered and stop exporting. */
  shutdown(): Promise<void>;
}

type Env = Record<string, string | undefined>;

/**
 * Which exporters the standard variables ask for, or why none: OTEL_SDK_DISABLED=true turns
 * tracing off; OTEL_TRACES_EXPORTER names them (`otlp`, `console`; `none` = off); without it an
 * OTLP endpoint (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) means `otlp`.
 */
export function requestedExporters(env: Env = process.env): string[] {
  if ((env.OTEL_SDK_DISABLED ?? "").trim().toLowerCase() === "true") return [];
  const named = (env.OTEL_TRACES_EXPORTER ?? "")
    .split(",")
    .map((s) => s.trim().toLowerCase())
    .filter(Boolean);
  if (named.length > 0) return named.includes("none") ? [] : [...new Set(named)];
  return env.OTEL_EXPORTER_OTLP_ENDPOINT || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ? ["otlp"] : [];
}

export interface StartTracingOptions {
  /** service.name unless OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES say otherwise. */
  serviceName: string;
  /** More resource attributes (e.g. service.instance.id: the worker id); the variables win. */
  resource?: Attributes;
  /** Where problems go (a missing SDK, an unknown exporter); tracing then stays off. */
  warn?: (message: string) => void;
  env?: Env;
}

/**
 * Install the SDK when the variables ask for export; null (and nothing loaded) otherwise.
 * Honours OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES, OTEL_TRACES_SAMPLER(_ARG),
 * OTEL_BSP_SCHEDULE_DELAY / _MAX_QUEUE_SIZE / _MAX_EXPORT_BATCH_SIZE / _EXPORT_TIMEOUT and the
 * exporter's own OTEL_EXPORTER_OTLP_* variables (endpoint, headers, timeout, compression).
 */
export async function startTracing(opts: StartTracingOptions): Promise<TracingHandle | null> {
  const env = opts.env ?? process.env;
  const warn = opts.warn ?? ((m: string) => process.stderr.write(`${m}\n`));
  const exporters = requestedExporters(env);
  if (exporters.length === 0) return null;
  if (tracer) return { shutdown: async () => {} };
  let sdk;
  try {
    sdk = await loadSdk();
  } catch (err) {
    warn(
      `tracing: OTEL variables ask for ${exporters.join(",")} export but the OpenTelemetry SDK is not installed (${(err as Error).message}); tracing stays off`,
    );
    return null;
  }
  const spanExporters = [];
  for (const name of exporters) {
    if (name === "otlp") {
      const protocol = env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ?? env.OTEL_EXPORTER_OTLP_PROTOCOL;
      if (protocol && protocol !== "http/protobuf")
        warn(`tracing: OTLP protocol ${protocol} is not supported; exporting with http/protobuf`);
      spanExporters.push(new sdk.OTLPTraceExporter(otlpUrl(env)));
    } else if (name === "console") {
      spanExporters.push(new sdk.ConsoleSpanExporter());
    } else {
      warn(`tracing: OTEL_TRACES_EXPORTER=${name} is not supported (otlp, console, none); ignored`);
    }
  }
  if (spanExporters.length === 0) return null;
  const num = (name: string) => {
    const v = env[name];
    const n = v === undefined || v === "" ? NaN : Number(v);
    return Number.isFinite(n) && n >= 0 ? n : undefined;
  };
  const processors = spanExporters.map(
    (exporter) =>
      new sdk.BatchSpanProcessor({
        exporter,
        scheduledDelayMillis: num("OTEL_BSP_SCHEDULE_DELAY"),
        maxQueueSize: num("OTEL_BSP_MAX_QUEUE_SIZE"),
        maxExportBatchSize: num("OTEL_BSP_MAX_EXPORT_BATCH_SIZE"),
        exportTimeoutMillis: num("OTEL_BSP_EXPORT_TIMEOUT"),
      }),
  );
  const detected = sdk.detectResources({ detectors: [sdk.envDetector] });
  // merge: the detected attributes (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES) win over ours.
  const resource = sdk
    .resourceFromAttributes({ "service.name": opts.serviceName, ...opts.resource })
    .merge(detected);
  const provider = new sdk.TracerProvider({
    resource,
    sampler: sampler(sdk, env, warn),
    spanProcessors: processors,
  });
  const contextManager = new sdk.AsyncLocalStorageContextManager();
  contextManager.enable();
  context.setGlobalContextManager(contextManager);
  propagation.setGlobalPropagator(
    new sdk.CompositePropagator({
      propagators: [new sdk.W3CTraceContextPropagator(), new sdk.W3CBaggagePropagator()],
    }),
  );
  trace.setGlobalTracerProvider(provider);
  tracer = trace.getTracer(TRACER_NAME);
  return {
    shutdown: async () => {
      await provider.shutdown().catch(() => {});
    },
  };
}

/**
 * The OTLP/HTTP traces URL from `env` (the exporter itself reads only process.env): the
 * signal's endpoint as is, the generic one with /v1/traces appended, as the specification says.
 */
function otlpUrl(env: Env): { url?: string } {
  if (env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) return { url: env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT };
  if (env.OTEL_EXPORTER_OTLP_ENDPOINT)
    return { url: `${env.OTEL_EXPORTER_OTLP_ENDPOINT.replace(/\/+$/, "")}/v1/traces` };
  return {};
}

async function loadSdk() {
  // Dynamic imports: optional dependencies, loaded only when export is asked for.
  const [sdkTrace, hooks, core, resources, otlp] = await Promise.all([
    import("@opentelemetry/sdk-trace"),
    import("@opentelemetry/context-async-hooks"),
    import("@opentelemetry/core"),
    import("@opentelemetry/resources"),
    import("@opentelemetry/exporter-trace-otlp-proto"),
  ]);
  return {
    ...sdkTrace,
    AsyncLocalStorageContextManager: hooks.AsyncLocalStorageContextManager,
    CompositePropagator: core.CompositePropagator,
    W3CTraceContextPropagator: core.W3CTraceContextPropagator,
    W3CBaggagePropagator: core.W3CBaggagePropagator,
    detectResources: resources.detectResources,
    envDetector: resources.envDetector,
    resourceFromAttributes: resources.resourceFromAttributes,
    OTLPTraceExporter: otlp.OTLPTraceExporter,
  };
}
type Sdk = Awaited<ReturnType<typeof loadSdk>>;

/** OTEL_TRACES_SAMPLER as the specification lists it; parentbased_always_on by default. */
function sampler(sdk: Sdk, env: Env, warn: (m: string) => void) {
  const name = (env.OTEL_TRACES_SAMPLER ?? "parentbased_always_on").trim().toLowerCase();
  const arg = Number(env.OTEL_TRACES_SAMPLER_ARG ?? "1");
  const ratio = Number.isFinite(arg) && arg >= 0 && arg <= 1 ? arg : 1;
  switch (name) {
    case "always_on":
      return new sdk.AlwaysOnSampler();
    case "always_off":
      return new sdk.AlwaysOffSampler();
    case "traceidratio":
      return new sdk.TraceIdRatioBasedSampler(ratio);
    case "parentbased_always_off":
      return new sdk.ParentBasedSampler({ root: new sdk.AlwaysOffSampler() });
    case "parentbased_traceidratio":
      return new sdk.ParentBasedSampler({ root: new sdk.TraceIdRatioBasedSampler(ratio) });
    case "parentbased_always_on":
      return new sdk.ParentBasedSampler({ root: new sdk.AlwaysOnSampler() });
    default:
      warn(`tracing: OTEL_TRACES_SAMPLER=${name} is not supported; using parentbased_always_on`);
      return new sdk.ParentBasedSampler({ root: new sdk.AlwaysOnSampler() });
  }
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
  if (!tracer) return null;
  const carrier: Record<string, string> = {};
  propagation.inject(context.active(), carrier);
  if (!carrier.traceparent) return null;
  return carrier.tracestate
    ? { traceparent: carrier.traceparent, tracestate: carrier.tracestate }
    : { traceparent: carrier.traceparent };
}

// The OpenTelemetry SDK bootstrap of Conveyor's processes (worker, operator, job API, CLI):
// installed only when the standard OTEL_* variables ask for export. The SDK, the W3C
// propagator, the async-hooks context manager and the OTLP/HTTP exporter are optional
// dependencies imported here dynamically, never by queue/ (the library depends on
// @opentelemetry/api only; applications bring their SDK and call enableTracing()).
import { context, propagation, trace, type Attributes } from "@opentelemetry/api";
import { LeanExporter, LeanTracer, leanExportEnv, leanRecorderApplies } from "./leanTracing.ts";
import { setConveyorTracer } from "./conveyorTracer.ts";
import { enableTracing, tracingActive } from "./tracingSwitch.ts";

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
  if (tracingActive()) return { shutdown: async () => {} };
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
      spanExporters.push(otlpExporter(sdk, env, warn));
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
  const configuredSampler = sampler(sdk, env, warn);
  const provider = new sdk.TracerProvider({
    resource,
    sampler: configuredSampler,
    spanProcessors: processors,
  });
  // Conveyor's own spans take the lean recorder (lib/leanTracing.ts) when it can export them as
  // the SDK would; the SDK's pipeline keeps every other span.
  let lean: LeanExporter | undefined;
  if (leanRecorderApplies(env, exporters, otlpProtocol(env))) {
    lean = new LeanExporter({
      ...leanExportEnv(env),
      maxQueueSize: num("OTEL_BSP_MAX_QUEUE_SIZE") || 2048,
      maxExportBatchSize: num("OTEL_BSP_MAX_EXPORT_BATCH_SIZE") || 512,
      scheduledDelayMs: num("OTEL_BSP_SCHEDULE_DELAY") ?? 5000,
      resource: resource.attributes,
      scopeName: "conveyor",
    });
    setConveyorTracer(new LeanTracer(configuredSampler, lean));
  }
  const contextManager = new sdk.AsyncLocalStorageContextManager();
  contextManager.enable();
  context.setGlobalContextManager(contextManager);
  propagation.setGlobalPropagator(
    new sdk.CompositePropagator({
      propagators: [new sdk.W3CTraceContextPropagator(), new sdk.W3CBaggagePropagator()],
    }),
  );
  trace.setGlobalTracerProvider(provider);
  enableTracing();
  return {
    shutdown: async () => {
      setConveyorTracer(undefined);
      await Promise.all([lean?.shutdown(), provider.shutdown().catch(() => {})]);
    },
  };
}

export type OtlpProtocol = "http/protobuf" | "http/json";

/**
 * OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else OTEL_EXPORTER_OTLP_PROTOCOL: `http/protobuf` (the
 * default) or `http/json`; `grpc` (not supported here) and anything else fall back to
 * http/protobuf with a warning.
 */
export function otlpProtocol(env: Env, warn: (message: string) => void = () => {}): OtlpProtocol {
  const asked = (env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL || env.OTEL_EXPORTER_OTLP_PROTOCOL || "")
    .trim()
    .toLowerCase();
  if (asked === "http/json") return "http/json";
  if (asked && asked !== "http/protobuf")
    warn(
      `tracing: OTLP protocol ${asked} is not supported (http/protobuf, http/json); exporting with http/protobuf`,
    );
  return "http/protobuf";
}

/** The OTLP/HTTP span exporter for the protocol the variables ask for. */
function otlpExporter(sdk: Sdk, env: Env, warn: (message: string) => void) {
  const config = otlpUrl(env);
  if (otlpProtocol(env, warn) === "http/protobuf") return new sdk.OTLPTraceExporter(config);
  // http/json: the same export delegate as the protobuf exporter's, with the JSON serializer.
  return new sdk.OTLPExporterBase(
    sdk.createOtlpHttpExportDelegate(
      sdk.convertLegacyHttpOptions(config, "TRACES", "v1/traces", { "Content-Type": "application/json" }),
      sdk.JsonTraceSerializer,
      "otlp_http_span_exporter",
      sdk.TraceExporterMetricsHelper,
      undefined,
    ),
  );
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
  const [sdkTrace, hooks, core, resources, otlp, exporterBase, exporterHttp, transformer] = await Promise.all(
    [
      import("@opentelemetry/sdk-trace"),
      import("@opentelemetry/context-async-hooks"),
      import("@opentelemetry/core"),
      import("@opentelemetry/resources"),
      import("@opentelemetry/exporter-trace-otlp-proto"),
      import("@opentelemetry/otlp-exporter-base"),
      import("@opentelemetry/otlp-exporter-base/node-http"),
      import("@opentelemetry/otlp-transformer"),
    ],
  );
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
    OTLPExporterBase: exporterBase.OTLPExporterBase,
    createOtlpHttpExportDelegate: exporterHttp.createOtlpHttpExportDelegate,
    convertLegacyHttpOptions: exporterHttp.convertLegacyHttpOptions,
    JsonTraceSerializer: transformer.JsonTraceSerializer,
    TraceExporterMetricsHelper: transformer.TraceExporterMetricsHelper,
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

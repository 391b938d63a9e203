// The OpenTelemetry SDK bootstrap of Conveyor's processes (worker, operator, job API, CLI):
// installed only when the standard OTEL_* variables ask for export. The SDK, the W3C
// propagator, the async-hooks context manager and the OTLP/HTTP exporter are optional
// dependencies imported here dynamically, never by queue/ (the library depends on
// @opentelemetry/api only; applications bring their SDK and call enableTracing()).
import { context, diag, DiagLogLevel, propagation, trace, type Attributes } from "@opentelemetry/api";
import type { Sampler } from "@opentelemetry/sdk-trace";
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
  /** Where problems go (a missing SDK, an unknown variable value, the SDK's failed exports). */
  warn?: (message: string) => void;
  /** The sampler while OTEL_TRACES_SAMPLER is unset (default: the specification's, parentbased_always_on). */
  defaultSampler?: DefaultSampler;
  env?: Env;
}

/** A sampler by its OTEL_TRACES_SAMPLER name, with the ratio used while OTEL_TRACES_SAMPLER_ARG is unset. */
export interface DefaultSampler {
  name: string;
  ratio: number;
}

/**
 * The default of the processes a job's trace starts or continues in (the worker, the job API):
 * one trace in ten where it starts, then followed wherever the job's context goes. An exported
 * span costs the worker ~15-30 µs, an unsampled one ~2-5 (docs/observability.md#cost).
 */
export const JOB_SAMPLER: DefaultSampler = { name: "parentbased_traceidratio", ratio: 0.1 };

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
    const v = env[name]?.trim();
    if (!v) return undefined;
    const n = Number(v);
    if (Number.isInteger(n) && n > 0) return n;
    warn(`tracing: ${name}=${v} is not a positive whole number; using the SDK's default`);
    return undefined;
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
  const chosen = samplerChoice(env, opts.defaultSampler ?? SPEC_SAMPLER, warn);
  const provider = new sdk.TracerProvider({
    resource,
    sampler: SAMPLERS[chosen.name]!(sdk, chosen.ratio),
    spanProcessors: processors,
  });
  // The SDK reports failed exports (after its retries) and dropped spans through diag.
  const report = (message: string, ...args: unknown[]) =>
    warn(["tracing:", message, ...args.map(String)].join(" "));
  const ignore = () => {};
  diag.setLogger(
    { error: report, warn: report, info: ignore, debug: ignore, verbose: ignore },
    DiagLogLevel.WARN,
  );
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
    shutdown: () => provider.shutdown().catch((err: Error) => warn(`tracing: shutdown: ${err.message}`)),
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

const SPEC_SAMPLER: DefaultSampler = { name: "parentbased_always_on", ratio: 1 };

/** The samplers OTEL_TRACES_SAMPLER names, as the specification lists them. */
const SAMPLERS: Record<string, (sdk: Sdk, ratio: number) => Sampler> = {
  always_on: (sdk) => new sdk.AlwaysOnSampler(),
  always_off: (sdk) => new sdk.AlwaysOffSampler(),
  traceidratio: (sdk, ratio) => new sdk.TraceIdRatioBasedSampler(ratio),
  parentbased_always_on: (sdk) => new sdk.ParentBasedSampler({ root: new sdk.AlwaysOnSampler() }),
  parentbased_always_off: (sdk) => new sdk.ParentBasedSampler({ root: new sdk.AlwaysOffSampler() }),
  parentbased_traceidratio: (sdk, ratio) =>
    new sdk.ParentBasedSampler({ root: new sdk.TraceIdRatioBasedSampler(ratio) }),
};

/**
 * The sampler OTEL_TRACES_SAMPLER(_ARG) ask for: `fallback` while the sampler is unset or not
 * one the specification lists (with a warning), its ratio while the argument is unset.
 */
export function samplerChoice(env: Env, fallback: DefaultSampler, warn: (m: string) => void): DefaultSampler {
  const asked = env.OTEL_TRACES_SAMPLER?.trim().toLowerCase();
  const known = !!asked && Object.hasOwn(SAMPLERS, asked);
  if (asked && !known)
    warn(
      `tracing: OTEL_TRACES_SAMPLER=${asked} is not supported (${Object.keys(SAMPLERS).join(", ")}); using ${fallback.name}`,
    );
  // The specification's ratio is 1 when a sampler is named without one; ours is the fallback's.
  const chosen = known ? { name: asked, ratio: 1 } : { ...fallback };
  const arg = env.OTEL_TRACES_SAMPLER_ARG?.trim();
  if (arg) {
    const n = Number(arg);
    if (Number.isFinite(n) && n >= 0 && n <= 1) chosen.ratio = n;
    else warn(`tracing: OTEL_TRACES_SAMPLER_ARG=${arg} is not a ratio from 0 to 1; using ${chosen.ratio}`);
  }
  return chosen;
}

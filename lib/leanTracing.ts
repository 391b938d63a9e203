// The lean recorder of Conveyor's own spans (the worker's `process {queue}`, `send {queue}`, the
// operator's): the SDK's Span, BatchSpanProcessor and OTLP transformer cost ~13 µs per exported
// span and keep each span's object graph alive until its batch is exported (docs/observability.md
// "Cost"). Here a span is a few fields until end(), then encoded straight into the protobuf bytes
// of an OTLP Span message appended to the batch being filled; a batch is POSTed http/protobuf.
// The SDK stays in charge of everything else: its sampler decides, its context manager carries
// our span (auto-instrumented http/pg spans nest under it: it only needs a valid spanContext),
// its resource describes the process, and other libraries' spans go through its pipeline.
import { randomFillSync } from "node:crypto";
import { request as httpRequest, Agent as HttpAgent } from "node:http";
import { request as httpsRequest, Agent as HttpsAgent } from "node:https";
import { gzip } from "node:zlib";
import { promisify } from "node:util";
import {
  context as contextApi,
  trace,
  SpanKind,
  TraceFlags,
  type Attributes,
  type AttributeValue,
  type Context,
  type Exception,
  type Link,
  type Span,
  type SpanAttributes,
  type SpanContext,
  type SpanOptions,
  type SpanStatus,
  type TimeInput,
  type Tracer,
  type TraceState,
} from "@opentelemetry/api";
import { OtlpWriter } from "./otlpWriter.ts";

const gzipAsync = promisify(gzip);

/** The SDK's sampler interface (sdk-trace's Sampler), as much as is used here. */
export interface LeanSampler {
  shouldSample(
    context: Context,
    traceId: string,
    spanName: string,
    spanKind: SpanKind,
    attributes: Attributes,
    links: Link[],
  ): { decision: number; attributes?: Attributes; traceState?: TraceState };
}
/** sdk-trace's SamplingDecision.RECORD_AND_SAMPLED. */
const RECORD_AND_SAMPLED = 2;

/** The SDK's default span limits (OTEL_SPAN_*_COUNT_LIMIT defaults). */
const MAX_EVENTS = 128;
const MAX_LINKS = 128;
const MAX_ATTRIBUTES = 128;
const NO_LINKS: readonly Link[] = Object.freeze([]);

// ---- ids -----------------------------------------------------------------------------------

/** Random trace and span ids, hex, cut from a large buffer filled at once. */
export class IdPool {
  private readonly pool = Buffer.allocUnsafe(64 * 1024);
  private at = this.pool.length;

  private take(n: number): string {
    if (this.at + n > this.pool.length) {
      randomFillSync(this.pool);
      this.at = 0;
    }
    const id = this.pool.toString("hex", this.at, this.at + n);
    this.at += n;
    // An all-zero id is invalid (2^-64 odds): redraw.
    return id.charCodeAt(0) === 48 && /^0+$/.test(id) ? this.take(n) : id;
  }

  traceId(): string {
    return this.take(16);
  }
  spanId(): string {
    return this.take(8);
  }
}

// ---- time ----------------------------------------------------------------------------------

const timeOrigin = performance.timeOrigin;

/** A TimeInput as epoch milliseconds (fractional), as the SDK reads it. */
function epochMs(time: TimeInput | undefined): number {
  if (time === undefined) return timeOrigin + performance.now();
  if (typeof time === "number") return time < timeOrigin ? timeOrigin + time : time;
  if (time instanceof Date) return time.getTime();
  return time[0] * 1000 + time[1] / 1e6;
}

// ---- spans ---------------------------------------------------------------------------------

interface LeanEvent {
  name: string;
  time: number;
  attributes: Attributes | undefined;
}

/** Attributes given as a frozen object are encoded once and their bytes reused (per queue). */
const encodedOnce = new WeakMap<Attributes, Buffer>();

function encodeFrozen(attributes: Attributes): Buffer {
  let bytes = encodedOnce.get(attributes);
  if (!bytes) {
    const w = new OtlpWriter(256);
    w.attributes(9, attributes);
    bytes = Buffer.from(w.buf.subarray(0, w.pos));
    encodedOnce.set(attributes, bytes);
  }
  return bytes;
}

export class LeanSpan implements Span {
  private readonly ctx: SpanContext;
  private name: string;
  private readonly kind: SpanKind;
  private readonly parentSpanId: string | undefined;
  private readonly parentRemote: boolean | undefined;
  private readonly start: number;
  private readonly exporter: LeanExporter;
  /** A frozen attribute object encoded once, then the others as key, value, key, value... */
  private fixed: Attributes | undefined;
  private readonly attrs: (string | AttributeValue)[] = [];
  private droppedAttributes = 0;
  private events: LeanEvent[] | undefined;
  private droppedEvents = 0;
  /** The caller's links as given (copied before addLink changes them). */
  private links: readonly Link[];
  private ownLinks = false;
  private droppedLinks = 0;
  private status: SpanStatus = { code: 0 };
  private ended = false;

  constructor(
    exporter: LeanExporter,
    ctx: SpanContext,
    name: string,
    kind: SpanKind,
    parent: SpanContext | undefined,
    options: SpanOptions,
  ) {
    this.exporter = exporter;
    this.ctx = ctx;
    this.name = name;
    this.kind = kind;
    this.parentSpanId = parent?.spanId;
    this.parentRemote = parent?.isRemote;
    this.start = epochMs(options.startTime);
    const links = options.links ?? NO_LINKS;
    this.links = links.length > MAX_LINKS ? links.slice(0, MAX_LINKS) : links;
    this.droppedLinks = links.length - this.links.length;
    if (options.attributes) this.setAttributes(options.attributes);
  }

  spanContext(): SpanContext {
    return this.ctx;
  }

  setAttribute(key: string, value: SpanAttributes[string]): this {
    if (this.ended || value === undefined || value === null || key.length === 0) return this;
    if (this.fixed && Object.prototype.hasOwnProperty.call(this.fixed, key)) this.unfix();
    const attrs = this.attrs;
    for (let i = 0; i < attrs.length; i += 2)
      if (attrs[i] === key) {
        attrs[i + 1] = value;
        return this;
      }
    if (attrs.length / 2 >= MAX_ATTRIBUTES) this.droppedAttributes++;
    else attrs.push(key, value);
    return this;
  }

  setAttributes(attributes: SpanAttributes): this {
    if (this.ended) return this;
    // Conveyor's fixed per-queue attributes: frozen, encoded once (the first frozen set only).
    if (this.fixed === undefined && this.attrs.length === 0 && Object.isFrozen(attributes)) {
      this.fixed = attributes;
      return this;
    }
    for (const key in attributes)
      if (Object.prototype.hasOwnProperty.call(attributes, key)) this.setAttribute(key, attributes[key]);
    return this;
  }

  /** A key of the pre-encoded set is set again: fall back to the plain list. */
  private unfix(): void {
    const fixed = this.fixed!;
    this.fixed = undefined;
    const rest = this.attrs.splice(0);
    for (const key in fixed) this.attrs.push(key, fixed[key]!);
    for (let i = 0; i < rest.length; i += 2) this.setAttribute(rest[i] as string, rest[i + 1]);
  }

  addEvent(name: string, attributesOrTime?: SpanAttributes | TimeInput, time?: TimeInput): this {
    if (this.ended) return this;
    const events = (this.events ??= []);
    if (events.length >= MAX_EVENTS) {
      this.droppedEvents++;
      return this;
    }
    const isTime =
      typeof attributesOrTime === "number" ||
      attributesOrTime instanceof Date ||
      Array.isArray(attributesOrTime);
    events.push({
      name,
      time: epochMs(isTime ? (attributesOrTime as TimeInput) : time),
      attributes: isTime ? undefined : (attributesOrTime as Attributes | undefined),
    });
    return this;
  }

  addLink(link: Link): this {
    if (this.ended) return this;
    if (this.links.length >= MAX_LINKS) this.droppedLinks++;
    else {
      if (!this.ownLinks) {
        this.links = [...this.links];
        this.ownLinks = true;
      }
      (this.links as Link[]).push(link);
    }
    return this;
  }

  addLinks(links: Link[]): this {
    for (const link of links) this.addLink(link);
    return this;
  }

  setStatus(status: SpanStatus): this {
    if (this.ended || this.status.code === 1 /* OK is final */) return this;
    if (status.code === 0) return this;
    this.status = status.code === 2 ? { code: 2, message: status.message } : { code: status.code };
    return this;
  }

  updateName(name: string): this {
    if (!this.ended) this.name = name;
    return this;
  }

  end(endTime?: TimeInput): void {
    if (this.ended) return;
    this.ended = true;
    this.exporter.record(this, epochMs(endTime));
  }

  isRecording(): boolean {
    return !this.ended;
  }

  recordException(exception: Exception, time?: TimeInput): void {
    const attributes: Attributes = {};
    if (typeof exception === "string") attributes["exception.message"] = exception;
    else if (exception) {
      const e = exception as { name?: string; message?: string; stack?: string; code?: string | number };
      if (e.code !== undefined) attributes["exception.type"] = String(e.code);
      else if (e.name) attributes["exception.type"] = e.name;
      if (e.message) attributes["exception.message"] = e.message;
      if (e.stack) attributes["exception.stacktrace"] = e.stack;
    }
    this.addEvent("exception", attributes, time);
  }

  /** The OTLP Span message (field 2 of ScopeSpans), in the SDK serializer's field order. */
  encode(w: OtlpWriter, end: number): void {
    const ctx = this.ctx;
    const span = w.begin(2);
    w.tag(1, 2);
    w.hexBytes(ctx.traceId);
    w.tag(2, 2);
    w.hexBytes(ctx.spanId);
    const traceState = ctx.traceState?.serialize();
    if (traceState) w.stringField(3, traceState);
    if (this.parentSpanId) {
      w.tag(4, 2);
      w.hexBytes(this.parentSpanId);
    }
    w.stringField(5, this.name);
    w.varintField(6, this.kind + 1);
    w.timeField(7, this.start);
    w.timeField(8, end);
    if (this.fixed) w.raw(encodeFrozen(this.fixed));
    const attrs = this.attrs;
    for (let i = 0; i < attrs.length; i += 2)
      w.keyValue(9, attrs[i] as string, attrs[i + 1] as AttributeValue);
    w.varintField(10, this.droppedAttributes);
    if (this.events)
      for (const event of this.events) {
        const e = w.begin(11);
        w.timeField(1, event.time);
        w.stringField(2, event.name);
        if (event.attributes) w.attributes(3, event.attributes);
        w.varintField(4, 0);
        w.end(e);
      }
    w.varintField(12, this.droppedEvents);
    for (const link of this.links) {
      const l = w.begin(13);
      w.tag(1, 2);
      w.hexBytes(link.context.traceId);
      w.tag(2, 2);
      w.hexBytes(link.context.spanId);
      const linkState = link.context.traceState?.serialize();
      if (linkState) w.stringField(3, linkState);
      if (link.attributes) w.attributes(4, link.attributes);
      w.varintField(5, link.droppedAttributesCount ?? 0);
      w.fixed32Field(6, spanFlags(link.context.traceFlags, link.context.isRemote));
      w.end(l);
    }
    w.varintField(14, this.droppedLinks);
    const status = w.begin(15);
    if (this.status.message) w.stringField(2, this.status.message);
    w.varintField(3, this.status.code);
    w.end(status);
    w.fixed32Field(16, spanFlags(ctx.traceFlags, this.parentRemote));
    w.end(span);
  }
}

/** The Span.flags field: the W3C trace flags and whether the parent is remote. */
function spanFlags(traceFlags: number, remote: boolean | undefined): number {
  return (traceFlags & 0xff) | 0x100 | (remote ? 0x200 : 0);
}

/** A Tracer whose recorded spans are LeanSpans; the SDK's sampler decides which are recorded. */
export class LeanTracer implements Tracer {
  private readonly sampler: LeanSampler;
  private readonly exporter: LeanExporter;
  private readonly ids: IdPool;

  constructor(sampler: LeanSampler, exporter: LeanExporter, ids = new IdPool()) {
    this.sampler = sampler;
    this.exporter = exporter;
    this.ids = ids;
  }

  startSpan(name: string, options: SpanOptions = {}, ctx: Context = contextApi.active()): Span {
    const parent = options.root ? undefined : trace.getSpanContext(ctx);
    const validParent = parent && trace.isSpanContextValid(parent) ? parent : undefined;
    const traceId = validParent ? validParent.traceId : this.ids.traceId();
    const spanId = this.ids.spanId();
    const kind = options.kind ?? SpanKind.INTERNAL;
    const sampling = this.sampler.shouldSample(
      options.root ? trace.deleteSpan(ctx) : ctx,
      traceId,
      name,
      kind,
      options.attributes ?? {},
      options.links ?? [],
    );
    const traceState = sampling.traceState ?? validParent?.traceState;
    // RECORD (recorded, not sampled) is treated as NOT_RECORD: nothing would export it.
    if (sampling.decision !== RECORD_AND_SAMPLED)
      return trace.wrapSpanContext({ traceId, spanId, traceFlags: TraceFlags.NONE, traceState });
    const spanContext: SpanContext = { traceId, spanId, traceFlags: TraceFlags.SAMPLED, traceState };
    const span = new LeanSpan(this.exporter, spanContext, name, kind, validParent, options);
    if (sampling.attributes) span.setAttributes(sampling.attributes);
    return span;
  }

  startActiveSpan<F extends (span: Span) => unknown>(name: string, fn: F): ReturnType<F>;
  startActiveSpan<F extends (span: Span) => unknown>(
    name: string,
    options: SpanOptions,
    fn: F,
  ): ReturnType<F>;
  startActiveSpan<F extends (span: Span) => unknown>(
    name: string,
    options: SpanOptions,
    ctx: Context,
    fn: F,
  ): ReturnType<F>;
  startActiveSpan<F extends (span: Span) => unknown>(
    name: string,
    a?: SpanOptions | F,
    b?: Context | F,
    c?: F,
  ): ReturnType<F> {
    const fn = (c ?? (typeof b === "function" ? b : a)) as F;
    const options = typeof a === "object" ? a : {};
    const ctx = typeof b === "object" ? b : contextApi.active();
    const span = this.startSpan(name, options, ctx);
    return contextApi.with(trace.setSpan(ctx, span), () => fn(span)) as ReturnType<F>;
  }
}

// ---- export --------------------------------------------------------------------------------

export interface LeanExportConfig {
  /** The OTLP/HTTP traces URL. */
  url: string;
  headers: Record<string, string>;
  timeoutMs: number;
  compression: "none" | "gzip";
  /** OTEL_BSP_* */
  maxQueueSize: number;
  maxExportBatchSize: number;
  scheduledDelayMs: number;
  /** The encoded Resource (field 1 of ResourceSpans), and the scope's name. */
  resource: Attributes;
  scopeName: string;
}

/**
 * Batches of encoded spans, POSTed one at a time: cut at maxExportBatchSize spans or after the
 * schedule delay; at most maxQueueSize spans wait (buffered or in batches not yet sent), the
 * others are dropped and counted. A failed export drops its batch, as the SDK's processor does.
 */
export class LeanExporter {
  private readonly arena = new OtlpWriter(256 * 1024);
  private arenaSpans = 0;
  private readonly batches: { spans: number; body: Buffer }[] = [];
  private queuedSpans = 0;
  private sending: Promise<void> | undefined;
  private timer: NodeJS.Timeout | undefined;
  private readonly prefix: Buffer;
  private readonly scope: Buffer;
  private readonly agent: HttpAgent;
  private readonly send: typeof httpRequest;
  private stopped = false;
  /** Spans dropped because the queue was full, or when their export failed. */
  dropped = 0;
  failedExports = 0;
  exportedSpans = 0;

  private readonly config: LeanExportConfig;

  constructor(config: LeanExportConfig) {
    this.config = config;
    const w = new OtlpWriter(1024);
    w.attributes(1, config.resource);
    w.varintField(2, 0);
    const resource = Buffer.from(w.buf.subarray(0, w.pos));
    w.pos = 0;
    const r = w.begin(1);
    w.raw(resource);
    w.end(r);
    this.prefix = Buffer.from(w.buf.subarray(0, w.pos));
    w.pos = 0;
    const s = w.begin(1);
    w.stringField(1, config.scopeName);
    w.end(s);
    this.scope = Buffer.from(w.buf.subarray(0, w.pos));
    const https = config.url.startsWith("https:");
    this.agent = https ? new HttpsAgent({ keepAlive: true }) : new HttpAgent({ keepAlive: true });
    this.send = https ? httpsRequest : httpRequest;
  }

  /** An ended span: encoded into the batch being filled, or dropped when the queue is full. */
  record(span: LeanSpan, end: number): void {
    if (this.stopped || this.queuedSpans + this.arenaSpans >= this.config.maxQueueSize) {
      this.dropped++;
      return;
    }
    span.encode(this.arena, end);
    if (++this.arenaSpans >= this.config.maxExportBatchSize) this.cut();
    else if (!this.timer) {
      this.timer = setTimeout(() => {
        this.timer = undefined;
        this.cut();
      }, this.config.scheduledDelayMs);
      this.timer.unref();
    }
  }

  /** The spans buffered become a request body: ExportTraceServiceRequest{ResourceSpans{...}}. */
  private cut(): void {
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
    if (this.arenaSpans === 0) return;
    const spans = this.arena.pos;
    const scopeSpans = this.scope.length + spans;
    const resourceSpans = this.prefix.length + 1 + varintBytes(scopeSpans).length + scopeSpans;
    const w = new OtlpWriter(resourceSpans + 16);
    w.tag(1, 2);
    w.varint(resourceSpans);
    w.raw(this.prefix);
    w.tag(2, 2);
    w.varint(scopeSpans);
    w.raw(this.scope);
    w.raw(this.arena.buf.subarray(0, spans));
    this.batches.push({ spans: this.arenaSpans, body: w.buf.subarray(0, w.pos) });
    this.queuedSpans += this.arenaSpans;
    this.arena.pos = 0;
    this.arenaSpans = 0;
    this.pump();
  }

  private pump(): void {
    if (this.sending || this.batches.length === 0) return;
    const batch = this.batches.shift()!;
    this.sending = this.post(batch.body)
      .then(
        () => {
          this.exportedSpans += batch.spans;
        },
        () => {
          this.failedExports++;
          this.dropped += batch.spans;
        },
      )
      .finally(() => {
        this.queuedSpans -= batch.spans;
        this.sending = undefined;
        this.pump();
      });
  }

  private async post(raw: Buffer): Promise<void> {
    const body = this.config.compression === "gzip" ? await gzipAsync(raw) : raw;
    const headers: Record<string, string | number> = {
      ...this.config.headers,
      "Content-Type": "application/x-protobuf",
      "Content-Length": body.length,
    };
    if (this.config.compression === "gzip") headers["Content-Encoding"] = "gzip";
    await new Promise<void>((resolve, reject) => {
      const req = this.send(this.config.url, { method: "POST", headers, agent: this.agent }, (res) => {
        res.resume();
        res.on("end", () => {
          const status = res.statusCode ?? 0;
          if (status >= 200 && status < 300) resolve();
          else reject(new Error(`OTLP export: HTTP ${status}`));
        });
        res.on("error", reject);
      });
      req.setTimeout(this.config.timeoutMs, () => req.destroy(new Error("OTLP export timed out")));
      req.on("error", reject);
      req.end(body);
    });
  }

  /** Export what is buffered and wait for every batch to be sent. */
  async forceFlush(): Promise<void> {
    this.cut();
    while (this.sending) await this.sending;
  }

  async shutdown(): Promise<void> {
    await this.forceFlush();
    this.stopped = true;
    this.agent.destroy();
  }
}

function varintBytes(v: number): Buffer {
  const w = new OtlpWriter(8);
  w.varint(v);
  return w.buf.subarray(0, w.pos);
}

// ---- configuration from the standard variables -------------------------------------------

type Env = Record<string, string | undefined>;

/** OTEL_EXPORTER_OTLP_(TRACES_)HEADERS: `key=value,key2=value2`, values URL-encoded. */
export function otlpHeaders(env: Env): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const source of [env.OTEL_EXPORTER_OTLP_HEADERS, env.OTEL_EXPORTER_OTLP_TRACES_HEADERS])
    for (const pair of (source ?? "").split(",")) {
      const eq = pair.indexOf("=");
      if (eq <= 0) continue;
      const key = pair.slice(0, eq).trim();
      try {
        headers[key] = decodeURIComponent(pair.slice(eq + 1).trim());
      } catch {
        headers[key] = pair.slice(eq + 1).trim();
      }
    }
  return headers;
}

/** The part of the exporter's configuration the variables give (the SDK exporter's defaults). */
export function leanExportEnv(
  env: Env,
): Omit<
  LeanExportConfig,
  "resource" | "scopeName" | "maxQueueSize" | "maxExportBatchSize" | "scheduledDelayMs"
> {
  const url =
    env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ||
    (env.OTEL_EXPORTER_OTLP_ENDPOINT
      ? `${env.OTEL_EXPORTER_OTLP_ENDPOINT.replace(/\/+$/, "")}/v1/traces`
      : "http://localhost:4318/v1/traces");
  const timeout = Number(env.OTEL_EXPORTER_OTLP_TRACES_TIMEOUT || env.OTEL_EXPORTER_OTLP_TIMEOUT || 10_000);
  const compression = (
    env.OTEL_EXPORTER_OTLP_TRACES_COMPRESSION ||
    env.OTEL_EXPORTER_OTLP_COMPRESSION ||
    "none"
  )
    .trim()
    .toLowerCase();
  return {
    url,
    headers: otlpHeaders(env),
    timeoutMs: Number.isFinite(timeout) && timeout > 0 ? timeout : 10_000,
    compression: compression === "gzip" ? "gzip" : "none",
  };
}

/**
 * Whether Conveyor's spans may take the lean path: OTLP http/protobuf the only exporter, no TLS
 * client settings (certificates stay with the SDK exporter), not turned off with
 * CONVEYOR_TRACE_RECORDER=sdk. http/json keeps the SDK path.
 */
export function leanRecorderApplies(env: Env, exporters: string[], protocol: string): boolean {
  if ((env.CONVEYOR_TRACE_RECORDER ?? "").trim().toLowerCase() === "sdk") return false;
  if (exporters.length !== 1 || exporters[0] !== "otlp" || protocol !== "http/protobuf") return false;
  return !Object.keys(env).some(
    (k) => /^OTEL_EXPORTER_OTLP_(TRACES_)?(CERTIFICATE|CLIENT_KEY|CLIENT_CERTIFICATE)$/.test(k) && env[k],
  );
}

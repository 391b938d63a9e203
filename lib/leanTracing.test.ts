// The lean recorder against the OpenTelemetry SDK's own OTLP serializer: the same span, recorded
// by LeanTracer and described as the SDK's ReadableSpan, must give the same request bytes (every
// field, in the SDK's order); a full queue drops and counts; an unsampled span records nothing.
import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import { after, before, describe, it } from "node:test";
import { gunzipSync } from "node:zlib";
import { context, trace, SpanKind, TraceFlags, type SpanContext } from "@opentelemetry/api";
import { TraceState } from "@opentelemetry/core";
import { resourceFromAttributes } from "@opentelemetry/resources";
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  ParentBasedSampler,
  type ReadableSpan,
} from "@opentelemetry/sdk-trace";
import { ProtobufTraceSerializer } from "@opentelemetry/otlp-transformer";
import {
  IdPool,
  LeanExporter,
  LeanTracer,
  leanExportEnv,
  otlpHeaders,
  type LeanExportConfig,
} from "./leanTracing.ts";

const TRACE_ID = "0af7651916cd43dd8448eb211c80319c";
const PARENT_ID = "b7ad6b7169203331";
const SPAN_ID = "00f067aa0ba902b7";

class FixedIds extends IdPool {
  override traceId(): string {
    return TRACE_ID;
  }
  override spanId(): string {
    return SPAN_ID;
  }
}

/** A loopback OTLP receiver keeping each request's body and headers. */
let server: Server;
let url = "";
const received: { body: Buffer; headers: Record<string, unknown> }[] = [];
before(async () => {
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      received.push({ body: Buffer.concat(chunks), headers: req.headers });
      res.writeHead(200).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  url = `http://127.0.0.1:${(server.address() as { port: number }).port}/v1/traces`;
});
after(() => new Promise<void>((resolve) => server.close(() => resolve())));

function config(over: Partial<LeanExportConfig> = {}): LeanExportConfig {
  return {
    url,
    headers: { "x-tenant": "a b" },
    timeoutMs: 5000,
    compression: "none",
    maxQueueSize: 2048,
    maxExportBatchSize: 512,
    scheduledDelayMs: 60_000,
    resource: { "service.name": "worker", "service.instance.id": "w-1", "host.cores": 2 },
    scopeName: "conveyor",
    ...over,
  };
}

describe("lean span recorder", () => {
  it("encodes a span exactly as the SDK's OTLP serializer does", async () => {
    received.length = 0;
    const exporter = new LeanExporter(config());
    const tracer = new LeanTracer(
      new ParentBasedSampler({ root: new AlwaysOnSampler() }),
      exporter,
      new FixedIds(),
    );
    const traceState = new TraceState("vendor=abc,other=1");
    const parent: SpanContext = {
      traceId: TRACE_ID,
      spanId: PARENT_ID,
      traceFlags: TraceFlags.SAMPLED,
      traceState,
      isRemote: true,
    };
    const linked: SpanContext = {
      traceId: "1".repeat(32),
      spanId: "2".repeat(16),
      traceFlags: 1,
      isRemote: true,
    };
    const fixed = Object.freeze({ "messaging.system": "conveyor", "messaging.destination.name": "q" });
    const span = tracer.startSpan(
      "process q",
      {
        kind: SpanKind.CONSUMER,
        startTime: [1_700_000_000, 123_000_000],
        links: [{ context: linked, attributes: { "conveyor.link": "creation" } }],
      },
      trace.setSpanContext(context.active(), parent),
    );
    assert.equal(span.isRecording(), true);
    span.setAttributes(fixed);
    span.setAttribute("messaging.message.id", "job-1");
    span.setAttribute("conveyor.job.attempt", 2);
    span.setAttribute("ratio", 0.25);
    span.setAttribute("negative", -5);
    span.setAttribute("flag", true);
    span.setAttribute("tags", ["a", "b"]);
    span.addEvent("redelivered", { "conveyor.redelivery.cause": "stalled" }, [1_700_000_000, 200_000_000]);
    span.addEvent("plain", [1_700_000_000, 300_000_000]);
    span.setStatus({ code: 2, message: "boom" });
    span.end(new Date(1_700_000_001_456));
    await exporter.forceFlush();

    const resource = resourceFromAttributes(config().resource);
    const expected: ReadableSpan = {
      name: "process q",
      kind: SpanKind.CONSUMER,
      spanContext: () => ({ traceId: TRACE_ID, spanId: SPAN_ID, traceFlags: 1, traceState }),
      parentSpanContext: parent,
      startTime: [1_700_000_000, 123_000_000],
      endTime: [1_700_000_001, 456_000_000],
      duration: [1, 333_000_000],
      ended: true,
      status: { code: 2, message: "boom" },
      attributes: {
        ...fixed,
        "messaging.message.id": "job-1",
        "conveyor.job.attempt": 2,
        ratio: 0.25,
        negative: -5,
        flag: true,
        tags: ["a", "b"],
      },
      links: [{ context: linked, attributes: { "conveyor.link": "creation" } }],
      events: [
        {
          name: "redelivered",
          time: [1_700_000_000, 200_000_000],
          attributes: { "conveyor.redelivery.cause": "stalled" },
        },
        { name: "plain", time: [1_700_000_000, 300_000_000] },
      ],
      resource,
      instrumentationScope: { name: "conveyor" },
      droppedAttributesCount: 0,
      droppedEventsCount: 0,
      droppedLinksCount: 0,
    };
    const sdkBytes = Buffer.from(ProtobufTraceSerializer.serializeRequest([expected])!);
    assert.equal(received.length, 1);
    assert.equal(received[0]!.headers["content-type"], "application/x-protobuf");
    assert.equal(received[0]!.headers["x-tenant"], "a b");
    assert.equal(received[0]!.body.toString("hex"), sdkBytes.toString("hex"));
    assert.equal(exporter.exportedSpans, 1);
    await exporter.shutdown();
  });

  it("batches many spans into one request the SDK would write the same way", async () => {
    received.length = 0;
    const exporter = new LeanExporter(config({ maxExportBatchSize: 300 }));
    const tracer = new LeanTracer(new AlwaysOnSampler(), exporter, new FixedIds());
    // 300 spans of more than 128 bytes: lengths of 2 and 3 varint bytes in the request header.
    for (let i = 0; i < 300; i++)
      tracer
        .startSpan("send q", { kind: SpanKind.PRODUCER, startTime: [1_700_000_000, 0], root: true })
        .setAttribute("messaging.message.id", `job-${i}-${"x".repeat(100)}`)
        .end([1_700_000_000, 1_000_000]);
    await exporter.forceFlush();
    assert.equal(received.length, 1);
    const resource = resourceFromAttributes(config().resource);
    const scope = { name: "conveyor" };
    const spans: ReadableSpan[] = Array.from({ length: 300 }, (_, i) => ({
      name: "send q",
      kind: SpanKind.PRODUCER,
      spanContext: () => ({ traceId: TRACE_ID, spanId: SPAN_ID, traceFlags: 1 }),
      startTime: [1_700_000_000, 0],
      endTime: [1_700_000_000, 1_000_000],
      duration: [0, 1_000_000],
      ended: true,
      status: { code: 0 },
      attributes: { "messaging.message.id": `job-${i}-${"x".repeat(100)}` },
      links: [],
      events: [],
      resource,
      instrumentationScope: scope,
      droppedAttributesCount: 0,
      droppedEventsCount: 0,
      droppedLinksCount: 0,
    }));
    const sdkBytes = Buffer.from(ProtobufTraceSerializer.serializeRequest(spans)!);
    assert.equal(received[0]!.body.toString("hex"), sdkBytes.toString("hex"));
    await exporter.shutdown();
  });

  it("drops and counts the spans that find the queue full, and survives a failing endpoint", async () => {
    received.length = 0;
    const exporter = new LeanExporter(config({ maxQueueSize: 4 }));
    const tracer = new LeanTracer(new AlwaysOnSampler(), exporter);
    for (let i = 0; i < 10; i++) tracer.startSpan("process q", { kind: SpanKind.CONSUMER }).end();
    assert.equal(exporter.dropped, 6);
    await exporter.forceFlush();
    assert.equal(exporter.exportedSpans, 4);
    assert.equal(received.length, 1);
    await exporter.shutdown();

    // Nothing listens on port 1: the export fails, its spans are counted as dropped.
    const failing = new LeanExporter(config({ url: "http://127.0.0.1:1/v1/traces" }));
    const t2 = new LeanTracer(new AlwaysOnSampler(), failing);
    for (let i = 0; i < 3; i++) t2.startSpan("process q").end();
    await failing.forceFlush();
    assert.equal(failing.failedExports, 1);
    assert.equal(failing.dropped, 3);
    await failing.shutdown();
  });

  it("records nothing for an unsampled span, but gives it a valid context", async () => {
    received.length = 0;
    const exporter = new LeanExporter(config());
    const tracer = new LeanTracer(new AlwaysOffSampler(), exporter);
    const span = tracer.startSpan("process q");
    assert.equal(span.isRecording(), false);
    assert.equal(trace.isSpanContextValid(span.spanContext()), true);
    assert.equal(span.spanContext().traceFlags, TraceFlags.NONE);
    span.end();
    await exporter.forceFlush();
    assert.equal(received.length, 0);
    await exporter.shutdown();
  });

  it("exports on the schedule delay without a flush, gzip-compressed when asked", async () => {
    received.length = 0;
    const exporter = new LeanExporter(config({ scheduledDelayMs: 20, compression: "gzip" }));
    const tracer = new LeanTracer(new AlwaysOnSampler(), exporter);
    tracer.startSpan("process q").end();
    while (exporter.exportedSpans === 0) await new Promise((resolve) => setTimeout(resolve, 10));
    assert.equal(received[0]!.headers["content-encoding"], "gzip");
    // The uncompressed request holds the one span: its name is in the bytes.
    assert.ok(gunzipSync(received[0]!.body).includes(Buffer.from("process q")));
    assert.equal(exporter.exportedSpans, 1);
    await exporter.shutdown();
  });

  it("keeps the caller's links array as given when a link is added", async () => {
    const exporter = new LeanExporter(config());
    const tracer = new LeanTracer(new AlwaysOnSampler(), exporter);
    const sc: SpanContext = { traceId: TRACE_ID, spanId: PARENT_ID, traceFlags: 1 };
    const links = [{ context: sc }];
    tracer.startSpan("process q", { links }).addLink({ context: sc }).end();
    assert.equal(links.length, 1);
    await exporter.shutdown();
  });

  it("reads the exporter variables as the SDK does", () => {
    assert.deepEqual(
      otlpHeaders({ OTEL_EXPORTER_OTLP_HEADERS: "a=1, b=x%20y", OTEL_EXPORTER_OTLP_TRACES_HEADERS: "a=2" }),
      {
        a: "2",
        b: "x y",
      },
    );
    const env = leanExportEnv({
      OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318/",
      OTEL_EXPORTER_OTLP_COMPRESSION: "gzip",
    });
    assert.equal(env.url, "http://c:4318/v1/traces");
    assert.equal(env.compression, "gzip");
    assert.equal(env.timeoutMs, 10_000);
    assert.equal(leanExportEnv({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://t/x" }).url, "http://t/x");
  });
});

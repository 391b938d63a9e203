// Unit tests of queue/tracing.ts: which variables turn export on, and the job record's `trace`
// field (W3C traceparent, tracestate, join links) both ways.
import assert from "node:assert/strict";
import { after, describe, test } from "node:test";
import { context, propagation, trace, TraceFlags } from "@opentelemetry/api";
import { W3CTraceContextPropagator, TraceState } from "@opentelemetry/core";
import { parseTraceField, requestedExporters, startTracing, traceFieldOf, tracingActive } from "./tracing.ts";

const TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";
const SPAN = "00f067aa0ba902b7";
const CHILD = "b7ad6b7169203331";

describe("requestedExporters", () => {
  test("the standard variables decide, OTEL_SDK_DISABLED and 'none' win", () => {
    assert.deepEqual(requestedExporters({}), []);
    assert.deepEqual(requestedExporters({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318" }), ["otlp"]);
    assert.deepEqual(requestedExporters({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://c:4318/v1/traces" }), [
      "otlp",
    ]);
    assert.deepEqual(requestedExporters({ OTEL_TRACES_EXPORTER: "console, otlp,otlp" }), ["console", "otlp"]);
    assert.deepEqual(
      requestedExporters({ OTEL_TRACES_EXPORTER: "none", OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318" }),
      [],
    );
    assert.deepEqual(
      requestedExporters({ OTEL_SDK_DISABLED: "TRUE", OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318" }),
      [],
    );
  });

  test("without them startTracing installs nothing", async () => {
    assert.equal(await startTracing({ serviceName: "t", env: {} }), null);
    assert.equal(tracingActive(), false);
  });
});

describe("the trace field", () => {
  // Unit tests share one process (test:unit): the global propagator goes again afterwards.
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  after(() => propagation.disable());

  test("round trip of traceparent and tracestate", () => {
    const sc = {
      traceId: TRACE,
      spanId: SPAN,
      traceFlags: TraceFlags.SAMPLED,
      traceState: new TraceState("vendor=abc,other=x y"),
    };
    const field = traceFieldOf(trace.setSpanContext(context.active(), sc));
    assert.equal(field, `00-${TRACE}-${SPAN}-01\nvendor=abc,other=x y`);
    const parsed = parseTraceField(field)!;
    const got = trace.getSpanContext(parsed.context)!;
    assert.equal(got.traceId, TRACE);
    assert.equal(got.spanId, SPAN);
    assert.equal(got.isRemote, true);
    assert.equal(got.traceState?.get("vendor"), "abc");
    assert.equal(parsed.links.length, 1, "the creation context is the first link");
    assert.equal(parsed.links[0]!.context.spanId, SPAN);
  });

  test("a join's field links every child", () => {
    const field = `00-${TRACE}-${SPAN}-01\nlink 00-${TRACE}-${CHILD}-01\nlink 00-${TRACE}-${SPAN}-01\nlink bogus`;
    const parsed = parseTraceField(field)!;
    assert.deepEqual(
      parsed.links.map((l) => [l.context.spanId, l.attributes?.["conveyor.link"]]),
      [
        [SPAN, "creation"],
        [CHILD, "joined-child"],
        [SPAN, "joined-child"],
      ],
    );
    assert.equal(trace.getSpanContext(parsed.context)!.traceState, undefined, "no tracestate line");
  });

  test("empty or invalid fields are no context", () => {
    assert.equal(parseTraceField(""), null);
    assert.equal(parseTraceField("not a traceparent"), null);
    assert.equal(parseTraceField(`00-${"0".repeat(32)}-${SPAN}-01`), null);
  });
});

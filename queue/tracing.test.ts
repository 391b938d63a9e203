// Unit tests of queue/tracing.ts: the job record's `trace` field (W3C traceparent, tracestate,
// join links) both ways; tracing is off until something turns it on.
import assert from "node:assert/strict";
import { after, describe, test } from "node:test";
import { context, propagation, trace, TraceFlags } from "@opentelemetry/api";
import { W3CTraceContextPropagator, TraceState } from "@opentelemetry/core";
import { tracingActive } from "../lib/tracingSwitch.ts";
import { parseTraceField, traceFieldOf } from "./tracing.ts";

const TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";
const SPAN = "00f067aa0ba902b7";
const CHILD = "b7ad6b7169203331";

test("tracing is off until the SDK is installed or an application enables it", () => {
  assert.equal(tracingActive(), false);
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

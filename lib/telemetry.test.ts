// Unit tests of lib/telemetry.ts: which OTEL_* variables turn export on.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { otlpProtocol, requestedExporters, startTracing } from "./telemetry.ts";
import { tracingActive } from "./tracingSwitch.ts";

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

describe("otlpProtocol", () => {
  test("http/protobuf by default, http/json when asked, the signal's variable first", () => {
    assert.equal(otlpProtocol({}), "http/protobuf");
    assert.equal(otlpProtocol({ OTEL_EXPORTER_OTLP_PROTOCOL: "http/json" }), "http/json");
    assert.equal(
      otlpProtocol({
        OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
        OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: "http/protobuf",
      }),
      "http/protobuf",
    );
  });

  test("grpc and unknown values fall back to http/protobuf with a warning naming the value", () => {
    const warnings: string[] = [];
    assert.equal(
      otlpProtocol({ OTEL_EXPORTER_OTLP_PROTOCOL: "grpc" }, (m) => warnings.push(m)),
      "http/protobuf",
    );
    assert.match(warnings[0] ?? "", /grpc is not supported/);
  });
});

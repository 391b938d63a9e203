// Unit tests of lib/telemetry.ts: which OTEL_* variables turn export on.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { requestedExporters, startTracing } from "./telemetry.ts";
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

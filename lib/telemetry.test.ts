// Unit tests of lib/telemetry.ts: which OTEL_* variables turn export on.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { JOB_SAMPLER, otlpProtocol, requestedExporters, samplerChoice, startTracing } from "./telemetry.ts";
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

describe("samplerChoice", () => {
  const SPEC = { name: "parentbased_always_on", ratio: 1 };
  const choose = (env: Record<string, string>, fallback = JOB_SAMPLER) => {
    const warnings: string[] = [];
    return { chosen: samplerChoice(env, fallback, (m) => warnings.push(m)), warnings };
  };

  test("unset: the process's default, the worker's a parent-based ratio of 0.1", () => {
    assert.deepEqual(choose({}).chosen, { name: "parentbased_traceidratio", ratio: 0.1 });
    assert.deepEqual(choose({}, SPEC).chosen, SPEC);
    assert.deepEqual(choose({ OTEL_TRACES_SAMPLER_ARG: "0.01" }).chosen, {
      name: "parentbased_traceidratio",
      ratio: 0.01,
    });
  });

  test("a named sampler wins, with the specification's ratio of 1 unless the argument says otherwise", () => {
    assert.deepEqual(choose({ OTEL_TRACES_SAMPLER: " Always_Off " }).chosen, {
      name: "always_off",
      ratio: 1,
    });
    assert.deepEqual(choose({ OTEL_TRACES_SAMPLER: "parentbased_traceidratio" }).chosen, {
      name: "parentbased_traceidratio",
      ratio: 1,
    });
    assert.deepEqual(
      choose({ OTEL_TRACES_SAMPLER: "traceidratio", OTEL_TRACES_SAMPLER_ARG: "0.25" }).chosen,
      { name: "traceidratio", ratio: 0.25 },
    );
  });

  test("an unknown sampler or a bad ratio is named in a warning and the default is kept", () => {
    const unknown = choose({ OTEL_TRACES_SAMPLER: "jaeger_remote" });
    assert.deepEqual(unknown.chosen, JOB_SAMPLER);
    assert.match(unknown.warnings[0] ?? "", /OTEL_TRACES_SAMPLER=jaeger_remote is not supported/);
    const constructor = choose({ OTEL_TRACES_SAMPLER: "constructor" });
    assert.deepEqual(constructor.chosen, JOB_SAMPLER, "only the samplers' own names");
    for (const arg of ["1.5", "-0.1", "half"]) {
      const bad = choose({ OTEL_TRACES_SAMPLER_ARG: arg });
      assert.deepEqual(bad.chosen, JOB_SAMPLER);
      assert.match(bad.warnings[0] ?? "", new RegExp(`OTEL_TRACES_SAMPLER_ARG=${arg} is not a ratio`));
    }
  });
});

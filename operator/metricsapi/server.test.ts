// The external metrics API server, its serving certificates, and the operator's configuration.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import * as https from "node:https";
import { pino } from "pino";
import { join } from "node:path";
import { MetricsApiServer, parseSelector } from "./server.ts";
import { selfSignedCert } from "./selfsigned.ts";
import { ServingCertificate } from "./servingCertificate.ts";
import { loadOperatorConfig } from "../config.ts";
import { urlWithPassword } from "../scaling/backlog.ts";

function getJson(port: number, path: string, ca: string): Promise<{ status: number; body: any }> {
  return new Promise((resolve, reject) => {
    https
      .get({ host: "127.0.0.1", port, path, ca, servername: "localhost", agent: false }, (res) => {
        let text = "";
        res.on("data", (c) => (text += c));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text || "{}") }));
      })
      .on("error", reject);
  });
}

describe("external metrics API", () => {
  it("parses label selectors", () => {
    assert.deepEqual(parseSelector("workerpool=ocr"), { workerpool: "ocr" });
    assert.deepEqual(parseSelector("workerpool==ocr,a=b"), { workerpool: "ocr", a: "b" });
    assert.deepEqual(parseSelector("workerpool in (ocr)"), { workerpool: "ocr" });
    assert.equal(parseSelector("workerpool notin (x)"), undefined);
  });

  it("serves discovery and each pool's backlog over TLS; 503 when unavailable", async () => {
    const { cert, key } = selfSignedCert("test", ["localhost", "127.0.0.1"]);
    const server = new MetricsApiServer({
      host: "127.0.0.1",
      port: 0,
      cert,
      key,
      lookup: (ns, name) =>
        name === "ocr"
          ? { kind: "ok", value: 500, at: Date.now() }
          : name === "down"
            ? { kind: "unavailable", message: "redis down" }
            : { kind: "not-found", message: `no ${ns}/${name}` },
    });
    const { port } = await server.start();
    try {
      const disc = await getJson(port, "/apis/external.metrics.k8s.io/v1beta1", cert);
      assert.equal(disc.status, 200);
      assert.equal(disc.body.resources[0].name, "conveyor-backlog");
      const ok = await getJson(
        port,
        "/apis/external.metrics.k8s.io/v1beta1/namespaces/jobs/conveyor-backlog?labelSelector=workerpool%3Docr",
        cert,
      );
      assert.equal(ok.status, 200);
      assert.equal(ok.body.kind, "ExternalMetricValueList");
      assert.equal(ok.body.items[0].value, "500");
      assert.deepEqual(ok.body.items[0].metricLabels, { workerpool: "ocr" });
      assert.equal(
        (
          await getJson(
            port,
            "/apis/external.metrics.k8s.io/v1beta1/namespaces/jobs/conveyor-backlog?labelSelector=workerpool%3Ddown",
            cert,
          )
        ).status,
        503,
      );
      assert.equal(
        (
          await getJson(
            port,
            "/apis/external.metrics.k8s.io/v1beta1/namespaces/jobs/conveyor-backlog?labelSelector=workerpool%3Dnone",
            cert,
          )
        ).status,
        404,
      );
      assert.equal(
        (await getJson(port, "/apis/external.metrics.k8s.io/v1beta1/namespaces/jobs/conveyor-backlog", cert))
          .status,
        400,
      );
      assert.equal(
        (
          await getJson(
            port,
            "/apis/external.metrics.k8s.io/v1beta1/namespaces/jobs/other-metric?labelSelector=workerpool%3Docr",
            cert,
          )
        ).status,
        404,
      );
    } finally {
      await server.stop();
    }
  });

  it("serves a rotated certificate from its files to new connections; a half-rotated pair keeps the old one", async () => {
    const dir = mkdtempSync(join(tmpdir(), "conveyor-cert-"));
    const certFile = join(dir, "tls.crt");
    const keyFile = join(dir, "tls.key");
    const first = selfSignedCert("first", ["localhost", "127.0.0.1"]);
    const second = selfSignedCert("second", ["localhost", "127.0.0.1"]);
    writeFileSync(certFile, first.cert);
    writeFileSync(keyFile, first.key);
    const serving = new ServingCertificate(certFile, keyFile);
    const server = new MetricsApiServer({
      host: "127.0.0.1",
      port: 0,
      ...serving.pair,
      lookup: () => ({ kind: "not-found", message: "none" }),
    });
    const { port } = await server.start();
    const discovery = "/apis/external.metrics.k8s.io/v1beta1";
    try {
      assert.equal((await getJson(port, discovery, first.cert)).status, 200);
      writeFileSync(certFile, second.cert); // the key file not yet: a mismatched pair
      assert.equal(
        serving.check((p) => server.setCertificate(p)),
        false,
        "a mismatched pair is not loaded",
      );
      assert.equal((await getJson(port, discovery, first.cert)).status, 200);
      writeFileSync(keyFile, second.key);
      assert.equal(
        serving.check((p) => server.setCertificate(p)),
        true,
      );
      assert.equal(
        (await getJson(port, discovery, second.cert)).status,
        200,
        "the new certificate is served",
      );
      await assert.rejects(getJson(port, discovery, first.cert), "the old certificate is no longer served");
      assert.equal(
        serving.check((p) => server.setCertificate(p)),
        false,
        "unchanged files: nothing to do",
      );
    } finally {
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("configuration errors name the flag and its variable", () => {
    assert.throws(
      () => loadOperatorConfig(["--metrics-port", "x"], {}),
      /--metrics-port \/ CONVEYOR_METRICS_PORT/,
    );
    assert.throws(
      () => loadOperatorConfig([], { CONVEYOR_LEADER_ELECT: "maybe" }),
      /--leader-elect \/ CONVEYOR_LEADER_ELECT/,
    );
    assert.throws(() => loadOperatorConfig(["--namespaces", "Bad_NS"], {}), /--namespaces/);
    assert.throws(
      () => loadOperatorConfig(["--renew-deadline", "20"], {}),
      /--renew-deadline.*less than.*--lease-duration/,
    );
    assert.throws(() => loadOperatorConfig(["--metrics-api-cert", "/nonexistent"], {}), /--metrics-api-cert/);
    const c = loadOperatorConfig(["--namespaces", "a,b"], { CONVEYOR_METRICS_API: "false" });
    assert.deepEqual(c.namespaces, ["a", "b"]);
    assert.equal(c.metricsApi, false);
    assert.equal(c.leaseDurationMs, 15_000);
    assert.equal(c.renewDeadlineMs, 10_000);
    assert.equal(c.retryPeriodMs, 2_000);
    assert.match(c.workerImage, /^ghcr\.io\/conveyor-dev\/conveyor-worker:\d/);
  });

  it("passes a Secret's Redis password in the URL connectRedis takes, encoded", () => {
    assert.equal(urlWithPassword("redis://r:6379/2", "p@ss:w/rd"), "redis://:p%40ss%3Aw%2Frd@r:6379/2");
    assert.equal(urlWithPassword("redis-cluster://a:1,b:2", "x"), "redis-cluster://:x@a:1,b:2");
    assert.equal(urlWithPassword("redis://user@r", "x"), "redis://user:x@r");
    assert.equal(urlWithPassword("redis://r", undefined), "redis://r");
  });
});

describe("external metrics API: bad input", () => {
  it("answers 400 naming the path segment for a malformed % escape, and logs no error", async () => {
    const { cert, key } = selfSignedCert("test", ["localhost", "127.0.0.1"]);
    const errors: string[] = [];
    const log = pino({ level: "error" }, { write: (line: string) => void errors.push(line) });
    const server = new MetricsApiServer({
      host: "127.0.0.1",
      port: 0,
      cert,
      key,
      log,
      lookup: () => ({ kind: "ok", value: 1, at: Date.now() }),
    });
    const { port } = await server.start();
    try {
      const prefix = "/apis/external.metrics.k8s.io/v1beta1/namespaces";
      const badNamespace = await getJson(
        port,
        `${prefix}/%E0%A4%A/conveyor-backlog?labelSelector=workerpool%3Dx`,
        cert,
      );
      assert.equal(badNamespace.status, 400);
      assert.match(badNamespace.body.message ?? "", /namespace/);
      const badMetric = await getJson(
        port,
        `${prefix}/jobs/conveyor-%ZZbacklog?labelSelector=workerpool%3Dx`,
        cert,
      );
      assert.equal(badMetric.status, 400);
      assert.match(badMetric.body.message ?? "", /metric/);
      const ok = await getJson(port, `${prefix}/jobs/conveyor-backlog?labelSelector=workerpool%3Dx`, cert);
      assert.equal(ok.status, 200, "a good request still works");
      assert.deepEqual(errors, []);
    } finally {
      await server.stop();
    }
  });
});

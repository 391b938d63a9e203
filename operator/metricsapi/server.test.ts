// The external metrics API server, its serving certificates, and the operator's configuration.
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import * as https from "node:https";
import { pino } from "pino";
import { join } from "node:path";
import { MetricsApiServer, clientRefusal, parseSelector, type ClientPolicy } from "./server.ts";
import { selfSignedCert } from "./selfsigned.ts";
import { ServingCertificate } from "./servingCertificate.ts";
import { loadOperatorConfig } from "../config.ts";
import { urlWithPassword } from "../scaling/redisConnections.ts";

function getJson(
  port: number,
  path: string,
  ca: string,
  client?: { cert: string; key: string },
): Promise<{ status: number; body: any }> {
  return new Promise((resolve, reject) => {
    https
      .get({ host: "127.0.0.1", port, path, ca, servername: "localhost", agent: false, ...client }, (res) => {
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
      clients: { kind: "any" },
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
      clients: { kind: "any" },
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

describe("external metrics API: who may call", () => {
  const serving = selfSignedCert("serving", ["localhost", "127.0.0.1"]);
  // A front-proxy CA and client certificates it signs, as kubeadm makes them (openssl).
  const dir = mkdtempSync(join(tmpdir(), "conveyor-front-proxy-"));
  const openssl = (...args: string[]) => execFileSync("openssl", args, { cwd: dir, stdio: "pipe" });
  const newKey = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
  function authority(name: string): string {
    openssl(
      "req",
      "-x509",
      ...newKey,
      "-keyout",
      `${name}.key`,
      "-out",
      `${name}.crt`,
      "-subj",
      `/CN=${name}`,
    );
    return readFileSync(join(dir, `${name}.crt`), "utf8");
  }
  function client(cn: string, ca: string): { cert: string; key: string } {
    openssl("req", ...newKey, "-keyout", `${cn}.key`, "-out", `${cn}.csr`, "-subj", `/CN=${cn}`);
    const ext = join(dir, "client.ext");
    writeFileSync(ext, "extendedKeyUsage=clientAuth\n");
    openssl(
      "x509",
      "-req",
      "-in",
      `${cn}.csr`,
      "-CA",
      `${ca}.crt`,
      "-CAkey",
      `${ca}.key`,
      "-out",
      `${cn}.crt`,
      "-extfile",
      ext,
    );
    return {
      cert: readFileSync(join(dir, `${cn}.crt`), "utf8"),
      key: readFileSync(join(dir, `${cn}.key`), "utf8"),
    };
  }
  const frontProxyCA = authority("front-proxy-ca");
  const otherCA = authority("other-ca");
  const frontProxy = client("front-proxy-client", "front-proxy-ca");
  const otherName = client("someone-else", "front-proxy-ca");
  const otherSigner = client("front-proxy-client-elsewhere", "other-ca");
  after(() => rmSync(dir, { recursive: true, force: true }));
  const discovery = "/apis/external.metrics.k8s.io/v1beta1";

  async function statuses(clients: ClientPolicy): Promise<number[]> {
    const server = new MetricsApiServer({
      host: "127.0.0.1",
      port: 0,
      ...serving,
      clients,
      lookup: () => ({ kind: "not-found", message: "none" }),
    });
    const { port } = await server.start();
    try {
      const as = (c?: { cert: string; key: string }) =>
        getJson(port, discovery, serving.cert, c).then((r) => r.status);
      return [await as(frontProxy), await as(otherName), await as(otherSigner), await as(undefined)];
    } finally {
      await server.stop();
    }
  }

  it("the front proxy: signed by the CA and an allowed name; any name when none are listed", async () => {
    const ca = frontProxyCA;
    assert.deepEqual(
      await statuses({ kind: "front-proxy", ca, allowedNames: ["front-proxy-client"] }),
      [200, 401, 401, 401],
    );
    assert.deepEqual(await statuses({ kind: "front-proxy", ca, allowedNames: [] }), [200, 200, 401, 401]);
    assert.deepEqual(
      await statuses({ kind: "front-proxy", ca: otherCA, allowedNames: [] }),
      [401, 401, 200, 401],
      "only the configured CA's certificates",
    );
  });

  it("no CA known: every client refused with the reason; none: any client", async () => {
    assert.deepEqual(await statuses({ kind: "refuse", why: "no CA" }), [401, 401, 401, 401]);
    assert.deepEqual(await statuses({ kind: "any" }), [200, 200, 200, 200]);
    assert.equal(
      clientRefusal({ kind: "front-proxy", ca: "", allowedNames: ["front-proxy-client"] }, true, "x"),
      'client certificate name "x" is not among the requestheader allowed names',
    );
    assert.deepEqual(loadOperatorConfig(["--metrics-api-allowed-names", "a,b"], {}).metricsApiAllowedNames, [
      "a",
      "b",
    ]);
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
      clients: { kind: "any" },
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

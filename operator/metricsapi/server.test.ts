import { describe, it } from "node:test";
import assert from "node:assert/strict";
import * as https from "node:https";
import { pino } from "pino";
import { MetricsApiServer } from "./server.ts";
import { selfSignedCert } from "./selfsigned.ts";

function get(
  port: number,
  path: string,
  ca: string,
): Promise<{ status: number; body: { message?: string } }> {
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
      const badNamespace = await get(
        port,
        `${prefix}/%E0%A4%A/conveyor-backlog?labelSelector=workerpool%3Dx`,
        cert,
      );
      assert.equal(badNamespace.status, 400);
      assert.match(badNamespace.body.message ?? "", /namespace/);
      const badMetric = await get(
        port,
        `${prefix}/jobs/conveyor-%ZZbacklog?labelSelector=workerpool%3Dx`,
        cert,
      );
      assert.equal(badMetric.status, 400);
      assert.match(badMetric.body.message ?? "", /metric/);
      const ok = await get(port, `${prefix}/jobs/conveyor-backlog?labelSelector=workerpool%3Dx`, cert);
      assert.equal(ok.status, 200, "a good request still works");
      assert.deepEqual(errors, []);
    } finally {
      await server.stop();
    }
  });
});

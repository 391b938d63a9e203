// KubeClient against a real TLS server that reports the client certificate it was shown.
import { strict as assert } from "node:assert";
import * as https from "node:https";
import type { TLSSocket } from "node:tls";
import { after, before, describe, it } from "node:test";
import { selfSignedCert } from "../metricsapi/selfsigned.ts";
import { KubeClient } from "./client.ts";
import type { KubeCredentials } from "./kubeConfig.ts";

describe("KubeClient", () => {
  const serving = selfSignedCert("api", ["127.0.0.1"]);
  let server: https.Server;
  let port = 0;
  before(async () => {
    server = https.createServer({ ...serving, requestCert: true, rejectUnauthorized: false }, (req, res) => {
      const cn = (req.socket as TLSSocket).getPeerCertificate().subject?.CN ?? "";
      res.writeHead(200, { "Content-Type": "application/json" });
      res.end(JSON.stringify({ cn }));
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    port = (server.address() as { port: number }).port;
  });
  after(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it("picks up a client certificate an exec plugin rotated (a new TLS agent, not the first one)", async () => {
    let current = selfSignedCert("first", ["localhost"]);
    const creds: KubeCredentials = {
      getCurrentCluster: () => ({ server: `https://127.0.0.1:${port}` }),
      applyToHTTPSOptions: async (opts) => {
        opts.ca = serving.cert;
        opts.cert = current.cert;
        opts.key = current.key;
      },
    };
    const client = new KubeClient(creds);
    assert.deepEqual(await client.get("/version"), { cn: "first" });
    assert.deepEqual(await client.get("/version"), { cn: "first" });
    current = selfSignedCert("rotated", ["localhost"]);
    assert.deepEqual(await client.get("/version"), { cn: "rotated" });
  });
});

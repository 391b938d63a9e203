// KubeClient against a real TLS server that reports the client certificate it was shown.
import { strict as assert } from "node:assert";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import * as https from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { TLSSocket } from "node:tls";
import { after, before, describe, it } from "node:test";
import { stringify } from "yaml";
import { pollUntil } from "../../test/support/poll.ts";
import { selfSignedCert } from "../metricsapi/selfsigned.ts";
import { KubeClient } from "./client.ts";
import { loadKubeConfig, type KubeCredentials } from "./kubeConfig.ts";

describe("KubeClient", () => {
  const serving = selfSignedCert("api", ["127.0.0.1"]);
  let server: https.Server;
  let port = 0;
  const received: string[] = [];
  before(async () => {
    server = https.createServer({ ...serving, requestCert: true, rejectUnauthorized: false }, (req, res) => {
      received.push(`${req.method} ${req.url}`);
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

  it("a write whose leadership ends while its credentials are read is refused (NotLeaderError), never sent", async () => {
    let credentialsAsked!: () => void;
    const asked = new Promise<void>((resolve) => (credentialsAsked = resolve));
    let handOut!: () => void;
    const handedOut = new Promise<void>((resolve) => (handOut = resolve));
    const creds: KubeCredentials = {
      getCurrentCluster: () => ({ server: `https://127.0.0.1:${port}` }),
      applyToHTTPSOptions: async (opts) => {
        opts.ca = serving.cert;
        credentialsAsked();
        await handedOut; // a slow exec plugin
      },
    };
    const leadership = new AbortController();
    const client = new KubeClient(creds).with({
      canWrite: () => !leadership.signal.aborted,
      writeSignal: () => leadership.signal,
    });
    const write = client.request("update", "PUT", "/apis/apps/v1/namespaces/a/deployments/late", {
      body: {},
    });
    await asked;
    leadership.abort(new Error("leadership lost"));
    handOut();
    await assert.rejects(write, { name: "NotLeaderError" });
    assert.deepEqual(
      received.filter((r) => r.includes("/late")),
      [],
      "the API server never saw the write",
    );
  });

  it("a kubeconfig's exec plugin that hands out a new client certificate is followed once the old one expires", async () => {
    const dir = mkdtempSync(join(tmpdir(), "cvy-exec-"));
    try {
      // The plugin prints an ExecCredential (kubectl's protocol); client-node runs it again once
      // the credential's expirationTimestamp has passed.
      const credential = join(dir, "credential.json");
      const issue = (cn: string, validMs: number) => {
        const { cert, key } = selfSignedCert(cn, ["localhost"]);
        writeFileSync(
          credential,
          JSON.stringify({
            apiVersion: "client.authentication.k8s.io/v1",
            kind: "ExecCredential",
            status: {
              clientCertificateData: cert.toString(),
              clientKeyData: key.toString(),
              expirationTimestamp: new Date(Date.now() + validMs).toISOString(),
            },
          }),
        );
      };
      const file = join(dir, "kubeconfig");
      writeFileSync(
        file,
        stringify({
          apiVersion: "v1",
          kind: "Config",
          "current-context": "ctx",
          clusters: [
            {
              name: "c",
              cluster: {
                server: `https://127.0.0.1:${port}`,
                "certificate-authority-data": Buffer.from(serving.cert).toString("base64"),
              },
            },
          ],
          users: [
            {
              name: "u",
              user: {
                exec: { apiVersion: "client.authentication.k8s.io/v1", command: "cat", args: [credential] },
              },
            },
          ],
          contexts: [{ name: "ctx", context: { cluster: "c", user: "u" } }],
        }),
      );
      issue("first", 1500);
      const client = new KubeClient(await loadKubeConfig({ file, env: {} }));
      assert.deepEqual(await client.get("/version"), { cn: "first" });
      issue("rotated", 3_600_000);
      await pollUntil(
        "the rotated certificate shown",
        async () => {
          const { cn } = (await client.get("/version")) as { cn: string };
          return cn === "rotated";
        },
        { timeoutMs: 30_000 },
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

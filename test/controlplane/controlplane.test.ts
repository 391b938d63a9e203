// The test control plane itself (issue 3): healthy from a warm cache, reports the pinned version,
// runs Deployments to Running pods (controller-manager + scheduler + kwok), garbage-collects, and
// reaches an aggregated API on a routable (non-loopback) address through the API server.
import { describe, it, before, after } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import * as https from "node:https";
import { once } from "node:events";
import type { AddressInfo } from "node:net";
import type { TLSSocket } from "node:tls";
import { AppsV1Api, CoreV1Api, type V1Pod } from "@kubernetes/client-node";
import { ControlPlane } from "../support/controlplane.ts";
import { pollUntil } from "../support/poll.ts";

const LONG = 180_000; // generous: a loaded 2-core machine

describe("test control plane", { timeout: 15 * 60_000 }, () => {
  let cp: ControlPlane;
  let core: CoreV1Api;
  let apps: AppsV1Api;

  before(async () => {
    cp = await ControlPlane.start({ controllers: true, scheduler: true, kwok: true, aggregation: true });
    const kc = cp.kubeConfig();
    core = kc.makeApiClient(CoreV1Api);
    apps = kc.makeApiClient(AppsV1Api);
  });

  after(async () => {
    await cp?.stop();
  });

  it("is healthy and reports the pinned Kubernetes version", async () => {
    const readyz = await cp.request("GET", "/readyz");
    assert.equal(readyz.status, 200, readyz.body);

    const res = await cp.request("GET", "/version");
    assert.equal(res.status, 200, res.body);
    const v = JSON.parse(res.body) as { gitVersion: string; major: string; minor: string };
    assert.match(cp.version, /^v1\.\d+\.\d+$/);
    assert.equal(v.gitVersion, cp.version);
    const [major, minor] = cp.version.slice(1).split(".");
    assert.equal(v.major, major);
    assert.equal(v.minor, minor);

    const kubectlVersion = JSON.parse(await cp.kubectl("version", "--output=json")) as {
      clientVersion: { gitVersion: string };
      serverVersion: { gitVersion: string };
    };
    assert.equal(kubectlVersion.clientVersion.gitVersion, cp.version);
    assert.equal(kubectlVersion.serverVersion.gitVersion, cp.version);

    // the other tools are there and run
    assert.match(await cp.helm("version", "--short"), /^v3\./);
    assert.match((await cp.run("kubeconform", ["-v"])).stdout, /v\d+\.\d+/);
  });

  it("applies manifests, and helm template output passes a server-side dry run", async () => {
    await cp.apply(JSON.stringify({ apiVersion: "v1", kind: "Namespace", metadata: { name: "applied" } }));
    assert.match(await cp.kubectl("get", "namespace", "applied", "-o", "name"), /^namespace\/applied$/m);

    // a throwaway chart: the same pipeline the project's chart test uses
    const chart = fs.mkdtempSync(path.join(os.tmpdir(), "conveyor-chart-"));
    try {
      fs.mkdirSync(path.join(chart, "templates"));
      fs.writeFileSync(path.join(chart, "Chart.yaml"), "apiVersion: v2\nname: probe\nversion: 0.1.0\n");
      fs.writeFileSync(path.join(chart, "values.yaml"), "greeting: hello\n");
      fs.writeFileSync(
        path.join(chart, "templates", "cm.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-cm\ndata:\n  greeting: {{ .Values.greeting | quote }}\n",
      );
      const rendered = await cp.helm("template", "probe", chart, "--namespace", "applied");
      assert.match(rendered, /greeting: "hello"/);
      const out = await cp.apply(rendered, "--dry-run=server", "--namespace", "applied");
      assert.match(out, /configmap\/probe-cm created \(server dry run\)/);
    } finally {
      fs.rmSync(chart, { recursive: true, force: true });
    }
    // the dry run left nothing behind
    await assert.rejects(
      cp.kubectl("get", "configmap", "probe-cm", "--namespace", "applied"),
      /NotFound|not found/,
    );
  });

  it("writes the audit log for writes, with the caller", async () => {
    await core.createNamespacedConfigMap({
      namespace: "default",
      body: { metadata: { name: "audited" }, data: { a: "1" } },
    });
    const events = await pollUntil("the audit event of the create", async () => {
      const ev = await cp.auditEvents(
        (e) =>
          e.verb === "create" && e.objectRef?.resource === "configmaps" && e.objectRef.name === "audited",
      );
      return ev.length > 0 ? ev : undefined;
    });
    assert.equal(events[0]!.user.username, "conveyor-admin");
    assert.equal(events[0]!.level, "Metadata");
    // reads are not logged
    const reads = await cp.auditEvents((e) => e.verb === "get" || e.verb === "list" || e.verb === "watch");
    assert.equal(reads.length, 0);
  });

  it("runs a Deployment: ReplicaSet, scheduled pods that kwok marks Running", async () => {
    const labels = { app: "demo" };
    await apps.createNamespacedDeployment({
      namespace: "default",
      body: {
        metadata: { name: "demo" },
        spec: {
          replicas: 2,
          selector: { matchLabels: labels },
          template: {
            metadata: { labels },
            spec: { containers: [{ name: "main", image: "example.invalid/demo:1" }] },
          },
        },
      },
    });
    const rs = await pollUntil(
      "a ReplicaSet owned by the Deployment",
      async () => {
        const list = await apps.listNamespacedReplicaSet({ namespace: "default", labelSelector: "app=demo" });
        return list.items.find((r) =>
          r.metadata?.ownerReferences?.some((o) => o.kind === "Deployment" && o.name === "demo"),
        );
      },
      { timeoutMs: LONG, onTimeout: () => cp.kubectl("get", "deploy,rs,events", "-o", "wide") },
    );
    const pods = await pollUntil(
      "2 Running pods on the kwok node",
      async () => {
        const list = await core.listNamespacedPod({ namespace: "default", labelSelector: "app=demo" });
        const running = list.items.filter((p: V1Pod) => p.status?.phase === "Running");
        return running.length === 2 ? running : undefined;
      },
      { timeoutMs: LONG, onTimeout: () => cp.kubectl("get", "deploy,rs,pods,nodes,events", "-o", "wide") },
    );
    for (const p of pods) {
      assert.ok(
        cp.nodeNames.includes(p.spec?.nodeName ?? ""),
        `pod ${p.metadata?.name} on ${p.spec?.nodeName}`,
      );
      assert.ok(
        p.metadata?.ownerReferences?.some((o) => o.kind === "ReplicaSet" && o.name === rs.metadata?.name),
      );
      assert.ok(p.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True"));
    }
    await pollUntil(
      "the Deployment to report 2 available replicas",
      async () =>
        (await apps.readNamespacedDeployment({ name: "demo", namespace: "default" })).status
          ?.availableReplicas === 2,
      { timeoutMs: LONG },
    );
  });

  it("garbage-collects an object whose owner is deleted", async () => {
    const owner = await core.createNamespacedConfigMap({
      namespace: "default",
      body: { metadata: { name: "gc-owner" } },
    });
    await core.createNamespacedConfigMap({
      namespace: "default",
      body: {
        metadata: {
          name: "gc-owned",
          ownerReferences: [
            { apiVersion: "v1", kind: "ConfigMap", name: "gc-owner", uid: owner.metadata!.uid! },
          ],
        },
      },
    });
    await core.deleteNamespacedConfigMap({ name: "gc-owner", namespace: "default" });
    await pollUntil(
      "the owned ConfigMap to be garbage-collected",
      async () => {
        const list = await core.listNamespacedConfigMap({
          namespace: "default",
          fieldSelector: "metadata.name=gc-owned",
        });
        return list.items.length === 0;
      },
      { timeoutMs: LONG },
    );
  });

  it("reaches an aggregated API on a routable address through the API server", async () => {
    const addr = await cp.routableAddress();
    assert.doesNotMatch(addr.address, /^127\./);
    const serviceName = "probe-api";
    // the API server checks the backend's cert against <service>.<namespace>.svc
    const cert = await cp.issueServingCert("aggregated-test", {
      ips: [addr.address],
      dnsNames: [`${serviceName}.default.svc`],
    });
    const seen: { path: string; user: string | undefined; clientCN: string | undefined }[] = [];
    const group = "probe.conveyor.dev";
    const server = https.createServer(
      {
        cert: cert.cert,
        key: cert.key,
        // the API server proxies with the front-proxy client cert; verify it as a real backend would
        ca: fs.readFileSync(cp.pkiFile("front-proxy-ca.crt")),
        requestCert: true,
        rejectUnauthorized: false,
      },
      (req, res) => {
        const socket = req.socket as TLSSocket;
        const cn = socket.authorized ? socket.getPeerCertificate().subject?.CN : undefined;
        seen.push({
          path: req.url ?? "",
          user: req.headers["x-remote-user"] as string | undefined,
          clientCN: Array.isArray(cn) ? cn.join(",") : cn,
        });
        const json = (status: number, body: unknown) => {
          res.writeHead(status, { "Content-Type": "application/json" });
          res.end(JSON.stringify(body));
        };
        const url = new URL(req.url ?? "/", "https://x");
        if (url.pathname === `/apis/${group}/v1`) {
          json(200, {
            kind: "APIResourceList",
            apiVersion: "v1",
            groupVersion: `${group}/v1`,
            resources: [
              {
                name: "probes",
                singularName: "probe",
                namespaced: true,
                kind: "Probe",
                verbs: ["get", "list"],
              },
            ],
          });
        } else if (url.pathname === `/apis/${group}/v1/namespaces/default/probes/hello`) {
          json(200, {
            kind: "Probe",
            apiVersion: `${group}/v1`,
            metadata: { name: "hello", namespace: "default" },
            servedBy: "conveyor-test-server",
          });
        } else {
          json(404, { kind: "Status", apiVersion: "v1", status: "Failure", code: 404, reason: "NotFound" });
        }
      },
    );
    server.listen(0, addr.address);
    await once(server, "listening");
    try {
      const port = (server.address() as AddressInfo).port;
      await cp.registerAPIService({ group, version: "v1", address: addr.address, port, serviceName });

      const discovery = await pollUntil(
        "the aggregated discovery document through the API server",
        async () => {
          const r = await cp.request("GET", `/apis/${group}/v1`);
          if (r.status !== 200) throw new Error(`HTTP ${r.status}: ${r.body.trim()}`);
          return r;
        },
        {
          timeoutMs: LONG,
          intervalMs: 500,
          onTimeout: () => cp.kubectl("get", "apiservice", `v1.${group}`, "-o", "yaml"),
        },
      );
      const list = JSON.parse(discovery.body) as { groupVersion: string; resources: { name: string }[] };
      assert.equal(list.groupVersion, `${group}/v1`);
      assert.deepEqual(
        list.resources.map((r) => r.name),
        ["probes"],
      );

      const obj = await cp.request("GET", `/apis/${group}/v1/namespaces/default/probes/hello`);
      assert.equal(obj.status, 200, obj.body);
      assert.equal((JSON.parse(obj.body) as { servedBy: string }).servedBy, "conveyor-test-server");

      // the aggregator authenticated with the front-proxy client cert and passed the user on
      const proxied = seen.find((s) =>
        s.path.startsWith(`/apis/${group}/v1/namespaces/default/probes/hello`),
      );
      assert.ok(proxied, `requests seen: ${JSON.stringify(seen)}`);
      assert.equal(proxied.clientCN, "front-proxy-client");
      assert.equal(proxied.user, "conveyor-admin");

      // kubectl sees the group too
      await pollUntil(
        "kubectl api-resources to list the aggregated group",
        async () =>
          (await cp.kubectl("api-resources", `--api-group=${group}`, "-o", "name")).includes(
            `probes.${group}`,
          ),
        { timeoutMs: LONG, intervalMs: 1000 },
      );
    } finally {
      server.close();
      server.closeAllConnections();
    }
  });
});

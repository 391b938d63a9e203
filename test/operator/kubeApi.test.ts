// The operator's Kubernetes client, cache and writes against a real API server (issues 27.5, 27.8,
// 27 security, 28): the informer indexes its cache and resyncs from it, relisting only after a
// watch error; a scale that
// lands between the operator's read and its write is never reverted (preconditions, 409); a
// leader's write in flight when leadership ends is cut off, not landed after a standby took
// over; with --restrict-secret-access only labelled Secrets (or the operator's namespace's) are
// used. No controller-manager: the "HPA" here is a scale written through the scale subresource,
// exactly what the HPA controller writes.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import * as net from "node:net";
import { join } from "node:path";
import { pino } from "pino";
import { parse, stringify } from "yaml";
import { ControlPlane } from "../support/controlplane.ts";
import { workerPoolManifest } from "../support/operator.ts";
import { pollUntil } from "../support/poll.ts";
import { RESOURCES, resourcePath } from "../../operator/apis/coordinates.ts";
import { withDefaults, type WorkerPool } from "../../operator/apis/v1alpha1/types.ts";
import { KubeClient, NotLeaderError, isConflict } from "../../operator/kube/client.ts";
import { loadKubeConfig, type KubeCredentials } from "../../operator/kube/kubeConfig.ts";
import { Informer } from "../../operator/kube/informer.ts";
import { Manager } from "../../operator/kube/manager.ts";
import { createOperatorMetrics } from "../../operator/metrics.ts";
import type { ReconcileContext, PoolState } from "../../operator/controllers/context.ts";
import { reconcileDeployment } from "../../operator/controllers/deployment.ts";
import { EventRecorder } from "../../operator/controllers/events.ts";
import type { Deployment } from "../../operator/controllers/objects.ts";
import { WriteOverlay } from "../../operator/controllers/overlay.ts";
import { Reason } from "../../operator/controllers/reasons.ts";
import { newPoolScaler } from "../../operator/scaling/decide.ts";
import { applyScale } from "../../operator/scaling/scaleWrite.ts";
import { SecretReader } from "../../operator/controllers/secretReader.ts";

const ROOT = join(import.meta.dirname, "../..");
const silent = pino({ level: "silent" });

/** A client whose next GET runs `then` after the read — a write by someone else in between. */
class InterleavingClient extends KubeClient {
  then: (() => Promise<void>) | undefined;
  override async get<T>(path: string): Promise<T | null> {
    const read = await super.get<T>(path);
    const then = this.then;
    this.then = undefined;
    await then?.();
    return read;
  }
}

/** A TCP proxy to the API server that can stop forwarding (a network partition): bytes wait. */
async function partitionableProxy(target: URL) {
  let partitioned = false;
  const held: [net.Socket, Buffer][] = [];
  const sockets = new Set<net.Socket>();
  const link = (from: net.Socket, to: net.Socket) => {
    from.on("data", (d: Buffer) => (partitioned ? held.push([to, d]) : to.write(d)));
    from.on("close", () => to.destroy());
    from.on("error", () => to.destroy());
  };
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(target.port), target.hostname);
    sockets.add(client).add(upstream);
    link(client, upstream);
    link(upstream, client);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `https://127.0.0.1:${(server.address() as net.AddressInfo).port}`,
    partition: () => void (partitioned = true),
    heal: () => {
      partitioned = false;
      for (const [to, d] of held.splice(0)) to.write(d);
    },
    close: () => {
      for (const s of sockets) s.destroy();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

describe("operator writes against a real API server", { timeout: 10 * 60_000 }, () => {
  let cp: ControlPlane;
  let k: KubeClient;

  before(async () => {
    cp = await ControlPlane.start({ controllers: false, scheduler: false, kwok: false, aggregation: false });
    k = new KubeClient(cp.kubeConfig());
    await cp.kubectl("apply", "--server-side", "-f", join(ROOT, "crds", "conveyor.dev_workerpools.yaml"));
    await pollUntil(
      "the WorkerPool CRD is Established",
      async () =>
        (
          await cp.kubectl(
            "get",
            "crd/workerpools.conveyor.dev",
            "-o",
            'jsonpath={.status.conditions[?(@.type=="Established")].status}',
          )
        ).trim() === "True",
      { timeoutMs: 120_000 },
    );
  });
  after(async () => {
    await cp?.stop();
  });

  function context(client: KubeClient): ReconcileContext {
    const metrics = createOperatorMetrics(undefined, { defaultMetrics: false });
    return {
      client,
      log: silent,
      metrics,
      events: new EventRecorder(client, "test", silent),
      defaultImage: "conveyor-worker:test",
      poolOverlay: new WriteOverlay(),
      deploymentOverlay: new WriteOverlay(),
      hpaOverlay: new WriteOverlay(),
      deletedHPAs: new Map(),
      podsOf: () => [],
      workerReports: async () => [],
    };
  }

  const deploymentPath = (name: string, subresource?: string) =>
    resourcePath(RESOURCES.deployments, { namespace: "default", name, subresource });
  /** What the HPA controller writes: a replica count through the scale subresource. */
  const hpaScales = (name: string, replicas: number) =>
    k.mergePatch(deploymentPath(name, "scale"), { spec: { replicas } });
  const replicasOf = async (name: string) => (await k.get<Deployment>(deploymentPath(name)))?.spec?.replicas;

  async function createPool(name: string): Promise<WorkerPool> {
    return k.create<WorkerPool>(
      resourcePath(RESOURCES.workerPools, { namespace: "default" }),
      workerPoolManifest(name, "redis://127.0.0.1:1", { scaling: { minReplicas: 1, maxReplicas: 20 } }),
    );
  }

  it("a Deployment update racing an HPA scale fails with 409 instead of reverting the scale; the retry keeps it", async () => {
    const pool = await createPool("race-apply");
    const key = "default/race-apply";
    const client = new InterleavingClient(cp.kubeConfig());
    const ctx = context(client);
    const created = await reconcileDeployment(ctx, key, pool, withDefaults(pool.spec), undefined, undefined);
    assert.equal(created.spec?.replicas, 1);
    // The spec changes, so the operator reads replicas and applies; the HPA scales to 7 in between.
    const changed = withDefaults({ ...pool.spec, concurrency: 3 });
    client.then = () => hpaScales("race-apply", 7).then(() => undefined);
    await assert.rejects(reconcileDeployment(ctx, key, pool, changed, created, undefined), (err) =>
      isConflict(err),
    );
    assert.equal(await replicasOf("race-apply"), 7, "the HPA's scale stands");
    const live = (await k.get<Deployment>(deploymentPath("race-apply")))!;
    const applied = await reconcileDeployment(ctx, key, pool, changed, live, undefined);
    assert.equal(applied.spec?.replicas, 7, "the retry applies the change at the HPA's count");
    const env = applied.spec?.template?.spec?.containers[0]?.env ?? [];
    assert.equal(env.find((e) => e.name === "CONVEYOR_CONCURRENCY")?.value, "3");
  });

  it("a scale decided from a Deployment the HPA has scaled since fails with 409; decided again it lands", async () => {
    const pool = await createPool("race-scale");
    const key = "default/race-scale";
    const ctx = context(k);
    const spec = withDefaults(pool.spec);
    await reconcileDeployment(ctx, key, pool, spec, undefined, undefined);
    await hpaScales("race-scale", 7);
    const seen = (await k.get<Deployment>(deploymentPath("race-scale")))!;
    const state: PoolState = { scaler: newPoolScaler(Date.now()), costsWritten: new Map() };
    const decision = { replicas: 3, from: 7, reason: Reason.DirectScaleDown, message: "backlog" } as const;
    await hpaScales("race-scale", 9); // lands after the operator read 7
    await assert.rejects(applyScale(ctx, key, pool, spec, seen, state, decision), (err) => isConflict(err));
    assert.equal(await replicasOf("race-scale"), 9, "the HPA's scale stands");
    const fresh = (await k.get<Deployment>(deploymentPath("race-scale")))!;
    await applyScale(ctx, key, pool, spec, fresh, state, { ...decision, from: 9 });
    assert.equal(await replicasOf("race-scale"), 3);
  });

  it("a leader's write in flight when the lease cannot be renewed is cut off (NotLeaderError), never landed later", async () => {
    const proxy = await partitionableProxy(new URL(cp.apiServerURL));
    const admin = cp.kubeConfig();
    const viaProxy: KubeCredentials = {
      getCurrentCluster: () => ({ server: proxy.url }),
      applyToHTTPSOptions: (o) => admin.applyToHTTPSOptions(o),
    };
    const metrics = createOperatorMetrics(undefined, { defaultMetrics: false });
    const manager = new Manager({
      baseClient: new KubeClient(viaProxy, { metrics }),
      log: silent,
      metrics,
      metricsAddress: "127.0.0.1",
      metricsPort: 0,
      leaderElection: {
        namespace: "default",
        name: "writes-test",
        identity: "leader",
        leaseDurationMs: 4000,
        renewDeadlineMs: 3000,
        retryPeriodMs: 1000,
      },
    });
    try {
      await manager.start();
      await pollUntil("the manager leads", () => manager.isLeader(), { timeoutMs: 60_000 });
      proxy.partition();
      const configMap = resourcePath(RESOURCES.configMaps, { namespace: "default" });
      // The client's own timeout is 30 s: only the lost leadership can end this write sooner.
      await assert.rejects(
        manager.client.create(configMap, {
          apiVersion: "v1",
          kind: "ConfigMap",
          metadata: { name: "written-by-a-former-leader" },
        }),
        (err) => err instanceof NotLeaderError,
      );
      assert.equal(manager.isLeader(), false);
      proxy.heal();
      await assert.rejects(manager.client.create(configMap, {}), (err) => err instanceof NotLeaderError);
      assert.equal(
        await k.get(
          resourcePath(RESOURCES.configMaps, { namespace: "default", name: "written-by-a-former-leader" }),
        ),
        null,
      );
    } finally {
      proxy.heal();
      await manager.stop();
      await proxy.close();
    }
  });

  it("the informer indexes its cache by label, resyncs from the cache without listing, and relists only after a watch error", async () => {
    let lists = 0;
    class CountingClient extends KubeClient {
      override listAll<T>(path: string, query: { labelSelector?: string } = {}) {
        lists++;
        return super.listAll<T>(path, query);
      }
    }
    const configMaps = resourcePath(RESOURCES.configMaps, { namespace: "default" });
    const informer = new Informer<{
      metadata: { name: string; namespace: string; labels?: Record<string, string> };
    }>(new CountingClient(cp.kubeConfig()), {
      path: configMaps,
      labelSelector: "test=informer",
      relistMs: 1000,
      minBackoffMs: 100,
      maxBackoffMs: 500,
      indexBy: (o) => o.metadata.labels?.group,
    });
    let resyncs = 0;
    informer.on({ synced: () => resyncs++ });
    const configMap = (name: string, group: string) => ({
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name, labels: { test: "informer", group } },
    });
    const names = (group: string) =>
      informer
        .indexed(group)
        .map((o) => o.metadata.name)
        .sort()
        .join(",");
    await k.create(configMaps, configMap("one", "a"));
    informer.start();
    try {
      await informer.waitForSync();
      await k.create(configMaps, configMap("two", "a"));
      await k.create(configMaps, configMap("three", "b"));
      await pollUntil("two in group a, one in b", () => names("a") === "one,two" && names("b") === "three");
      await k.mergePatch(resourcePath(RESOURCES.configMaps, { namespace: "default", name: "two" }), {
        metadata: { labels: { group: "b" } },
      });
      await pollUntil("two moved to group b", () => names("a") === "one" && names("b") === "three,two");
      await k.delete(resourcePath(RESOURCES.configMaps, { namespace: "default", name: "one" }));
      await pollUntil("one gone from the index", () => names("a") === "");
      const resyncsBefore = resyncs;
      await pollUntil("three resyncs", () => resyncs >= resyncsBefore + 3);
      assert.equal(lists, 1, "resyncs come from the cache: one list so far");
      await cp.restartApiServer({ downMs: 500 });
      await pollUntil("a relist after the broken watch", () => lists > 1 && informer.failures === 0, {
        timeoutMs: 60_000,
      });
      assert.equal(names("b"), "three,two", "the index survives the relist");
    } finally {
      await informer.stop();
    }
  });

  it("--restrict-secret-access: only Secrets labelled conveyor.dev/secret-access=true or in the operator's namespace", async () => {
    await cp.kubectl("create", "namespace", "conveyor-system");
    const secret = (namespace: string, name: string, labelled: boolean) =>
      k.create(resourcePath(RESOURCES.secrets, { namespace }), {
        apiVersion: "v1",
        kind: "Secret",
        metadata: { name, ...(labelled ? { labels: { "conveyor.dev/secret-access": "true" } } : {}) },
        stringData: { password: `${name}-value` },
      });
    await secret("default", "unlabelled", false);
    await secret("default", "labelled", true);
    await secret("conveyor-system", "own", false);
    const restricted = new SecretReader(k, 60_000, { restricted: true, ownNamespace: "conveyor-system" });
    const ref = (name: string) => ({ name, key: "password" });
    const denied = await restricted.value("default", ref("unlabelled"), "Redis password", true);
    assert.equal(denied.problem?.reason, Reason.SecretNotPermitted);
    assert.match(denied.problem?.message ?? "", /Secret unlabelled .*conveyor\.dev\/secret-access=true/);
    assert.equal(denied.value, undefined);
    assert.equal((await restricted.value("default", ref("labelled"), "x", true)).value, "labelled-value");
    assert.equal((await restricted.value("conveyor-system", ref("own"), "x", true)).value, "own-value");
    assert.equal(
      (await restricted.value("default", ref("unlabelled"), "PostgreSQL URL")).value,
      "unlabelled-value",
      "a Secret the operator only checks (never sends) is exempt",
    );
    const open = new SecretReader(k, 60_000);
    assert.equal((await open.value("default", ref("unlabelled"), "x")).value, "unlabelled-value");
  });

  it("kubeconfig impersonation (as, as-uid, as-groups, as-user-extra): the API server sees the impersonated user", async () => {
    const config = parse(readFileSync(cp.kubeconfigPath, "utf8")) as {
      users: { user: Record<string, unknown> }[];
    };
    for (const u of config.users)
      Object.assign(u.user, {
        as: "alice",
        "as-uid": "uid-1234",
        "as-groups": ["devs", "ops"],
        "as-user-extra": { scopes: ["read", "write"] },
      });
    const file = `${cp.kubeconfigPath}.impersonating`;
    writeFileSync(file, stringify(config));
    const client = new KubeClient(await loadKubeConfig({ file, env: {} }));
    const review = await client.create<{ status: { userInfo: Record<string, unknown> } }>(
      "/apis/authentication.k8s.io/v1/selfsubjectreviews",
      { apiVersion: "authentication.k8s.io/v1", kind: "SelfSubjectReview" },
    );
    const { username, uid, groups, extra } = review.status.userInfo;
    assert.deepEqual([username, uid, extra], ["alice", "uid-1234", { scopes: ["read", "write"] }]);
    assert.deepEqual(
      (groups as string[]).filter((g) => g !== "system:authenticated"),
      ["devs", "ops"],
    );
  });
});

// The operator side of budgets (issue 32) on a real control plane and Redis: a WorkerPool's
// spec.resources reach the pipeline's Redis as key ids and limits (never the Secret's values),
// the worker pods get the declared keys of the Secret as read-only files, the pool is capped at
// the replicas its keys' request rate can feed while the backlog is 10,000 — with the reason in
// status, an Event, `kubectl get wp` and the metrics — and bad limits are a Degraded condition
// and a Warning Event. Direct scaling mode (no metrics API); jobs are claimed in-process.
import assert from "node:assert/strict";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { pollUntil } from "../support/poll.ts";
import { RESOURCES, resourcePath } from "../../operator/apis/coordinates.ts";
import type { WorkerPool, WorkerPoolSpecInput } from "../../operator/apis/v1alpha1/types.ts";
import type { Deployment } from "../../operator/controllers/objects.ts";
import { KubeClient } from "../../operator/kube/client.ts";
import { Consumer, Producer, connectRedis, listResources, type RedisClient } from "../../queue/index.ts";
import { ControlPlane } from "../support/controlplane.ts";
import {
  isLeader,
  scrapeOperator,
  startOperator,
  sumSeries,
  waitForPolls,
  workerPoolEvents,
  workerPoolManifest,
  type OperatorProcess,
} from "../support/operator.ts";
import { stopProcess } from "../support/processes.ts";
import { RedisServer } from "../support/redis.ts";

const ROOT = join(import.meta.dirname, "../..");
const LONG = 240_000;
const SECRET_VALUE = "sk-never-in-redis-";

describe("operator: resources", { timeout: 20 * 60_000 }, () => {
  let cp: ControlPlane;
  let k: KubeClient;
  let redis: RedisServer;
  let r: RedisClient;
  let op: OperatorProcess;

  const getPool = (name: string) =>
    k.get<WorkerPool>(resourcePath(RESOURCES.workerPools, { namespace: "default", name }));
  const deployment = (name: string) =>
    k.get<Deployment>(resourcePath(RESOURCES.deployments, { namespace: "default", name }));
  const eventsOf = (name: string) => workerPoolEvents(k, "default", name);

  async function apply(obj: unknown): Promise<void> {
    const res = await cp.run("kubectl", [`--kubeconfig=${cp.kubeconfigPath}`, "apply", "-f", "-"], {
      input: JSON.stringify(obj),
      check: false,
    });
    assert.equal(res.code, 0, `${res.stdout}${res.stderr}`);
  }

  before(async () => {
    cp = await ControlPlane.start({ controllers: false });
    k = new KubeClient(cp.kubeConfig());
    await cp.kubectl("apply", "--server-side", "-f", join(ROOT, "crds", "conveyor.dev_workerpools.yaml"));
    await cp.waitForCrd("workerpools.conveyor.dev");
    redis = await RedisServer.start();
    r = connectRedis(redis.url);
    op = await startOperator(cp, "res", ["--metrics-api=false"]);
    await pollUntil("the operator leads", () => isLeader(op), { timeoutMs: LONG });
  });
  after(async () => {
    if (op) await stopProcess(op.proc, 5000);
    r?.disconnect();
    await redis?.stop();
    await cp?.stop();
  });

  it("spec.resources: ids and limits in Redis (no secret), keys mounted, and with a backlog of 10,000 the pool stays at the replicas 3 keys × 60/m can feed, shown in status, an Event, kubectl get and the metrics", async () => {
    const name = "summarize";
    const queue = `${name}/work`;
    await cp.kubectl(
      "create",
      "secret",
      "generic",
      "openai-keys",
      ...["k1", "k2", "k3"].map((id) => `--from-literal=${id}=${SECRET_VALUE}${id}`),
    );
    const producer = new Producer(r);
    await producer.enqueueMany(
      queue,
      Array.from({ length: 10_000 }, (_, i) => ({ data: i })),
    );
    // Workers report a median job of 4 s: 3 keys × floor(0.9 × 60)/min = 2.7 requests/s × 4 s
    // / concurrency 2 = 5.4 → 6, + 1 = a cap of 7 (maxReplicas 20; the backlog alone wants 20).
    const report = async () => {
      for (const pod of ["pod-a", "pod-b"])
        await new Consumer(r, queue, { workerId: pod, leaseMs: 30_000 }).renew([], {
          id: pod,
          pod,
          slots: 2,
          busy: 2,
          draining: false,
          jobP50Ms: 4000,
          seen: Date.now(),
        });
    };
    await report();
    const spec: Partial<WorkerPoolSpecInput> = {
      concurrency: 2,
      resources: [
        {
          name: "openai",
          secretRef: { name: "openai-keys" },
          keys: ["k1", "k2", "k3"].map((id) => ({ id, limits: ["requests=60/m", "tokens=200000/m"] })),
        },
      ],
      scaling: { mode: "direct", maxReplicas: 20, targetBacklogPerReplica: 10, pollSeconds: 1 },
    };
    await apply(workerPoolManifest(name, redis.url, spec));

    const [res] = await pollUntil(
      "the resource in Redis",
      async () => {
        const list = await listResources(r, queue);
        return list.length === 1 && list[0]!.keys.length === 3 ? list : undefined;
      },
      { timeoutMs: LONG },
    );
    assert.equal(res!.pipeline, name);
    assert.equal(res!.ceiling, 0.9);
    assert.deepEqual(
      res!.keys.map((key) => [key.id, key.limits.map((l) => `${l.unit}=${l.max}/${l.windowMs}`).sort()]),
      ["k1", "k2", "k3"].map((id) => [id, ["requests=60/60000", "tokens=200000/60000"]]),
    );

    await pollUntil("at the cap", async () => (await deployment(name))?.spec?.replicas === 7, {
      timeoutMs: LONG,
    });
    for (let i = 0; i < 6; i++) {
      await report();
      await waitForPolls(op, "default", name, 1);
      assert.equal(
        (await deployment(name))?.spec?.replicas,
        7,
        "stays at the cap while the backlog is 10,000",
      );
    }
    const p = await getPool(name);
    assert.equal(p?.status?.control?.replicaCap, 7);
    assert.equal(p?.status?.control?.capBy, "resources");
    assert.match(
      p?.status?.control?.capReason ?? "",
      /resource openai \(3 key\(s\), 2\.7 requests\/s at ceiling 90%\) × job 4000ms \(workers. median\) \/ concurrency 2 → 7 replica\(s\)/,
    );
    assert.equal(p?.status?.control?.summary, "budget openai (cap 7)");
    const capped = (await eventsOf(name)).find((e) => e.reason === "BudgetLimited");
    assert.match(capped?.message ?? "", /replicas capped at 7: resource openai/);
    assert.match(await cp.kubectl("get", "wp", name, "--no-headers"), /budget openai \(cap 7\)/);

    // The worker pods: only the declared keys, as read-only files; the credentials never in env.
    const podSpec = (await deployment(name))!.spec!.template!.spec!;
    const volume = podSpec.volumes?.find((v) => v.name === "conveyor-resources");
    assert.deepEqual(volume?.projected?.sources, [
      {
        secret: {
          name: "openai-keys",
          items: ["k1", "k2", "k3"].map((id) => ({ key: id, path: `openai/${id}` })),
        },
      },
    ]);
    const worker = podSpec.containers.find((c) => c.name === "worker")!;
    assert.ok(
      worker.volumeMounts?.some(
        (m) => m.name === "conveyor-resources" && m.readOnly && m.mountPath === "/var/run/conveyor/resources",
      ),
    );
    assert.ok(!JSON.stringify(worker.env).includes("openai-keys"));

    // Jobs admitted on the keys show in the metrics: 6 jobs with uses, claimed.
    await producer.enqueueMany(
      queue,
      Array.from({ length: 6 }, (_, i) => ({ data: { llm: i }, uses: { openai: { tokens: 1000 } } })),
    );
    const claimer = new Consumer(r, queue, { workerId: "pod-c", leaseMs: 600_000 });
    let admitted = 0;
    await pollUntil(
      "6 jobs with uses admitted",
      async () => {
        const jobs = (await claimer.claim(50)).jobs;
        admitted += jobs.filter((j) => j.resources?.openai).length;
        return admitted >= 6;
      },
      { timeoutMs: LONG, intervalMs: 50 },
    );
    const series = /namespace="default",workerpool="summarize",pipeline="summarize",resource="openai"/;
    const metrics = await pollUntil(
      "the resource metrics",
      async () => {
        const m = await scrapeOperator(op);
        return sumSeries(m, "conveyor_resource_admitted_total", series) === 6 ? m : undefined;
      },
      { timeoutMs: LONG },
    );
    assert.equal(
      metrics.get(
        'conveyor_operator_pool_replica_cap{namespace="default",workerpool="summarize",cap="resources"}',
      ),
      7,
    );
    assert.equal(sumSeries(metrics, "conveyor_resource_ceiling", series), 0.9);
    // 6 of k1..k3's 60 requests, 6,000 of their 200,000 tokens: 0.1 and 0.03 of one key's limit.
    assert.ok(Math.abs(sumSeries(metrics, "conveyor_resource_utilization", /limit="requests"/) - 0.1) < 1e-9);
    assert.ok(Math.abs(sumSeries(metrics, "conveyor_resource_utilization", /limit="tokens"/) - 0.03) < 1e-9);
    assert.equal(sumSeries(metrics, "conveyor_resource_benched_seconds", series), 0);

    // Redis holds ids and counters only: no value of the Secret anywhere.
    for (const key of await r.keys("*")) {
      const type = await r.type(key);
      const text =
        type === "hash"
          ? JSON.stringify(await r.hgetall(key))
          : type === "string"
            ? ((await r.get(key)) ?? "")
            : type === "set"
              ? JSON.stringify(await r.smembers(key))
              : "";
      assert.ok(!text.includes(SECRET_VALUE), `${key} holds a credential`);
    }
  });

  it("bad limits: Degraded/InvalidSpec naming the field, and a Warning Event", async () => {
    const name = "badbudget";
    await apply(
      workerPoolManifest(name, redis.url, {
        resources: [{ name: "openai", keys: [{ id: "k1", limits: ["requests=60/m", "requests=1/s"] }] }],
        scaling: { mode: "direct", pollSeconds: 1 },
      }),
    );
    const degraded = await pollUntil(
      "Degraded=True InvalidSpec",
      async () =>
        (await getPool(name))?.status?.conditions?.find(
          (c) => c.type === "Degraded" && c.status === "True" && c.reason === "InvalidSpec",
        ),
      { timeoutMs: LONG },
    );
    assert.match(degraded.message, /spec\.resources\[0\]\.keys\[0\]\.limits: requests is limited twice/);
    await pollUntil(
      "a Warning InvalidSpec Event",
      async () => (await eventsOf(name)).some((e) => e.type === "Warning" && e.reason === "InvalidSpec"),
      { timeoutMs: LONG },
    );
    assert.deepEqual(await listResources(r, `${name}/work`), [], "nothing written from an invalid spec");
  });
});

// The operator against a real control plane (etcd, kube-apiserver, kube-controller-manager with
// the deployment/replicaset/GC/HPA controllers, kube-scheduler, kwok) and a real Redis. The
// operator runs as `conveyor operator` in a child process, its external metrics API reached by
// the API server's aggregation layer on a routable address. Waits are polls with generous
// deadlines (a loaded 2-core machine); nothing asserts on timing.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { ControlPlane } from "../support/controlplane.ts";
import { pollUntil } from "../support/poll.ts";
import { RedisServer } from "../support/redis.ts";
import { freePort } from "../support/ports.ts";
import { stopProcess } from "../support/processes.ts";
import {
  isLeader,
  operatorLog,
  scrapeOperator,
  startMetricsApiOperator,
  sumSeries,
  startOperator,
  workerPoolEvents,
  workerPoolManifest,
  waitForPolls,
  type OperatorProcess,
} from "../support/operator.ts";
import { drainQueue } from "../support/workers.ts";
import {
  Consumer,
  DOORBELL_CHANNEL,
  Producer,
  QueueAdmin,
  QueueKeys,
  connectRedis,
  type RedisClient,
} from "../../queue/index.ts";
import { RESOURCES, resourcePath } from "../../operator/apis/coordinates.ts";
import { KubeClient } from "../../operator/kube/client.ts";
import type { WorkerPool, WorkerPoolSpecInput } from "../../operator/apis/v1alpha1/types.ts";
import type { Deployment, HPA } from "../../operator/controllers/objects.ts";

const ROOT = join(import.meta.dirname, "../..");
const LONG = 240_000;

/** Writes (create/update/patch/delete) the operator made, except renewing its Lease. */
async function operatorWrites(op: OperatorProcess): Promise<number> {
  let n = 0;
  for (const [series, v] of await scrapeOperator(op)) {
    if (!series.startsWith("conveyor_operator_kube_api_requests_total{")) continue;
    if (!/verb="(create|update|patch|delete)"/.test(series) || /resource="leases"/.test(series)) continue;
    n += v;
  }
  return n;
}

describe("operator on a real control plane", { timeout: 40 * 60_000 }, () => {
  let cp: ControlPlane;
  let k: KubeClient;
  let redis: RedisServer;
  let r: RedisClient;
  let producer: Producer;
  let admin: QueueAdmin;
  let opA: OperatorProcess;
  let opB: OperatorProcess | undefined;

  const pools = (ns: string) => resourcePath(RESOURCES.workerPools, { namespace: ns });
  const getPool = (ns: string, name: string) =>
    k.get<WorkerPool>(resourcePath(RESOURCES.workerPools, { namespace: ns, name }));
  const getDeployment = (ns: string, name: string) =>
    k.get<Deployment>(resourcePath(RESOURCES.deployments, { namespace: ns, name }));
  const getHPA = (ns: string, name: string) =>
    k.get<HPA>(resourcePath(RESOURCES.horizontalPodAutoscalers, { namespace: ns, name }));
  const condition = (p: WorkerPool | null, type: string) =>
    p?.status?.conditions?.find((c) => c.type === type);

  const poolObject = (name: string, spec: Partial<WorkerPoolSpecInput>, ns = "default") =>
    workerPoolManifest(name, redis.url, spec, ns);

  /** kubectl apply; resolves the result (stderr carries the API server's validation messages). */
  async function apply(obj: unknown): Promise<{ code: number; out: string }> {
    const res = await cp.run("kubectl", [`--kubeconfig=${cp.kubeconfigPath}`, "apply", "-f", "-"], {
      input: JSON.stringify(obj),
      check: false,
    });
    return { code: res.code, out: `${res.stdout}${res.stderr}` };
  }

  async function applyOk(obj: unknown): Promise<void> {
    const res = await apply(obj);
    assert.equal(res.code, 0, res.out);
  }

  const events = (ns: string, name: string) => workerPoolEvents(k, ns, name);

  async function replicas(ns: string, name: string): Promise<number | undefined> {
    return (await getDeployment(ns, name))?.spec?.replicas;
  }

  before(async () => {
    cp = await ControlPlane.start({ controllers: true, scheduler: true, kwok: true, aggregation: true });
    k = new KubeClient(cp.kubeConfig());
    await cp.kubectl("apply", "--server-side", "-f", join(ROOT, "crds", "conveyor.dev_workerpools.yaml"));
    await cp.waitForCrd("workerpools.conveyor.dev");
    redis = await RedisServer.start();
    r = connectRedis(redis.url);
    producer = new Producer(r);
    admin = new QueueAdmin(r);
    opA = await startMetricsApiOperator(cp, "op-a", [
      // frequent resyncs of every pool from the cache: they must change nothing
      "--relist-seconds=20",
    ]);
    await pollUntil(
      "the external metrics APIService is Available",
      async () => {
        const out = await cp.kubectl(
          "get",
          "apiservice",
          "v1beta1.external.metrics.k8s.io",
          "-o",
          'jsonpath={.status.conditions[?(@.type=="Available")].status}',
        );
        return out.trim() === "True";
      },
      { timeoutMs: LONG },
    );
    await pollUntil("operator op-a leads", () => isLeader(opA), { timeoutMs: LONG });
  });

  after(async () => {
    r?.disconnect();
    for (const op of [opA, opB]) if (op) await stopProcess(op.proc, 10_000);
    await redis?.stop();
    await cp?.stop();
  });

  it("the schema and CEL rules reject invalid pools with readable messages", async () => {
    const cases: [string, Partial<WorkerPoolSpecInput>, RegExp][] = [
      [
        "bad-minmax",
        { scaling: { minReplicas: 5, maxReplicas: 2 } },
        /minReplicas must be <= scaling.maxReplicas/,
      ],
      [
        "bad-next",
        { queue: "docs/ocr", nextQueue: "other/embed" },
        /nextQueue must be a stage of the same pipeline/,
      ],
      [
        "bad-handler",
        { handler: { module: "/a.js", command: ["x"] } },
        /exactly one of module, http, command or python/,
      ],
      ["bad-nohandler", { handler: {} }, /exactly one of module, http, command or python/],
      ["bad-python", { handler: { python: { callable: "app/handlers.py" } } }, /callable.*should match/],
      [
        "bad-python-credentials",
        { handler: { module: "/a.js", passCredentials: true } },
        /passCredentials applies to a command or python handler only/,
      ],
      ["bad-password", { redis: { url: "redis://:hunter2@redis:6379" } }, /must not contain a password/],
      ["bad-queue", { queue: "a/b/c" }, /spec.queue.*should match/],
      ["bad-env", { template: { env: [{ name: "CONVEYOR_QUEUE", value: "x" }] } }, /may not set/],
      ["bad-mode", { scaling: { mode: "fast" as "hpa" } }, /Unsupported value: "fast"/],
      ["bad-concurrency", { concurrency: 0 }, /spec.concurrency.*should be greater than or equal to 1/],
    ];
    for (const [name, spec, message] of cases) {
      const res = await apply(poolObject(name, spec));
      assert.notEqual(res.code, 0, `${name} was accepted`);
      assert.match(res.out, message, name);
      assert.doesNotMatch(res.out, /hunter2/, "a rejected password is not echoed");
    }
  });

  it("applies a pool: Deployment and HPA with owner references and the spec's fields; converges on change; GC on delete", async () => {
    await cp.kubectl("create", "secret", "generic", "redis-auth", "--from-literal=password=unused");
    await applyOk(
      poolObject("alpha", {
        queue: "docs/ocr",
        nextQueue: "docs/embed",
        redis: { url: redis.url, secretRef: { name: "redis-auth" } },
        concurrency: 3,
        maxJobSeconds: 90,
        template: {
          nodeSelector: { disk: "ssd" },
          env: [{ name: "MODEL", value: "v1" }],
          resources: { requests: { cpu: "0.5" } },
        },
        scaling: { maxReplicas: 6, targetBacklogPerReplica: 20, pollSeconds: 1 },
      }),
    );
    const pool = await pollUntil(
      "alpha exists",
      async () => (await getPool("default", "alpha")) ?? undefined,
    );
    const dep = await pollUntil(
      "alpha's Deployment",
      async () => (await getDeployment("default", "alpha")) ?? undefined,
      { timeoutMs: LONG },
    );
    const hpa = await pollUntil("alpha's HPA", async () => (await getHPA("default", "alpha")) ?? undefined, {
      timeoutMs: LONG,
    });
    for (const o of [dep, hpa]) {
      assert.deepEqual(o.metadata.ownerReferences, [
        {
          apiVersion: "conveyor.dev/v1alpha1",
          kind: "WorkerPool",
          name: "alpha",
          uid: pool.metadata.uid,
          controller: true,
          blockOwnerDeletion: true,
        },
      ]);
    }
    const c = dep.spec!.template!.spec!.containers[0]!;
    const env = Object.fromEntries(c.env!.map((e) => [e.name, e.value ?? JSON.stringify(e.valueFrom)]));
    assert.equal(c.image, "conveyor-worker:test");
    assert.deepEqual(c.args, ["worker"]);
    assert.equal(env.CONVEYOR_QUEUE, "docs/ocr");
    assert.equal(env.CONVEYOR_NEXT_QUEUE, "docs/embed");
    assert.equal(env.CONVEYOR_CONCURRENCY, "3");
    assert.equal(env.CONVEYOR_JOB_TIMEOUT_SECONDS, "90");
    assert.equal(env.MODEL, "v1");
    assert.match(env.REDIS_PASSWORD!, /redis-auth/);
    assert.equal(dep.spec!.template!.spec!.terminationGracePeriodSeconds, 100);
    assert.deepEqual(dep.spec!.template!.spec!.nodeSelector, { disk: "ssd" });
    assert.equal(dep.spec!.replicas, 0, "created at zero: no backlog");
    assert.equal(hpa.spec!.minReplicas, 1);
    assert.equal(hpa.spec!.maxReplicas, 6);
    await pollUntil(
      "alpha Ready (scaled to zero)",
      async () => {
        const p = await getPool("default", "alpha");
        return (
          condition(p, "Ready")?.status === "True" &&
          condition(p, "Ready")?.reason === "ScaledToZero" &&
          p?.status?.observedGeneration === p?.metadata.generation
        );
      },
      { timeoutMs: LONG },
    );
    const table = await cp.kubectl("get", "wp", "alpha");
    assert.match(table, /QUEUE\s+BACKLOG\s+IN-FLIGHT\s+REPLICAS\s+READY\s+CONTROL\s+ROLLOUT\s+AGE/);
    assert.match(table, /alpha\s+docs\/ocr\s+0\s+0\s+0\/0\s+True/);

    // change: image, concurrency, max; drop the nodeSelector (server-side apply removes it)
    await applyOk(
      poolObject("alpha", {
        queue: "docs/ocr",
        nextQueue: "docs/embed",
        redis: { url: redis.url, secretRef: { name: "redis-auth" } },
        concurrency: 8,
        maxJobSeconds: 90,
        template: {
          image: "my/worker:2",
          env: [{ name: "MODEL", value: "v2" }],
          resources: { requests: { cpu: "0.5" } },
        },
        scaling: { maxReplicas: 4, targetBacklogPerReplica: 20, pollSeconds: 1 },
      }),
    );
    await pollUntil(
      "alpha's Deployment converged",
      async () => {
        const d = await getDeployment("default", "alpha");
        const ctr = d?.spec?.template?.spec?.containers[0];
        return (
          ctr?.image === "my/worker:2" &&
          ctr.env?.find((e) => e.name === "CONVEYOR_CONCURRENCY")?.value === "8" &&
          ctr.env?.find((e) => e.name === "MODEL")?.value === "v2" &&
          d?.spec?.template?.spec?.nodeSelector === undefined
        );
      },
      { timeoutMs: LONG },
    );
    await pollUntil(
      "alpha's HPA converged",
      async () => (await getHPA("default", "alpha"))?.spec?.maxReplicas === 4,
      { timeoutMs: LONG },
    );

    // someone edits a field the operator owns: it is put back
    await cp.kubectl("set", "image", "deployment/alpha", "worker=tampered:1");
    await pollUntil(
      "drift repaired",
      async () =>
        (await getDeployment("default", "alpha"))?.spec?.template?.spec?.containers[0]?.image ===
        "my/worker:2",
      { timeoutMs: LONG },
    );

    await cp.kubectl("delete", "wp", "alpha", "--wait=true");
    await pollUntil(
      "alpha's Deployment and HPA garbage-collected",
      async () => !(await getDeployment("default", "alpha")) && !(await getHPA("default", "alpha")),
      { timeoutMs: LONG },
    );
  });

  it("a missing Secret, an unreachable Redis and a template the API server rejects make a pool Degraded with an Event; a healthy pool beside them still scales", async () => {
    const closedPort = await freePort();
    await applyOk(
      poolObject("nosecret", {
        redis: { url: redis.url, secretRef: { name: "absent" } },
        scaling: { pollSeconds: 1 },
      }),
    );
    await applyOk(
      poolObject("unreachable", {
        redis: { url: `redis://127.0.0.1:${closedPort}` },
        scaling: { pollSeconds: 1 },
      }),
    );
    await applyOk(poolObject("healthy", { scaling: { pollSeconds: 1, cooldownSeconds: 3600 } }));
    // passes the schema (the pod template is passed through) but not the API server's Deployment validation
    await applyOk(
      poolObject("badtemplate", {
        template: { resources: { requests: { cpu: "lots" } } },
        scaling: { pollSeconds: 1 },
      }),
    );

    const degraded = async (name: string, reason: string) =>
      pollUntil(
        `${name} Degraded/${reason}`,
        async () => {
          const p = await getPool("default", name);
          const d = condition(p, "Degraded");
          return d?.status === "True" && d.reason === reason && condition(p, "Ready")?.status === "False"
            ? d
            : undefined;
        },
        { timeoutMs: LONG },
      );
    const noSecret = await degraded("nosecret", "SecretNotFound");
    assert.match(noSecret.message, /Secret absent .* not found/);
    const down = await degraded("unreachable", "RedisUnreachable");
    assert.match(down.message, new RegExp(`127\\.0\\.0\\.1:${closedPort}`));
    const bad = await degraded("badtemplate", "ApplyFailed");
    assert.match(bad.message, /Deployment: .*quantities must match/);
    assert.equal(await getDeployment("default", "badtemplate"), null);
    await pollUntil(
      "Warning events",
      async () => {
        const a = await events("default", "nosecret");
        const b = await events("default", "unreachable");
        return (
          a.some((e) => e.type === "Warning" && e.reason === "SecretNotFound") &&
          b.some((e) => e.type === "Warning" && e.reason === "RedisUnreachable")
        );
      },
      { timeoutMs: LONG },
    );

    // the healthy pool is unaffected
    await producer.enqueueMany("healthy/work", [{ data: 1 }, { data: 2 }]);
    await pollUntil("healthy activated 0 → 1", async () => (await replicas("default", "healthy")) === 1, {
      timeoutMs: LONG,
    });
    const hp = await pollUntil(
      "healthy status shows the backlog",
      async () => {
        const p = await getPool("default", "healthy");
        return p?.status?.backlog === 2 ? p : undefined;
      },
      { timeoutMs: LONG },
    );
    assert.equal(hp.status?.lastDecision?.reason, "Activated");
    assert.equal(condition(hp, "Degraded")?.status, "False");

    // the Secret appears: the pool recovers
    await cp.kubectl("create", "secret", "generic", "absent", "--from-literal=password=");
    await pollUntil(
      "nosecret recovers",
      async () => condition(await getPool("default", "nosecret"), "Degraded")?.status === "False",
      { timeoutMs: LONG },
    );
    await pollUntil(
      "a Recovered event",
      async () => (await events("default", "nosecret")).some((e) => e.reason === "Recovered"),
      { timeoutMs: LONG },
    );

    await cp.kubectl("delete", "wp", "nosecret", "unreachable", "healthy", "badtemplate", "--wait=true");
    await drainQueue(r, "healthy/work");
  });

  it("hpa mode: backlog 0 → 500 activates 0 → 1, the HPA scales up on the external metric, drained → 0 after the cooldown", async () => {
    await applyOk(
      poolObject("burst", {
        scaling: {
          maxReplicas: 10,
          targetBacklogPerReplica: 50,
          pollSeconds: 1,
          cooldownSeconds: 5,
          behavior: {
            scaleUp: {
              stabilizationWindowSeconds: 0,
              policies: [{ type: "Percent", value: 1000, periodSeconds: 5 }],
            },
          },
        },
      }),
    );
    await pollUntil(
      "burst HPA exists and the pool is at zero",
      async () => (await getHPA("default", "burst")) && (await replicas("default", "burst")) === 0,
      { timeoutMs: LONG },
    );
    const t0 = Date.now();
    await producer.enqueueMany(
      "burst/work",
      Array.from({ length: 500 }, (_, i) => ({ data: { i } })),
    );
    await pollUntil(
      "activation event 0 → 1",
      async () => (await events("default", "burst")).some((e) => /0 → 1: Activated/.test(e.message)),
      { timeoutMs: LONG },
    );
    // the metric through the aggregation layer, as the HPA controller reads it
    const m = await cp.request(
      "GET",
      "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/conveyor-backlog?labelSelector=workerpool%3Dburst",
    );
    assert.equal(m.status, 200, m.body);
    assert.equal(JSON.parse(m.body).items[0].value, "500");
    await pollUntil("the HPA scales burst to 10", async () => (await replicas("default", "burst")) === 10, {
      timeoutMs: LONG,
    });
    const tUp = Date.now();
    // (the HPA controller writes the scale first and its own status after)
    await pollUntil(
      "the HPA's status desiring 10",
      async () => (await getHPA("default", "burst"))?.status?.desiredReplicas === 10,
      { timeoutMs: LONG, onTimeout: async () => JSON.stringify((await getHPA("default", "burst"))?.status) },
    );
    process.stderr.write(
      `hpa mode: 0 → 10 replicas in ${((tUp - t0) / 1000).toFixed(1)}s after enqueueing 500 jobs\n`,
    );
    // The HPA's scale-up is a decision too, beside the operator's activation: the Pools page's
    // "Why it scaled" lists every change the pool went through.
    const recorded = await pollUntil("the HPA's scale-up recorded as a decision", async () => {
      const recent = (await getPool("default", "burst"))?.status?.recentDecisions ?? [];
      return recent.some((d) => d.reason === "HPAScaleUp" && d.replicas === 10) ? recent : undefined;
    });
    assert.equal(recorded[0]!.reason, "Activated");
    let from = 0;
    for (const d of recorded) {
      assert.equal(d.from, from, `each change starts where the last ended: ${JSON.stringify(recorded)}`);
      from = d.replicas!;
    }
    for (const d of recorded.filter((d) => d.reason === "HPAScaleUp"))
      assert.match(d.message ?? "", /^HPA: backlog\/replica above target: [\d.]+ > 50 → \d+ replica\(s\)/);

    await drainQueue(r, "burst/work");
    const tDrained = Date.now();
    await pollUntil(
      "burst back to 0 after the cooldown",
      async () => (await replicas("default", "burst")) === 0,
      { timeoutMs: LONG },
    );
    process.stderr.write(
      `hpa mode: 10 → 0 replicas ${((Date.now() - tDrained) / 1000).toFixed(1)}s after the backlog drained (cooldown 5s)\n`,
    );
    const p = await pollUntil("decision recorded", async () => {
      const pool = await getPool("default", "burst");
      return pool?.status?.lastDecision?.reason === "CooledDown" ? pool : undefined;
    });
    assert.equal(p.status?.lastDecision?.replicas, 0);
    assert.ok(p.status?.lastScaleTime);
    assert.ok(
      (await events("default", "burst")).some(
        (e) => e.reason === "ScaledDown" && /CooledDown/.test(e.message),
      ),
    );
    const decisions = await scrapeOperator(opA);
    assert.ok(
      [...decisions.keys()].some(
        (s) =>
          s.startsWith("conveyor_operator_scale_decisions_total{") &&
          s.includes('workerpool="burst"') &&
          s.includes('reason="CooledDown"'),
      ),
    );
    await cp.kubectl("delete", "wp", "burst", "--wait=true");
  });

  it("direct mode: the same replica counts without an HPA", async () => {
    await applyOk(
      poolObject("direct", {
        scaling: {
          mode: "direct",
          maxReplicas: 10,
          targetBacklogPerReplica: 50,
          pollSeconds: 1,
          cooldownSeconds: 5,
        },
      }),
    );
    await pollUntil("direct pool at zero", async () => (await replicas("default", "direct")) === 0, {
      timeoutMs: LONG,
    });
    assert.equal(await getHPA("default", "direct"), null, "no HPA in direct mode");
    const t0 = Date.now();
    await producer.enqueueMany(
      "direct/work",
      Array.from({ length: 500 }, (_, i) => ({ data: { i } })),
    );
    await pollUntil("direct scales to 10", async () => (await replicas("default", "direct")) === 10, {
      timeoutMs: LONG,
    });
    process.stderr.write(
      `direct mode: 0 → 10 replicas in ${((Date.now() - t0) / 1000).toFixed(1)}s (default HPA scale-up policies)\n`,
    );
    const ev = await events("default", "direct");
    assert.ok(ev.some((e) => /0 → 1: Activated/.test(e.message)));
    assert.ok(ev.some((e) => /DirectScaleUp/.test(e.message)));
    await drainQueue(r, "direct/work");
    await pollUntil("direct back to 0", async () => (await replicas("default", "direct")) === 0, {
      timeoutMs: LONG,
    });

    // switching to hpa mode creates the HPA, back to direct deletes it
    await applyOk(poolObject("direct", { scaling: { mode: "hpa", pollSeconds: 1 } }));
    await pollUntil("HPA created on mode change", () => getHPA("default", "direct"), { timeoutMs: LONG });
    await applyOk(poolObject("direct", { scaling: { mode: "direct", pollSeconds: 1 } }));
    await pollUntil("HPA deleted on mode change", async () => (await getHPA("default", "direct")) === null, {
      timeoutMs: LONG,
    });
    await cp.kubectl("delete", "wp", "direct", "--wait=true");
  });

  it("a pool woken by its doorbell over and over starts with no bell left", async () => {
    // The ring races the reconciles that follow the pool's creation (they end with the pool
    // still asleep): each start is one more draw, at the pace of a fast machine.
    const bad: string[] = [];
    for (let i = 0; i < 20; i++) {
      const name = `bell${i}`;
      const bell = new QueueKeys(`${name}/work`).doorbell;
      await applyOk(
        poolObject(name, {
          scaling: { mode: "direct", maxReplicas: 2, pollSeconds: 3600, cooldownSeconds: 1 },
        }),
      );
      await pollUntil(
        `${name} asleep with its bell`,
        async () => (await r.get(bell)) === DOORBELL_CHANNEL && (await replicas("default", name)) === 0,
        { timeoutMs: LONG, intervalMs: 5 },
      );
      await producer.enqueue(`${name}/work`, { i });
      await pollUntil(`${name} started`, async () => (await replicas("default", name)) === 1, {
        timeoutMs: LONG,
        intervalMs: 5,
      });
      if ((await r.exists(bell)) !== 0) bad.push(name);
      await drainQueue(r, `${name}/work`);
      await cp.kubectl("delete", "wp", name, "--wait=false");
    }
    assert.deepEqual(bad, [], "pools that started with their bell left in Redis");
    await pollUntil(
      "the pools gone",
      async () =>
        (await k.list<WorkerPool>(pools("default"))).items.every((p) => !/^bell\d+$/.test(p.metadata.name)),
      { timeoutMs: LONG },
    );
  });

  it("a pool asleep at zero starts on its doorbell: the first job or a resume scales it at once, not at the next poll", async () => {
    // pollSeconds 3600: within this test only the doorbell can show the operator a job.
    const sleepy = (pollSeconds: number) =>
      poolObject("sleepy", {
        scaling: { mode: "direct", maxReplicas: 2, pollSeconds, cooldownSeconds: 1 },
      });
    const bell = new QueueKeys("sleepy/work").doorbell;
    const rings = async () =>
      sumSeries(await scrapeOperator(opA), "conveyor_operator_doorbell_rings_total", /workerpool="sleepy"/);
    await applyOk(sleepy(3600));
    await pollUntil(
      "sleepy at zero with its doorbell left",
      async () => {
        return (await replicas("default", "sleepy")) === 0 && (await r.get(bell)) === DOORBELL_CHANNEL;
      },
      { timeoutMs: LONG },
    );
    await producer.enqueue("sleepy/work", { i: 1 });
    await pollUntil(
      "the first job starts a worker",
      async () => (await replicas("default", "sleepy")) === 1,
      {
        timeoutMs: LONG,
      },
    );
    assert.equal(await rings(), 1, "one ring");
    assert.equal(await r.exists(bell), 0, "the ring took the bell");

    // A pool whose queue is paused with jobs waiting is held at zero with no bell (each enqueue
    // would ring for nothing); the resume rings.
    const heldBell = new QueueKeys("held/work").doorbell;
    await admin.pause("held/work");
    await producer.enqueue("held/work", { i: 1 });
    await applyOk(
      poolObject("held", {
        scaling: { mode: "direct", maxReplicas: 2, pollSeconds: 3600, cooldownSeconds: 1 },
      }),
    );
    await pollUntil(
      "held seen paused with its job, and the operator listening",
      async () => {
        const st = (await getPool("default", "held"))?.status;
        const [, listeners] = (await r.pubsub("NUMSUB", DOORBELL_CHANNEL)) as [string, number];
        return st?.control?.paused === true && st.backlog === 1 && listeners > 0;
      },
      { timeoutMs: LONG },
    );
    await producer.enqueue("held/work", { i: 2 });
    assert.equal(await replicas("default", "held"), 0, "a paused queue holds the pool at zero");
    assert.equal(await r.exists(heldBell), 0, "no bell while jobs wait");
    await admin.resume("held/work");
    await pollUntil("the resume starts a worker", async () => (await replicas("default", "held")) === 1, {
      timeoutMs: LONG,
    });
    await drainQueue(r, "sleepy/work");
    await drainQueue(r, "held/work");
    await cp.kubectl("delete", "wp", "held", "--wait=true");
    await cp.kubectl("delete", "wp", "sleepy", "--wait=true");
  });

  it("kubectl scale pins a pool through the scale subresource; paused freezes it; unpinned it autoscales again", async () => {
    await applyOk(poolObject("pinned", { scaling: { pollSeconds: 1, cooldownSeconds: 3600 } }));
    await pollUntil("pinned has its HPA", () => getHPA("default", "pinned"), { timeoutMs: LONG });
    await cp.kubectl("scale", "wp/pinned", "--replicas=3");
    await pollUntil(
      "pinned at 3, no HPA",
      async () => (await replicas("default", "pinned")) === 3 && (await getHPA("default", "pinned")) === null,
      { timeoutMs: LONG },
    );
    const p = await pollUntil(
      "ManualReplicas in status",
      async () => {
        const pool = await getPool("default", "pinned");
        return condition(pool, "ScalingActive")?.reason === "ManualReplicas" && pool?.status?.replicas === 3
          ? pool
          : undefined;
      },
      { timeoutMs: LONG },
    );
    assert.equal(p.status?.lastDecision?.reason, "ManualReplicas");
    const scale = JSON.parse(
      await cp.kubectl(
        "get",
        "--raw",
        "/apis/conveyor.dev/v1alpha1/namespaces/default/workerpools/pinned/scale",
      ),
    ) as { spec: { replicas: number }; status: { replicas: number; selector: string } };
    assert.equal(scale.spec.replicas, 3);
    assert.equal(scale.status.replicas, 3);
    assert.equal(scale.status.selector, "conveyor.dev/workerpool=pinned");

    // unpinned and paused: the count stays where it is, no HPA, no decisions
    await cp.kubectl(
      "patch",
      "wp",
      "pinned",
      "--type=merge",
      "-p",
      '{"spec":{"replicas":null,"scaling":{"paused":true}}}',
    );
    await pollUntil(
      "Paused",
      async () => condition(await getPool("default", "pinned"), "ScalingActive")?.reason === "Paused",
      { timeoutMs: LONG },
    );
    assert.equal(await replicas("default", "pinned"), 3);
    assert.equal(await getHPA("default", "pinned"), null);
    // resumed: the HPA is back and takes the pool to its minimum (no backlog)
    await cp.kubectl("patch", "wp", "pinned", "--type=merge", "-p", '{"spec":{"scaling":{"paused":false}}}');
    await pollUntil("the HPA again", () => getHPA("default", "pinned"), { timeoutMs: LONG });
    await cp.kubectl("delete", "wp", "pinned", "--wait=true");
  });

  it("scale-in deletes the idle pod: pod-deletion-cost from the workers' busy/idle reports", async () => {
    await applyOk(
      poolObject("costs", {
        scaling: {
          mode: "direct",
          maxReplicas: 3,
          targetBacklogPerReplica: 10,
          pollSeconds: 1,
          behavior: { scaleDown: { stabilizationWindowSeconds: 0 } },
        },
      }),
    );
    await producer.enqueueMany(
      "costs/work",
      Array.from({ length: 30 }, (_, i) => ({ data: { i } })),
    );
    const core = resourcePath(RESOURCES.pods, { namespace: "default" });
    const pods = await pollUntil(
      "3 running pods",
      async () => {
        const list = await k.list<{
          metadata: { name: string; annotations?: Record<string, string> };
          status?: { phase?: string };
        }>(core, { labelSelector: "conveyor.dev/workerpool=costs" });
        const running = list.items.filter((p) => p.status?.phase === "Running");
        return (await replicas("default", "costs")) === 3 && running.length === 3 ? running : undefined;
      },
      { timeoutMs: LONG },
    );
    const [busy1, busy2, idle] = pods.map((p) => p.metadata.name) as [string, string, string];
    // The workers' heartbeat reports (as the generic worker writes them), kept fresh.
    const report = async () => {
      for (const [pod, busy] of [
        [busy1, 2],
        [busy2, 1],
        [idle, 0],
      ] as const) {
        await new Consumer(r, "costs/work", { workerId: pod, leaseMs: 30_000 }).renew([], {
          id: pod,
          pod,
          slots: 4,
          busy,
          draining: false,
          seen: Date.now(),
        });
      }
    };
    await report();
    const timer = setInterval(() => void report().catch(() => {}), 5000);
    try {
      // 30 → 20 jobs: the HPA algorithm wants 2
      const c = new Consumer(r, "costs/work", { workerId: "test", leaseMs: 60_000, retentionSeconds: 0 });
      const { jobs } = await c.claim(10);
      for (const j of jobs) await c.complete(j, null);
      await pollUntil(
        "scaled in to 2",
        async () => {
          const list = await k.list<{ metadata: { name: string; deletionTimestamp?: string } }>(core, {
            labelSelector: "conveyor.dev/workerpool=costs",
          });
          const live = list.items.filter((p) => !p.metadata.deletionTimestamp).map((p) => p.metadata.name);
          return (await replicas("default", "costs")) === 2 && live.length === 2 ? live : undefined;
        },
        { timeoutMs: LONG },
      ).then((live) => {
        assert.deepEqual(live.sort(), [busy1, busy2].sort(), "the idle pod was the one deleted");
      });
      const after = await k.list<{ metadata: { name: string; annotations?: Record<string, string> } }>(core, {
        labelSelector: "conveyor.dev/workerpool=costs",
      });
      for (const p of after.items.filter((x) => x.metadata.name !== idle)) {
        assert.equal(
          p.metadata.annotations?.["controller.kubernetes.io/pod-deletion-cost"],
          "100",
          `${p.metadata.name} is busy`,
        );
      }
    } finally {
      clearInterval(timer);
    }
    await drainQueue(r, "costs/work");
    await cp.kubectl("delete", "wp", "costs", "--wait=true");
  });

  it("an idle operator over 50 pools makes zero writes in a minute", async () => {
    await cp.kubectl("create", "namespace", "idle");
    for (let i = 0; i < 50; i++) {
      await applyOk(
        poolObject(`p${i}`, { scaling: { pollSeconds: 2, mode: i % 2 ? "direct" : "hpa" } }, "idle"),
      );
    }
    await pollUntil(
      "50 pools settled (Ready, scaled to zero, status current)",
      async () => {
        const list = await k.list<WorkerPool>(pools("idle"));
        return (
          list.items.length === 50 &&
          list.items.every(
            (p) =>
              condition(p, "Ready")?.reason === "ScaledToZero" &&
              p.status?.observedGeneration === p.metadata.generation &&
              p.status?.backlog === 0,
          )
        );
      },
      { timeoutMs: 10 * 60_000, intervalMs: 2000 },
    );
    // quiet: no write for 10 s
    let last = await operatorWrites(opA);
    await pollUntil(
      "no more writes",
      async () => {
        await sleep(10_000);
        const now = await operatorWrites(opA);
        const quiet = now === last;
        last = now;
        return quiet;
      },
      { timeoutMs: 5 * 60_000 },
    );
    const auditBefore = (
      await cp.auditEvents(
        (e) => (e.userAgent ?? "").startsWith("conveyor-operator/") && e.objectRef?.resource !== "leases",
      )
    ).length;
    const before = await operatorWrites(opA);
    const reconcilesBefore =
      (await scrapeOperator(opA)).get('conveyor_operator_reconciles_total{result="success"}') ?? 0;
    await sleep(60_000);
    const after = await operatorWrites(opA);
    const auditAfter = (
      await cp.auditEvents(
        (e) => (e.userAgent ?? "").startsWith("conveyor-operator/") && e.objectRef?.resource !== "leases",
      )
    ).length;
    const reconcilesAfter =
      (await scrapeOperator(opA)).get('conveyor_operator_reconciles_total{result="success"}') ?? 0;
    const m = await scrapeOperator(opA);
    const lists = [...m]
      .filter(([k]) => k.startsWith('conveyor_operator_kube_api_requests_total{verb="list"'))
      .reduce((n, [, v]) => n + v, 0);
    process.stderr.write(
      `idle: ${reconcilesAfter - reconcilesBefore} reconciles of 50 pools in 60s, ${after - before} writes (metric), ${auditAfter - auditBefore} writes (audit log); ${lists} list calls so far (resync every 20s)\n`,
    );
    assert.ok(reconcilesAfter - reconcilesBefore >= 50, "the pools were reconciled (polls drive reconciles)");
    assert.equal(after - before, 0, "writes counted by the operator");
    assert.equal(auditAfter - auditBefore, 0, "writes in the API server's audit log");
    await cp.kubectl("delete", "namespace", "idle", "--wait=false");
  });

  it("two replicas: only the leader writes; killing it, the standby takes over within the lease time", async () => {
    const startedAt = Date.now();
    const steps: string[] = [];
    const step = (what: string) => steps.push(`${((Date.now() - startedAt) / 1000).toFixed(1)}s ${what}`);
    let opC: OperatorProcess | undefined;
    try {
      await failoverAndHandover();
      process.stderr.write(`two replicas: ${steps.join("; ")}\n`);
    } catch (err) {
      // Said here, at once: the runner's summary of failures comes last and a cut-off CI log loses it.
      const tails = [opA, opB, opC]
        .filter((op) => op !== undefined)
        .map((op) => `--- ${op.name} (last lines):\n${operatorLog(op).split("\n").slice(-15).join("\n")}`);
      process.stderr.write(
        `two replicas: failed ${((Date.now() - startedAt) / 1000).toFixed(1)}s in (steps done: ${steps.join("; ")}): ${(err as Error).message}\n${tails.join("\n")}\n`,
      );
      throw err;
    }

    async function failoverAndHandover(): Promise<void> {
      opB = await startOperator(cp, "op-b", ["--metrics-api=false"]);
      assert.equal(await isLeader(opB), false);
      const bBefore = await operatorWrites(opB);
      step("op-b started");
      await applyOk(poolObject("ha", { scaling: { pollSeconds: 1, maxReplicas: 3 } }));
      await pollUntil("ha reconciled by the leader", () => getHPA("default", "ha"), { timeoutMs: LONG });
      await applyOk(poolObject("ha", { scaling: { pollSeconds: 1, maxReplicas: 4 } }));
      await pollUntil(
        "ha converged by the leader",
        async () => (await getHPA("default", "ha"))?.spec?.maxReplicas === 4,
        { timeoutMs: LONG },
      );
      // The standby polled the pool twice since and has nothing queued: it saw the change.
      await waitForPolls(opB, "default", "ha", 2);
      step("op-b polled ha twice");
      assert.equal(await operatorWrites(opB), bBefore, "the standby wrote nothing");
      const bAudit = await cp.auditEvents(
        (e) => e.userAgent === "conveyor-operator/op-b" && e.objectRef?.resource !== "leases",
      );
      assert.deepEqual(
        bAudit.map((e) => `${e.verb} ${e.objectRef?.resource}`),
        [],
        "no write by the standby in the audit log",
      );

      // the leader dies without releasing the lease
      process.kill(-opA.proc.child.pid!, "SIGKILL");
      await opA.proc.exited;
      const killedAt = Date.now();
      step("op-a killed");
      await pollUntil("op-b leads", () => isLeader(opB!), { timeoutMs: LONG, intervalMs: 200 });
      const takeover = (Date.now() - killedAt) / 1000;
      process.stderr.write(
        `leader failover: op-b leads ${takeover.toFixed(1)}s after op-a was killed (lease 15s)\n`,
      );
      step("op-b leads");
      assert.ok(takeover < 60, `took over in ${takeover}s`);
      await applyOk(poolObject("ha", { scaling: { pollSeconds: 1, maxReplicas: 5 } }));
      await pollUntil(
        "ha converged by the new leader",
        async () => (await getHPA("default", "ha"))?.spec?.maxReplicas === 5,
        { timeoutMs: LONG },
      );
      step("ha converged by op-b");
      // The HPA shows the write once the API server committed it; op-b counts it once it read the
      // reply, a moment later on a loaded machine: wait for the count.
      let bAfter = bBefore;
      await pollUntil("op-b counts its writes", async () => (bAfter = await operatorWrites(opB!)) > bBefore, {
        timeoutMs: LONG,
        onTimeout: () => `op-b's write count: ${bBefore} before the failover, ${bAfter} now`,
      });
      const lease = JSON.parse(await cp.kubectl("get", "lease", "conveyor-operator", "-o", "json")) as {
        spec: { holderIdentity: string };
      };
      assert.equal(lease.spec.holderIdentity, "op-b", `the Lease names op-b: ${JSON.stringify(lease.spec)}`);

      // a graceful stop (SIGTERM) releases the Lease: the next standby does not wait for it to expire
      const c = await startOperator(cp, "op-c", ["--metrics-api=false"]);
      opC = c;
      step("op-c started");
      try {
        process.kill(-opB.proc.child.pid!, "SIGTERM");
        const stoppedAt = Date.now();
        const exit = await opB.proc.exited;
        step(`op-b exited ${exit}`);
        assert.equal(
          exit,
          0,
          `SIGTERM: op-b exits 0, not ${exit}; its log ends:\n${operatorLog(opB).slice(-3000)}`,
        );
        await pollUntil("op-c leads", () => isLeader(c), { timeoutMs: LONG, intervalMs: 200 });
        process.stderr.write(
          `graceful handover: op-c leads ${((Date.now() - stoppedAt) / 1000).toFixed(1)}s after SIGTERM to op-b\n`,
        );
        await applyOk(poolObject("ha", { scaling: { pollSeconds: 1, maxReplicas: 6 } }));
        await pollUntil(
          "ha converged by op-c",
          async () => (await getHPA("default", "ha"))?.spec?.maxReplicas === 6,
          { timeoutMs: LONG },
        );
      } finally {
        await stopProcess(c.proc, 10_000);
      }
    }
  });
});

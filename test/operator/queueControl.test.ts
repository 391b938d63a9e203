// The operator side of queue control (issue 13) on a real control plane and Redis: spec.paused
// and spec.rateLimit reach Redis and win over the CLI, a paused pool scales to its running jobs
// and then to zero without a redelivery, and a rate-limited pool stays at the replicas its rate
// can feed while the backlog is 10,000. Pools are in direct mode (the operator writes the scale;
// no metrics API needed); job execution is played by in-process consumers. Waits are polls.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { pollUntil } from "../support/poll.ts";
import type { WorkerPoolSpecInput } from "../../operator/apis/v1alpha1/types.ts";
import type { KubeClient } from "../../operator/kube/client.ts";
import { Consumer, Producer, QueueAdmin, type RedisClient } from "../../queue/index.ts";
import type { ControlPlane } from "../support/controlplane.ts";
import {
  startPoolHarness,
  waitForPolls,
  workerPoolEvents,
  workerPoolManifest,
  type OperatorProcess,
  type PoolHarness,
} from "../support/operator.ts";
import type { RedisServer } from "../support/redis.ts";

const LONG = 240_000;

describe("operator: queue control", { timeout: 20 * 60_000 }, () => {
  let h: PoolHarness;
  let cp: ControlPlane;
  let k: KubeClient;
  let redis: RedisServer;
  let r: RedisClient;
  let producer: Producer;
  let admin: QueueAdmin;
  let op: OperatorProcess;

  const getPool = (name: string) => h.getPool(name);
  const replicas = (name: string) => h.replicas(name);
  const apply = (obj: unknown) => h.apply(obj);
  const eventReasons = async (name: string) =>
    (await workerPoolEvents(k, "default", name)).map((e) => e.reason);

  const poolObject = (name: string, spec: Partial<WorkerPoolSpecInput>) =>
    workerPoolManifest(name, redis.url, spec);

  before(async () => {
    h = await startPoolHarness("qc");
    ({ cp, k, redis, r, op } = h);
    producer = new Producer(r);
    admin = new QueueAdmin(r);
  });
  after(() => h?.stop());

  it("spec.paused: Redis follows (and wins over `conveyor resume`); the pool goes N → ceil(inflight/concurrency) → 0 without a redelivery; Paused condition and Events; resume scales on the backlog again", async () => {
    const name = "pausing";
    const queue = `${name}/work`;
    const base = {
      concurrency: 2,
      scaling: {
        mode: "direct" as const,
        maxReplicas: 5,
        targetBacklogPerReplica: 1,
        pollSeconds: 1,
        cooldownSeconds: 600,
      },
    };
    await producer.enqueueMany(
      queue,
      Array.from({ length: 10 }, (_, i) => ({ id: `j${i}`, data: i })),
    );
    await apply(poolObject(name, base));
    await pollUntil("scaled up on the backlog", async () => (await replicas(name)) === 5, {
      timeoutMs: LONG,
    });
    // Three jobs are running (a worker's claims), then the pool is paused.
    const worker = new Consumer(r, queue, { workerId: "pod-1", leaseMs: 600_000 });
    const running = (await worker.claim(3)).jobs;
    assert.equal(running.length, 3);
    await apply(poolObject(name, { ...base, paused: true }));
    await pollUntil("paused in Redis", async () => (await admin.control(queue)).paused, {
      timeoutMs: LONG,
    });
    await pollUntil(
      "down to what the running jobs need: ceil(3 / 2) = 2",
      async () => (await replicas(name)) === 2,
      {
        timeoutMs: LONG,
      },
    );
    // Status is written after the scale: wait for it rather than read it once.
    const paused = await pollUntil(
      "Paused=True and the QueuePaused decision in status",
      async () => {
        const pool = await getPool(name);
        const cond = pool?.status?.conditions?.find((c) => c.type === "Paused");
        // The scale is written before its status: an earlier hold may already show Paused=True.
        return cond?.status === "True" &&
          cond.reason === "QueuePaused" &&
          pool?.status?.lastDecision?.reason === "QueuePaused"
          ? pool
          : undefined;
      },
      { timeoutMs: LONG },
    );
    assert.deepEqual(
      [paused?.status?.control?.paused, paused?.status?.control?.source, paused?.status?.control?.summary],
      [true, "spec", "paused"],
    );
    // The spec wins over an ad-hoc resume while it is set.
    await admin.resume(queue);
    await pollUntil("re-paused by the operator", async () => (await admin.control(queue)).paused, {
      timeoutMs: LONG,
    });
    assert.equal((await worker.claim(5)).jobs.length, 0, "no claims while paused");
    // The running jobs finish on their warm pods; then the pool goes to its minimum (0).
    for (const job of running) assert.equal(await worker.complete(job, "done"), true);
    await pollUntil("paused pool at zero", async () => (await replicas(name)) === 0, { timeoutMs: LONG });
    const counters = await admin.counters(queue);
    assert.equal(counters.stalled, undefined, "no redelivery");
    assert.equal(counters.handedBack, undefined);
    assert.equal(counters.completed, 3);
    await pollUntil("a QueuePaused Event", async () => (await eventReasons(name)).includes("QueuePaused"), {
      timeoutMs: LONG,
    });
    // Resume through the spec: Redis follows and the backlog (7) scales the pool up again.
    await apply(poolObject(name, { ...base, paused: false }));
    await pollUntil("resumed in Redis", async () => !(await admin.control(queue)).paused, {
      timeoutMs: LONG,
    });
    await pollUntil("scaled up on the backlog again", async () => ((await replicas(name)) ?? 0) >= 1, {
      timeoutMs: LONG,
    });
    await pollUntil(
      "Paused=False",
      async () =>
        (await getPool(name))?.status?.conditions?.find((c) => c.type === "Paused")?.status === "False",
      { timeoutMs: LONG },
    );
    await pollUntil("a QueueRunning Event", async () => (await eventReasons(name)).includes("QueueRunning"), {
      timeoutMs: LONG,
    });
  });

  it("spec.rateLimit: Redis follows; with a backlog of 10,000 the pool stays at ceil(rate × job s / concurrency) + 1, shown in status, an Event and kubectl get", async () => {
    const name = "limited";
    const queue = `${name}/work`;
    await producer.enqueueMany(
      queue,
      Array.from({ length: 10_000 }, (_, i) => ({ data: i })),
    );
    // Workers report a median job of 800 ms: 10/s × 0.8 s / concurrency 4 = 2 → cap 3.
    const report = async () => {
      for (const pod of ["pod-a", "pod-b"])
        await new Consumer(r, queue, { workerId: pod, leaseMs: 30_000 }).renew([], {
          id: pod,
          pod,
          slots: 4,
          busy: 4,
          draining: false,
          jobP50Ms: 800,
          seen: Date.now(),
        });
    };
    await report();
    await apply(
      poolObject(name, {
        concurrency: 4,
        rateLimit: "10/s",
        scaling: { mode: "direct", maxReplicas: 20, targetBacklogPerReplica: 10, pollSeconds: 1 },
      }),
    );
    await pollUntil("rate limit in Redis", async () => (await admin.control(queue)).rateLimit?.max === 10, {
      timeoutMs: LONG,
    });
    await pollUntil("at the cap", async () => (await replicas(name)) === 3, { timeoutMs: LONG });
    for (let i = 0; i < 8; i++) {
      await report();
      await waitForPolls(op, "default", name, 1);
      assert.equal(await replicas(name), 3, "stays at the cap while the backlog is 10,000");
    }
    const p = await getPool(name);
    assert.equal(p?.status?.control?.replicaCap, 3);
    assert.match(
      p?.status?.control?.capReason ?? "",
      /10\/s × job 800ms \(workers. median\) \/ concurrency 4 → 3/,
    );
    assert.equal(p?.status?.control?.summary, "limited 10/s (cap 3)");
    assert.ok((await eventReasons(name)).includes("RateLimited"));
    const table = await cp.kubectl("get", "wp", name, "--no-headers");
    assert.match(table, /limited 10\/s \(cap 3\)/);
  });
});

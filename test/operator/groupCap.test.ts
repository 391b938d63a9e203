// The operator's groups cap (issue 31) on a real control plane and Redis: when every waiting job
// belongs to a group at its concurrency limit, more pods could start nothing — the pool stays at
// what can run (running + admissible jobs over concurrency), not at what the backlog asks for,
// and says why in status, an Event, `kubectl get wp` and a metric. Raising the groups' limit
// lifts the cap. Direct mode (the operator writes the scale); in-process consumers play the
// workers. Waits are polls.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { pollUntil } from "../support/poll.ts";
import { RESOURCES, resourcePath } from "../../operator/apis/coordinates.ts";
import type { KubeClient } from "../../operator/kube/client.ts";
import { PoolReader } from "../../operator/poolReader.ts";
import { Consumer, Producer, QueueAdmin, setGroupLimit, type RedisClient } from "../../queue/index.ts";
import type { ControlPlane } from "../support/controlplane.ts";
import {
  scrapeOperator,
  startPoolHarness,
  waitForPolls,
  workerPoolEvents,
  workerPoolManifest,
  type OperatorProcess,
  type PoolHarness,
} from "../support/operator.ts";
import type { RedisServer } from "../support/redis.ts";

const LONG = 240_000;

describe("operator: groups cap", { timeout: 20 * 60_000 }, () => {
  let h: PoolHarness;
  let cp: ControlPlane;
  let k: KubeClient;
  let redis: RedisServer;
  let r: RedisClient;
  let op: OperatorProcess;

  const getPool = (name: string) => h.getPool(name);
  const replicas = (name: string) => h.replicas(name);

  before(async () => {
    h = await startPoolHarness("gc");
    ({ cp, k, redis, r, op } = h);
  });
  after(() => h?.stop());

  it("all waiting jobs in groups at their limit: the pool stays at ceil(running / concurrency), with the reason in status, an Event, kubectl get and a metric; a higher limit lifts the cap", async () => {
    const name = "tenants";
    const queue = `${name}/work`;
    // 10 groups × 100 jobs, at most 2 running per group: 20 can run at once, 980 cannot.
    await setGroupLimit(r, queue, undefined, { concurrency: 2 });
    await new Producer(r).enqueueMany(
      queue,
      Array.from({ length: 1000 }, (_, i) => ({ data: i, group: `tenant-${i % 10}` })),
    );
    const worker = new Consumer(r, queue, { workerId: "pod-1", leaseMs: 600_000 });
    const running = (await worker.claim(100)).jobs;
    assert.equal(running.length, 20, "the claim takes only what the groups admit");
    // Backlog 1000 at 10 per replica asks for maxReplicas (8); 20 slots / concurrency 4 = 5.
    await k.create(
      resourcePath(RESOURCES.workerPools, { namespace: "default" }),
      workerPoolManifest(name, redis.url, {
        concurrency: 4,
        scaling: {
          mode: "direct",
          maxReplicas: 8,
          targetBacklogPerReplica: 10,
          pollSeconds: 1,
          cooldownSeconds: 600,
        },
      }),
    );
    await pollUntil("at the groups' cap", async () => (await replicas(name)) === 5, { timeoutMs: LONG });
    for (let i = 0; i < 6; i++) {
      await waitForPolls(op, "default", name, 1);
      assert.equal(await replicas(name), 5, "never past what the groups can run while the backlog is 1000");
    }
    const pool = await pollUntil(
      "the cap in status",
      async () => {
        const p = await getPool(name);
        return p?.status?.control?.capBy === "groups" ? p : undefined;
      },
      { timeoutMs: LONG },
    );
    assert.equal(pool?.status?.control?.replicaCap, 5);
    assert.match(
      pool?.status?.control?.capReason ?? "",
      /groups: 0 of 980 grouped waiting job\(s\) can start, 980 wait for groups at their limit or paused; 20 running \+ 0 other ready \+ 0 = 20 slot\(s\) \/ concurrency 4 → 5 replica/,
    );
    assert.equal(pool?.status?.control?.summary, "groups (cap 5)");
    const events = await workerPoolEvents(k, "default", name);
    assert.ok(
      events.some((e) => e.reason === "GroupLimited" && /replicas capped at 5: groups/.test(e.message)),
      JSON.stringify(events.map((e) => e.reason)),
    );
    assert.match(await cp.kubectl("get", "wp", name, "--no-headers"), /groups \(cap 5\)/);
    const metrics = await scrapeOperator(op);
    assert.equal(
      metrics.get(
        `conveyor_operator_pool_replica_cap{namespace="default",workerpool="${name}",cap="groups"}`,
      ),
      5,
    );
    // The dashboard's pool page ("Why it scaled") reads the cap in force from the status.
    const detail = await new PoolReader(k, new QueueAdmin(r)).detail("default", name, () => true);
    assert.equal(detail?.cap?.replicas, 5);
    assert.equal(detail?.cap?.by, "groups");
    assert.match(detail?.cap?.reason ?? "", /980 wait for groups at their limit/);
    // Each group may run 10: 20 running + 10 × 8 admissible = 100 slots → 25 replicas ≥ 8: no cap.
    await setGroupLimit(r, queue, undefined, { concurrency: 10 });
    await pollUntil("the cap lifted: maxReplicas", async () => (await replicas(name)) === 8, {
      timeoutMs: LONG,
    });
    await pollUntil(
      "no cap in status",
      async () => (await getPool(name))?.status?.control?.replicaCap === undefined,
      { timeoutMs: LONG },
    );
    for (const job of running) await worker.complete(job, "done");
  });
});

// The operator polls a WorkerPool whose spec.redis.url is a redis-sentinel:// URL (1 primary,
// 1 replica, 3 sentinels) on a real control plane, follows a failover, and while no primary can
// be read holds the replicas it last decided (saying so in status) instead of scaling to zero.
import assert from "node:assert/strict";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { pollUntil } from "../support/poll.ts";
import { RESOURCES, resourcePath } from "../../operator/apis/coordinates.ts";
import type { WorkerPool } from "../../operator/apis/v1alpha1/types.ts";
import type { Deployment } from "../../operator/controllers/objects.ts";
import { KubeClient } from "../../operator/kube/client.ts";
import { connectRedis, Producer, type RedisClient } from "../../queue/index.ts";
import { ControlPlane } from "../support/controlplane.ts";
import { isLeader, startOperator, workerPoolManifest, type OperatorProcess } from "../support/operator.ts";
import { stopProcess } from "../support/processes.ts";
import { RedisSentinelSet } from "../support/sentinel.ts";

const ROOT = join(import.meta.dirname, "../..");
const LONG = 240_000;

describe("operator with Redis behind Sentinel", { timeout: 20 * 60_000 }, () => {
  let cp: ControlPlane;
  let k: KubeClient;
  let set: RedisSentinelSet;
  let r: RedisClient;
  let producer: Producer;
  let op: OperatorProcess;

  const getPool = (name: string) =>
    k.get<WorkerPool>(resourcePath(RESOURCES.workerPools, { namespace: "default", name }));
  const replicas = async (name: string) =>
    (await k.get<Deployment>(resourcePath(RESOURCES.deployments, { namespace: "default", name })))?.spec
      ?.replicas;
  const degraded = (p: WorkerPool | null) => p?.status?.conditions?.find((c) => c.type === "Degraded");

  before(async () => {
    cp = await ControlPlane.start({ controllers: false });
    k = new KubeClient(cp.kubeConfig());
    await cp.kubectl("apply", "--server-side", "-f", join(ROOT, "crds", "conveyor.dev_workerpools.yaml"));
    await cp.waitForCrd("workerpools.conveyor.dev");
    set = await RedisSentinelSet.start();
    r = connectRedis(set.url);
    producer = new Producer(r);
    op = await startOperator(cp, "sentinel", ["--metrics-api=false"]);
    await pollUntil("the operator leads", () => isLeader(op), { timeoutMs: LONG });
  });
  after(async () => {
    if (op) await stopProcess(op.proc, 5000);
    r?.disconnect();
    await set?.stop();
    await cp?.stop();
  });

  it("a sentinel URL is polled; a failover is followed; an unreadable queue holds the replicas and says so", async () => {
    const name = "sentinel";
    const queue = `${name}/work`;
    const res = await cp.run("kubectl", [`--kubeconfig=${cp.kubeconfigPath}`, "apply", "-f", "-"], {
      input: JSON.stringify(
        workerPoolManifest(name, set.url, {
          scaling: {
            mode: "direct",
            maxReplicas: 5,
            targetBacklogPerReplica: 2,
            pollSeconds: 1,
            cooldownSeconds: 600,
          },
        }),
      ),
      check: false,
    });
    assert.equal(res.code, 0, `${res.stdout}${res.stderr}`);
    await producer.enqueueMany(
      queue,
      Array.from({ length: 6 }, (_, i) => ({ id: `a${i}`, data: i })),
    );
    await pollUntil("scaled to 3 on a backlog of 6", async () => (await replicas(name)) === 3, {
      timeoutMs: LONG,
    });
    assert.equal((await getPool(name))?.status?.backlog, 6);

    // Failover: the replicas never move while the primary is down, and the new primary is polled.
    let watching = true;
    const seen = new Set<number | undefined>();
    const watch = (async () => {
      while (watching) {
        seen.add(await replicas(name));
        await sleep(100);
      }
    })();
    const { killed } = await set.failover();
    await producer.enqueueMany(
      queue,
      Array.from({ length: 4 }, (_, i) => ({ id: `b${i}`, data: i })),
    );
    await pollUntil(
      "scaled to 5 on the new primary's backlog of 10",
      async () => (await replicas(name)) === 5,
      {
        timeoutMs: LONG,
      },
    );
    watching = false;
    await watch;
    // (the watch may stop before it samples the 5 the poll above saw: only other counts fail)
    assert.deepEqual(
      [...seen].filter((n) => n !== 3 && n !== 5),
      [],
      `no other replica count during the failover (seen ${[...seen].join(", ")})`,
    );

    // No primary at all (the promoted one killed, no replica left to promote): held, and said.
    const promoted = await set.primary();
    await promoted.kill("SIGKILL");
    const held = await pollUntil(
      "Degraded RedisUnreachable",
      async () => {
        const p = await getPool(name);
        return degraded(p)?.reason === "RedisUnreachable" ? p : undefined;
      },
      { timeoutMs: LONG },
    );
    assert.match(degraded(held)!.message, /replicas held at the last decision/);
    assert.equal(await replicas(name), 5);
    await promoted.resume();
    await killed.resume();
    await pollUntil("recovered", async () => degraded(await getPool(name))?.status === "False", {
      timeoutMs: LONG,
    });
    assert.equal(await replicas(name), 5);
  });
});

// A canary rollout of a pool in hpa mode (docs/rollouts.md) on a real control plane: the real HPA
// (kube-controller-manager, reading the operator's external metric through the aggregator) sizes
// the stable Deployment, and the canary's pods are added beside it so that they are the step's
// weight of all pods. A good version is promoted through every step with every job run once.
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { after, before, describe, it } from "node:test";
import { RESOURCES, resourcePath } from "../../operator/apis/coordinates.ts";
import type { Deployment } from "../../operator/controllers/objects.ts";
import { KubeClient } from "../../operator/kube/client.ts";
import { canaryReplicas } from "../../operator/rollout/step.ts";
import { Producer, QueueAdmin, type RedisClient } from "../../queue/index.ts";
import { ControlPlane } from "../support/controlplane.ts";
import {
  operatorLog,
  startMetricsApiOperator,
  startPoolHarness,
  workerPoolEvents,
  type PoolHarness,
} from "../support/operator.ts";
import { PodRunner } from "../support/podRunner.ts";
import { pollUntil } from "../support/poll.ts";
import { RedisServer } from "../support/redis.ts";
import { RECORDING_HANDLER } from "../support/workers.ts";

const LONG = 240_000;

describe("operator: a canary rollout in hpa mode", { timeout: 20 * 60_000 }, () => {
  let h: PoolHarness;
  let cp: ControlPlane;
  let k: KubeClient;
  let redis: RedisServer;
  let r: RedisClient;
  let runner: PodRunner;

  const getPool = (name: string) => h.getPool(name);
  const deployment = (name: string) =>
    k.get<Deployment>(resourcePath(RESOURCES.deployments, { namespace: "default", name }));
  const hpaOf = (name: string) =>
    k.get<{ spec?: { scaleTargetRef?: { name?: string } }; status?: { desiredReplicas?: number } }>(
      resourcePath(RESOURCES.horizontalPodAutoscalers, { namespace: "default", name }),
    );
  const executions = () =>
    existsSync(h.executionLog)
      ? readFileSync(h.executionLog, "utf8")
          .split("\n")
          .filter(Boolean)
          .map((l) => JSON.parse(l) as { q: string; id: string; attempt: number })
      : [];
  const diagnose = async (name: string) => {
    const pool = await getPool(name);
    const lines = operatorLog(h.op)
      .split("\n")
      .filter((l) => l.includes(`default/${name}`) && !l.includes("writing status"))
      .slice(-20);
    return `status.rollout ${JSON.stringify(pool?.status?.rollout)}\nhpa ${JSON.stringify((await hpaOf(name))?.status)}\npods ${runner.running.map((p) => p.name).join(" ")}\noperator:\n${lines.join("\n")}`;
  };

  before(async () => {
    h = await startPoolHarness("rollouthpa", {
      controlPlane: { controllers: true, scheduler: true, kwok: true, aggregation: true },
      operator: (cp, name) => startMetricsApiOperator(cp, name),
      pods: { executionLog: true },
    });
    ({ cp, k, redis, r } = h);
    runner = h.runner!;
  });
  after(() => h?.stop());

  /** hpa mode, 2..4 stable pods of 2 slots at 4 ready jobs per replica; the env makes the version. */
  const applyPool = (
    name: string,
    env: Record<string, string>,
    steps: { weight: number; holdSeconds: number }[],
  ) =>
    cp.apply(
      JSON.stringify({
        apiVersion: "conveyor.dev/v1alpha1",
        kind: "WorkerPool",
        metadata: { name, namespace: "default" },
        spec: {
          queue: `${name}/work`,
          redis: { url: redis.url },
          handler: { module: RECORDING_HANDLER.slice("module:".length) },
          concurrency: 2,
          maxJobSeconds: 60,
          drainSeconds: 5,
          scaling: {
            mode: "hpa",
            minReplicas: 2,
            maxReplicas: 4,
            targetBacklogPerReplica: 4,
            pollSeconds: 1,
            cooldownSeconds: 30,
          },
          template: { env: Object.entries(env).map(([n, value]) => ({ name: n, value })) },
          rollout: {
            canary: {
              steps,
              analysis: { minJobs: 15, maxFailureRate: 0.1, maxFailureRatio: 3, maxP95Ratio: 50 },
            },
          },
        },
      }),
      "--server-side",
      "--field-manager=tester",
      "--force-conflicts",
    );

  /** Enqueues 8 jobs of 20 ms every 250 ms until stopped; the ids it enqueued. */
  const feed = (queue: string) => {
    const producer = new Producer(r);
    const ids: string[] = [];
    let stopped = false;
    let n = 0;
    const done = (async () => {
      while (!stopped) {
        const batch = Array.from({ length: 8 }, () => ({
          id: `j-${n++}`,
          data: { sleepMs: 20 },
          attempts: 5,
        }));
        await producer.enqueueMany(queue, batch);
        ids.push(...batch.map((b) => b.id));
        await new Promise((res) => setTimeout(res, 250));
      }
    })();
    return {
      ids,
      stop: async () => {
        stopped = true;
        await done;
      },
    };
  };

  it("the HPA sizes the stable Deployment, the canary is the step's weight beside it; promoted, every job run once", async () => {
    const name = "viahpa";
    const queue = `${name}/work`;
    const steps = [
      { weight: 30, holdSeconds: 2 },
      { weight: 60, holdSeconds: 2 },
    ];
    await applyPool(name, { VERSION_TAG: "v1" }, steps);
    const feeder = feed(queue);
    const v1 = await pollUntil(
      `${name}: the HPA scaled up the stable Deployment, its version recorded`,
      async () => {
        const pool = await getPool(name);
        const hpa = await hpaOf(name);
        return pool?.status?.rollout?.stableHash && (hpa?.status?.desiredReplicas ?? 0) >= 1
          ? pool.status.rollout.stableHash
          : undefined;
      },
      { timeoutMs: LONG, onTimeout: () => diagnose(name) },
    );
    assert.equal(
      (await hpaOf(name))?.spec?.scaleTargetRef?.name,
      name,
      "the HPA targets the stable Deployment",
    );
    await applyPool(name, { VERSION_TAG: "v2" }, steps);
    // Each step: the canary Deployment's replicas are the weight of all pods, beside the HPA's.
    const splits = new Map<number, string>();
    const promoted = await pollUntil(
      "the canary promoted",
      async () => {
        const ro = (await getPool(name))?.status?.rollout;
        if (ro?.phase === "Progressing" && !splits.has(ro.step ?? 0)) {
          const [stable, canary] = await Promise.all([deployment(name), deployment(`${name}-canary`)]);
          const s = stable?.spec?.replicas ?? 0;
          const c = canary?.spec?.replicas ?? 0;
          const again = (await getPool(name))?.status?.rollout;
          if (s > 0 && c === canaryReplicas(s, ro.weight ?? 0) && again?.step === ro.step)
            splits.set(ro.step ?? 0, `${ro.weight}%: stable ${s} (the HPA's) + canary ${c}`);
        }
        return ro?.phase === "RolledBack" || (ro?.phase === "Promoted" && ro.stableHash !== v1)
          ? ro
          : undefined;
      },
      { timeoutMs: LONG, intervalMs: 250, onTimeout: () => diagnose(name) },
    );
    assert.equal(promoted.phase, "Promoted", promoted.message);
    await feeder.stop();
    assert.deepEqual([...splits.keys()].sort(), [0, 1], `splits seen: ${JSON.stringify([...splits])}`);
    process.stderr.write(`hpa mode rollout splits: ${[...splits.values()].join("; ")}\n`);
    const admin = new QueueAdmin(r);
    const counts = await pollUntil(
      `${feeder.ids.length} jobs finished`,
      async () => {
        const c = await admin.counts(queue);
        return c.completed + c.dead === feeder.ids.length && c.inflight === 0 && c.ready === 0
          ? c
          : undefined;
      },
      { timeoutMs: LONG, intervalMs: 250 },
    );
    assert.equal(counts.dead, 0);
    const runs = new Map<string, number>();
    for (const e of executions().filter((e) => e.q === queue)) runs.set(e.id, (runs.get(e.id) ?? 0) + 1);
    assert.equal(runs.size, feeder.ids.length, "every job ran");
    assert.deepEqual(
      [...runs].filter(([, n]) => n > 1),
      [],
      "no job ran twice",
    );
    const stable = await deployment(name);
    assert.equal(stable?.metadata.annotations?.["conveyor.dev/template-version"], promoted.stableHash);
    await pollUntil("the canary Deployment removed", async () => !(await deployment(`${name}-canary`)), {
      timeoutMs: LONG,
    });
    assert.equal(
      (await hpaOf(name))?.spec?.scaleTargetRef?.name,
      name,
      "the HPA still targets the stable Deployment",
    );
    const reasons = (await workerPoolEvents(k, "default", name)).map((e) => e.reason);
    for (const x of ["RolloutStarted", "RolloutStepPassed", "RolloutPromoted"])
      assert.equal(reasons.filter((y) => y === x).length, 1, `${x} in ${reasons.join(" ")}`);
  });
});

// Canary rollouts (spec.rollout, docs/rollouts.md) on a real control plane (ReplicaSet controller,
// scheduler, kwok node) with a real `conveyor worker` process per pod (test/support/podRunner.ts):
// a template change runs as `<pool>-canary` beside the stable Deployment and is judged on both
// versions' jobs. A good version is promoted through every step with every job run once; a bad
// one (its pods fail 30 % of attempts: the recording handler's FAIL_PERCENT) is rolled back in its
// first step with no job dead-lettered; a slow one by its p95; a second change starts over; a
// rollout started at zero wakes with the pool; a rollout survives an operator restart and is
// finished by `conveyor rollout promote`.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { after, before, describe, it } from "node:test";
import { RESOURCES, resourcePath } from "../../operator/apis/coordinates.ts";
import type { Deployment } from "../../operator/controllers/objects.ts";
import { KubeClient } from "../../operator/kube/client.ts";
import { Producer, QueueAdmin, type RedisClient } from "../../queue/index.ts";
import { ControlPlane } from "../support/controlplane.ts";
import {
  operatorLog,
  scrapeOperator,
  startPoolHarness,
  sumSeries,
  workerPoolEvents,
  type PoolHarness,
} from "../support/operator.ts";
import { PodRunner } from "../support/podRunner.ts";
import { pollUntil } from "../support/poll.ts";
import { RedisServer } from "../support/redis.ts";
import { CONVEYOR, NODE, RECORDING_HANDLER } from "../support/workers.ts";

/** `conveyor <args>`: its exit code and output. */
function runConveyor(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((res) => {
    execFile(NODE, [CONVEYOR, ...args], { timeout: 60_000 }, (err, stdout, stderr) =>
      res({ code: err ? (typeof err.code === "number" ? err.code : 1) : 0, stdout, stderr }),
    );
  });
}

const LONG = 240_000;

describe("operator: canary rollouts", { timeout: 20 * 60_000 }, () => {
  let h: PoolHarness;
  let cp: ControlPlane;
  let k: KubeClient;
  let redis: RedisServer;
  let r: RedisClient;
  let runner: PodRunner;

  const getPool = (name: string) => h.getPool(name);
  const deployment = (name: string) =>
    k.get<Deployment>(resourcePath(RESOURCES.deployments, { namespace: "default", name }));
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
    return `status.rollout ${JSON.stringify(pool?.status?.rollout)}\npods ${runner.running.map((p) => p.name).join(" ")}\noperator:\n${lines.join("\n")}`;
  };

  before(async () => {
    h = await startPoolHarness("rollout", {
      controlPlane: { controllers: true, scheduler: true, kwok: true },
      pods: { executionLog: true },
    });
    ({ cp, k, redis, r } = h);
    runner = h.runner!;
  });
  after(() => h?.stop());

  /** Two stable pods of 4 slots; the template's env makes the version (and FAIL_PERCENT a bad one). */
  const applyPool = (
    name: string,
    env: Record<string, string>,
    steps: { weight: number; holdSeconds: number }[],
    minJobs = 15,
    maxP95Ratio = 50,
    scaling?: Record<string, unknown>,
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
          concurrency: 4,
          maxJobSeconds: 60,
          drainSeconds: 5,
          ...(scaling ? { scaling } : { replicas: 2, scaling: { pollSeconds: 1 } }),
          template: { env: Object.entries(env).map(([n, value]) => ({ name: n, value })) },
          rollout: {
            canary: {
              steps,
              analysis: { minJobs, maxFailureRate: 0.1, maxFailureRatio: 3, maxP95Ratio },
            },
          },
        },
      }),
      "--server-side",
      "--field-manager=tester",
      "--force-conflicts",
    );

  /** Enqueues 8 jobs of `sleepMs` every 250 ms until stopped; the ids it enqueued. */
  const feed = (queue: string, sleepMs = 20) => {
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

  /** Every fed job finished: completed or dead. */
  const drained = async (queue: string, total: number) => {
    const admin = new QueueAdmin(r);
    await pollUntil(
      `${total} jobs of ${queue} finished`,
      async () => {
        const c = await admin.counts(queue);
        return c.completed + c.dead === total && c.inflight === 0 && c.ready === 0 && c.delayed === 0
          ? c
          : undefined;
      },
      { timeoutMs: LONG, intervalMs: 250 },
    );
    return admin.counts(queue);
  };

  const stableReady = (name: string) =>
    pollUntil(
      `${name}: 2 stable pods running, the stable version recorded`,
      async () => {
        const pool = await getPool(name);
        return pool?.status?.rollout?.stableHash &&
          runner.running.filter((p) => p.name.startsWith(`${name}-`)).length >= 2
          ? pool.status.rollout.stableHash
          : undefined;
      },
      { timeoutMs: LONG, onTimeout: () => diagnose(name) },
    );

  it("a good version is promoted through every step; every job runs once", async () => {
    const name = "good";
    const queue = `${name}/work`;
    const steps = [
      { weight: 30, holdSeconds: 2 },
      { weight: 60, holdSeconds: 2 },
    ];
    await applyPool(name, { VERSION_TAG: "v1" }, steps);
    const v1 = await stableReady(name);
    const feeder = feed(queue);
    await applyPool(name, { VERSION_TAG: "v2" }, steps);
    const seenSteps = new Set<number>();
    const promoted = await pollUntil(
      "the canary promoted",
      async () => {
        const ro = (await getPool(name))?.status?.rollout;
        if (ro?.phase === "Progressing") seenSteps.add(ro.step ?? 0);
        return ro?.phase === "RolledBack" || (ro?.phase === "Promoted" && ro.stableHash !== v1)
          ? ro
          : undefined;
      },
      { timeoutMs: LONG, intervalMs: 250, onTimeout: () => diagnose(name) },
    );
    assert.equal(promoted.phase, "Promoted", promoted.message);
    await feeder.stop();
    assert.deepEqual([...seenSteps].sort(), [0, 1]);
    assert.match(promoted.message ?? "", /promoted after 2 step\(s\)/);
    const counts = await drained(queue, feeder.ids.length);
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
    // each once, though a pass that fails after a transition (a 409 on a scale) is made again
    const reasons = (await workerPoolEvents(k, "default", name)).map((e) => e.reason);
    for (const r of ["RolloutStarted", "RolloutStepPassed", "RolloutPromoted"])
      assert.equal(reasons.filter((x) => x === r).length, 1, `${r} in ${reasons.join(" ")}`);
  });

  it("a version failing 30% of attempts is rolled back in its first step; no job is dead-lettered", async () => {
    const name = "bad";
    const queue = `${name}/work`;
    const steps = [
      { weight: 30, holdSeconds: 2 },
      { weight: 60, holdSeconds: 2 },
    ];
    await applyPool(name, { VERSION_TAG: "v1" }, steps, 30);
    await stableReady(name);
    const feeder = feed(queue);
    await applyPool(name, { VERSION_TAG: "v2", FAIL_PERCENT: "30" }, steps, 30);
    const rolledBack = await pollUntil(
      "the canary rolled back",
      async () => {
        const pool = await getPool(name);
        const ro = pool?.status?.rollout;
        return ro?.phase === "RolledBack" || (ro?.phase === "Promoted" && ro.canaryHash) ? pool : undefined;
      },
      { timeoutMs: LONG, intervalMs: 250, onTimeout: () => diagnose(name) },
    );
    const ro = rolledBack.status!.rollout!;
    assert.equal(ro.phase, "RolledBack", ro.message);
    assert.equal(ro.step, 0, "rolled back in its first step");
    assert.match(
      ro.message ?? "",
      /rolled back at step 1 \(30%\): canary failure rate .* above maxFailureRate 10\.0%/,
    );
    const cond = rolledBack.status!.conditions!.find((c) => c.type === "RolledBack");
    assert.equal(cond?.status, "True");
    assert.equal(cond?.reason, "RolledBack");
    // (the Event is posted after the status that shows the roll-back)
    const event = await pollUntil(
      "the RolledBack Event",
      async () => (await workerPoolEvents(k, "default", name)).find((e) => e.reason === "RolledBack"),
      { timeoutMs: LONG },
    );
    assert.equal(event.type, "Warning");
    assert.match(event.message ?? "", /canary \d+\/\d+ failed/);
    await pollUntil(
      "the canary at 0 replicas",
      async () => (await deployment(`${name}-canary`))?.spec?.replicas === 0,
      {
        timeoutMs: LONG,
      },
    );
    // the stable Deployment kept its template; the jobs the canary failed were retried there
    await new Promise((res) => setTimeout(res, 1500));
    await feeder.stop();
    const counts = await drained(queue, feeder.ids.length);
    assert.equal(counts.dead, 0, "no job dead-lettered");
  });

  it("a version whose jobs take 8× as long is rolled back by maxP95Ratio", async () => {
    const name = "slow";
    const queue = `${name}/work`;
    const steps = [{ weight: 50, holdSeconds: 2 }];
    await applyPool(name, { VERSION_TAG: "v1" }, steps, 20, 2);
    await stableReady(name);
    // (100 ms against 800 ms: a loaded machine's scheduling noise stays well inside the ratio)
    const feeder = feed(queue, 100);
    await applyPool(name, { VERSION_TAG: "v2", SLOW_FACTOR: "8" }, steps, 20, 2);
    const ro = await pollUntil(
      "the slow canary rolled back",
      async () => {
        const ro = (await getPool(name))?.status?.rollout;
        return ro?.phase === "RolledBack" || (ro?.phase === "Promoted" && ro.canaryHash) ? ro : undefined;
      },
      { timeoutMs: LONG, intervalMs: 250, onTimeout: () => diagnose(name) },
    );
    assert.equal(ro.phase, "RolledBack", ro.message);
    assert.match(ro.message ?? "", /canary p95 [\d.]+× stable's, above maxP95Ratio 2/);
    await feeder.stop();
    const counts = await drained(queue, feeder.ids.length);
    assert.equal(counts.dead, 0);
  });

  it("a template changed again during a rollout starts over from the stable version; conveyor rollout abort stops it", async () => {
    const name = "again";
    const queue = `${name}/work`;
    const steps = [{ weight: 30, holdSeconds: 3600 }];
    await applyPool(name, { VERSION_TAG: "v1" }, steps, 10);
    const v1 = await stableReady(name);
    const feeder = feed(queue);
    await applyPool(name, { VERSION_TAG: "v2" }, steps, 10);
    const first = await pollUntil(
      "the rollout of v2 judged",
      async () => {
        const ro = (await getPool(name))?.status?.rollout;
        return ro?.phase === "Progressing" && ro.baseline ? ro : undefined;
      },
      { timeoutMs: LONG, intervalMs: 250, onTimeout: () => diagnose(name) },
    );
    await applyPool(name, { VERSION_TAG: "v3" }, steps, 10);
    const second = await pollUntil(
      "the rollout of v3 started over",
      async () => {
        const ro = (await getPool(name))?.status?.rollout;
        return ro?.phase === "Progressing" && ro.canaryHash !== first.canaryHash ? ro : undefined;
      },
      { timeoutMs: LONG, intervalMs: 250, onTimeout: () => diagnose(name) },
    );
    assert.equal(second.stableHash, v1);
    assert.equal(second.step, 0);
    const canary = await pollUntil(
      "the canary Deployment on v3",
      async () => {
        const d = await deployment(`${name}-canary`);
        return d?.metadata.annotations?.["conveyor.dev/template-version"] === second.canaryHash
          ? d
          : undefined;
      },
      { timeoutMs: LONG },
    );
    assert.ok((canary.spec?.replicas ?? 0) >= 1);
    // the pool's 2 replicas split at 30%: one stable pod, one canary pod
    await pollUntil(
      "the replicas split 1 + 1",
      async () =>
        (await deployment(name))?.spec?.replicas === 1 &&
        (await deployment(`${name}-canary`))?.spec?.replicas === 1,
      { timeoutMs: LONG, onTimeout: () => diagnose(name) },
    );
    await pollUntil(
      "the rollout's metrics",
      async () => {
        const m = await scrapeOperator(h.op);
        return (
          sumSeries(m, "conveyor_operator_pool_rollout_canary_weight", /workerpool="again"/) === 30 &&
          [...m.keys()].some(
            (k) =>
              k.startsWith("conveyor_operator_pool_rollout_failure_rate{") &&
              k.includes('workerpool="again"') &&
              k.includes('version="canary"'),
          )
        );
      },
      { timeoutMs: LONG },
    );
    const started = (await workerPoolEvents(k, "default", name)).filter((e) => e.reason === "RolloutStarted");
    assert.ok(
      started.some((e) => /starts over/.test(e.message)),
      started.map((e) => e.message).join("\n"),
    );
    const cli = await runConveyor(["rollout", "abort", name, `--kubeconfig=${cp.kubeconfigPath}`]);
    assert.equal(cli.code, 0, cli.stderr);
    const aborted = await pollUntil(
      "aborted by the CLI",
      async () => {
        const pool = await getPool(name);
        return pool?.status?.rollout?.phase === "Aborted" ? pool : undefined;
      },
      { timeoutMs: LONG, intervalMs: 250, onTimeout: () => diagnose(name) },
    );
    assert.equal(aborted.status!.conditions!.find((c) => c.type === "RolledBack")?.reason, "RolloutAborted");
    await pollUntil(
      "the canary at 0 replicas",
      async () => (await deployment(`${name}-canary`))?.spec?.replicas === 0,
      {
        timeoutMs: LONG,
      },
    );
    // (a second abort: nothing in progress, a clear refusal)
    const again = await runConveyor(["rollout", "abort", name, `--kubeconfig=${cp.kubeconfigPath}`]);
    assert.equal(again.code, 1);
    assert.match(again.stderr, /has no rollout in progress \(Aborted\)/);
    await feeder.stop();
    const counts = await drained(queue, feeder.ids.length);
    assert.equal(counts.dead, 0);
  });

  it("a rollout started while the pool sleeps at zero: both versions wake with the backlog, the canary is promoted", async () => {
    const name = "zero";
    const queue = `${name}/work`;
    const steps = [{ weight: 50, holdSeconds: 1 }];
    const scaling = {
      mode: "direct",
      minReplicas: 0,
      maxReplicas: 4,
      targetBacklogPerReplica: 8,
      pollSeconds: 1,
      cooldownSeconds: 2,
      behavior: { scaleDown: { stabilizationWindowSeconds: 0 } },
    };
    await applyPool(name, { VERSION_TAG: "v1" }, steps, 10, 50, scaling);
    const asleep = async () => (await deployment(name))?.spec?.replicas === 0;
    await pollUntil(
      "the pool at zero, its stable version recorded",
      async () => (await asleep()) && (await getPool(name))?.status?.rollout?.stableHash,
      { timeoutMs: LONG, onTimeout: () => diagnose(name) },
    );
    await applyPool(name, { VERSION_TAG: "v2" }, steps, 10, 50, scaling);
    const started = await pollUntil(
      "the rollout started at zero",
      async () => {
        const ro = (await getPool(name))?.status?.rollout;
        return ro?.phase === "Progressing" && (await deployment(`${name}-canary`)) ? ro : undefined;
      },
      { timeoutMs: LONG, onTimeout: () => diagnose(name) },
    );
    assert.equal(
      (await deployment(`${name}-canary`))?.spec?.replicas,
      0,
      "no canary pod while the pool sleeps",
    );
    assert.equal(await asleep(), true);
    const feeder = feed(queue);
    const promoted = await pollUntil(
      "the canary promoted after the pool woke",
      async () => {
        const ro = (await getPool(name))?.status?.rollout;
        return ro?.phase === "RolledBack" ||
          (ro?.phase === "Promoted" && ro.stableHash === started.canaryHash)
          ? ro
          : undefined;
      },
      { timeoutMs: LONG, intervalMs: 250, onTimeout: () => diagnose(name) },
    );
    assert.equal(promoted.phase, "Promoted", promoted.message);
    await feeder.stop();
    const counts = await drained(queue, feeder.ids.length);
    assert.equal(counts.dead, 0);
  });

  it("a rollout survives an operator restart and is finished by conveyor rollout promote", async () => {
    const name = "resume";
    const queue = `${name}/work`;
    const steps = [
      { weight: 30, holdSeconds: 1 },
      { weight: 60, holdSeconds: 3600 },
    ];
    await applyPool(name, { VERSION_TAG: "v1" }, steps, 10);
    await stableReady(name);
    const feeder = feed(queue);
    await applyPool(name, { VERSION_TAG: "v2" }, steps, 10);
    const before = await pollUntil(
      "the rollout at step 2",
      async () => {
        const ro = (await getPool(name))?.status?.rollout;
        return ro?.phase === "Progressing" && ro.step === 1 ? ro : undefined;
      },
      { timeoutMs: LONG, intervalMs: 250, onTimeout: () => diagnose(name) },
    );
    await h.restartOperator();
    // the new process carries on with the same rollout (its step and start) from the status
    await pollUntil(
      "the restarted operator judging the same step",
      async () => {
        const ro = (await getPool(name))?.status?.rollout;
        return ro?.message !== before.message && ro?.phase === "Progressing" ? ro : undefined;
      },
      { timeoutMs: LONG, intervalMs: 250, onTimeout: () => diagnose(name) },
    );
    const resumed = (await getPool(name))!.status!.rollout!;
    assert.equal(resumed.step, 1);
    assert.equal(resumed.startedAt, before.startedAt);
    assert.equal(resumed.canaryHash, before.canaryHash);
    const cli = await runConveyor(["rollout", "promote", name, `--kubeconfig=${cp.kubeconfigPath}`]);
    assert.equal(cli.code, 0, cli.stderr);
    await pollUntil(
      "promoted by the CLI",
      async () => {
        const ro = (await getPool(name))?.status?.rollout;
        return ro?.phase === "Promoted" && ro.stableHash === before.canaryHash ? ro : undefined;
      },
      { timeoutMs: LONG, intervalMs: 250, onTimeout: () => diagnose(name) },
    );
    const status = await runConveyor(["rollout", "status", name, `--kubeconfig=${cp.kubeconfigPath}`]);
    assert.match(status.stdout, /promoted/);
    await feeder.stop();
    const counts = await drained(queue, feeder.ids.length);
    assert.equal(counts.dead, 0);
  });
});

// Scale-in never interrupts jobs that may outlast the drain (issue 33: "0 jobs interrupted by
// scale-in"). A real control plane (ReplicaSet controller, scheduler, kwok node) with a real
// `conveyor worker` process per pod (test/support/podRunner.ts), one job at a time per pod, a 2 s
// drain and jobs that run until the test lets them finish (a file appears). Five such jobs make
// the pool 3 pods; once the backlog has drained onto them it wants 2 while all 3 run a job. The
// operator holds the scale-in at the 3 busy pods (ScalingActive=ScaleInHeld, the held-replicas
// metric) and steps down as each goes idle, deleting the idle one — and no job is handed back or
// run twice. Without the hold a busy pod is deleted, drains 2 s and hands its job back — which
// is still what happens to pods someone else deletes (a user's `kubectl scale`, a node drain).
// In hpa mode the same holds through the HPA (it reads the operator's external metric through the
// aggregator): its minReplicas follows the busy pods.
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { pollUntil } from "../support/poll.ts";
import { RESOURCES, resourcePath } from "../../operator/apis/coordinates.ts";
import type { WorkerPool } from "../../operator/apis/v1alpha1/types.ts";
import type { Deployment } from "../../operator/controllers/objects.ts";
import { KubeClient } from "../../operator/kube/client.ts";
import { Producer, QueueAdmin, QueueKeys, connectRedis, type RedisClient } from "../../queue/index.ts";
import { ControlPlane } from "../support/controlplane.ts";
import {
  isLeader,
  operatorLog,
  scrapeOperator,
  startMetricsApiOperator,
  sumSeries,
  workerPoolEvents,
  type OperatorProcess,
} from "../support/operator.ts";
import { type PodRunner, startPoolPodRunner } from "../support/podRunner.ts";
import { stopProcess } from "../support/processes.ts";
import { RedisServer } from "../support/redis.ts";
import { RECORDING_HANDLER } from "../support/workers.ts";

const ROOT = join(import.meta.dirname, "../..");
const LONG = 240_000;

describe("operator: scale-in waits for the pods running jobs", { timeout: 15 * 60_000 }, () => {
  let cp: ControlPlane;
  let k: KubeClient;
  let redis: RedisServer;
  let r: RedisClient;
  let op: OperatorProcess;
  let runner: PodRunner;
  let dir: string;

  const getPool = (name: string) =>
    k.get<WorkerPool>(resourcePath(RESOURCES.workerPools, { namespace: "default", name }));
  const replicas = async (name: string) =>
    (await k.get<Deployment>(resourcePath(RESOURCES.deployments, { namespace: "default", name })))?.spec
      ?.replicas ?? 0;
  const livePods = async (name: string) =>
    (
      await k.list<{ metadata: { name: string; deletionTimestamp?: string } }>(
        resourcePath(RESOURCES.pods, { namespace: "default" }),
        { labelSelector: `conveyor.dev/workerpool=${name}` },
      )
    ).items
      .filter((p) => !p.metadata.deletionTimestamp)
      .map((p) => p.metadata.name);
  /** Each execution the handler recorded: job id and the worker process that ran it. */
  const executions = () =>
    existsSync(join(dir, "executions.ndjson"))
      ? readFileSync(join(dir, "executions.ndjson"), "utf8")
          .split("\n")
          .filter(Boolean)
          .map((l) => JSON.parse(l) as { id: string; pid: number })
      : [];

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "cvy-scalein-"));
    cp = await ControlPlane.start({ controllers: true, scheduler: true, kwok: true, aggregation: true });
    k = new KubeClient(cp.kubeConfig());
    await cp.kubectl("apply", "--server-side", "-f", join(ROOT, "crds", "conveyor.dev_workerpools.yaml"));
    await cp.waitForCrd("workerpools.conveyor.dev");
    redis = await RedisServer.start();
    r = connectRedis(redis.url);
    // hpa mode: the HPA reads the operator's external metric through the aggregator
    op = await startMetricsApiOperator(cp, "scalein");
    await pollUntil("the operator leads", () => isLeader(op), { timeoutMs: LONG });
    runner = startPoolPodRunner(cp.kubeConfig(), dir, join(dir, "executions.ndjson"));
  });
  after(async () => {
    await runner?.stop();
    r?.disconnect();
    if (op) await stopProcess(op.proc, 10_000);
    await redis?.stop();
    await cp?.stop();
    if (dir && process.env.CONVEYOR_KEEP_TMP !== "1") rmSync(dir, { recursive: true, force: true });
  });

  /** One job at a time per pod (or `concurrency`), a 2 s drain for jobs of up to 600 s, up to 3 pods at 2 jobs per replica (or `concurrency`). */
  const applyPool = (name: string, mode: "direct" | "hpa" = "direct", concurrency = 1) =>
    cp.apply(
      JSON.stringify({
        apiVersion: "conveyor.dev/v1alpha1",
        kind: "WorkerPool",
        metadata: { name, namespace: "default" },
        spec: {
          queue: `${name}/work`,
          redis: { url: redis.url },
          handler: { module: RECORDING_HANDLER.slice("module:".length) },
          concurrency,
          maxJobSeconds: 600,
          drainSeconds: 2,
          scaling: {
            mode,
            maxReplicas: 3,
            targetBacklogPerReplica: Math.max(2, concurrency),
            pollSeconds: 1,
            cooldownSeconds: 5,
            behavior: { scaleDown: { stabilizationWindowSeconds: 0 } },
          },
        },
      }),
      "--server-side",
      "--field-manager=tester",
    );

  /** Lets the recording handler's job `id` (enqueued with `untilFile`) finish. */
  const release = (id: string) => writeFileSync(join(dir, `release-${id}`), "");
  /** Jobs of `queue` handed back, and a poll that fails at once on one (what the hold prevents). */
  /** What a timed-out wait shows: the pool's replicas, pods, scaling condition, worker reports and the operator's lines on it. */
  const diagnose = async (admin: QueueAdmin, queue: string) => {
    const name = queue.split("/")[0]!;
    const cond = (await getPool(name))?.status?.conditions?.find((x) => x.type === "ScalingActive");
    const reports = (await admin.workers(queue)).map((w) => JSON.stringify(w));
    const lines = operatorLog(op)
      .split("\n")
      .filter((l) => l.includes(`default/${name}"`) && !l.includes("writing status"))
      .slice(-15);
    return [
      `replicas ${await replicas(name)}, live pods ${(await livePods(name)).join(" ")}`,
      `ScalingActive ${cond?.reason}: ${cond?.message}`,
      `reports:\n${reports.join("\n")}`,
      `operator:\n${lines.join("\n")}`,
    ].join("\n");
  };
  const handBacks = (admin: QueueAdmin, queue: string) => {
    const handedBack = async () => (await admin.counters(queue)).handedBack ?? 0;
    const waitFor = async (what: string, probe: () => Promise<boolean>) => {
      const got = await pollUntil(
        what,
        async () => ((await handedBack()) > 0 ? "handed back" : (await probe()) ? "ok" : undefined),
        { timeoutMs: LONG, intervalMs: 250, onTimeout: () => diagnose(admin, queue) },
      );
      assert.equal(got, "ok", `a job was handed back by a scale-in while waiting for ${what}`);
    };
    return { handedBack, waitFor };
  };

  it("long jobs on 3 pods, backlog drained: the scale-in is held at the busy pods and steps down as each goes idle; nothing handed back, every job ran once", async () => {
    const name = "long";
    const queue = `${name}/work`;
    await applyPool(name);
    const admin = new QueueAdmin(r);
    const { handedBack, waitFor } = handBacks(admin, queue);
    const producer = new Producer(r);
    const jobs: string[] = [];
    for (let i = 0; i < 5; i++) {
      const id = `job-${i}`;
      await producer.enqueue(queue, { untilFile: join(dir, `release-${id}`) }, { id });
      jobs.push(id);
    }
    // backlog 5 at 2 per replica: 3 pods, each running one job, two waiting
    await waitFor(
      "3 jobs running on 3 pods",
      async () => new Set(executions().map((e) => e.pid)).size === 3 && (await replicas(name)) === 3,
    );
    // two finish: their pods take the two waiting jobs; the backlog (3, all running) wants 2
    const running = [...new Set(executions().map((e) => e.id))];
    release(running[0]!);
    release(running[1]!);
    await waitFor("all 5 jobs started", async () => new Set(executions().map((e) => e.id)).size === 5);
    await waitFor("the scale-in held at the 3 busy pods (status)", async () => {
      const c = (await getPool(name))?.status?.conditions?.find((x) => x.type === "ScalingActive");
      return c?.reason === "ScaleInHeld" && (await replicas(name)) === 3;
    });
    const held = (await getPool(name))!.status!.conditions!.find((x) => x.type === "ScalingActive")!;
    assert.match(
      held.message,
      /^scale-in to 2 held at 3: 3 pod\(s\) running jobs that may outlast drainSeconds 2 \(maxJobSeconds 600\)/,
    );
    assert.equal(
      sumSeries(
        await scrapeOperator(op),
        "conveyor_operator_pool_scale_in_held_replicas",
        /workerpool="long"/,
      ),
      1,
      "1 replica held for busy pods",
    );

    // One more finishes: its pod is idle, the pool steps down to 2 by deleting that pod.
    const pidOf = new Map(executions().map((e) => [e.id, e.pid]));
    const busyJobs = jobs.filter((id) => !running.slice(0, 2).includes(id));
    release(busyJobs[0]!);
    await waitFor(
      "2 replicas, 2 live pods",
      async () => (await replicas(name)) === 2 && (await livePods(name)).length === 2,
    );
    const kept = runner.running.map((p) => p.proc.child.pid);
    assert.ok(
      busyJobs.slice(1).every((id) => kept.includes(pidOf.get(id))),
      `the pods still running jobs were kept (${JSON.stringify([...pidOf])}, running ${kept.join(",")})`,
    );
    // The rest finish: down to zero after the cooldown.
    for (const id of busyJobs.slice(1)) release(id);
    await waitFor("scaled to zero", async () => (await replicas(name)) === 0);
    await pollUntil("every job completed", async () => (await admin.counts(queue)).backlog === 0, {
      timeoutMs: LONG,
    });

    assert.equal(await handedBack(), 0, "no job handed back");
    const runs = executions().map((e) => e.id);
    assert.deepEqual(runs.toSorted(), jobs.toSorted(), "every job ran exactly once");
    const decisions = (await workerPoolEvents(k, "default", name)).map((e) => e.message);
    assert.ok(
      decisions.some((m) => /^3 → 2: ScaleInHeld: scale-in to 1 held at 2/.test(m)),
      `a step down for the pod that went idle:\n${decisions.join("\n")}`,
    );
    await cp.kubectl("delete", "wp", name, "--wait=true");
  });

  it("while a scale-in is held, the pods beyond what it wants are cordoned: new jobs go to the pod that stays, and the others go idle and are removed", async () => {
    const name = "pack";
    const queue = `${name}/work`;
    await applyPool(name, "direct", 4);
    const admin = new QueueAdmin(r);
    const { handedBack, waitFor } = handBacks(admin, queue);
    const producer = new Producer(r);
    const ran = () => executions().filter((e) => e.id.startsWith("pack-"));
    const jobs: string[] = [];
    const enqueue = async (id: string) => {
      await producer.enqueue(queue, { untilFile: join(dir, `release-${id}`) }, { id });
      jobs.push(id);
    };
    // 12 jobs at 4 per replica: 3 pods running 4 each.
    for (let i = 0; i < 12; i++) await enqueue(`pack-${i}`);
    await waitFor(
      "12 jobs running on 3 pods",
      async () => ran().length === 12 && new Set(ran().map((e) => e.pid)).size === 3,
    );
    // All but one job of each pod finish: 3 running, one per pod; the backlog wants 1 replica.
    const byPid = Map.groupBy(ran(), (e) => e.pid);
    for (const runs of byPid.values()) for (const e of runs.slice(1)) release(e.id);
    const cordoned = await pollUntil(
      "the scale-in held at 3 with 2 pods cordoned (status)",
      async () => {
        const c = (await getPool(name))?.status?.conditions?.find((x) => x.type === "ScalingActive");
        const m = /; cordoned \(claiming no new jobs\): (\S+), (\S+)$/.exec(c?.message ?? "");
        return c?.reason === "ScaleInHeld" && m ? [m[1]!, m[2]!] : undefined;
      },
      { timeoutMs: LONG, onTimeout: () => diagnose(admin, queue) },
    );
    assert.equal(
      sumSeries(await scrapeOperator(op), "conveyor_operator_pool_cordoned_pods", /workerpool="pack"/),
      2,
    );
    // The cordoned pods' workers learn it at their next renewal, and report it.
    await waitFor("the cordoned workers report it", async () => {
      const reports = await admin.workers(queue);
      return cordoned.every((pod) => reports.some((w) => w.pod === pod && w.cordoned === true));
    });
    const kept = (await livePods(name)).find((p) => !cordoned.includes(p))!;
    const pidOfPod = (pod: string) => runner.running.find((p) => p.name === pod)?.proc.child.pid;
    // A new job goes to the pod that stays, though every pod has free slots.
    await enqueue("pack-new");
    await waitFor("the new job started", async () => ran().some((e) => e.id === "pack-new"));
    assert.equal(
      ran().find((e) => e.id === "pack-new")!.pid,
      pidOfPod(kept),
      `the new job ran on ${kept}, the pod not cordoned`,
    );
    // The cordoned pods' last jobs finish: they are idle and removed; the cordon goes with the hold.
    const pidsCordoned = cordoned.map(pidOfPod);
    for (const e of ran()) if (pidsCordoned.includes(e.pid)) release(e.id);
    await waitFor(
      "1 replica, 1 live pod: the one kept",
      async () => (await replicas(name)) === 1 && (await livePods(name)).join() === kept,
    );
    await waitFor("the cordon lifted", async () => (await r.exists(new QueueKeys(queue).cordon)) === 0);
    for (const id of jobs) release(id);
    await waitFor("scaled to zero", async () => (await replicas(name)) === 0);
    assert.equal(await handedBack(), 0, "no job handed back");
    assert.deepEqual(
      ran()
        .map((e) => e.id)
        .toSorted(),
      jobs.toSorted(),
      "every job ran exactly once",
    );
    await cp.kubectl("delete", "wp", name, "--wait=true");
  });

  it("pods deleted by someone else (kubectl scale) are not held: their workers drain and hand the long jobs back, which run again", async () => {
    const name = "pinned";
    const queue = `${name}/work`;
    await applyPool(name);
    const admin = new QueueAdmin(r);
    const producer = new Producer(r);
    const jobs = ["pinned-0", "pinned-1", "pinned-2", "pinned-3", "pinned-4"];
    for (const id of jobs) await producer.enqueue(queue, { untilFile: join(dir, `release-${id}`) }, { id });
    const ran = () => executions().filter((e) => e.id.startsWith("pinned-"));
    await pollUntil(
      "3 jobs running on 3 pods",
      async () => new Set(ran().map((e) => e.pid)).size === 3 && (await replicas(name)) === 3,
      { timeoutMs: LONG, intervalMs: 250 },
    );
    // The user pins the pool at 1 while 3 pods run jobs: spec.replicas wins over the hold.
    await cp.kubectl("scale", `wp/${name}`, "--replicas=1");
    await pollUntil(
      "the 2 deleted pods' jobs handed back after the 2 s drain",
      async () => (await admin.counters(queue)).handedBack === 2 && (await replicas(name)) === 1,
      { timeoutMs: LONG, intervalMs: 250 },
    );
    for (const id of jobs) release(id);
    await pollUntil("every job completed", async () => (await admin.counts(queue)).backlog === 0, {
      timeoutMs: LONG,
    });
    const runs = ran().map((e) => e.id);
    assert.equal(runs.length, 7, `5 jobs, the 2 handed back ran again: ${runs.join(" ")}`);
    assert.deepEqual([...new Set(runs)].toSorted(), jobs);
    const events = (await workerPoolEvents(k, "default", name)).map((e) => e.message);
    assert.ok(
      events.some((m) => /^3 → 1: ManualReplicas/.test(m)),
      events.join("\n"),
    );
    assert.ok(!events.some((m) => /ScaleInHeld/.test(m)), events.join("\n"));
    await cp.kubectl("delete", "wp", name, "--wait=true");
  });

  it("hpa mode: the HPA's minReplicas follows the busy pods, holding the HPA when it wants fewer, lowered as they go idle; nothing handed back", async () => {
    const name = "viahpa";
    const queue = `${name}/work`;
    await applyPool(name, "hpa");
    const hpaOf = () =>
      k.get<{
        spec?: { minReplicas?: number };
        status?: { conditions?: { type: string; status: string; reason?: string }[] };
      }>(resourcePath(RESOURCES.horizontalPodAutoscalers, { namespace: "default", name }));
    const admin = new QueueAdmin(r);
    const { handedBack, waitFor } = handBacks(admin, queue);
    const producer = new Producer(r);
    const jobs = [0, 1, 2, 3, 4].map((i) => `${name}-${i}`);
    for (const id of jobs) await producer.enqueue(queue, { untilFile: join(dir, `release-${id}`) }, { id });
    const ran = () => executions().filter((e) => e.id.startsWith(`${name}-`));
    // 0 → 1 by the operator, then the HPA: backlog 5 at 2 per replica → 3
    await waitFor(
      "the HPA at 3 pods, each running a job",
      async () => new Set(ran().map((e) => e.pid)).size === 3 && (await replicas(name)) === 3,
    );
    const first = [...new Set(ran().map((e) => e.id))];
    release(first[0]!);
    release(first[1]!);
    await waitFor("all 5 jobs started", async () => new Set(ran().map((e) => e.id)).size === 5);
    // The backlog (3, all running) makes the HPA want 2; minReplicas 3 holds it.
    await waitFor("the HPA held at minReplicas 3 (ScalingLimited/TooFewReplicas)", async () => {
      const hpa = await hpaOf();
      const limited = hpa?.status?.conditions?.find((c) => c.type === "ScalingLimited");
      return (
        hpa?.spec?.minReplicas === 3 && limited?.status === "True" && limited.reason === "TooFewReplicas"
      );
    });
    const cond = (await getPool(name))?.status?.conditions?.find((c) => c.type === "ScalingActive");
    assert.equal(cond?.reason, "ScaleInHeld", cond?.message);
    // One finishes: minReplicas drops to the 2 busy pods and the HPA deletes the idle one.
    const busy = jobs.filter((id) => !first.slice(0, 2).includes(id));
    release(busy[0]!);
    await waitFor(
      "the HPA at 2 replicas, 2 live pods",
      async () => (await replicas(name)) === 2 && (await livePods(name)).length === 2,
    );
    for (const id of busy.slice(1)) release(id);
    await waitFor("every job completed", async () => (await admin.counts(queue)).backlog === 0);
    await waitFor("minReplicas back to 1", async () => (await hpaOf())?.spec?.minReplicas === 1);
    assert.equal(await handedBack(), 0, "no job handed back");
    assert.deepEqual(
      ran()
        .map((e) => e.id)
        .toSorted(),
      jobs,
      "every job ran exactly once",
    );
    await cp.kubectl("delete", "wp", name, "--wait=true");
  });
});

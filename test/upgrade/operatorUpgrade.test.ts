// The operator upgraded while a pool scales: the previous release's operator (0.1.0, from the
// previous-release cache) scales a pool up under a backlog, then is replaced by this release's —
// the new CRD applied first, as docs/install.md says — which scales it on to the end and back to
// zero. Real worker processes of this release run the pods (test/support/podRunner.ts) on a real
// control plane (ReplicaSet controller, scheduler, kwok). The pool is never at zero while its jobs
// wait once it was up, every job runs once, and this release's operator finalized layout 2 (every
// pod read it). Then the rollback, on a pool that keeps its pipeline on layout 1 (autoFinalize
// off): this release's operator replaced by 0.1.0's mid-backlog, the same checks.
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { RESOURCES, resourcePath } from "../../operator/apis/coordinates.ts";
import type { Deployment } from "../../operator/controllers/objects.ts";
import { KubeClient } from "../../operator/kube/client.ts";
import { connectRedis, Producer, QueueAdmin, readLayout, type RedisClient } from "../../queue/index.ts";
import { ControlPlane } from "../support/controlplane.ts";
import { isLeader, operatorLog, startOperator, type OperatorProcess } from "../support/operator.ts";
import { type PodRunner, startPoolPodRunner } from "../support/podRunner.ts";
import { pollUntil } from "../support/poll.ts";
import { stopProcess } from "../support/processes.ts";
import { RedisServer } from "../support/redis.ts";
import { previousRelease } from "../support/releases.ts";
import { countBy, RECORDING_HANDLER, REPO } from "../support/workers.ts";

const PREVIOUS = previousRelease();
const LONG = 240_000;
/** The upgrade's pool; the rollback's keeps its pipeline on layout 1 (spec.upgrade.autoFinalize off). */
const UPGRADE_POOL = "upg";
const ROLLBACK_POOL = "rbk";
const queueOf = (pool: string) => `${pool}/work`;
const JOBS = 600;

describe(
  "the operator upgraded from the previous release while a pool scales",
  { timeout: 15 * 60_000 },
  () => {
    let cp: ControlPlane;
    let k: KubeClient;
    let redis: RedisServer;
    let r: RedisClient;
    let runner: PodRunner;
    let dir: string;
    const operators: OperatorProcess[] = [];

    before(async () => {
      dir = mkdtempSync(join(tmpdir(), "cvy-opupgrade-"));
      cp = await ControlPlane.start({ controllers: true, scheduler: true, kwok: true });
      k = new KubeClient(cp.kubeConfig());
      // the previous release as installed: its own CRD
      await cp.kubectl(
        "apply",
        "--server-side",
        "-f",
        join(PREVIOUS.dir, "crds", "conveyor.dev_workerpools.yaml"),
      );
      await cp.waitForCrd("workerpools.conveyor.dev");
      redis = await RedisServer.start();
      r = connectRedis(redis.url);
      runner = startPoolPodRunner(cp.kubeConfig(), dir, join(dir, "executions.ndjson"));
    });
    after(async () => {
      await runner?.stop();
      r?.disconnect();
      for (const op of operators) await stopProcess(op.proc, 10_000);
      await redis?.stop();
      await cp?.stop();
      if (dir && process.env.CONVEYOR_KEEP_TMP !== "1") rmSync(dir, { recursive: true, force: true });
    });

    const replicas = async (pool: string) =>
      (await k.get<Deployment>(resourcePath(RESOURCES.deployments, { namespace: "default", name: pool })))
        ?.spec?.replicas ?? 0;
    const executions = () =>
      existsSync(join(dir, "executions.ndjson"))
        ? readFileSync(join(dir, "executions.ndjson"), "utf8")
            .split("\n")
            .filter(Boolean)
            .map((l) => JSON.parse(l) as { id: string; q: string })
        : [];

    const applyPool = (pool: string, extra: Record<string, unknown> = {}) =>
      cp.apply(
        JSON.stringify({
          apiVersion: "conveyor.dev/v1alpha1",
          kind: "WorkerPool",
          metadata: { name: pool, namespace: "default" },
          spec: {
            ...extra,
            queue: queueOf(pool),
            redis: { url: redis.url },
            handler: { module: RECORDING_HANDLER.slice("module:".length) },
            concurrency: 2,
            maxJobSeconds: 60,
            drainSeconds: 5,
            scaling: {
              mode: "direct",
              minReplicas: 0,
              maxReplicas: 3,
              targetBacklogPerReplica: 20,
              activationBacklog: 0,
              pollSeconds: 1,
              cooldownSeconds: 5,
              behavior: { scaleDown: { stabilizationWindowSeconds: 0 } },
            },
          },
        }),
        "--server-side",
        "--field-manager=tester",
      );
    let current: OperatorProcess | undefined;
    const operator = async (which: "previous" | "this") => {
      const op = await startOperator(cp, which, [], which === "previous" ? { release: PREVIOUS } : {});
      operators.push(op);
      await pollUntil(`the ${which} operator leads`, () => isLeader(op), { timeoutMs: LONG });
      current = op;
      return op;
    };

    /**
     * JOBS jobs (ids `<prefix>N`) while `from`'s operator scales the pool up to 3, then `to`'s
     * replaces it mid-backlog and runs it to the end and back to zero. Sampled every 250 ms from
     * the first scale-up: the pool is never at zero while jobs wait; every job runs once.
     */
    const handOver = async (
      pool: string,
      prefix: string,
      from: "previous" | "this",
      to: "previous" | "this",
    ) => {
      const queue = queueOf(pool);
      const admin = new QueueAdmin(r);
      const samples: { replicas: number; waiting: number; by: string }[] = [];
      let by: string = from;
      let sampling = true;
      const sampler = (async () => {
        while (sampling) {
          const [n, c] = await Promise.all([replicas(pool), admin.counts(queue)]);
          samples.push({ replicas: n, waiting: c.ready + c.delayed, by });
          await new Promise((res) => setTimeout(res, 250));
        }
      })();
      const completedBefore = (await admin.counts(queue)).completed;
      await new Producer(r).enqueueMany(
        queue,
        Array.from({ length: JOBS }, (_, i) => ({ id: `${prefix}${i}`, data: { sleepMs: 150 } })),
      );
      try {
        await pollUntil(
          `the ${from} operator scaled the pool to 3`,
          async () => (await replicas(pool)) === 3,
          {
            timeoutMs: LONG,
            onTimeout: () => operatorLog(current!).slice(-3000),
          },
        );
        assert.ok((await admin.counts(queue)).ready > 0, "jobs still wait when the operator is replaced");
        // the upgrade as docs/install.md has it: the new CRD first (a rollback leaves it: it only adds)
        if (to === "this")
          await cp.kubectl(
            "apply",
            "--server-side",
            "--force-conflicts",
            "-f",
            join(REPO, "crds", "conveyor.dev_workerpools.yaml"),
          );
        await stopProcess(current!.proc, 10_000);
        by = "none";
        const op = await operator(to);
        by = to;
        await pollUntil(
          `all ${JOBS} jobs completed and the pool back at zero`,
          async () =>
            (await admin.counts(queue)).completed === completedBefore + JOBS && (await replicas(pool)) === 0,
          { timeoutMs: LONG, intervalMs: 500, onTimeout: () => operatorLog(op).slice(-3000) },
        );
      } finally {
        sampling = false;
        await sampler;
      }
      const firstUp = samples.findIndex((x) => x.replicas > 0);
      assert.ok(firstUp >= 0, "the pool scaled up");
      const atZeroWhileWaiting = samples.slice(firstUp).filter((x) => x.replicas === 0 && x.waiting > 0);
      assert.deepEqual(atZeroWhileWaiting, [], "the pool was at zero while jobs waited");
      assert.ok(
        samples.some((x) => x.by === to && x.replicas > 0),
        `the ${to} operator ran the pool while it had work`,
      );
      assert.equal((await admin.counts(queue)).dead, 0);
      const perJob = countBy(
        executions().filter((e) => e.id.startsWith(prefix)),
        (e) => e.id,
      );
      assert.equal(perJob.size, JOBS, "every job ran");
      assert.deepEqual(
        [...perJob].filter(([, n]) => n !== 1),
        [],
        "no job ran twice",
      );
    };

    test("upgrade: 0.1.0's operator scales the pool up, this release's (its CRD applied first) takes over mid-backlog and scales it to zero — never zero while jobs wait, every job once", async () => {
      await operator("previous");
      await applyPool(UPGRADE_POOL);
      await handOver(UPGRADE_POOL, "u", "previous", "this");
      // (every pod of its pool read layout 2 while it ran: this release's operator finalized it)
      assert.equal((await readLayout(r, UPGRADE_POOL)).inForce, 2, "the operator finalized layout 2");
    });

    test("rollback: this release's operator scales the pool up, 0.1.0's takes over mid-backlog and scales it to zero — the same", async () => {
      // A rollback needs the pipeline on layout 1: after finalize, 0.1.0 reads every queue as
      // paused (docs/install.md, "Upgrading"); a user who may roll back turns autoFinalize off.
      await applyPool(ROLLBACK_POOL, { upgrade: { autoFinalize: false } });
      await handOver(ROLLBACK_POOL, "r", "this", "previous");
      assert.equal((await readLayout(r, ROLLBACK_POOL)).inForce, 1, "autoFinalize off: layout 1 held");
    });
  },
);

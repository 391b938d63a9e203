// Canary rollouts (docs/rollouts.md) on a real node: the chart installed with helm as `make demo`
// does (test/e2e/nodeScenario.ts), the demo's two-stage pipeline of worker image pods under a
// real kubelet, a steady load of jobs, and two template changes of the first stage. A good one
// (an env var the handler ignores) is promoted through its step, every job runs once at each
// stage; a bad one (the recording handler's FAIL_PERCENT=30: 30 % of its attempts fail) is rolled
// back in its first step — RolledBack=True, the Warning Event with the figures, the canary
// Deployment at 0 replicas through warm shutdown (its containers exit 0 as the kubelet reports)
// — and no job is dead-lettered or completed twice.
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { Producer, QueueAdmin } from "../../queue/index.ts";
import { nodeUnavailable } from "../support/node.ts";
import { pollUntil } from "../support/poll.ts";
import { countBy, readExecutions } from "../support/workers.ts";
import { DEMO_HANDLER, demoTemplate, startNodeCluster, type NodeCluster } from "./nodeScenario.ts";
import { POOLS, workerPoolManifest } from "./scenario.ts";

const skip = nodeUnavailable();
const LONG = 300_000;
const [EXTRACT, SUMMARIZE] = POOLS;

interface PoolObject {
  status?: {
    rollout?: {
      phase?: string;
      step?: number;
      weight?: number;
      stableHash?: string;
      canaryHash?: string;
      message?: string;
    };
    conditions?: { type: string; status: string; reason?: string; message?: string }[];
  };
}

test(
  "rollouts on a real node: a good version of the demo's first stage is promoted, a bad one rolled back",
  { skip, timeout: 30 * 60_000 },
  async () => {
    const c: NodeCluster = await startNodeCluster((line) => console.log(line));
    const { cp, redis, dir, say, elapsed } = c;
    const feeders: { stop: () => Promise<void> }[] = [];
    try {
      const admin = new QueueAdmin(redis);
      const steps = [{ weight: 50, holdSeconds: 5 }]; // then 100
      /** The demo's pipeline, two worker pods a pool, `env` in the first stage's template. */
      const applyPipeline = async (env: Record<string, string>) => {
        const manifests = POOLS.map((p) => {
          const m = workerPoolManifest(p, {
            redisUrl: c.podRedis,
            handler: DEMO_HANDLER,
            template: demoTemplate(dir, p === EXTRACT ? env : {}),
          }) as { spec: Record<string, unknown> };
          // pinned at two pods: the pods the test watches are the rollout's, not an autoscaler's
          m.spec.replicas = 2;
          m.spec.scaling = { pollSeconds: 1 };
          m.spec.rollout = {
            canary: {
              steps,
              // judged on failures only: a canary's first jobs run beside its own start-up (a
              // good version's p95 read 7 s for 20 ms jobs once); test/operator/rollout.test.ts
              // judges run time
              analysis: { minJobs: 40, maxFailureRate: 0.1, maxFailureRatio: 3, maxP95Ratio: 1000 },
            },
          };
          return m;
        });
        const file = join(dir, "pipeline.yaml");
        writeFileSync(file, manifests.map((m) => JSON.stringify(m)).join("\n---\n"));
        say(`[${elapsed()}] kubectl apply (${EXTRACT.name} env ${JSON.stringify(env)})`);
        await cp.kubectl("apply", "-f", file);
      };
      let lastMessage = "";
      const getPool = async (name: string) => {
        const pool = JSON.parse(await cp.kubectl("get", "wp", name, "-o", "json")) as PoolObject;
        const ro = pool.status?.rollout;
        const line =
          ro?.phase === "Progressing"
            ? `step ${ro.step} ${ro.weight}%: ${ro.message}`
            : `${ro?.phase}: ${ro?.message ?? ""}`;
        if (name === EXTRACT.name && line !== lastMessage)
          say(`  [${elapsed()}] rollout ${(lastMessage = line)}`);
        return pool;
      };
      const readyPods = (pool: string) =>
        [...c.watcher.pods.values()].filter(
          (p) => p.pool === pool && p.toReadyMs !== undefined && !p.deleted,
        );
      const diagnose = async () =>
        `status.rollout ${JSON.stringify((await getPool(EXTRACT.name)).status?.rollout)}\n` +
        `${await cp.kubectl("get", "wp,deploy,pods", "-o", "wide").catch((e: Error) => e.message)}`;
      const events = async () =>
        (
          JSON.parse(
            await cp.kubectl(
              "get",
              "events",
              "--field-selector",
              `involvedObject.name=${EXTRACT.name},involvedObject.kind=WorkerPool`,
              "--sort-by=.firstTimestamp",
              "-o",
              "json",
            ),
          ) as { items: { reason: string; type: string; message: string }[] }
        ).items;

      /** Enqueues 8 documents every 250 ms on the first stage until stopped; the ids it enqueued. */
      const feed = (prefix: string) => {
        const producer = new Producer(redis);
        const ids: string[] = [];
        let stopped = false;
        const done = (async () => {
          for (let n = 0; !stopped;) {
            const batch = Array.from({ length: 8 }, () => ({
              id: `${prefix}-${n++}`,
              data: { sleepMs: 20, result: { sleepMs: 20 } },
              attempts: 6,
            }));
            await producer.enqueueMany(EXTRACT.queue, batch);
            ids.push(...batch.map((b) => b.id));
            await new Promise((res) => setTimeout(res, 250));
          }
        })();
        const f = {
          ids,
          stop: async () => {
            stopped = true;
            await done;
          },
        };
        feeders.push(f);
        return f;
      };

      /** Both stages drained; what each job's executions were, per stage. */
      const settle = async (ids: string[]) => {
        const want = new Set(ids);
        for (const p of POOLS)
          await pollUntil(
            `${p.queue}: every job of the load finished`,
            async () => {
              const n = await admin.counts(p.queue);
              return n.ready === 0 && n.delayed === 0 && n.inflight === 0;
            },
            { timeoutMs: LONG, intervalMs: 500 },
          );
        await pollUntil(
          `${SUMMARIZE.queue}: the load's ${ids.length} jobs completed`,
          async () => {
            const done = readExecutions(join(dir, "out", "executions.ndjson")).filter(
              (e) => e.q === SUMMARIZE.queue && want.has(e.id),
            );
            return new Set(done.map((e) => e.id)).size === ids.length;
          },
          { timeoutMs: LONG, intervalMs: 500 },
        );
        const mine = readExecutions(join(dir, "out", "executions.ndjson")).filter((e) => want.has(e.id));
        return {
          extract: mine.filter((e) => e.q === EXTRACT.queue),
          summarize: mine.filter((e) => e.q === SUMMARIZE.queue),
        };
      };

      // v1: both pools at their two stable pods, the stable version recorded
      await applyPipeline({ VERSION_TAG: "v1" });
      const v1 = await pollUntil(
        "both pools' two stable pods Ready, the stable version recorded",
        async () => {
          const ro = (await getPool(EXTRACT.name)).status?.rollout;
          return ro?.stableHash && POOLS.every((p) => readyPods(p.name).length >= 2)
            ? ro.stableHash
            : undefined;
        },
        { timeoutMs: LONG, intervalMs: 1000, onTimeout: diagnose },
      );
      say(`[${elapsed()}] stable version ${v1} on two pods a pool`);

      // the good change: an env var the handler ignores
      const good = feed("good");
      const tGood = Date.now();
      const stableTemplate = new Set(readyPods(EXTRACT.name).map((p) => p.templateHash));
      await applyPipeline({ VERSION_TAG: "v2" });
      let sawCanary = false;
      const promoted = await pollUntil(
        "the good version promoted",
        async () => {
          const ro = (await getPool(EXTRACT.name)).status?.rollout;
          if (ro?.phase === "Progressing" && readyPods(EXTRACT.name).some((p) => p.canary)) sawCanary = true;
          return ro?.phase === "RolledBack" || (ro?.phase === "Promoted" && ro.stableHash !== v1)
            ? ro
            : undefined;
        },
        { timeoutMs: LONG, intervalMs: 500, onTimeout: diagnose },
      );
      const goodSeconds = (Date.now() - tGood) / 1000;
      assert.equal(promoted.phase, "Promoted", promoted.message);
      // The step splits the pool's two pods: one stable pod stops, none starts (a scaling write
      // of the total then the split's share started one and stopped it within a second; deleted
      // while its container started, it never got its SIGTERM and was SIGKILLed 40 s later).
      const tPromoted = Date.now();
      assert.deepEqual(
        [...c.watcher.pods.values()]
          .filter(
            (p) =>
              p.pool === EXTRACT.name &&
              !p.canary &&
              stableTemplate.has(p.templateHash) &&
              p.seen > tGood &&
              p.seen < tPromoted,
          )
          .map((p) => p.name),
        [],
        "no stable pod of the first stage started during the step",
      );
      // ... and one canary pod does (a canary created with its share while the stable still had
      // both pods was split as a pool of three: a second canary pod, stopped a pass later).
      const stepCanaries = [...c.watcher.pods.values()]
        .filter((p) => p.pool === EXTRACT.name && p.canary && p.seen > tGood && p.seen < tPromoted)
        .map((p) => p.name);
      assert.equal(stepCanaries.length, 1, `canary pods of the step: ${stepCanaries.join(", ")}`);
      // (the canary ran the step's jobs: its pod may finish them before the watch sees it Ready)
      const canaryJobs = Number(/canary (\d+)\/(\d+) failed/.exec(promoted.message ?? "")?.[2] ?? 0);
      assert.ok(canaryJobs >= 40, `the canary ran the step's jobs: ${promoted.message}`);
      if (!sawCanary) say(`[${elapsed()}] (no canary pod was seen Ready during the step)`);
      assert.match(promoted.message ?? "", /promoted after 1 step\(s\)/);
      say(`[${elapsed()}] promoted in ${goodSeconds.toFixed(0)}s: ${promoted.message}`);
      await pollUntil(
        "the canary Deployment deleted, the stable pods Ready on v2",
        async () => {
          if ((await cp.kubectl("get", "deploy", `${EXTRACT.name}-canary`, "--ignore-not-found")).trim())
            return false;
          const d = JSON.parse(await cp.kubectl("get", "deploy", EXTRACT.name, "-o", "json")) as {
            metadata: { annotations?: Record<string, string> };
            status?: { replicas?: number; updatedReplicas?: number; readyReplicas?: number };
          };
          const s = d.status ?? {};
          return (
            d.metadata.annotations?.["conveyor.dev/template-version"] === promoted.stableHash &&
            s.replicas === 2 &&
            s.updatedReplicas === 2 &&
            s.readyReplicas === 2
          );
        },
        { timeoutMs: LONG, intervalMs: 1000, onTimeout: diagnose },
      );
      await good.stop();
      const g = await settle(good.ids);
      const ranTwice = (es: { id: string }[]) => [...countBy(es, (e) => e.id)].filter(([, n]) => n > 1);
      assert.deepEqual(ranTwice(g.extract), [], "good: every job ran once at the first stage");
      assert.deepEqual(ranTwice(g.summarize), [], "good: every job ran once at the second stage");
      assert.equal(new Set(g.extract.map((e) => e.id)).size, good.ids.length);
      for (const p of POOLS)
        assert.equal((await admin.counts(p.queue)).dead, 0, `${p.queue}: no dead letters`);
      say(`[${elapsed()}] good rollout: ${good.ids.length} jobs, each once at both stages, 0 dead letters`);

      // the bad change: 30 % of its attempts fail
      const bad = feed("bad");
      const tBad = Date.now();
      await applyPipeline({ VERSION_TAG: "v3", FAIL_PERCENT: "30" });
      const rolledBack = await pollUntil(
        "the bad version rolled back",
        async () => {
          const pool = await getPool(EXTRACT.name);
          const ro = pool.status?.rollout;
          return ro?.phase === "RolledBack" ||
            (ro?.phase === "Promoted" && ro.stableHash !== promoted.stableHash)
            ? pool
            : undefined;
        },
        { timeoutMs: LONG, intervalMs: 500, onTimeout: diagnose },
      );
      const badSeconds = (Date.now() - tBad) / 1000;
      const ro = rolledBack.status!.rollout!;
      assert.equal(ro.phase, "RolledBack", ro.message);
      assert.equal(ro.step, 0, "rolled back in its first step");
      assert.equal(ro.stableHash, promoted.stableHash, "the pool stays on the promoted version");
      const cond = rolledBack.status!.conditions!.find((x) => x.type === "RolledBack");
      assert.equal(cond?.status, "True");
      // (the Event is posted after the status that shows the roll-back)
      const event = await pollUntil(
        "the RolledBack Event",
        async () => (await events()).find((e) => e.reason === "RolledBack"),
        { timeoutMs: LONG, intervalMs: 500 },
      );
      assert.equal(event.type, "Warning");
      assert.match(event?.message ?? "", /canary \d+\/\d+ failed \([\d.]+%\).*stable \d+\/\d+ failed/);
      say(`[${elapsed()}] rolled back in ${badSeconds.toFixed(0)}s: ${event?.message}`);
      const canaryPods = () =>
        [...c.watcher.pods.values()].filter((p) => p.pool === EXTRACT.name && p.canary && p.toReadyMs);
      const badCanaries = canaryPods().map((p) => p.name);
      await pollUntil(
        "the canary Deployment at 0 replicas, its pods gone",
        async () => {
          const spec = (
            await cp.kubectl("get", "deploy", `${EXTRACT.name}-canary`, "-o", "jsonpath={.spec.replicas}")
          ).trim();
          return (
            spec === "0" &&
            badCanaries.every((n) => [...c.watcher.pods.values()].find((p) => p.name === n)?.deleted)
          );
        },
        { timeoutMs: LONG, intervalMs: 1000, onTimeout: diagnose },
      );
      await bad.stop();
      const b = await settle(bad.ids);
      const attemptsTwice = [...countBy(b.extract, (e) => `${e.id}:${e.attempt}`)].filter(([, n]) => n > 1);
      assert.deepEqual(attemptsTwice, [], "bad: no attempt ran twice at the first stage");
      assert.deepEqual(ranTwice(b.summarize), [], "bad: every job completed its first stage once");
      assert.equal(
        new Set(b.summarize.map((e) => e.id)).size,
        bad.ids.length,
        "bad: every job reached the second stage",
      );
      for (const p of POOLS)
        assert.equal((await admin.counts(p.queue)).dead, 0, `${p.queue}: no job dead-lettered`);
      const failed = b.extract.length - bad.ids.length;
      say(
        `[${elapsed()}] bad rollout: ${bad.ids.length} jobs, ${b.extract.length} first-stage attempts (${failed} retried after a failure), 0 dead letters`,
      );

      // warm shutdown: every worker container that became Ready and was stopped exited 0
      const workers = [...c.watcher.pods.values()].filter((p) => p.pool);
      assert.ok(badCanaries.length >= 1, "the bad version ran in a canary pod");
      assert.deepEqual(
        workers
          .filter((p) => p.toReadyMs !== undefined && p.exitCode !== undefined && p.exitCode !== 0)
          .map((p) => `${p.name}: ${p.exitCode}`),
        [],
        "every worker container stopped by a rollout exited 0 as the kubelet reported",
      );
      for (const n of badCanaries)
        assert.equal(workers.find((p) => p.name === n)?.exitCode, 0, `canary pod ${n} exited 0`);
      say(`[${elapsed()}] kubectl get wp:\n${await cp.kubectl("get", "wp")}`);
    } catch (err) {
      for (const f of feeders) await f.stop().catch(() => {});
      await c.stop().catch(() => []);
      throw err;
    }
    for (const f of feeders) await f.stop();
    assert.deepEqual(await c.stop(), [], "host unchanged after the run");
  },
);

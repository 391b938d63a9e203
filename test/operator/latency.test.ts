// Latency mode (scaling.targetWaitSeconds) on a real control plane and Redis: two pools get the
// same traffic — arrivals of 10 jobs/s that in-process consumers claim at once and hold 2 s, so
// nothing waits — one sized by targetBacklogPerReplica, one by a wait target. The latency pool
// grows from the arrival rate and the measured job time (the backlog pool, seeing only its running
// jobs, stays at its minimum), says why with its numbers, shows the oldest waiting job in status
// and metrics, and once arrivals stop comes back down after its stabilization window only, never
// up again (no flapping). A running latency pool hears a surge through its surge bell. Pools are
// in direct mode (the operator writes the scale); waits are polls.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { pollUntil } from "../support/poll.ts";
import { rfc3339 } from "../../lib/time.ts";
import type { WorkerPoolSpecInput } from "../../operator/apis/v1alpha1/types.ts";
import type { KubeClient } from "../../operator/kube/client.ts";
import {
  Consumer,
  DOORBELL_CHANNEL,
  Producer,
  QueueKeys,
  type ClaimedJob,
  type RedisClient,
} from "../../queue/index.ts";
import type { ControlPlane } from "../support/controlplane.ts";
import {
  scrapeOperator,
  startPoolHarness,
  sumSeries,
  workerPoolEvents,
  workerPoolManifest,
  type OperatorProcess,
  type PoolHarness,
} from "../support/operator.ts";
import type { RedisServer } from "../support/redis.ts";

const LONG = 240_000;

describe("operator: latency mode", { timeout: 20 * 60_000 }, () => {
  let h: PoolHarness;
  let cp: ControlPlane;
  let k: KubeClient;
  let redis: RedisServer;
  let r: RedisClient;
  let producer: Producer;
  let op: OperatorProcess;

  const getPool = (name: string) => h.getPool(name);
  const replicas = async (name: string) => (await h.replicas(name)) ?? 0;
  const apply = (obj: unknown) => h.apply(obj);

  before(async () => {
    h = await startPoolHarness("lat");
    ({ cp, k, redis, r, op } = h);
    producer = new Producer(r);
  });
  after(() => h?.stop());

  it("the API server refuses a wait target that is not positive, or without mode direct, naming the field", async () => {
    const refused = async (scaling: object) => {
      const res = await cp.run("kubectl", [`--kubeconfig=${cp.kubeconfigPath}`, "apply", "-f", "-"], {
        input: JSON.stringify(
          workerPoolManifest("refused", redis.url, { scaling } as Partial<WorkerPoolSpecInput>),
        ),
        check: false,
      });
      assert.notEqual(res.code, 0, "applied");
      return res.stderr;
    };
    assert.match(await refused({ mode: "direct", targetWaitSeconds: 0 }), /spec\.scaling\.targetWaitSeconds/);
    assert.match(
      await refused({ targetWaitSeconds: 5 }),
      /scaling\.targetWaitSeconds needs scaling\.mode: direct/,
    );
  });

  it("same traffic, no backlog: the latency pool grows from the arrival rate while the backlog pool stays; it comes down after the window, without flapping", async () => {
    const scaling = (extra: object) => ({
      mode: "direct" as const,
      minReplicas: 1,
      maxReplicas: 20,
      targetBacklogPerReplica: 10,
      pollSeconds: 1,
      behavior: { scaleDown: { stabilizationWindowSeconds: 20 } },
      ...extra,
    });
    // (its 20 running jobs are its backlog: 30 per replica keeps it at one)
    await apply(
      workerPoolManifest("by-backlog", redis.url, {
        concurrency: 2,
        scaling: scaling({ targetBacklogPerReplica: 30 }),
      }),
    );
    await apply(
      workerPoolManifest("by-wait", redis.url, {
        concurrency: 2,
        scaling: scaling({ targetWaitSeconds: 10 }),
      }),
    );
    await pollUntil(
      "both pools at their minimum",
      async () => (await replicas("by-backlog")) === 1 && (await replicas("by-wait")) === 1,
      {
        timeoutMs: LONG,
      },
    );

    // A job waits: its enqueue time is in status (oldestReadySince) and its age in the metric.
    const first = await producer.enqueue("by-wait/work", { waiting: true });
    const createdAt = Number(await r.hget(`cvy:{by-wait}:job:${first.id}`, "createdAt"));
    await pollUntil(
      "status.oldestReadySince is the waiting job's enqueue time",
      async () => (await getPool("by-wait"))?.status?.oldestReadySince === rfc3339(createdAt),
      { timeoutMs: LONG },
    );
    await pollUntil(
      "the oldest ready age metric counts up",
      async () =>
        sumSeries(
          await scrapeOperator(op),
          "conveyor_queue_oldest_ready_age_seconds",
          /workerpool="by-wait"/,
        ) >= 1,
      { timeoutMs: LONG },
    );
    // Columns are aligned: the cell starts where its header does (empty cells make splitting unsafe).
    const [header, row] = (await cp.kubectl("get", "wp", "by-wait", "-o", "wide")).split("\n");
    const column = header!.indexOf("OLDEST");
    assert.ok(column > 0, header);
    const cell = row!.slice(column).split(/\s+/)[0]!;
    assert.match(cell, /^\d+s$/, `kubectl get wp -o wide shows the oldest job's age:\n${header}\n${row}`);

    // Arrivals of 10/s are claimed at once and each held 2 s before it completes: the queue's
    // run-time counter says a job holds a slot 2 s. The workers' reports say a median of 500 ms:
    // the measured mean is what the decision sizes by.
    const stop = new AbortController();
    const run = async (queue: string, pod: string) => {
      const c = new Consumer(r, queue, { workerId: pod, leaseMs: 30_000 });
      const held: { job: ClaimedJob; until: number }[] = [];
      while (!stop.signal.aborted) {
        await c.renew([], {
          id: pod,
          pod,
          slots: 64,
          busy: held.length,
          draining: false,
          jobP50Ms: 500,
          seen: Date.now(),
        });
        const { jobs } = await c.claim(64 - held.length);
        for (const job of jobs) held.push({ job, until: Date.now() + 2000 });
        while (held.length > 0 && held[0]!.until <= Date.now()) await c.complete(held.shift()!.job, null);
        await new Promise((res) => setTimeout(res, 50));
      }
      // (arrivals stopped: what is held ends now, or its lease would lapse into a waiting job)
      for (const { job } of held) await c.complete(job, null);
    };
    const arrive = async () => {
      let i = 0;
      while (!stop.signal.aborted) {
        await producer.enqueueMany("by-wait/work", [{ data: i }]);
        await producer.enqueueMany("by-backlog/work", [{ data: i++ }]);
        await new Promise((res) => setTimeout(res, 100));
      }
    };
    const running = [run("by-wait/work", "wait-pod"), run("by-backlog/work", "backlog-pod"), arrive()];
    try {
      // 10/s × 2 s = 20 busy slots + √20 headroom ≈ 24.5 → 13 replicas of 2 (the enqueue loop on a
      // loaded machine may arrive slower: well above the minimum is what is asserted).
      await pollUntil(
        "the latency pool grows from the arrival rate",
        async () => (await replicas("by-wait")) >= 5,
        {
          timeoutMs: LONG,
        },
      );
      assert.equal(await replicas("by-backlog"), 1, "the backlog pool saw no waiting backlog to scale on");
      // (the first scale-up may come before any job has ended: sized by the reports' 500 ms)
      const mean = /wait target 10s: arrivals [\d.]+\/s × job 2(\.\d+)?s \(mean of \d+\) = [\d.]+ slots/;
      // (the first scale-ups may be sized by the reports alone and reach the size above before a
      // job has ended: the one sized by the mean follows once one has)
      const ups = async () =>
        (await workerPoolEvents(k, "default", "by-wait"))
          .map((e) => e.message)
          .filter((m) => /LatencyScaleUp/.test(m));
      await pollUntil(
        "a LatencyScaleUp Event sized by the measured mean",
        async () => (await ups()).some((m) => mean.test(m)),
        { timeoutMs: LONG },
      ).catch(async (err: Error) => {
        throw new Error(`${err.message}:\n${(await ups()).join("\n")}`);
      });
      // (the same pass writes status after the Event: waited for, not read once)
      const decisions = async () => (await getPool("by-wait"))?.status?.recentDecisions ?? [];
      await pollUntil(
        "the reasoning in status.recentDecisions",
        async () =>
          (await decisions()).some((d) => d.reason === "LatencyScaleUp" && mean.test(d.message ?? "")),
        { timeoutMs: LONG, onTimeout: async () => JSON.stringify(await decisions()) },
      );
      assert.ok(
        sumSeries(await scrapeOperator(op), "conveyor_operator_pool_arrival_rate", /workerpool="by-wait"/) >
          2,
        "the arrival rate metric",
      );
    } finally {
      stop.abort();
      await Promise.all(running);
    }

    // Arrivals stop: down to the minimum after the 20 s window, never up again on the way.
    const peak = await replicas("by-wait");
    const stoppedAt = Date.now();
    const seen: number[] = [];
    await pollUntil(
      "back at the minimum",
      async () => {
        const n = await replicas("by-wait");
        if (seen.at(-1) !== n) seen.push(n);
        return n === 1;
      },
      { timeoutMs: LONG },
    );
    assert.ok(
      Date.now() - stoppedAt >= 15_000,
      `scaled down ${Date.now() - stoppedAt} ms after arrivals stopped`,
    );
    for (let i = 1; i < seen.length; i++)
      assert.ok(seen[i]! < seen[i - 1]!, `no flapping: ${peak} then ${seen.join(" → ")}`);
    const down = (await workerPoolEvents(k, "default", "by-wait")).filter((e) =>
      /LatencyScaleDown/.test(e.message),
    );
    assert.ok(down.length > 0, "a LatencyScaleDown Event");
  });
  it("a running pool hears a surge at once: its surge bell rings when more jobs wait than its slots start within the target", async () => {
    // pollSeconds 3600: within this test only a bell can show the operator a job. Workers report
    // jobs of 10 min; a target of 2 h leaves each new job 1/12 of a slot to ask for: the pool's
    // 2 slots (+10 %) start 26 within it, and the 27th waiting job rings.
    const queue = "surging/work";
    const bell = new QueueKeys(queue).doorbell;
    await new Consumer(r, queue, { workerId: "surging-pod", leaseMs: 30_000 }).renew([], {
      id: "surging-pod",
      pod: "surging-pod",
      slots: 2,
      busy: 0,
      draining: false,
      jobP50Ms: 600_000,
      seen: Date.now(),
    });
    await apply(
      workerPoolManifest("surging", redis.url, {
        concurrency: 2,
        scaling: {
          mode: "direct",
          minReplicas: 1,
          maxReplicas: 20,
          pollSeconds: 3600,
          targetWaitSeconds: 7200,
        },
      }),
    );
    const rings = async () =>
      sumSeries(await scrapeOperator(op), "conveyor_operator_doorbell_rings_total", /workerpool="surging"/);
    await pollUntil(
      "surging at 1 with its surge bell left",
      async () => (await replicas("surging")) === 1 && (await r.get(bell)) === `${DOORBELL_CHANNEL} 27`,
      { timeoutMs: LONG },
    );
    await producer.enqueueMany(
      queue,
      Array.from({ length: 20 }, (_, i) => ({ data: { i } })),
    );
    assert.equal(await r.get(bell), `${DOORBELL_CHANNEL} 27`, "20 waiting: no ring");
    await producer.enqueueMany(
      queue,
      Array.from({ length: 20 }, (_, i) => ({ data: { i: 20 + i } })),
    );
    await pollUntil("the surge scales the pool up", async () => (await replicas("surging")) > 1, {
      timeoutMs: LONG,
    });
    assert.equal(await rings(), 1, "one ring");
    // (status is written after the scale and its Event: waited for, not read once)
    const decision = async () =>
      (await getPool("surging"))?.status?.recentDecisions?.find((d) => d.reason === "LatencyScaleUp");
    await pollUntil(
      "the ring's poll saw the surge (a LatencyScaleUp of + 40 waiting)",
      async () => /\+ 40 waiting/.test((await decision())?.message ?? ""),
      { timeoutMs: LONG, onTimeout: async () => JSON.stringify(await decision()) },
    );
    // The bell is left again for the new size (none at the maximum): it rings at more than 1.5 × 40.
    const n = await replicas("surging");
    if (n < 20)
      await pollUntil("a new surge bell", async () => Number((await r.get(bell))?.split(" ")[1] ?? 0) > 60, {
        timeoutMs: LONG,
      });
    await cp.kubectl("delete", "wp", "surging", "--wait=true");
  });
});

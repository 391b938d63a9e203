// Redis behind Sentinel (1 primary, 1 replica, 3 sentinels): a producer and real worker processes
// connect through the sentinels, and follow a failover — the primary SIGKILLed mid-run, the
// replica promoted — without a restart. With durability "replicated" no acknowledged enqueue or
// settle is lost.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import {
  connectRedis,
  Producer,
  QueueAdmin,
  QueueKeys,
  ReplicationError,
  waitUntilReady,
  type RedisClient,
} from "../../queue/index.ts";
import { pollUntil } from "../support/poll.ts";
import { stopProcess, waitFor } from "../support/processes.ts";
import { RedisSentinelSet } from "../support/sentinel.ts";
import {
  countBy,
  readExecutions,
  RECORDING_HANDLER,
  startWorker,
  type WorkerProcess,
} from "../support/workers.ts";

describe("Redis Sentinel", () => {
  let set: RedisSentinelSet;
  let redis: RedisClient;
  let admin: QueueAdmin;
  let dir: string;
  const workers: WorkerProcess[] = [];
  before(async () => {
    set = await RedisSentinelSet.start();
    redis = connectRedis(set.url, { name: "sentinel-test" });
    await waitUntilReady(redis, set.url, 20_000);
    admin = new QueueAdmin(redis);
    dir = mkdtempSync(join(tmpdir(), "cvy-sentinel-test-"));
  });
  after(async () => {
    await Promise.all(workers.map((w) => stopProcess(w, 2000)));
    redis?.disconnect();
    await set?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const worker = async (queue: string, env: Record<string, string> = {}) => {
    const w = await startWorker({
      dir,
      name: `sw${workers.length + 1}`,
      env: {
        REDIS_URL: set.url,
        CONVEYOR_QUEUE: queue,
        CONVEYOR_HANDLER: RECORDING_HANDLER,
        EXEC_LOG: join(dir, `${queue}.exec`),
        CONVEYOR_LEASE: "3s",
        ...env,
      },
    });
    workers.push(w);
    return w;
  };
  const readyz = async (w: WorkerProcess) => {
    try {
      return (await fetch(`http://127.0.0.1:${w.port}/readyz`)).status;
    } catch {
      return 0;
    }
  };

  test("a producer and a worker process work through the sentinels", async () => {
    const q = "through-sentinel";
    const producer = new Producer(redis);
    await producer.enqueueMany(
      q,
      Array.from({ length: 30 }, (_, i) => ({ id: `s${i}`, data: { i } })),
    );
    await worker(q, { CONVEYOR_CONCURRENCY: "4" });
    await waitFor("30 completed", async () => (await admin.counts(q)).completed === 30, 60_000, 100);
    // the jobs live on the primary the sentinels name, and reached the replica
    const primary = connectRedis(set.servers[0]!.url);
    const replica = connectRedis(set.servers[1]!.url);
    try {
      assert.equal(await primary.call("WAIT", 1, 10_000), 1);
      const job = new QueueKeys(q).job("s29");
      assert.ok(await replica.exists(job));
      assert.deepEqual(await replica.hgetall(job), await primary.hgetall(job));
    } finally {
      primary.disconnect();
      replica.disconnect();
    }
  });

  test('a bad sentinel URL is an error naming it; durability "replicated" fails clearly without a replica', async () => {
    assert.throws(() => connectRedis("redis-sentinel://127.0.0.1:1"), /names the primary/);
    // a primary without replicas: WAIT 1 answers 0
    const lone = connectRedis(`redis://127.0.0.1:${set.servers[0]!.port}`);
    const replica = set.servers[1]!;
    await replica.kill("SIGTERM");
    try {
      const p = new Producer(lone, { durability: "replicated", replicaTimeoutMs: 100 });
      await assert.rejects(p.enqueue("lonely", { x: 1 }, { id: "l1" }), (err: unknown) => {
        assert.ok(err instanceof ReplicationError, String(err));
        assert.match(err.message, /no replica confirmed it within 100ms/);
        return true;
      });
      // the primary did take it: enqueueing again with the same id creates nothing twice
      const again = await new Producer(lone).enqueue("lonely", { x: 1 }, { id: "l1" });
      assert.equal(again.created, false);
    } finally {
      lone.disconnect();
      await replica.resume();
      await waitFor("the replica back in sync", async () => {
        const r = connectRedis(replica.url);
        try {
          return /master_link_status:up/.test(await (r as import("ioredis").Redis).info("replication"));
        } finally {
          r.disconnect();
        }
      });
    }
  });

  test('failover mid-run: workers go unready and come back, producers follow; "replicated" loses no acknowledged job', async () => {
    const q = "failover";
    const producer = new Producer(redis, { durability: "replicated" });
    const ws = [
      await worker(q, { CONVEYOR_CONCURRENCY: "4", CONVEYOR_DURABILITY: "replicated" }),
      await worker(q, { CONVEYOR_CONCURRENCY: "4", CONVEYOR_DURABILITY: "replicated" }),
    ];
    const acknowledged = new Set<string>();
    let stop = false;
    let enqueueErrors = 0;
    // a producer that keeps enqueueing through the failover; only acknowledged ids are counted
    const producing = (async () => {
      for (let i = 0; !stop; i++) {
        const id = `f${i}`;
        try {
          await producer.enqueue(q, { sleepMs: 20 }, { id });
          acknowledged.add(id);
        } catch {
          enqueueErrors++;
          await sleep(50);
        }
        await sleep(10);
      }
    })();
    const sawUnready = ws.map(() => false);
    const watching = (async () => {
      while (!stop) {
        const codes = await Promise.all(ws.map(readyz));
        codes.forEach((c, i) => c === 503 && (sawUnready[i] = true));
        await sleep(25);
      }
    })();
    await waitFor(
      "work before the failover",
      async () => (await admin.counts(q)).completed >= 50,
      60_000,
      50,
    );
    const { killed, promoted } = await set.failover();
    assert.notEqual(killed.port, promoted.port);
    // The new primary has no replica until the old one is back (as its pod would restart):
    // until then a "replicated" write cannot be confirmed and fails.
    await set.rejoin(killed);
    await waitFor(
      "every worker ready again on the new primary",
      async () => (await Promise.all(ws.map(readyz))).every((c) => c === 200),
      60_000,
      50,
    );
    const afterFailover = acknowledged.size;
    await waitFor(
      "enqueues acknowledged after the failover",
      async () => acknowledged.size >= afterFailover + 30,
      60_000,
      50,
    );
    stop = true;
    await producing;
    await watching;
    assert.deepEqual(
      sawUnready,
      [true, true],
      "each worker answered /readyz 503 while no primary was reachable",
    );
    await pollUntil(
      "every acknowledged job completed",
      async () => {
        const c = await admin.counts(q);
        return c.backlog === 0 && c.completed >= acknowledged.size ? c : null;
      },
      {
        timeoutMs: 120_000,
        // what a failure needs to be read from a CI log: the counts, the jobs not completed and
        // what the workers said
        onTimeout: async () => {
          const open: string[] = [];
          for (const id of acknowledged) {
            const job = await admin.job(id, q);
            if (job?.state !== "completed") open.push(`${id}: ${job ? JSON.stringify(job) : "no record"}`);
          }
          return [
            `counts ${JSON.stringify(await admin.counts(q))} counters ${JSON.stringify(await admin.counters(q))}`,
            `${acknowledged.size} acknowledged; not completed (${open.length}):`,
            ...open.slice(0, 20),
            ...ws.map((w, i) => `worker ${i + 1} log (tail):\n${w.logs().slice(-4000)}`),
          ].join("\n");
        },
      },
    );
    const missing: string[] = [];
    for (const id of acknowledged) if ((await admin.job(id, q))?.state !== "completed") missing.push(id);
    assert.deepEqual(missing, [], "acknowledged jobs lost in the failover");
    const perJob = countBy(readExecutions(join(dir, `${q}.exec`)), (e) => e.id);
    for (const id of acknowledged) assert.ok((perJob.get(id) ?? 0) >= 1, `${id} never ran`);
    for (const w of ws) assert.equal(w.child.exitCode, null, `a worker exited: ${w.logs()}`);
    console.log(
      `failover: ${acknowledged.size} acknowledged, ${enqueueErrors} enqueue errors, ${[...perJob.values()].filter((n) => n > 1).length} jobs ran twice`,
    );
    // the old primary came back as a replica of the new one
    await waitFor("the old primary rejoins as a replica", async () => {
      const r = connectRedis(killed.url);
      try {
        return /role:slave/.test(await (r as import("ioredis").Redis).info("replication"));
      } finally {
        r.disconnect();
      }
    });
  });
});

// Redis Cluster with replicas (3 primaries + 3 replicas): the primary serving a queue is
// SIGKILLed mid-run and its replica promoted; a producer and real worker processes follow the
// new slot owner (MOVED, CLUSTERDOWN/TRYAGAIN retried) and carry on without a restart. With
// durability "replicated" no acknowledged enqueue or settle is lost.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { connectRedis, Producer, QueueAdmin, QueueKeys, type RedisClient } from "../../queue/index.ts";
import { stopProcess, waitFor } from "../support/processes.ts";
import { RedisClusterServer } from "../support/redis.ts";
import {
  countBy,
  readExecutions,
  RECORDING_HANDLER,
  startWorker,
  type WorkerProcess,
} from "../support/workers.ts";

describe("Redis Cluster failover", () => {
  let cluster: RedisClusterServer;
  let redis: RedisClient;
  let admin: QueueAdmin;
  let dir: string;
  const workers: WorkerProcess[] = [];
  before(async () => {
    cluster = await RedisClusterServer.start(3, { replicas: 1, nodeTimeoutMs: 1000 });
    redis = connectRedis(cluster.url, { name: "cluster-failover-test" });
    admin = new QueueAdmin(redis);
    dir = mkdtempSync(join(tmpdir(), "cvy-cluster-failover-"));
  });
  after(async () => {
    await Promise.all(workers.map((w) => stopProcess(w, 2000)));
    redis?.disconnect();
    await cluster?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  test('the queue\'s primary killed mid-run: its replica takes over, workers and producers carry on; "replicated" loses no acknowledged job', async () => {
    const q = "cfail/work";
    const producer = new Producer(redis, { durability: "replicated" });
    for (let i = 0; i < 2; i++) {
      const w = await startWorker({
        dir,
        name: `cw${i + 1}`,
        env: {
          REDIS_URL: cluster.url,
          CONVEYOR_QUEUE: q,
          CONVEYOR_HANDLER: RECORDING_HANDLER,
          EXEC_LOG: join(dir, "exec.log"),
          CONVEYOR_CONCURRENCY: "4",
          CONVEYOR_LEASE: "3s",
          CONVEYOR_DURABILITY: "replicated",
        },
      });
      workers.push(w);
    }
    const acknowledged = new Set<string>();
    let stop = false;
    let enqueueErrors = 0;
    const producing = (async () => {
      for (let i = 0; !stop; i++) {
        const id = `c${i}`;
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
    await waitFor(
      "work before the failover",
      async () => (await admin.counts(q)).completed >= 50,
      60_000,
      50,
    );
    const { killed, promoted } = await cluster.failover(new QueueKeys(q).ready);
    assert.notEqual(killed.port, promoted.port);
    // the promoted primary gets a replica again (the killed node rejoins as one)
    await killed.resume();
    const afterFailover = acknowledged.size;
    await waitFor(
      "enqueues acknowledged after the failover",
      async () => acknowledged.size >= afterFailover + 30,
      120_000,
      50,
    );
    stop = true;
    await producing;
    await waitFor(
      "every acknowledged job completed",
      async () => {
        const c = await admin.counts(q);
        return c.backlog === 0 && c.completed >= acknowledged.size ? c : null;
      },
      120_000,
      100,
    );
    const missing: string[] = [];
    for (const id of acknowledged) if ((await admin.job(id, q))?.state !== "completed") missing.push(id);
    assert.deepEqual(missing, [], "acknowledged jobs lost in the failover");
    const perJob = countBy(readExecutions(join(dir, "exec.log")), (e) => e.id);
    for (const w of workers) assert.equal(w.child.exitCode, null, `a worker exited: ${w.logs()}`);
    console.log(
      `cluster failover: ${acknowledged.size} acknowledged, ${enqueueErrors} enqueue errors, ${[...perJob.values()].filter((n) => n > 1).length} jobs ran twice`,
    );
  });
});

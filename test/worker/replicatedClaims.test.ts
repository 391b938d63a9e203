// Durability "replicated" and complete-and-claim: a settle waits for a replica (WAIT) before it
// is acknowledged, and a claim in the same call would wait with it — its jobs' leases running
// out before they start (seen in `make chaos` on Sentinel, seed 167314027: right after a
// failover the new primary has no replica until the old one rejoins, and WAIT blocks for its
// timeout; the claimed jobs were swept and run twice, once by the same worker). A real primary
// and replica; the replica is held with CLIENT PAUSE ALL, so WAIT blocks for three leases.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { connectRedis, Producer, QueueAdmin, type RedisClient } from "../../queue/index.ts";
import { stopProcess, waitFor } from "../support/processes.ts";
import { RedisServer } from "../support/redis.ts";
import {
  countBy,
  readExecutions,
  RECORDING_HANDLER,
  startWorker,
  type WorkerProcess,
} from "../support/workers.ts";

describe('durability "replicated": settles wait for a replica, claims do not', () => {
  let primary: RedisServer;
  let replica: RedisServer;
  let redis: RedisClient;
  let onReplica: RedisClient;
  let dir: string;
  const workers: WorkerProcess[] = [];
  before(async () => {
    const sync = ["--repl-diskless-sync-delay", "0"];
    primary = await RedisServer.start({ args: sync });
    replica = await RedisServer.start({ args: [...sync, "--replicaof", "127.0.0.1", String(primary.port)] });
    redis = connectRedis(primary.url);
    onReplica = connectRedis(replica.url);
    await waitFor("the replica in sync", async () =>
      /master_link_status:up/.test(await (onReplica as import("ioredis").Redis).info("replication")),
    );
    dir = mkdtempSync(join(tmpdir(), "cvy-replicated-claims-"));
  });
  after(async () => {
    await Promise.all(workers.map((w) => stopProcess(w, 2000)));
    redis?.disconnect();
    onReplica?.disconnect();
    await replica?.stop();
    await primary?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  test("a completion whose WAIT outlasts the lease: the next job is not claimed under it, runs once, no stall", async () => {
    const q = "replicated-claims";
    const leaseMs = 1000;
    const workerId = "rc-1";
    const producer = new Producer(redis, { durability: "replicated" });
    const admin = new QueueAdmin(redis);
    await producer.enqueue(q, { sleepMs: 300 }, { id: "first", priority: 10 });
    await producer.enqueue(q, { sleepMs: 10 }, { id: "second" });
    const execLog = join(dir, "exec");
    const w = await startWorker({
      dir,
      name: "rc1",
      env: {
        REDIS_URL: primary.url,
        CONVEYOR_QUEUE: q,
        CONVEYOR_HANDLER: RECORDING_HANDLER,
        EXEC_LOG: execLog,
        CONVEYOR_WORKER_ID: workerId,
        CONVEYOR_CONCURRENCY: "1",
        CONVEYOR_LEASE: `${leaseMs}ms`,
        CONVEYOR_DURABILITY: "replicated",
        CONVEYOR_REPLICA_TIMEOUT: "30s",
      },
    });
    workers.push(w);
    await waitFor("the first job running", async () => (await admin.job("first", q))?.state === "active");
    // Three leases (CLIENT UNPAUSE would wait behind the pause itself): a lease taken with the
    // settle would lapse before WAIT answers.
    await onReplica.call("CLIENT", "PAUSE", 3 * leaseMs, "ALL");
    await waitFor("the first job's settle waiting for the replica", async () =>
      String(await redis.call("CLIENT", "LIST", "TYPE", "normal"))
        .split("\n")
        .some(
          (l) =>
            l.includes(` name=conveyor-worker:${workerId} `) && /cmd=wait\b/.test(l) && / flags=\w*b/.test(l),
        ),
    );
    await waitFor("both jobs completed", async () => (await admin.counts(q)).completed === 2);
    const runs = countBy(readExecutions(execLog), (e) => e.id);
    assert.deepEqual(Object.fromEntries(runs), { first: 1, second: 1 }, w.logs());
    const counters = await admin.counters(q);
    assert.equal(counters.stalled ?? 0, 0, `no lease expired: ${JSON.stringify(counters)}`);
  });
});

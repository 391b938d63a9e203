// A real `conveyor worker` reclaims its queue's finished jobs after the retention (its heartbeat
// thread calls reclaim_finished after each renewal): the completed records and the index go, the
// queue's other keys stay. docs/protocol.md, "Retention".
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { pollUntil } from "../support/poll.ts";
import { QueueKeys } from "../../queue/index.ts";
import { stopProcess } from "../support/processes.ts";
import { startQueueRedis, stopQueueRedis, type QueueRedis } from "../support/redis.ts";
import { metricValue, RECORDING_HANDLER, startWorker, type WorkerProcess } from "../support/workers.ts";

describe("a worker reclaims finished jobs", () => {
  let qr: QueueRedis;
  let dir: string;
  let worker: WorkerProcess | undefined;
  before(async () => {
    qr = await startQueueRedis();
    dir = mkdtempSync(join(tmpdir(), "cvy-retention-"));
  });
  after(async () => {
    if (worker) await stopProcess(worker, 2000);
    await stopQueueRedis(qr);
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  test("1,000 completed records kept 1 s are all gone soon after, while the worker runs", async () => {
    const { redis, producer } = qr;
    const q = "wret/s";
    const k = new QueueKeys(q);
    await producer.enqueueMany(
      q,
      Array.from({ length: 1000 }, (_, i) => ({ id: `j${i}`, data: i })),
    );
    worker = await startWorker({
      dir,
      name: "wret",
      env: {
        REDIS_URL: qr.server.url,
        CONVEYOR_QUEUE: q,
        CONVEYOR_HANDLER: RECORDING_HANDLER,
        EXEC_LOG: join(dir, "exec.log"),
        CONVEYOR_CONCURRENCY: "16",
        CONVEYOR_RETENTION: "1s",
        CONVEYOR_LEASE: "1500ms",
      },
    });
    await pollUntil("1,000 completed", async () => Number(await redis.hget(k.counts, "completed")) === 1000, {
      timeoutMs: 60_000,
    });
    // (the records are there, TTL far later: Redis does not expire them; the worker reclaims them)
    assert.ok(
      (await redis.ttl(`${k.jobPrefix}j999`)) > 3000 || (await redis.exists(`${k.jobPrefix}j999`)) === 0,
    );
    await pollUntil(
      "every record reclaimed",
      async () =>
        (await redis.keys(`${k.jobPrefix}*`)).length === 0 && (await redis.exists(k.finished)) === 0,
      { timeoutMs: 30_000, intervalMs: 200 },
    );
    assert.equal(worker.child.exitCode, null);
    assert.equal(
      metricValue(await worker.metrics(), "conveyor_finished_jobs_reclaimed_total", { queue: q }),
      1000,
    );
    assert.doesNotMatch(worker.logs(), /reclaiming finished jobs failed/);
  });
});

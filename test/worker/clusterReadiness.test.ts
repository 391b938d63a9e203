// A worker on Redis Cluster answers /readyz 503 while the shard of its queue has no primary (the
// cluster client itself stays "ready": the other shards answer), and ready again once the
// primary is back — without a restart. A 3-primary cluster without replicas keeps the shard
// down until the test brings its node back, so the outage is as long as the test says.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { QueueKeys } from "../../queue/index.ts";
import { stopProcess, waitFor } from "../support/processes.ts";
import { RedisClusterServer } from "../support/redis.ts";
import { RECORDING_HANDLER, startWorker, type WorkerProcess } from "../support/workers.ts";

describe("worker readiness on Redis Cluster", () => {
  let cluster: RedisClusterServer;
  let dir: string;
  let worker: WorkerProcess | undefined;
  before(async () => {
    cluster = await RedisClusterServer.start(3);
    dir = mkdtempSync(join(tmpdir(), "cvy-cluster-ready-"));
  });
  after(async () => {
    if (worker) await stopProcess(worker, 2000);
    await cluster?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });
  const readyz = async () => {
    const r = await fetch(`http://127.0.0.1:${worker!.port}/readyz`).catch(() => null);
    return r ? { status: r.status, reason: (await r.text()).trim() } : { status: 0, reason: "no answer" };
  };

  test("the queue's shard without a primary: /readyz 503 naming it; back when the primary is", async () => {
    const q = "cready/work";
    worker = await startWorker({
      dir,
      name: "crw",
      env: {
        REDIS_URL: cluster.url,
        CONVEYOR_QUEUE: q,
        CONVEYOR_HANDLER: RECORDING_HANDLER,
        EXEC_LOG: join(dir, "exec.log"),
      },
    });
    assert.equal((await readyz()).status, 200);
    const primary = await cluster.primaryOf(new QueueKeys(q).ready);
    await primary.kill("SIGKILL");
    const down = await waitFor("/readyz 503", async () => {
      const r = await readyz();
      return r.status === 503 ? r : null;
    });
    assert.match(
      down.reason,
      new RegExp(
        `primary for ${new QueueKeys(q).ready.replace(/[{}]/g, "\\$&")} \\(127\\.0\\.0\\.1:${primary.port}\\)`,
      ),
    );
    await primary.resume();
    await waitFor("/readyz 200 again", async () => (await readyz()).status === 200);
    assert.equal(worker.child.exitCode, null, "the worker did not restart");
  });
});

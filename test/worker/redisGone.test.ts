// A worker without Redis: started against a port where nothing listens, or whose Redis went away
// while it ran. It says which Redis it cannot reach (password masked) and keeps trying, is not
// ready, and a SIGTERM ends it at once when nothing runs; with a job running, at the drain
// deadline — the job cannot be handed back without Redis: its lease lapses and the sweeper
// delivers it again.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { freePort } from "../support/ports.ts";
import { connectRedis, Producer, QueueAdmin, type RedisClient } from "../../queue/index.ts";
import { stopProcess, waitFor } from "../support/processes.ts";
import { RedisServer } from "../support/redis.ts";
import { WorkerTestBed } from "../support/testbed.ts";
import { readExecutions, type WorkerProcess } from "../support/workers.ts";

/** How long a stop may take at most here before the test gives up on it (and SIGKILLs). */
const STOP_LIMIT_MS = Number(process.env.STOP_LIMIT_MS ?? 15_000);

/** Time from SIGTERM to the process's exit, and its exit code ("timeout" past STOP_LIMIT_MS). */
async function stopTimed(w: WorkerProcess): Promise<{ ms: number; code: number | string }> {
  const t0 = performance.now();
  w.signal("SIGTERM");
  let timer: NodeJS.Timeout | undefined;
  const code = await Promise.race([
    w.exited,
    new Promise<string>((resolve) => (timer = setTimeout(() => resolve("timeout"), STOP_LIMIT_MS))),
  ]);
  clearTimeout(timer);
  const ms = Math.round(performance.now() - t0);
  if (code === "timeout") await stopProcess(w, 0);
  return { ms, code };
}

const readyz = async (w: WorkerProcess) =>
  (await fetch(`http://127.0.0.1:${w.port}/readyz`).catch(() => undefined))?.status ?? 0;

describe("a worker without Redis", { timeout: 300_000 }, () => {
  const bed = new WorkerTestBed("noredis");
  // Append-only with fsync on every write: what Redis held survives its SIGKILL.
  let server: RedisServer;
  let redis: RedisClient;
  let producer: Producer;
  let admin: QueueAdmin;
  before(async () => {
    await bed.start();
    server = await RedisServer.start({ args: ["--appendonly", "yes", "--appendfsync", "always"] });
    redis = connectRedis(server.url);
    producer = new Producer(redis);
    admin = new QueueAdmin(redis);
  });
  after(async () => {
    redis.disconnect();
    await bed.stop();
    await server.stop();
  });

  test("started against a port where nothing listens: names the URL (password masked), retries, is not ready, and a SIGTERM ends it at once", async () => {
    const port = await freePort();
    const w = await bed.worker(
      "nowhere",
      { REDIS_URL: `redis://:s3cret@127.0.0.1:${port}`, CONVEYOR_LEASE: "600ms" },
      { waitReady: false },
    );
    const url = `redis://:***@127.0.0.1:${port}`;
    await waitFor("the worker saying which Redis it cannot reach", async () =>
      w.logs().includes(`cannot connect to Redis at ${url}; retrying`),
    );
    // Five lease lengths without Redis (a heartbeat every 200 ms), not ready throughout.
    const since = Date.now();
    await waitFor("five lease lengths without Redis, never ready", async () => {
      assert.equal(await readyz(w), 503, w.logs());
      return Date.now() - since > 3000;
    });
    const logs = w.logs();
    assert.doesNotMatch(logs, /s3cret/);
    assert.doesNotMatch(logs, /lease renewal failed/, "no lease is held: nothing to renew");
    assert.doesNotMatch(logs, /claim failed/, "no claim is sent to a Redis that is not there");
    const { ms, code } = await stopTimed(w);
    console.log(`# nothing listening: SIGTERM to exit ${ms} ms, exit ${code}`);
    assert.equal(code, 0, w.logs());
    assert.ok(ms < 2000, `stopped in ${ms} ms:\n${w.logs()}`);
  });

  test("Redis gone under an idle worker: a SIGTERM ends it at once, exit 0", async () => {
    const w = await bed.worker("idle", { REDIS_URL: server.url, CONVEYOR_LEASE: "1s" });
    await producer.enqueue("idle", {}, { id: "i1" });
    await waitFor("a job done", async () => (await admin.job("i1", "idle"))?.state === "completed");
    await server.kill("SIGKILL");
    try {
      await waitFor("not ready once Redis is gone", async () => (await readyz(w)) === 503);
      await waitFor("the worker saying it lost Redis", async () =>
        w.logs().includes(`Redis connection problem at ${server.url}; reconnecting`),
      );
      const { ms, code } = await stopTimed(w);
      console.log(`# Redis gone, idle: SIGTERM to exit ${ms} ms, exit ${code}`);
      assert.equal(code, 0, w.logs());
      assert.ok(ms < 2000, `stopped in ${ms} ms:\n${w.logs()}`);
    } finally {
      await server.resume();
    }
  });

  test("Redis gone under a running job: the worker ends at the drain deadline (exit 1: the job is left to its lease), and the job runs again once its lease lapses", async () => {
    const q = "busy";
    const w = await bed.worker(q, {
      REDIS_URL: server.url,
      CONVEYOR_LEASE: "2s",
      CONVEYOR_DRAIN: "2s",
    });
    await producer.enqueue(q, { sleepMs: 3000 }, { id: "long", attempts: 3 });
    await waitFor("the job running", async () => readExecutions(bed.execLog(q)).length === 1);
    await server.kill("SIGKILL");
    await waitFor("not ready once Redis is gone", async () => (await readyz(w)) === 503);
    const { ms, code } = await stopTimed(w);
    console.log(`# Redis gone, one job running, drain deadline 2 s: SIGTERM to exit ${ms} ms, exit ${code}`);
    assert.equal(code, 1, w.logs());
    assert.ok(ms < 2000 + 2000, `stopped in ${ms} ms:\n${w.logs()}`);
    assert.match(w.logs(), /not handed back: Redis is unreachable; it runs again once its lease lapses/);
    // Redis back with what it held: another worker's sweeper finds the lapsed lease.
    await server.resume();
    const w2 = await bed.worker(q, { REDIS_URL: server.url, CONVEYOR_LEASE: "2s" });
    await waitFor(
      "the job completed by the other worker",
      async () => (await admin.job("long", q))?.state === "completed",
      60_000,
    );
    const runs = readExecutions(bed.execLog(q));
    assert.equal(runs.length, 2);
    assert.match(w2.logs(), /sweeper requeued jobs whose lease expired/);
  });
});

// `conveyor api` stopped (SIGTERM, as a rollout or an upgrade does) while a request is in flight:
// the request gets its answer before the process exits, and new connections are refused. A real
// Redis holds the request: CLIENT PAUSE WRITE keeps the enqueue's script waiting until the test lets it go.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { connectRedis, QueueAdmin, type RedisClient } from "../../queue/index.ts";
import { startApi, type ApiProcess } from "../support/dashboard.ts";
import { stopProcess, waitFor } from "../support/processes.ts";
import { RedisServer } from "../support/redis.ts";

describe("conveyor api stopped with a request in flight", () => {
  let server: RedisServer;
  let redis: RedisClient;
  let api: ApiProcess;
  let dir: string;
  const TOKEN = "graceful-stop-token";
  before(async () => {
    server = await RedisServer.start();
    redis = connectRedis(server.url);
    dir = mkdtempSync(join(tmpdir(), "cvy-api-stop-"));
    api = await startApi(dir, "api", { REDIS_URL: server.url, CONVEYOR_API_TOKEN: TOKEN }, [
      "--dashboard",
      "off",
    ]);
  });
  after(async () => {
    await redis.call("CLIENT", "UNPAUSE").catch(() => {});
    if (api) await stopProcess(api, 2000);
    redis?.disconnect();
    await server?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });
  const enqueue = (id: string, to: ApiProcess = api) =>
    fetch(`${to.base}/queues/stop/jobs`, {
      method: "POST",
      headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
      body: JSON.stringify({ id, data: { id } }),
    });
  const blocked = async () => Number(/blocked_clients:(\d+)/.exec(await redis.info("clients"))![1]);

  test("SIGTERM during an enqueue: the enqueue is answered 202 and applied, then the process exits 0", async () => {
    assert.equal((await enqueue("warm")).status, 202, "the scripts loaded");
    await redis.call("CLIENT", "PAUSE", "60000", "WRITE");
    const inFlight = enqueue("held").then(
      async (res) => ({ status: res.status, body: await res.text() }),
      (err: Error) => ({ status: 0, body: `${err.message}: ${(err.cause as Error)?.message}` }),
    );
    await waitFor("the enqueue waiting in Redis", async () => (await blocked()) >= 1);
    api.child.kill("SIGTERM");
    await waitFor("the API refusing new connections", async () =>
      fetch(`${api.base}/healthz`).then(
        () => false,
        () => true,
      ),
    );
    await redis.call("CLIENT", "UNPAUSE");
    assert.deepEqual((await inFlight).status, 202, (await inFlight).body);
    assert.equal((await new QueueAdmin(redis).job("held", "stop"))?.state, "ready");
    assert.equal(await api.exited, 0);
  });

  test("--stop-grace bounds the wait: a request still held when it runs out is cut, and the process exits 0", async () => {
    const short = await startApi(dir, "api-short", { REDIS_URL: server.url, CONVEYOR_API_TOKEN: TOKEN }, [
      "--dashboard",
      "off",
      "--stop-grace",
      "300ms",
    ]);
    try {
      assert.equal((await enqueue("warm-short", short)).status, 202, "the scripts loaded");
      await redis.call("CLIENT", "PAUSE", "60000", "WRITE");
      const inFlight = enqueue("held-short", short).then(
        (res) => res.status,
        () => 0,
      );
      await waitFor("the enqueue waiting in Redis", async () => (await blocked()) >= 1);
      short.child.kill("SIGTERM");
      assert.equal(await short.exited, 0, "exited while Redis still held the request");
      assert.equal(await inFlight, 0, "the held request was cut, not answered");
    } finally {
      await redis.call("CLIENT", "UNPAUSE");
      await stopProcess(short, 2000);
    }
  });
});

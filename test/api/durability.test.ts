// Durability "replicated" for the job API (`conveyor api --durability replicated`) and
// `conveyor enqueue --durability replicated`, against a real Redis: with no replica to confirm,
// the API answers 503 `replication_unconfirmed` naming the job (never a 500) and the CLI exits 1
// saying how to make sure; once a replica is attached both acknowledge as usual.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { connectRedis, QueueAdmin, type RedisClient } from "../../queue/index.ts";
import { startApi, type ApiProcess } from "../support/dashboard.ts";
import { stopProcess, waitFor } from "../support/processes.ts";
import { RedisServer } from "../support/redis.ts";
import { CONVEYOR, NODE } from "../support/workers.ts";

describe('durability "replicated" in the job API and the CLI', () => {
  let primary: RedisServer;
  let replica: RedisServer | undefined;
  let redis: RedisClient;
  let admin: QueueAdmin;
  let api: ApiProcess;
  let dir: string;
  const env = () => ({
    REDIS_URL: primary.url,
    CONVEYOR_DURABILITY: "replicated",
    CONVEYOR_REPLICA_TIMEOUT: "200ms",
  });
  before(async () => {
    primary = await RedisServer.start({ args: ["--repl-diskless-sync-delay", "0"] });
    redis = connectRedis(primary.url);
    admin = new QueueAdmin(redis);
    dir = mkdtempSync(join(tmpdir(), "cvy-api-durability-"));
    api = await startApi(dir, "api", { ...env(), CONVEYOR_API_INSECURE_NO_AUTH: "true" }, [
      "--dashboard",
      "off",
    ]);
  });
  after(async () => {
    if (api) await stopProcess(api, 2000);
    redis?.disconnect();
    await replica?.stop();
    await primary?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });
  const post = (path: string, body: unknown) =>
    fetch(`${api.base}${path}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    });
  const cli = (...args: string[]) =>
    spawnSync(NODE, [CONVEYOR, ...args], { env: { ...process.env, ...env() }, encoding: "utf8" });

  test("no replica: the API answers 503 replication_unconfirmed naming the job; the CLI exits 1 naming --id", async () => {
    const one = await post("/queues/durable/jobs", { data: { n: 1 }, id: "d1" });
    assert.equal(one.status, 503);
    assert.equal(one.headers.get("retry-after"), "1");
    const body = (await one.json()) as { error: string; code: string; field: string | null };
    assert.equal(body.code, "replication_unconfirmed");
    assert.equal(body.field, null);
    assert.match(
      body.error,
      /^job d1: enqueue_jobs: applied on the primary, but no replica confirmed it within 200ms/,
    );
    assert.match(body.error, /enqueue again with the same id/);
    // Applied on the primary all the same: the retry with the same id finds it.
    assert.equal((await admin.job("d1", "durable"))?.state, "ready");

    const noId = await post("/queues/durable/jobs", { data: { n: 2 } });
    assert.equal(noId.status, 503);
    assert.match(
      ((await noId.json()) as { error: string }).error,
      /^job [\w-]+: /,
      "a job without an id is named too",
    );

    const batch = await post("/queues/durable/jobs/batch", {
      jobs: [
        { data: 1, id: "b1" },
        { data: 2, id: "b2" },
      ],
    });
    assert.equal(batch.status, 503);
    assert.match(((await batch.json()) as { error: string }).error, /^2 jobs \(b1, b2\): /);

    const r = cli("enqueue", "durable", "{}", "--id", "c1");
    assert.equal(r.status, 1, r.stderr);
    assert.match(r.stderr, /no replica confirmed it within 200ms.*enqueue again with --id c1 to be sure/s);
    const bad = cli("enqueue", "durable", "{}", "--durability", "sometimes");
    assert.equal(bad.status, 2, bad.stderr);
    assert.match(bad.stderr, /--durability/);
  });

  test("with a replica: both acknowledge", async () => {
    replica = await RedisServer.start({ args: ["--replicaof", "127.0.0.1", String(primary.port)] });
    const onReplica = connectRedis(replica.url);
    try {
      await waitFor("the replica in sync", async () =>
        /master_link_status:up/.test(await (onReplica as import("ioredis").Redis).info("replication")),
      );
    } finally {
      onReplica.disconnect();
    }
    const one = await post("/queues/durable/jobs", { data: { n: 3 }, id: "d3" });
    assert.equal(one.status, 202, await one.text());
    const r = cli("enqueue", "durable", "{}", "--id", "c3");
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stdout.trim(), "c3");
  });
});

// Changes that do not go through the job API join its audit trail: the CLI's pause, cancel and
// dead-letter purge (written straight into Redis) and an operator rollout decision each end as
// one conveyor_audit row — who, verb, operation, target, outcome — drained by the job API from
// the pipeline's audit stream (queue/audit.ts), once however often an entry is read.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import type { AddressInfo } from "node:net";
import { hostname, userInfo } from "node:os";
import { after, before, describe, test } from "node:test";
import type pg from "pg";
import { pino } from "pino";
import { AUDIT_GROUP } from "../../api/auditDrain.ts";
import { startJobApi, type JobApi } from "../../api/server.ts";
import { auditDecision } from "../../operator/scaling/poolWrites.ts";
import { connectRedis, Consumer, PipelineKeys, Producer, type RedisClient } from "../../queue/index.ts";
import { createPool, migrate } from "../../records/index.ts";
import { waitFor } from "../support/processes.ts";
import { PostgresServer } from "../support/postgres.ts";
import { RedisServer } from "../support/redis.ts";
import { CONVEYOR, NODE } from "../support/workers.ts";

const Q = "shop/orders";

interface Row {
  token: string;
  verb: string;
  operation: string;
  target: string;
  status: number | null;
  jobs: number | null;
  client: string | null;
  params: Record<string, unknown>;
}

describe("audit of changes outside the job API", () => {
  let redisServer: RedisServer;
  let pgServer: PostgresServer;
  let redis: RedisClient;
  let db: pg.Pool;
  let api: JobApi;

  before(async () => {
    [redisServer, pgServer] = await Promise.all([RedisServer.start(), PostgresServer.start()]);
    redis = connectRedis(redisServer.url);
    const url = await pgServer.createDatabase("audit_outside");
    db = createPool(url);
    await migrate(db);
    const producer = new Producer(redis);
    await producer.enqueue(Q, { n: 1 }, { id: "o-1" });
    await producer.enqueue(Q, { n: 2 }, { id: "o-dead", attempts: 1 });
    const c = new Consumer(redis, Q, { workerId: "w", leaseMs: 30_000 });
    const claimed = (await c.claim(2)).jobs;
    const dead = claimed.find((j) => j.id === "o-dead")!;
    await c.fail(dead, { name: "Error", message: "boom" }, { retryable: false, retryDelayMs: 0 });
    api = await startJobApi({
      redis,
      port: 0,
      host: "127.0.0.1",
      token: "audit-test-token-0123456789",
      database: createPool(url), // (ended by the API when it closes)
      dashboardDir: null,
      resourceSampleMs: 0,
      log: pino({ level: "silent" }),
    });
  });
  after(async () => {
    await new Promise((resolve) => api?.close(resolve));
    api?.closeAllConnections();
    await db?.end();
    redis?.disconnect();
    await Promise.all([redisServer?.stop(), pgServer?.stop()]);
  });

  const conveyor = (args: string[], env: Record<string, string> = {}) =>
    execFileSync(NODE, [CONVEYOR, ...args, "--redis", redisServer.url], {
      encoding: "utf8",
      env: { ...process.env, CONVEYOR_AUDIT_ACTOR: "", ...env },
    });
  const rows = async () =>
    (
      await db.query<Row>(
        "SELECT token, verb, operation, target, status, jobs, client, params FROM conveyor_audit WHERE source IS NOT NULL ORDER BY at, id",
      )
    ).rows;

  test("the CLI's pause, cancel and purge and an operator rollback: one row each", async () => {
    conveyor(["pause", Q]);
    conveyor(["cancel", "o-1"], { CONVEYOR_AUDIT_ACTOR: "ci:nightly" });
    conveyor(["dlq", "purge", Q]);
    await auditDecision(
      redis,
      Q,
      {
        verb: "admin",
        operation: "rolloutRollback",
        target: `${Q} pool:shop/orders`,
        params: { version: "abc123", step: 0, token: "never-kept" },
      },
      { status: 200, jobs: null, result: { message: "abc123 rolled back at step 1" } },
      { POD_NAMESPACE: "conveyor-system", SERVICE_ACCOUNT_NAME: "conveyor-operator", HOSTNAME: "op-0" },
    );
    const all = await waitFor(
      "four audit rows with their outcomes",
      async () => {
        const r = await rows();
        return r.length === 4 && r.every((x) => x.status !== null) && r;
      },
      30_000,
    );
    const me = `cli:${userInfo().username}@${hostname()}`;
    assert.deepEqual(
      all.map((r) => [r.token, r.verb, r.operation, r.target, r.status, r.jobs]),
      [
        [me, "operate", "pause", Q, 200, null],
        ["ci:nightly", "operate", "cancelJob", `${Q} job:o-1`, 200, 1],
        [me, "admin", "purgeDead", Q, 200, 1],
        [
          "operator:system:serviceaccount:conveyor-system:conveyor-operator",
          "admin",
          "rolloutRollback",
          `${Q} pool:shop/orders`,
          200,
          null,
        ],
      ],
    );
    assert.equal(all[0]!.client, hostname());
    assert.equal(all[3]!.client, "op-0");
    assert.equal(all[3]!.params.token, "[removed]", "secrets removed");
    // Drained: acknowledged and deleted from the stream.
    const key = new PipelineKeys("shop").audit;
    await waitFor("the stream emptied", async () => (await redis.xlen(key)) === 0, 30_000);
    assert.deepEqual(await redis.xpending(key, AUDIT_GROUP), [0, null, null, null]);
  });

  test("limits, group settings and a refused change: each a row with its outcome", async () => {
    const before = (await rows()).length;
    conveyor(["limit", Q, "10/s"]);
    conveyor(["group", "pause", Q, "acme"]);
    assert.throws(() => conveyor(["limit", Q, "fast"]), "a usage error changes nothing and is not audited");
    const all = await waitFor(
      "two more rows",
      async () => {
        const r = await rows();
        return r.length === before + 2 && r.every((x) => x.status !== null) && r;
      },
      30_000,
    );
    assert.deepEqual(
      all.slice(before).map((r) => [r.operation, r.target, r.status, r.params]),
      [
        ["setRateLimit", Q, 200, { limit: "10/s" }],
        ["pauseGroup", `${Q} group:acme`, 200, {}],
      ],
    );
  });

  test("an entry read again (a replica died before acknowledging it) writes no second row", async () => {
    const before = (await rows()).length;
    conveyor(["resume", Q]);
    await waitFor("the resume's row", async () => (await rows()).length === before + 1, 30_000);
    // The same change's entries again, as a takeover would deliver them.
    const key = new PipelineKeys("shop").audit;
    const last = (
      await db.query<{ source: string }>("SELECT source FROM conveyor_audit ORDER BY id DESC LIMIT 1")
    ).rows[0]!.source;
    const first = last.slice("shop:".length);
    await redis.xadd(
      key,
      "*",
      "kind",
      "end",
      "of",
      first,
      "actor",
      "x",
      "verb",
      "operate",
      "operation",
      "resume",
      "target",
      Q,
      "params",
      "{}",
      "at",
      String(Date.now()),
      "status",
      "200",
      "jobs",
      "",
      "result",
      "null",
    );
    await waitFor("the stream emptied", async () => (await redis.xlen(key)) === 0, 30_000);
    assert.equal((await rows()).length, before + 1, "still one row for the resume");
  });
});

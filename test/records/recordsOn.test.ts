// Job records are complete whatever the order: a new pipeline's jobs enqueued before any worker
// with a database has started are still recorded from their enqueue, when records were switched
// on beforehand by `conveyor records enable` or by the job API (at start for its --queues, or
// before its own first enqueue). The operator's route is in test/operator/records.test.ts.
// Real Redis, PostgreSQL, `conveyor` processes; every wait polls a condition.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import type pg from "pg";
import { JobRecords } from "../../api/records.ts";
import { connectRedis, PipelineKeys, Producer, type RedisClient } from "../../queue/index.ts";
import { createPool } from "../../records/index.ts";
import { startApi, type ApiProcess } from "../support/dashboard.ts";
import { PostgresServer } from "../support/postgres.ts";
import { stopProcess, waitFor } from "../support/processes.ts";
import { RedisServer } from "../support/redis.ts";
import { CONVEYOR, NODE, RECORDING_HANDLER, startWorker, type WorkerProcess } from "../support/workers.ts";

const JOBS = 100;

describe("job records switched on before a pipeline's first recorder", { timeout: 10 * 60_000 }, () => {
  let redisServer: RedisServer;
  let pgServer: PostgresServer;
  let redis: RedisClient;
  let pool: pg.Pool;
  let records: JobRecords;
  let dir: string;
  const processes: (WorkerProcess | ApiProcess)[] = [];

  before(async () => {
    redisServer = await RedisServer.start();
    pgServer = await PostgresServer.start();
    redis = connectRedis(redisServer.url);
    pool = createPool(pgServer.url, { maxConnections: 2 });
    records = new JobRecords(pool);
    dir = mkdtempSync(join(tmpdir(), "cvy-records-on-"));
  });
  after(async () => {
    await Promise.all(processes.map((p) => stopProcess(p, 5000)));
    await records?.close();
    redis?.disconnect();
    await pgServer?.stop();
    await redisServer?.stop();
    if (!process.env.CONVEYOR_KEEP_TMP) rmSync(dir, { recursive: true, force: true });
    else console.log(`kept ${dir}`);
  });

  const recordsOn = async (pipeline: string) =>
    (await redis.hget(new PipelineKeys(pipeline).meta, "records")) === "1";

  /** The first stage's input of each job: `batch` names the pipeline, the result does not. */
  const jobs = (pipeline: string) =>
    Array.from({ length: JOBS }, (_, n) => ({ id: `j${n}`, data: { batch: pipeline, n } }));

  /**
   * Then a worker with --database runs the jobs; once every job's row shows it completed, the
   * search by the first-stage field: how many of the jobs it finds.
   */
  async function recordAndSearch(pipeline: string): Promise<number> {
    const queue = `${pipeline}/extract`;
    processes.push(
      await startWorker({
        dir,
        name: `worker-${pipeline}`,
        env: {
          REDIS_URL: redisServer.url,
          DATABASE_URL: pgServer.url,
          CONVEYOR_QUEUE: queue,
          CONVEYOR_HANDLER: RECORDING_HANDLER,
          CONVEYOR_CONCURRENCY: "8",
          LOG_LEVEL: "info",
        },
      }),
    );
    await waitFor(
      `${pipeline}: every job recorded as completed`,
      async () => {
        const r = await pool.query<{ n: string }>(
          "SELECT count(*) AS n FROM conveyor_jobs WHERE pipeline = $1 AND state = 'completed'",
          [pipeline],
        );
        return Number(r.rows[0]!.n) === JOBS;
      },
      120_000,
    );
    const page = await records.byField({ path: ["batch"], value: pipeline, limit: 2 * JOBS });
    return page.items.length;
  }

  test("`conveyor records enable <pipeline>`, then enqueue, then the worker: search finds every job", async () => {
    const pipeline = "viacli";
    const cli = (...args: string[]) =>
      spawnSync(NODE, [CONVEYOR, "records", ...args, "--redis", redisServer.url], { encoding: "utf8" });
    const enable = cli("enable", pipeline);
    assert.equal(enable.status, 0, enable.stderr);
    assert.match(enable.stdout, /job records on for pipeline viacli/);
    // Idempotent: with records on it writes only its two audit entries (Redis's count of changes).
    const changes = async () =>
      Number(/rdb_changes_since_last_save:(\d+)/.exec(await redis.info("persistence"))![1]);
    const before = await changes();
    const again = cli("enable", pipeline, "--json");
    assert.equal(again.status, 0, again.stderr);
    assert.deepEqual(JSON.parse(again.stdout), { pipeline, on: true, switched: false });
    // (the CLI's audit trail: an entry before the change and one with its outcome)
    assert.equal(await changes(), before + 2);
    await new Producer(redis).enqueueMany(`${pipeline}/extract`, jobs(pipeline));
    const status = cli("status", pipeline, "--json");
    assert.equal(status.status, 0, status.stderr);
    const s = JSON.parse(status.stdout) as Record<string, unknown>;
    assert.equal(s.on, true);
    assert.equal(s.outbox, JOBS, "every enqueue waits in the outbox for a recorder");
    assert.equal(s.recorders, 0);
    assert.equal(await recordAndSearch(pipeline), JOBS);
    // Off, and bad input: exit 1 and 2, each with a message.
    const off = cli("status", "never-enabled");
    assert.equal(off.status, 1);
    assert.match(off.stdout, /job records off/);
    for (const args of [["enable"], ["switch", pipeline], ["enable", "no spaces"]]) {
      const r = cli(...args);
      assert.equal(r.status, 2, `${args.join(" ")}: ${r.stdout}${r.stderr}`);
      assert.match(r.stderr, /records|invalid queue name/);
    }
  });

  test("`conveyor api --database --queues`: records on at start, jobs enqueued by anyone are recorded", async () => {
    const pipeline = "viaapistart";
    assert.equal(await recordsOn(pipeline), false);
    processes.push(
      await startApi(dir, "api-start", { REDIS_URL: redisServer.url, DATABASE_URL: pgServer.url }, [
        "--queues",
        `${pipeline}/extract`,
        "--dashboard",
        "off",
        "--insecure-no-auth",
      ]),
    );
    assert.equal(await recordsOn(pipeline), true, "switched on before the API answers");
    await new Producer(redis).enqueueMany(`${pipeline}/extract`, jobs(pipeline));
    assert.equal(await recordAndSearch(pipeline), JOBS);
  });

  test("`conveyor api --database`: its first enqueue into a new pipeline switches records on first", async () => {
    const pipeline = "viaapienqueue";
    const api = await startApi(
      dir,
      "api-enqueue",
      { REDIS_URL: redisServer.url, DATABASE_URL: pgServer.url },
      ["--dashboard", "off", "--insecure-no-auth"],
    );
    processes.push(api);
    assert.equal(await recordsOn(pipeline), false, "a pipeline the API has not served stays as it was");
    const res = await fetch(`${api.base}/queues/${encodeURIComponent(`${pipeline}/extract`)}/jobs/batch`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ jobs: jobs(pipeline) }),
    });
    assert.equal(res.status, 202, await res.text());
    assert.equal(await recordsOn(pipeline), true);
    assert.equal(await recordAndSearch(pipeline), JOBS);
  });
});

// Job records end to end: real worker processes with DATABASE_URL, PostgreSQL stopped mid-run
// and restarted — every job still completes and every record arrives.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { connectRedis, Producer, QueueAdmin, type RedisClient } from "../../queue/index.ts";
import { PostgresServer } from "../support/postgres.ts";
import { stopProcess, waitFor } from "../support/processes.ts";
import { RedisServer } from "../support/redis.ts";
import { RECORDING_HANDLER, startWorker, type WorkerProcess } from "../support/workers.ts";

describe("job records from worker processes", () => {
  let redisServer: RedisServer;
  let pg: PostgresServer;
  let redis: RedisClient;
  let dir: string;
  const workers: WorkerProcess[] = [];
  before(async () => {
    redisServer = await RedisServer.start();
    pg = await PostgresServer.start();
    redis = connectRedis(redisServer.url);
    dir = mkdtempSync(join(tmpdir(), "cvy-records-w-"));
  });
  after(async () => {
    await Promise.all(workers.map((w) => stopProcess(w, 5000)));
    redis.disconnect();
    await pg.stop();
    await redisServer.stop();
    if (!process.env.CONVEYOR_KEEP_TMP) rmSync(dir, { recursive: true, force: true });
    else console.log(`kept ${dir}`);
  });

  test("PostgreSQL stopped mid-run and restarted: all jobs complete and all their records arrive", async () => {
    const a = "rec/a";
    const b = "rec/b";
    const env = (q: string, next?: string) => ({
      REDIS_URL: redisServer.url,
      DATABASE_URL: pg.url,
      CONVEYOR_QUEUE: q,
      ...(next ? { CONVEYOR_NEXT_QUEUE: next } : {}),
      CONVEYOR_HANDLER: RECORDING_HANDLER,
      CONVEYOR_CONCURRENCY: "8",
      LOG_LEVEL: "info",
    });
    workers.push(await startWorker({ dir, name: "ra", env: env(a, b) }));
    workers.push(await startWorker({ dir, name: "rb", env: env(b) }));
    const admin = new QueueAdmin(redis);
    const producer = new Producer(redis);
    await producer.enqueueMany(
      a,
      Array.from({ length: 400 }, (_, i) => ({ id: `r${i}`, data: { sleepMs: 5 } })),
    );
    await waitFor("some done", async () => (await admin.counts(b)).completed >= 50);
    await pg.kill();
    await waitFor(
      "all done while PostgreSQL is down",
      async () => (await admin.counts(b)).completed === 400,
      60_000,
    );
    await pg.restart();
    const rows = await waitFor(
      "records caught up",
      async () => {
        const r = await pg.query<{ n: string; done: string }>(
          "select count(*) as n, count(*) filter (where state = 'completed' and queue = 'rec/b') as done from conveyor_jobs",
        );
        return Number(r[0]!.done) === 400 ? r[0] : null;
      },
      180_000,
    );
    assert.equal(Number(rows.n), 400);
    const attempts = await waitFor(
      "attempt records",
      async () => {
        const r = await pg.query<{ outcome: string; n: string }>(
          "select outcome, count(*) as n from conveyor_attempts group by outcome",
        );
        const byOutcome = Object.fromEntries(r.map((x) => [x.outcome, Number(x.n)]));
        return byOutcome.completed === 800 ? byOutcome : null;
      },
      60_000,
    );
    assert.deepEqual(attempts, { completed: 800 }, "exactly one completed attempt per job per stage");
  });
});

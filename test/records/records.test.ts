// Job records against a real PostgreSQL 15 and a real Redis: the queue scripts write the
// outbox, recorders drain it. Transitions come from the real queue API. No timing asserts:
// every wait polls a condition with a generous deadline.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { pino, type Logger } from "pino";
import { Registry } from "prom-client";
import {
  Consumer,
  PipelineKeys,
  Producer,
  QueueAdmin,
  QueueKeys,
  connectRedis,
  type ClaimedJob,
  type RedisClient,
} from "../../queue/index.ts";
import {
  JobRecorder,
  MIGRATIONS,
  RECORDER_GROUP,
  RecordsQueries,
  createPool,
  foldEvents,
  migrate,
  parseEntry,
  startRecorder,
  writeBatch,
  type RawEntry,
  type RecorderOptions,
} from "../../records/index.ts";
import { PostgresServer } from "../support/postgres.ts";
import { waitFor } from "../support/processes.ts";
import { RedisClusterServer, RedisServer } from "../support/redis.ts";

interface JobRow {
  id: string;
  queue: string;
  state: string;
  data: string | null;
  result: string | null;
  error: string | null;
  dead_reason: string | null;
  attempts: number;
  max_attempts: number | null;
  stalls: number;
  parent_id: string | null;
  due_at: Date | null;
  progress: number | null;
  progress_message: string | null;
  progress_at: Date | null;
  created_at: Date | null;
  started_at: Date | null;
  finished_at: Date | null;
  task: string | null;
  flow_id?: string | null;
  flow_parents?: string | null;
}

interface AttemptRow {
  job_id: string;
  execution: string;
  queue: string;
  worker: string | null;
  attempt: number | null;
  outcome: string;
  error: string | null;
  reason: string | null;
  started_at: Date | null;
  finished_at: Date | null;
}

const DEADLINE = 120_000;

function captureLogger(): { logger: Logger; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const logger = pino(
    { level: "debug" },
    { write: (s: string) => void lines.push(JSON.parse(s) as Record<string, unknown>) },
  );
  return { logger, lines };
}

describe("job records (PostgreSQL through the outbox)", () => {
  let pgServer: PostgresServer;
  let redisServer: RedisServer;
  let redis: RedisClient;
  let producer: Producer;
  let admin: QueueAdmin;
  const recorders: JobRecorder[] = [];
  let n = 0;
  const fresh = () => `r${++n}${Math.random().toString(36).slice(2, 6)}`;

  before(async () => {
    [pgServer, redisServer] = await Promise.all([PostgresServer.start(), RedisServer.start()]);
    redis = connectRedis(redisServer.url);
    producer = new Producer(redis);
    admin = new QueueAdmin(redis);
  });
  after(async () => {
    await Promise.all(recorders.map((r) => r.stop()));
    redis.disconnect();
    await Promise.all([pgServer.stop(), redisServer.stop()]);
  });

  function recorder(
    database: string,
    pipelines: string[],
    extra: Partial<RecorderOptions> = {},
  ): JobRecorder {
    const r = new JobRecorder({
      redis,
      redisUrl: redisServer.url,
      database,
      pipelines,
      logger: pino({ level: "silent" }),
      blockMs: 200,
      claimIdleMs: 1_000,
      claimIntervalMs: 300,
      minBackoffMs: 50,
      maxBackoffMs: 1_000,
      gaugeIntervalMs: 200,
      ...extra,
    });
    recorders.push(r);
    return r;
  }

  async function outboxDrained(pipeline: string): Promise<boolean> {
    const key = new PipelineKeys(pipeline).outbox;
    const [len, pending] = await Promise.all([
      redis.xlen(key),
      redis.xpending(key, RECORDER_GROUP) as Promise<[number]>,
    ]);
    return len === 0 && Number(pending[0]) === 0;
  }

  const waitDrained = (pipeline: string) =>
    waitFor(`outbox of ${pipeline} drained`, () => outboxDrained(pipeline), DEADLINE, 50);

  async function jobRows(db: string, pipeline: string): Promise<Map<string, JobRow>> {
    const rows = await pgServer.query<JobRow>(
      "SELECT * FROM conveyor_jobs WHERE pipeline = $1",
      [pipeline],
      db,
    );
    return new Map(rows.map((r) => [r.id, r]));
  }

  async function attemptRows(db: string, pipeline: string): Promise<Map<string, AttemptRow[]>> {
    const rows = await pgServer.query<AttemptRow>(
      "SELECT * FROM conveyor_attempts WHERE pipeline = $1 ORDER BY job_id, execution::numeric",
      [pipeline],
      db,
    );
    const out = new Map<string, AttemptRow[]>();
    for (const r of rows) out.set(r.job_id, [...(out.get(r.job_id) ?? []), r]);
    return out;
  }

  async function newDatabase(): Promise<{ name: string; url: string }> {
    const name = fresh();
    return { name, url: await pgServer.createDatabase(name) };
  }

  /** Turn the outbox on for a pipeline without a recorder (what JobRecorder.start does). */
  async function recordsOn(pipeline: string): Promise<void> {
    const keys = new PipelineKeys(pipeline);
    await redis.xgroup("CREATE", keys.outbox, RECORDER_GROUP, "0", "MKSTREAM");
    await redis.hset(keys.meta, "records", "1");
  }

  test("startRecorder is null without a DATABASE_URL", async () => {
    const r = await startRecorder({
      databaseUrl: undefined,
      redis,
      redisUrl: redisServer.url,
      pipelines: ["x"],
      logger: pino({ level: "silent" }),
    });
    assert.equal(r, null);
    assert.equal(
      await redis.hget(new PipelineKeys("x").meta, "records"),
      null,
      "without records the outbox stays off",
    );
  });

  test("migrations are applied once, idempotently, also by many workers starting at once", async () => {
    const db = await newDatabase();
    const pools = Array.from({ length: 4 }, () => createPool(db.url, { maxConnections: 2 }));
    try {
      const applied = await Promise.all(pools.map((p) => migrate(p)));
      assert.deepEqual(
        applied.flat().sort((x, y) => x - y),
        MIGRATIONS.map((m) => m.id),
        "each migration applied by exactly one worker",
      );
      assert.deepEqual(await migrate(pools[0]!), [], "a second run applies nothing");
      const tables = await pgServer.query<{ table_name: string }>(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY table_name",
        [],
        db.name,
      );
      assert.deepEqual(
        tables.map((t) => t.table_name),
        ["conveyor_attempts", "conveyor_audit", "conveyor_jobs", "conveyor_migrations", "conveyor_stages"],
      );
      const migrations = await pgServer.query<{ id: number }>(
        "SELECT id FROM conveyor_migrations",
        [],
        db.name,
      );
      assert.deepEqual(
        migrations.map((m) => m.id).sort((x, y) => x - y),
        MIGRATIONS.map((m) => m.id),
      );
      // A later release appends a migration: only that one runs.
      const extra = { id: 99, name: "extra", sql: "CREATE TABLE conveyor_extra (x int)" };
      assert.deepEqual(await migrate(pools[1]!, [...MIGRATIONS, extra]), [99]);
      assert.deepEqual(await migrate(pools[2]!, [...MIGRATIONS, extra]), []);
    } finally {
      await Promise.all(pools.map((p) => p.end()));
    }
    // Once migrated, a user without CREATE on the schema can start (and write).
    const role = `rw_${db.name}`;
    await pgServer.query(`CREATE ROLE ${role} LOGIN`, [], db.name);
    await pgServer.query(`REVOKE CREATE ON SCHEMA public FROM PUBLIC`, [], db.name);
    await pgServer.query(
      `GRANT SELECT, INSERT, UPDATE ON conveyor_jobs, conveyor_attempts, conveyor_stages, conveyor_migrations TO ${role}`,
      [],
      db.name,
    );
    const limited = createPool(db.url.replace("//postgres@", `//${role}@`));
    try {
      assert.deepEqual(await migrate(limited), []);
      await writeBatch(
        limited,
        foldEvents([
          parseEntry("p", [
            "1-1",
            ["type", "enqueued", "id", "j", "queue", "p", "at", "1000", "data", "{}"],
          ])!,
        ]),
      );
      const rows = await pgServer.query<{ state: string }>("SELECT state FROM conveyor_jobs", [], db.name);
      assert.deepEqual(rows, [{ state: "queued" }]);
    } finally {
      await limited.end();
    }
  });

  test("every kind of transition lands in jobs and attempts", async () => {
    const db = await newDatabase();
    const p = fresh();
    const qa = `${p}/a`;
    const qb = `${p}/b`;
    const { logger, lines } = captureLogger();
    const rec = recorder(db.url, [p], { logger, registry: new Registry() });
    await rec.start();
    assert.equal(await redis.hget(new PipelineKeys(p).meta, "records"), "1");

    const w1 = new Consumer(redis, qa, { workerId: "w1", leaseMs: 30_000 });
    const w2 = new Consumer(redis, qa, { workerId: "w2", leaseMs: 30_000 });
    const short = new Consumer(redis, qa, { workerId: "short", leaseMs: 50 });
    const wb = new Consumer(redis, qb, { workerId: "wb", leaseMs: 30_000 });
    const claimOne = async (c: Consumer, id: string) => {
      const { jobs } = await c.claim(1);
      assert.equal(jobs[0]?.id, id);
      return jobs[0]!;
    };
    const boom = { name: "Boom", message: "it broke", stack: "Boom: it broke\n    at handler" };

    // Completed on the first attempt.
    await producer.enqueue(qa, { n: 1 }, { id: "ok" });
    assert.equal(await w1.complete(await claimOne(w1, "ok"), { done: true }), true);
    // A failed attempt, retried, then completed.
    await producer.enqueue(qa, { n: 2 }, { id: "retry", attempts: 3 });
    assert.equal(
      await w1.fail(await claimOne(w1, "retry"), boom, { retryable: true, retryDelayMs: 0 }),
      "retry",
    );
    assert.equal(await w2.complete(await claimOne(w2, "retry"), "second time"), true);
    // Attempts exhausted: dead letters; then `dlq retry` brings it back and it completes.
    await producer.enqueue(qa, { n: 3 }, { id: "dead", attempts: 1 });
    assert.equal(
      await w1.fail(await claimOne(w1, "dead"), boom, { retryable: true, retryDelayMs: 0 }),
      "dead",
    );
    // Handed back at shutdown (no attempt counted), finished by another worker.
    await producer.enqueue(qa, { n: 4 }, { id: "handback" });
    assert.equal(await w1.release(await claimOne(w1, "handback"), "drain deadline"), true);
    assert.equal(await w2.complete(await claimOne(w2, "handback"), 4), true);
    // A stall: the lease expires, the sweeper requeues it, another worker completes it.
    await producer.enqueue(qa, { n: 5 }, { id: "stall" });
    await claimOne(short, "stall");
    await waitFor("sweep", async () => (await short.sweep({ lockMs: 1 })).requeued === 1, DEADLINE, 20);
    assert.equal(await w2.complete(await claimOne(w2, "stall"), 5), true);
    // Two stages: advance a → b atomically, then b completes.
    await producer.enqueue(qa, { n: 6 }, { id: "chain" });
    assert.equal(await w1.advance(await claimOne(w1, "chain"), { stage: "a" }, qb, { from: "a" }), true);
    assert.equal(await wb.complete(await claimOne(wb, "chain"), { stage: "b" }), true);
    // Not retryable: straight to dead letters.
    await producer.enqueue(qa, { n: 7 }, { id: "final", attempts: 5 });
    assert.equal(
      await w1.fail(await claimOne(w1, "final"), boom, { retryable: false, retryDelayMs: 0 }),
      "dead",
    );
    // Still waiting to run.
    const enqueuedAt = Date.now();
    await producer.enqueue(qa, { n: 8 }, { id: "waiting", delayMs: 3_600_000, attempts: 7 });

    await waitDrained(p);
    let jobs = await jobRows(db.name, p);
    assert.equal(jobs.get("dead")?.state, "dead");
    assert.match(jobs.get("dead")?.dead_reason ?? "", /attempts exhausted \(1\/1\): it broke/);
    assert.equal(await admin.retryDead(qa, ["dead"]), 1);
    assert.equal(await w2.complete(await claimOne(w2, "dead"), "revived"), true);
    await waitDrained(p);

    jobs = await jobRows(db.name, p);
    const attempts = await attemptRows(db.name, p);
    assert.deepEqual([...jobs.keys()].sort(), [
      "chain",
      "dead",
      "final",
      "handback",
      "ok",
      "retry",
      "stall",
      "waiting",
    ]);
    const pick = (r: JobRow | undefined) =>
      r && { queue: r.queue, state: r.state, result: r.result, attempts: r.attempts, stalls: r.stalls };
    const outcomes = (id: string) =>
      (attempts.get(id) ?? []).map((a) => [a.queue, a.worker, a.attempt, a.outcome]);

    assert.deepEqual(pick(jobs.get("ok")), {
      queue: qa,
      state: "completed",
      result: '{"done":true}',
      attempts: 1,
      stalls: 0,
    });
    assert.equal(jobs.get("ok")?.data, '{"n":1}');
    assert.ok(jobs.get("ok")?.created_at && jobs.get("ok")?.started_at && jobs.get("ok")?.finished_at);
    assert.deepEqual(outcomes("ok"), [[qa, "w1", 1, "completed"]]);

    assert.deepEqual(pick(jobs.get("retry")), {
      queue: qa,
      state: "completed",
      result: '"second time"',
      attempts: 2,
      stalls: 0,
    });
    assert.equal(jobs.get("retry")!.error, null, "a job that succeeded has no error as its outcome");
    assert.deepEqual(outcomes("retry"), [
      [qa, "w1", 1, "retried"],
      [qa, "w2", 2, "completed"],
    ]);
    assert.deepEqual(JSON.parse(attempts.get("retry")![0]!.error!), boom);

    assert.deepEqual(pick(jobs.get("dead")), {
      queue: qa,
      state: "completed",
      result: '"revived"',
      attempts: 1,
      stalls: 0,
    });
    assert.equal(jobs.get("dead")?.dead_reason, null);
    assert.deepEqual(outcomes("dead"), [
      [qa, "w1", 1, "dead"],
      [qa, "w2", 1, "completed"],
    ]);
    assert.match(attempts.get("dead")![0]!.reason!, /attempts exhausted/);

    assert.deepEqual(pick(jobs.get("handback")), {
      queue: qa,
      state: "completed",
      result: "4",
      attempts: 1,
      stalls: 0,
    });
    assert.deepEqual(outcomes("handback"), [
      [qa, "w1", 1, "handedBack"],
      [qa, "w2", 1, "completed"],
    ]);
    assert.equal(attempts.get("handback")![0]!.reason, "drain deadline");

    assert.deepEqual(pick(jobs.get("stall")), {
      queue: qa,
      state: "completed",
      result: "5",
      attempts: 1,
      stalls: 1,
    });
    assert.deepEqual(outcomes("stall"), [
      [qa, "short", 1, "stalled"],
      [qa, "w2", 1, "completed"],
    ]);

    assert.deepEqual(pick(jobs.get("chain")), {
      queue: qb,
      state: "completed",
      result: '{"stage":"b"}',
      attempts: 1,
      stalls: 0,
    });
    assert.equal(jobs.get("chain")?.data, '{"from":"a"}', "data is the current stage's input");
    assert.deepEqual(outcomes("chain"), [
      [qa, "w1", 1, "completed"],
      [qb, "wb", 1, "completed"],
    ]);

    assert.deepEqual(pick(jobs.get("final")), {
      queue: qa,
      state: "dead",
      result: null,
      attempts: 1,
      stalls: 0,
    });
    assert.match(jobs.get("final")?.dead_reason ?? "", /^not retryable: it broke/);
    assert.ok(jobs.get("final")?.finished_at);

    assert.deepEqual(pick(jobs.get("waiting")), {
      queue: qa,
      state: "delayed",
      result: null,
      attempts: 0,
      stalls: 0,
    });
    assert.equal(jobs.get("waiting")?.started_at, null);
    const due = jobs.get("waiting")!.due_at!.getTime() - jobs.get("waiting")!.created_at!.getTime();
    assert.equal(due, 3_600_000, "due_at is the enqueue time plus the delay");
    assert.ok(jobs.get("waiting")!.created_at!.getTime() >= enqueuedAt);
    assert.equal(attempts.get("waiting"), undefined);

    // Max attempts as enqueued (the default is 3); kept across stages and a dead-letter retry.
    const maxAttempts = Object.fromEntries([...jobs].map(([id, r]) => [id, r.max_attempts]));
    assert.deepEqual(maxAttempts, {
      ok: 3,
      retry: 3,
      dead: 1,
      handback: 3,
      stall: 3,
      chain: 3,
      final: 5,
      waiting: 7,
    });
    // due_at belongs to the delayed/retrying states; nothing here ran from a fan-out.
    for (const [id, r] of jobs) {
      if (id !== "waiting") assert.equal(r.due_at, null, id);
      assert.equal(r.parent_id, null, id);
    }

    const stats = rec.stats();
    assert.equal(stats.rejected, 0);
    assert.equal(stats.lost, 0);
    assert.ok(stats.written >= 20, `written ${stats.written}`);
    assert.ok(lines.some((l) => l.msg === "job records: database schema migrated"));
  });

  test("malformed outbox entries are skipped and counted; the recorder keeps going", async () => {
    const db = await newDatabase();
    const p = fresh();
    const { logger, lines } = captureLogger();
    const rec = recorder(db.url, [p], { logger });
    await rec.start();
    const outbox = new PipelineKeys(p).outbox;
    await redis.xadd(outbox, "*", "type", "exploded", "id", "a", "queue", p, "at", "1");
    await redis.xadd(outbox, "*", "type", "exploded", "id", "b", "queue", p, "at", "1");
    await redis.xadd(
      outbox,
      "*",
      "type",
      "progress",
      "id",
      "fine",
      "queue",
      p,
      "at",
      "1",
      "token",
      "1",
      "progress",
      "0.5",
    );
    await redis.xadd(outbox, "*", "type", "enqueued", "queue", p, "at", "1");
    await redis.xadd(
      outbox,
      "*",
      "type",
      "enqueued",
      "id",
      "nul",
      "queue",
      p,
      "at",
      String(Date.now()),
      "data",
      "bad\u0000bytes{",
    );
    await producer.enqueue(p, "fine", { id: "fine" });
    await waitDrained(p);
    const jobs = await jobRows(db.name, p);
    assert.deepEqual([...jobs.keys()].sort(), ["fine", "nul"]);
    assert.equal(jobs.get("nul")?.data, "bad\uFFFDbytes{", "NUL cannot be stored in text: replaced");
    assert.equal(
      rec.stats().rejected,
      3,
      "two of an unknown type, one without a job id; progress is not an error",
    );
    const skipped = lines.filter((l) => l.msg === "job records: outbox entry skipped");
    assert.equal(skipped.length, 2, "an unknown type is logged once, not per entry");
  });

  test("hand-back by the circuit breaker (deferred) and reused results are recorded", async () => {
    const db = await newDatabase();
    const p = fresh();
    const rec = recorder(db.url, [p]);
    await rec.start();
    const w = new Consumer(redis, p, { workerId: "w", leaseMs: 30_000 });
    await producer.enqueue(p, 1, { id: "dep" });
    const [job] = (await w.claim(1)).jobs;
    // As release_job.lua writes it for cause 'deferred', and complete_job.lua with 'reused'.
    const outbox = new PipelineKeys(p).outbox;
    await redis.xadd(
      outbox,
      "*",
      "type",
      "deferred",
      "id",
      "dep",
      "queue",
      p,
      "at",
      String(Date.now()),
      "token",
      job!.token,
      "reason",
      "dependency down",
    );
    await redis.xadd(
      outbox,
      "*",
      "type",
      "started",
      "id",
      "dep",
      "queue",
      p,
      "at",
      String(Date.now()),
      "token",
      "t2",
      "attempt",
      "1",
      "worker",
      "w",
    );
    await redis.xadd(
      outbox,
      "*",
      "type",
      "completed",
      "id",
      "dep",
      "queue",
      p,
      "at",
      String(Date.now()),
      "token",
      "t2",
      "result",
      "7",
      "reused",
      "1",
    );
    await waitDrained(p);
    const row = (await jobRows(db.name, p)).get("dep");
    assert.equal(row?.state, "completed");
    const attempts = await pgServer.query<AttemptRow & { reused: boolean | null }>(
      "SELECT * FROM conveyor_attempts WHERE pipeline = $1 ORDER BY started_at, execution",
      [p],
      db.name,
    );
    assert.deepEqual(
      attempts.map((a) => [a.execution, a.outcome, a.reason, a.reused]),
      [
        [job!.token, "deferred", "dependency down", null],
        ["t2", "completed", null, true],
      ],
    );
    assert.equal(rec.stats().rejected, 0);
  });

  test("a job's task is recorded from its start (or its enqueue) and found by task", async () => {
    const db = await newDatabase();
    const p = fresh();
    const rec = recorder(db.url, [p]);
    await rec.start();
    const q = `${p}/extract`;
    const w = new Consumer(redis, q, { workerId: "w", leaseMs: 30_000 });
    await producer.enqueue(q, 1, { id: "tasked" });
    await producer.enqueue(q, 2, { id: "plain" });
    await redis.hset(new QueueKeys(q).job("tasked"), "task", "summarize");
    for (const job of (await w.claim(2)).jobs) assert.equal(await w.complete(job, job.id), true);
    // An enqueue entry that names the task (the enqueue side's) sets it too.
    await redis.xadd(
      new PipelineKeys(p).outbox,
      "*",
      "type",
      "enqueued",
      "id",
      "later",
      "queue",
      q,
      "at",
      String(Date.now()),
      "data",
      "3",
      "task",
      "classify",
    );
    await waitDrained(p);
    const rows = await jobRows(db.name, p);
    assert.deepEqual(
      ["tasked", "plain", "later"].map((id) => [id, rows.get(id)?.state, rows.get(id)?.task]),
      [
        ["tasked", "completed", "summarize"],
        ["plain", "completed", null],
        ["later", "queued", "classify"],
      ],
    );
    const pool = createPool(db.url);
    try {
      const found = await new RecordsQueries(pool).byTask("summarize");
      assert.deepEqual(
        found.map((r) => [r.id, r.queue, r.task]),
        [["tasked", q, "summarize"]],
      );
    } finally {
      await pool.end();
    }
  });

  test("the same events in any order, split and repeated, give the same rows", async () => {
    const p = fresh();
    const q = `${p}/a`;
    const next = `${p}/b`;
    await recordsOn(p);
    // Real transitions, no recorder: the outbox keeps them.
    const w = new Consumer(redis, q, { workerId: "w", leaseMs: 30_000 });
    const wb = new Consumer(redis, next, { workerId: "wb", leaseMs: 30_000 });
    const join = `${p}/join`;
    const wj = new Consumer(redis, join, { workerId: "wj", leaseMs: 30_000 });
    const ids = Array.from({ length: 40 }, (_, i) => `j${i}`);
    await producer.enqueueMany(
      q,
      ids.map((id, i) => ({ id, data: { i }, attempts: 2 })),
    );
    await producer.enqueue(q, { fan: true }, { id: "fan", attempts: 4 });
    await producer.enqueue(q, { later: true }, { id: "later", delayMs: 3_600_000 });
    // Every handler reports progress several times (each execution afresh), then ends.
    const report = async (c: Consumer, job: ClaimedJob, steps: number) => {
      for (let k = 1; k <= steps; k++)
        assert.equal(await c.progress(job, k / 5, `step ${k} of ${job.id} try ${job.attempt}`), true);
    };
    for (let round = 0; round < 3; round++) {
      const { jobs } = await w.claim(100);
      for (const job of jobs) {
        await report(w, job, 2 + round);
        if (job.id === "fan") {
          assert.equal(await w.fanOut(job, [{ c: 1 }, { c: 2 }, { c: 3 }], next, join), 3);
          continue;
        }
        const i = Number(job.id.slice(1));
        if (i % 4 === 0)
          await w.fail(
            job,
            { name: "E", message: `fail ${job.attempt}` },
            { retryable: true, retryDelayMs: 0 },
          );
        else if (i % 4 === 1) await w.release(job, "shutdown");
        else if (i % 4 === 2) await w.advance(job, { a: i }, next);
        else await w.complete(job, i);
      }
    }
    for (const job of (await wb.claim(100)).jobs) {
      await report(wb, job, 4);
      await wb.complete(job, "b");
    }
    for (const job of (await wj.claim(10)).jobs) await wj.complete(job, "joined");

    const entries = (await redis.xrange(new PipelineKeys(p).outbox, "-", "+")) as RawEntry[];
    assert.ok(entries.length > 150, `entries: ${entries.length}`);
    const events = entries.flatMap((e) => parseEntry(p, e) ?? []);

    const dump = async (name: string) => ({
      jobs: await pgServer.query("SELECT * FROM conveyor_jobs ORDER BY pipeline, id", [], name),
      attempts: await pgServer.query(
        "SELECT * FROM conveyor_attempts ORDER BY pipeline, job_id, execution",
        [],
        name,
      ),
    });
    const applyAll = async (batches: (typeof events)[]) => {
      const db = await newDatabase();
      const pool = createPool(db.url);
      try {
        await migrate(pool);
        for (const b of batches) await writeBatch(pool, foldEvents(b));
      } finally {
        await pool.end();
      }
      return dump(db.name);
    };

    const inOrder = await applyAll([events]);
    const reversed = await applyAll(events.map((e) => [e]).reverse());
    // Random chunks, shuffled, with a third of them delivered twice.
    let seed = 42;
    const rand = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    const chunks: (typeof events)[] = [];
    for (let i = 0; i < events.length;) {
      const size = 1 + Math.floor(rand() * 30);
      chunks.push(events.slice(i, i + size));
      i += size;
    }
    const shuffled = [...chunks, ...chunks.filter(() => rand() < 0.33)].sort(() => rand() - 0.5);
    const scrambled = await applyAll(shuffled);

    assert.equal(
      inOrder.jobs.length,
      40 + 1 + 3 + 1 + 1,
      "40 jobs, the parent, its 3 children and join, the delayed one",
    );
    assert.deepEqual(reversed, inOrder);
    assert.deepEqual(scrambled, inOrder);
    const byId = new Map((inOrder.jobs as unknown as JobRow[]).map((r) => [r.id, r]));
    assert.equal(byId.get("j3")?.state, "completed");
    assert.equal(byId.get("j2")?.state, "completed");
    assert.equal(byId.get("j2")?.queue, next);
    assert.equal(byId.get("j0")?.state, "dead");
    assert.equal(byId.get("j1")?.state, "queued", "handed back in every round");
    // Progress: the last report of the latest execution, whatever the delivery order.
    const progressOf = (id: string) => [byId.get(id)?.progress, byId.get(id)?.progress_message];
    assert.deepEqual(progressOf("j3"), [0.4, "step 2 of j3 try 1"], "completed in round 0 after 2 reports");
    assert.deepEqual(progressOf("j0"), [0.6, "step 3 of j0 try 2"], "died in round 1, its second execution");
    assert.deepEqual(progressOf("j1"), [0.8, "step 4 of j1 try 1"], "handed back in round 2");
    assert.deepEqual(progressOf("j2"), [0.8, "step 4 of j2 try 1"], "reported afresh at its second stage");
    assert.deepEqual(progressOf("later"), [null, null], "never ran");
    assert.ok(byId.get("j3")!.progress_at! <= byId.get("j3")!.finished_at!);
    assert.deepEqual([byId.get("later")?.state, byId.get("later")?.max_attempts], ["delayed", 3]);
    // The fan-out: the parent completed with its child count; children and join name it.
    assert.deepEqual(
      [byId.get("fan")?.state, byId.get("fan")?.result, byId.get("fan")?.max_attempts],
      ["completed", '{"children":3}', 4],
    );
    for (const id of ["fan:1", "fan:2", "fan:3"]) {
      const child = byId.get(id)!;
      assert.deepEqual(
        [child.parent_id, child.queue, child.state, child.result],
        ["fan", next, "completed", '"b"'],
        id,
      );
      assert.ok(child.created_at, `${id} has its own history`);
    }
    const joined = byId.get("fan:join")!;
    assert.deepEqual(
      [joined.parent_id, joined.queue, joined.state, joined.result],
      ["fan", join, "completed", '"joined"'],
    );
    assert.deepEqual((JSON.parse(joined.data!) as { results: unknown[] }).results.length, 3);
    assert.equal(byId.get("j2")?.parent_id, null, "a stage hand-over is not a child");
  });

  test("progress: the latest report of the latest execution, one row write per batch however chatty", async () => {
    const db = await newDatabase();
    const p = fresh();
    const rec = recorder(db.url, [p]);
    await rec.start();
    const w = new Consumer(redis, p, { workerId: "w", leaseMs: 30_000 });
    await producer.enqueue(p, 1, { id: "chatty", attempts: 2 });
    const [first] = (await w.claim(1)).jobs;
    await waitDrained(p);
    const row = async () => (await jobRows(db.name, p)).get("chatty")!;
    assert.deepEqual(
      [(await row()).state, (await row()).progress, (await row()).progress_message],
      ["active", null, null],
    );

    await w.progress(first!, 0.25, "reading");
    await w.progress(first!, 0.5, "");
    await waitDrained(p);
    let r = await row();
    assert.deepEqual(
      [r.state, r.progress, r.progress_message],
      ["active", 0.5, null],
      "an empty message is recorded as none",
    );
    assert.ok(r.progress_at);
    const updatedBefore = (
      await pgServer.query<{ updated_at: Date; last_event: string }>(
        "SELECT updated_at, last_event FROM conveyor_jobs WHERE pipeline = $1",
        [p],
        db.name,
      )
    )[0]!;

    // A failed execution keeps its last report visible while it waits to retry; the next
    // execution starts from none.
    await w.progress(first!, 0.6, "almost");
    await waitDrained(p);
    const after = (
      await pgServer.query<{ updated_at: Date; last_event: string }>(
        "SELECT updated_at, last_event FROM conveyor_jobs WHERE pipeline = $1",
        [p],
        db.name,
      )
    )[0]!;
    assert.deepEqual(
      after,
      updatedBefore,
      "a progress report is not a transition: updated_at and last_event stay",
    );
    assert.equal(
      await w.fail(first!, { name: "E", message: "no" }, { retryable: true, retryDelayMs: 3_600_000 }),
      "retry",
    );
    await waitDrained(p);
    r = await row();
    assert.deepEqual([r.state, r.progress, r.progress_message], ["retrying", 0.6, "almost"]);
    assert.ok(r.due_at && r.due_at.getTime() > Date.now() + 3_000_000, "a retry's due time is recorded too");
    await redis.zadd(new QueueKeys(p).delayed, 0, "chatty"); // make the retry due now
    const [second] = (await w.claim(1)).jobs;
    assert.equal(second?.attempt, 2);
    await waitDrained(p);
    r = await row();
    assert.deepEqual([r.state, r.progress, r.due_at], ["active", null, null]);

    // A chatty handler: 300 reports between two reads of the recorder fold into one row write.
    await rec.stop();
    for (let k = 1; k <= 300; k++) await w.progress(second!, k / 300, `page ${k}`);
    assert.equal(
      await w.progress({ id: "chatty", token: first!.token }, 0.01, "stale execution"),
      false,
      "fenced: nothing recorded",
    );
    const entries = (await redis.xrange(new PipelineKeys(p).outbox, "-", "+")) as RawEntry[];
    const folded = foldEvents(entries.flatMap((e) => parseEntry(p, e) ?? []));
    assert.equal(entries.length, 300);
    assert.equal(folded.jobs.length, 1, "one job patch");
    assert.equal(folded.attempts.length, 0, "progress does not touch the executions table");
    const next = recorder(db.url, [p], { batchSize: 500 });
    await next.start();
    await waitDrained(p);
    assert.equal(next.stats().batches, 1, "one transaction");
    r = await row();
    assert.deepEqual([r.state, r.progress, r.progress_message], ["active", 1, "page 300"]);
    await w.complete(second!, "done");
    await waitDrained(p);
    r = await row();
    assert.deepEqual(
      [r.state, r.progress, r.progress_message, r.max_attempts],
      ["completed", 1, "page 300", 2],
      "the last report stays after completion",
    );
  });

  test("a report that reaches PostgreSQL before its job's transitions still gives the right row", async () => {
    const p = fresh();
    const db = await newDatabase();
    const pool = createPool(db.url);
    try {
      await migrate(pool);
      const e = (id: string, ...fields: string[]) => parseEntry(p, [id, fields])!;
      const enq = e(
        "100-0",
        "type",
        "enqueued",
        "id",
        "j",
        "queue",
        p,
        "at",
        "100",
        "data",
        "{}",
        "attempts",
        "3",
      );
      const start = e(
        "200-0",
        "type",
        "started",
        "id",
        "j",
        "queue",
        p,
        "at",
        "200",
        "token",
        "1",
        "attempt",
        "1",
        "worker",
        "w",
      );
      const p1 = e(
        "300-0",
        "type",
        "progress",
        "id",
        "j",
        "queue",
        p,
        "at",
        "300",
        "token",
        "1",
        "progress",
        "0.3",
        "message",
        "a",
      );
      const p2 = e(
        "400-0",
        "type",
        "progress",
        "id",
        "j",
        "queue",
        p,
        "at",
        "400",
        "token",
        "1",
        "progress",
        "0.7",
        "message",
        "b",
      );
      const bad = e(
        "450-0",
        "type",
        "progress",
        "id",
        "j",
        "queue",
        p,
        "at",
        "450",
        "token",
        "1",
        "progress",
        "70",
        "message",
        "percent?",
      );
      // Only reports so far (the transitions are in another recorder's batch): a provisional row.
      await writeBatch(pool, foldEvents([p2]));
      await writeBatch(pool, foldEvents([p1]));
      const rows = () =>
        pgServer.query<JobRow & { last_event: string; updated_at: Date }>(
          "SELECT * FROM conveyor_jobs",
          [],
          db.name,
        );
      let [row] = await rows();
      assert.deepEqual(
        [row!.state, row!.progress, row!.progress_message, row!.last_event, row!.created_at],
        ["active", 0.7, "b", "400-0", null],
      );
      // The transitions arrive late: they take over the row, and the newer report stays.
      await writeBatch(pool, foldEvents([start]));
      await writeBatch(pool, foldEvents([enq]));
      [row] = await rows();
      assert.deepEqual(
        [row!.state, row!.progress, row!.progress_message, row!.last_event, row!.attempts, row!.max_attempts],
        ["active", 0.7, "b", "200-0", 1, 3],
      );
      assert.equal(row!.created_at?.getTime(), 100);
      assert.equal(row!.updated_at.getTime(), 200);
      // A report whose fraction is not one (0..1) keeps its message and records no fraction.
      await writeBatch(pool, foldEvents([bad]));
      [row] = await rows();
      assert.deepEqual([row!.progress, row!.progress_message], [null, "percent?"]);
    } finally {
      await pool.end();
    }
  });

  test("a fan-out: the parent, each child (also dead-lettered and revived) and the join are recorded", async () => {
    const db = await newDatabase();
    const p = fresh();
    const [split, work, join] = [`${p}/split`, `${p}/work`, `${p}/join`];
    const rec = recorder(db.url, [p]);
    await rec.start();
    const ws = new Consumer(redis, split, { workerId: "ws", leaseMs: 30_000 });
    const ww = new Consumer(redis, work, { workerId: "ww", leaseMs: 30_000 });
    const wj = new Consumer(redis, join, { workerId: "wj", leaseMs: 30_000 });
    await producer.enqueue(split, { doc: 1 }, { id: "doc", attempts: 1 });
    await producer.enqueue(split, { doc: 2 }, { id: "empty" });
    for (const job of (await ws.claim(10)).jobs) {
      const children = job.id === "doc" ? [{ page: 1 }, { page: 2 }, { page: 3 }] : [];
      assert.equal(await ws.fanOut(job, children, work, join), children.length);
    }
    // Children inherit the parent's single attempt: page 2 fails into dead letters (it still finishes).
    for (const job of (await ww.claim(10)).jobs) {
      if (job.id === "doc:2")
        assert.equal(
          await ww.fail(job, { name: "E", message: "torn page" }, { retryable: true, retryDelayMs: 0 }),
          "dead",
        );
      else assert.equal(await ww.complete(job, { words: Number(job.id.slice(-1)) * 100 }), true);
    }
    const joins = (await wj.claim(10)).jobs;
    assert.deepEqual(joins.map((j) => j.id).sort(), ["doc:join", "empty:join"]);
    for (const job of joins) assert.equal(await wj.complete(job, "merged"), true);
    await waitDrained(p);
    // The dead child is revived from dead letters: still the parent's child.
    assert.equal(await admin.retryDead(work, ["doc:2"]), 1);
    const revived = (await ww.claim(1)).jobs[0]!;
    assert.equal(await ww.complete(revived, { words: 200 }), true);
    await waitDrained(p);

    const jobs = await jobRows(db.name, p);
    assert.deepEqual([...jobs.keys()].sort(), [
      "doc",
      "doc:1",
      "doc:2",
      "doc:3",
      "doc:join",
      "empty",
      "empty:join",
    ]);
    const parent = jobs.get("doc")!;
    assert.deepEqual(
      [parent.queue, parent.state, parent.result, parent.parent_id],
      [split, "completed", '{"children":3}', null],
    );
    assert.deepEqual(jobs.get("empty")?.result, '{"children":0}');
    for (const id of ["doc:1", "doc:2", "doc:3"]) {
      const child = jobs.get(id)!;
      assert.deepEqual([child.parent_id, child.queue, child.state], ["doc", work, "completed"], id);
      assert.equal(child.data, JSON.stringify({ page: Number(id.slice(-1)) }));
      assert.equal(
        child.created_at?.getTime(),
        parent.finished_at?.getTime(),
        `${id} was created by the fan-out`,
      );
    }
    assert.equal(jobs.get("doc:2")?.error, null, "the revived child succeeded: no error as its outcome");
    assert.match(
      (await attemptRows(db.name, p)).get("doc:2")?.[0]?.error ?? "",
      /torn page/,
      "the revived child's earlier failure stays in its attempts",
    );
    const docJoin = jobs.get("doc:join")!;
    assert.deepEqual(
      [docJoin.parent_id, docJoin.queue, docJoin.state, docJoin.result],
      ["doc", join, "completed", '"merged"'],
    );
    assert.deepEqual(JSON.parse(docJoin.data!), {
      parent: "doc",
      results: [
        { id: "doc:1", result: { words: 100 } },
        { id: "doc:2", error: "attempts exhausted (1/1): torn page" },
        { id: "doc:3", result: { words: 300 } },
      ],
    });
    assert.ok(docJoin.created_at);
    assert.deepEqual(
      [jobs.get("empty:join")?.parent_id, jobs.get("empty:join")?.state],
      ["empty", "completed"],
    );
    // What the parent_id index is for: a fan-out's children (the join is `<parent>:join`).
    const kids = await pgServer.query<{ id: string; state: string }>(
      "SELECT id, state FROM conveyor_jobs WHERE pipeline = $1 AND parent_id = $2 AND id <> $2 || ':join' ORDER BY id",
      [p, "doc"],
      db.name,
    );
    assert.deepEqual(kids, [
      { id: "doc:1", state: "completed" },
      { id: "doc:2", state: "completed" },
      { id: "doc:3", state: "completed" },
    ]);
    assert.equal(rec.stats().rejected, 0);
  });

  test("migration 2 upgrades a database recorded by migration 1 alone, keeping its rows", async () => {
    const db = await newDatabase();
    const pool = createPool(db.url);
    try {
      assert.deepEqual(await migrate(pool, MIGRATIONS.slice(0, 1)), [1]);
      await pgServer.query(
        `INSERT INTO conveyor_jobs (pipeline, id, queue, state, data, attempts, updated_at, last_event, v_event, v_data, v_created, created_at)
        VALUES ('p', 'old', 'p', 'queued', '{}', 0, to_timestamp(1), '1-0', 100000000000000000000, 100000000000000000000, 100000000000000000000, to_timestamp(1))`,
        [],
        db.name,
      );
      assert.deepEqual(
        await migrate(pool),
        MIGRATIONS.slice(1).map((m) => m.id),
      );
      assert.deepEqual(await migrate(pool), [], "and only once");
      const [old] = await pgServer.query<JobRow>("SELECT * FROM conveyor_jobs", [], db.name);
      assert.deepEqual(
        [old!.state, old!.data, old!.progress, old!.max_attempts, old!.parent_id, old!.due_at],
        ["queued", "{}", null, null, null, null],
      );
      // The old row takes new events; the widened state check accepts `delayed`, and still refuses nonsense.
      await writeBatch(
        pool,
        foldEvents([
          parseEntry("p", [
            "2-0",
            [
              "type",
              "enqueued",
              "id",
              "new",
              "queue",
              "p",
              "at",
              "2",
              "data",
              "1",
              "attempts",
              "2",
              "due",
              "60000",
            ],
          ])!,
          parseEntry("p", [
            "3-0",
            [
              "type",
              "started",
              "id",
              "old",
              "queue",
              "p",
              "at",
              "3",
              "token",
              "9",
              "attempt",
              "1",
              "worker",
              "w",
            ],
          ])!,
          parseEntry("p", [
            "4-0",
            [
              "type",
              "progress",
              "id",
              "old",
              "queue",
              "p",
              "at",
              "4",
              "token",
              "9",
              "progress",
              "0.5",
              "message",
              "half",
            ],
          ])!,
        ]),
      );
      const rows = new Map(
        (await pgServer.query<JobRow>("SELECT * FROM conveyor_jobs", [], db.name)).map((r) => [r.id, r]),
      );
      assert.deepEqual(
        [rows.get("old")?.state, rows.get("old")?.progress, rows.get("old")?.data],
        ["active", 0.5, "{}"],
      );
      assert.deepEqual(
        [rows.get("new")?.state, rows.get("new")?.due_at?.getTime(), rows.get("new")?.max_attempts],
        ["delayed", 60000, 2],
      );
      await assert.rejects(
        pgServer.query("UPDATE conveyor_jobs SET state = 'lost'", [], db.name),
        /check constraint/,
      );
    } finally {
      await pool.end();
    }
  });

  test("two recorders drain one outbox concurrently: every job recorded once, final states right", async () => {
    const db = await newDatabase();
    const p = fresh();
    const q = `${p}/work`;
    const a = recorder(db.url, [p], { consumer: "rec-a", batchSize: 50 });
    const b = recorder(db.url, [p], { consumer: "rec-b", batchSize: 50 });
    await Promise.all([a.start(), b.start()]);

    const total = 500;
    const expected = new Map<string, { state: string; attempts: number; outcomes: string[] }>();
    const workers = [1, 2, 3].map((i) => new Consumer(redis, q, { workerId: `w${i}`, leaseMs: 30_000 }));
    for (let start = 0; start < total; start += 100) {
      await producer.enqueueMany(
        q,
        Array.from({ length: 100 }, (_, k) => ({
          id: `job-${start + k}`,
          data: { i: start + k },
          attempts: 2,
        })),
      );
    }
    // Three workers take turns: i%5==0 fails once then completes, i%7==0 dies after 2 failures,
    // i%11==0 is handed back once; the rest complete at once.
    const handedBack = new Set<string>();
    let done = 0;
    let turn = 0;
    while (done < total) {
      const w = workers[turn++ % workers.length]!;
      const { jobs } = await w.claim(20);
      if (jobs.length === 0) continue;
      await Promise.all(
        jobs.map(async (job) => {
          const i = Number(job.id.slice(4));
          if (i % 11 === 0 && !handedBack.has(job.id)) {
            handedBack.add(job.id);
            await w.release(job, "shutdown");
          } else if (i % 7 === 0) {
            const outcome = await w.fail(
              job,
              { name: "E", message: "no" },
              { retryable: true, retryDelayMs: 0 },
            );
            if (outcome === "dead") done++;
          } else if (i % 5 === 0 && job.attempt === 1) {
            await w.fail(job, { name: "E", message: "once" }, { retryable: true, retryDelayMs: 0 });
          } else {
            await w.complete(job, i);
            done++;
          }
        }),
      );
    }
    for (let i = 0; i < total; i++) {
      const outcomes: string[] = [];
      if (i % 11 === 0) outcomes.push("handedBack");
      if (i % 7 === 0)
        expected.set(`job-${i}`, { state: "dead", attempts: 2, outcomes: [...outcomes, "retried", "dead"] });
      else if (i % 5 === 0)
        expected.set(`job-${i}`, {
          state: "completed",
          attempts: 2,
          outcomes: [...outcomes, "retried", "completed"],
        });
      else
        expected.set(`job-${i}`, { state: "completed", attempts: 1, outcomes: [...outcomes, "completed"] });
    }

    await waitDrained(p);
    const jobs = await jobRows(db.name, p);
    const attempts = await attemptRows(db.name, p);
    assert.equal(jobs.size, total);
    const counts = await pgServer.query<{ n: string; distinct_ids: string }>(
      "SELECT count(*) AS n, count(DISTINCT id) AS distinct_ids FROM conveyor_jobs WHERE pipeline = $1",
      [p],
      db.name,
    );
    assert.deepEqual(counts[0], { n: String(total), distinct_ids: String(total) });
    for (const [id, want] of expected) {
      const row = jobs.get(id);
      assert.equal(row?.state, want.state, `${id} state`);
      assert.equal(row?.attempts, want.attempts, `${id} attempts`);
      assert.equal(row?.data, `{"i":${Number(id.slice(4))}}`, `${id} data`);
      const got = (attempts.get(id) ?? []).map((x) => x.outcome);
      assert.deepEqual([...got].sort(), [...want.outcomes].sort(), `${id} attempts`);
    }
    const written = a.stats().written + b.stats().written;
    assert.ok(written >= total * 3, `written ${written}`);
    assert.equal(a.stats().rejected + b.stats().rejected, 0);
  });

  test("PostgreSQL down mid-run: jobs keep moving, records arrive after it returns", async () => {
    const db = await newDatabase();
    const p = fresh();
    const q = `${p}/work`;
    const { logger, lines } = captureLogger();
    const registry = new Registry();
    const rec = recorder(db.url, [p], { logger, registry });
    await rec.start();
    const w = new Consumer(redis, q, { workerId: "w", leaseMs: 30_000 });
    const runJobs = async (from: number, count: number) => {
      await producer.enqueueMany(
        q,
        Array.from({ length: count }, (_, k) => ({ id: `job-${from + k}`, data: from + k })),
      );
      let left = count;
      while (left > 0) {
        const { jobs } = await w.claim(25);
        for (const job of jobs) assert.equal(await w.complete(job, "ok"), true);
        left -= jobs.length;
      }
    };

    await runJobs(0, 100);
    await waitDrained(p);
    await pgServer.kill();
    // With PostgreSQL gone, the Redis side does not wait for it.
    await runJobs(100, 300);
    const counts = await admin.counts(q);
    assert.equal(counts.completed, 400);
    await waitFor("the recorder notices the outage", async () => !rec.stats().databaseUp, DEADLINE);
    assert.ok((await redis.xlen(new PipelineKeys(p).outbox)) > 0, "records wait in the outbox");
    await waitFor("a few retries while it is down", async () => rec.stats().failures >= 3, DEADLINE);
    await pgServer.restart();
    await runJobs(400, 100);
    await waitDrained(p);

    const jobs = await jobRows(db.name, p);
    assert.equal(jobs.size, 500);
    for (const [id, row] of jobs) assert.equal(row.state, "completed", id);
    const attempts = await pgServer.query<{ n: string }>(
      "SELECT count(*) AS n FROM conveyor_attempts WHERE outcome = 'completed'",
      [],
      db.name,
    );
    assert.equal(attempts[0]?.n, "500");
    const stats = rec.stats();
    assert.ok(stats.failures >= 1);
    assert.equal(stats.databaseUp, true);
    assert.equal(
      lines.filter((l) => String(l.msg).includes("PostgreSQL unavailable")).length,
      1,
      "the outage is logged once",
    );
    assert.equal(
      lines.filter((l) => String(l.msg).includes("PostgreSQL is back")).length,
      1,
      "and its end once",
    );
    const metrics = await registry.getMetricsAsJSON();
    const value = (name: string) =>
      metrics.find((m) => m.name === name)?.values.reduce((s, v) => s + v.value, 0);
    assert.ok((value("conveyor_records_failures_total") ?? 0) >= 1);
    assert.ok((value("conveyor_records_written_total") ?? 0) >= 1000);
    assert.equal(value("conveyor_records_database_up"), 1);
  });

  test("PostgreSQL down while 2,000 jobs with 64 KiB results run: the outbox stays within its byte budget, the queue keeps working, the records that fit arrive after", async () => {
    const db = await newDatabase();
    const p = fresh();
    const q = `${p}/work`;
    const budget = 16 * 1024 * 1024; // 2,000 results of 64 KiB are 125 MiB
    const registry = new Registry();
    const { logger, lines } = captureLogger();
    const rec = recorder(db.url, [p], { registry, logger, outboxMaxBytes: budget, budgetIntervalMs: 50 });
    await rec.start();
    await waitFor("schema", async () => rec.stats().databaseUp, DEADLINE);
    await pgServer.kill();
    const outbox = new PipelineKeys(p).outbox;
    const bytes = async () => Number((await redis.memory("USAGE", outbox, "SAMPLES", 0)) ?? 0);
    // Results are deleted from Redis at completion (retention 0): what grows is the outbox alone.
    const w = new Consumer(redis, q, { workerId: "w", leaseMs: 30_000, retentionSeconds: 0 });
    const result = "x".repeat(64 * 1024);
    let largest = 0;
    for (let from = 0; from < 2000; from += 25) {
      await producer.enqueueMany(
        q,
        Array.from({ length: 25 }, (_, k) => ({ id: `big-${from + k}`, data: from + k })),
      );
      let left = 25;
      while (left > 0) {
        const { jobs } = await w.claim(left);
        for (const job of jobs) assert.equal(await w.complete(job, result), true);
        left -= jobs.length;
      }
      largest = Math.max(largest, await bytes());
    }
    assert.equal((await admin.counts(q)).completed, 2000, "the queue kept working");
    // Between two checks (50 ms here) the outbox may pass the budget by what those add.
    assert.ok(largest < budget * 1.5, `outbox peaked at ${largest} bytes (budget ${budget})`);
    await waitFor("within the budget", async () => (await bytes()) <= budget, DEADLINE);
    const metrics = await registry.getMetricsAsJSON();
    const shed = metrics.find((m) => m.name === "conveyor_records_shed_total")!.values[0]!.value;
    assert.ok(shed > 0, "entries were shed");
    assert.ok(
      lines.some((l) => String(l.msg).includes("over its byte budget")),
      "and logged",
    );

    // What is still in the outbox (and what the recorder holds) arrives once PostgreSQL is back.
    const kept = await redis.xrange(outbox, "-", "+");
    const keptCompletions = kept
      .map(([, f]) =>
        Object.fromEntries(Array.from({ length: f.length / 2 }, (_, i) => [f[2 * i], f[2 * i + 1]])),
      )
      .filter((e) => e.type === "completed")
      .map((e) => e.id!);
    assert.ok(keptCompletions.length > 100, `${keptCompletions.length} completions fit`);
    await pgServer.restart();
    await waitDrained(p);
    const rows = await jobRows(db.name, p);
    for (const id of keptCompletions) assert.equal(rows.get(id)?.state, "completed", id);
    assert.ok(rows.size < 2000, "the shed ones are not invented");
  });

  test("PostgreSQL down at start: the schema is created once it comes up", async () => {
    const db = await newDatabase();
    const p = fresh();
    await pgServer.kill();
    try {
      const rec = recorder(db.url, [p]);
      await rec.start(); // needs only Redis
      await producer.enqueue(p, "early", { id: "early" });
      await waitFor("a failed attempt", async () => rec.stats().failures > 0, DEADLINE);
    } finally {
      await pgServer.restart();
    }
    await waitDrained(p);
    const jobs = await jobRows(db.name, p);
    assert.equal(jobs.get("early")?.state, "queued");
  });

  test("a recorder that crashed after reading (or even after writing) leaves nothing lost or doubled", async () => {
    const db = await newDatabase();
    const p = fresh();
    const q = `${p}/work`;
    await recordsOn(p);
    const w = new Consumer(redis, q, { workerId: "w", leaseMs: 30_000 });
    await producer.enqueueMany(
      q,
      Array.from({ length: 120 }, (_, i) => ({ id: `job-${i}`, data: i })),
    );
    for (;;) {
      const { jobs } = await w.claim(50);
      if (jobs.length === 0) break;
      for (const job of jobs) await w.complete(job, job.id);
    }
    const outbox = new PipelineKeys(p).outbox;
    // Ghost 1 read 200 entries and died before writing them.
    const read = async (consumer: string, count: number) =>
      (
        (await redis.xreadgroup(
          "GROUP",
          RECORDER_GROUP,
          consumer,
          "COUNT",
          count,
          "STREAMS",
          outbox,
          ">",
        )) as [string, RawEntry[]][]
      )[0]![1];
    await read("ghost-1", 200);
    // Ghost 2 read 100 entries, committed them to PostgreSQL and died before XACK.
    const written = await read("ghost-2", 100);
    const pool = createPool(db.url);
    try {
      await migrate(pool);
      await writeBatch(pool, foldEvents(written.flatMap((e) => parseEntry(p, e) ?? [])));
    } finally {
      await pool.end();
    }
    const pendingBefore = (await redis.xpending(outbox, RECORDER_GROUP)) as [number];
    assert.equal(Number(pendingBefore[0]), 300);

    const rec = recorder(db.url, [p], { consumer: "survivor" });
    await rec.start();
    await waitDrained(p);
    const jobs = await jobRows(db.name, p);
    assert.equal(jobs.size, 120);
    for (const [id, row] of jobs) {
      assert.equal(row.state, "completed", id);
      assert.equal(row.result, JSON.stringify(id));
    }
    const attempts = await pgServer.query<{ n: string; d: string }>(
      "SELECT count(*) AS n, count(DISTINCT (job_id, execution)) AS d FROM conveyor_attempts",
      [],
      db.name,
    );
    assert.deepEqual(attempts[0], { n: "120", d: "120" });
    assert.ok(rec.stats().written >= 360, "the survivor took over the ghosts' entries");
  });

  test("entries trimmed by the outbox cap before they were recorded are reported, never silent", async () => {
    const db = await newDatabase();
    const p = fresh();
    await recordsOn(p);
    await producer.enqueueMany(
      p,
      Array.from({ length: 100 }, (_, i) => ({ id: `job-${i}`, data: i })),
    );
    const outbox = new PipelineKeys(p).outbox;
    await redis.xreadgroup("GROUP", RECORDER_GROUP, "ghost", "COUNT", 10, "STREAMS", outbox, ">");
    // What the scripts' MAXLEN cap does when no recorder keeps up: the oldest entries go.
    await redis.xtrim(outbox, "MAXLEN", 50);
    const { logger, lines } = captureLogger();
    const registry = new Registry();
    const rec = recorder(db.url, [p], { logger, registry });
    await rec.start();
    const gauge = (await registry.getSingleMetric("conveyor_records_outbox_trimmed")!.get()).values[0]?.value;
    assert.equal(gauge, 40, "40 entries were trimmed before anyone read them");
    assert.ok(lines.some((l) => String(l.msg).includes("unread entries were trimmed")));
    await waitFor("the ghost's trimmed entries are noticed", async () => rec.stats().lost === 10, DEADLINE);
    await waitDrained(p);
    const jobs = await jobRows(db.name, p);
    assert.equal(jobs.size, 50);
    assert.ok(jobs.has("job-99") && !jobs.has("job-49"));
  });

  test("stop() flushes what the outbox holds before it returns", async () => {
    const db = await newDatabase();
    const p = fresh();
    const q = `${p}/work`;
    const rec = recorder(db.url, [p], { batchSize: 25, stopTimeoutMs: DEADLINE });
    await rec.start();
    const w = new Consumer(redis, q, { workerId: "w", leaseMs: 30_000 });
    await producer.enqueueMany(
      q,
      Array.from({ length: 200 }, (_, i) => ({ id: `job-${i}`, data: i })),
    );
    for (;;) {
      const { jobs } = await w.claim(50);
      if (jobs.length === 0) break;
      for (const job of jobs) await w.complete(job, 1);
    }
    await rec.stop();
    assert.equal(await outboxDrained(p), true, "nothing left for another recorder");
    const jobs = await jobRows(db.name, p);
    assert.equal(jobs.size, 200);
    for (const [id, row] of jobs) assert.equal(row.state, "completed", id);
  });

  test("stop() during an outage returns promptly and leaves the entries for later", async () => {
    const db = await newDatabase();
    const p = fresh();
    const rec = recorder(db.url, [p], {
      stopTimeoutMs: DEADLINE,
      maxBackoffMs: 60_000,
      minBackoffMs: 30_000,
    });
    await rec.start();
    await producer.enqueue(p, 1, { id: "one" });
    await waitDrained(p);
    await pgServer.kill();
    try {
      await producer.enqueue(p, 2, { id: "two" });
      await waitFor("the recorder notices the outage", async () => rec.stats().failures > 0, DEADLINE);
      // It now sleeps a long backoff; stop must not wait for it (nor for stopTimeoutMs).
      const stopped = await Promise.race([rec.stop().then(() => true), sleep(20_000, false, { ref: false })]);
      assert.equal(stopped, true, "stop() returned");
    } finally {
      await pgServer.restart();
    }
    assert.equal(await redis.xlen(new PipelineKeys(p).outbox), 1, "the entry waits in the outbox");
    const next = recorder(db.url, [p]);
    await next.start();
    await waitDrained(p);
    assert.equal((await jobRows(db.name, p)).get("two")?.state, "queued");
  });

  test("stop() mid-run and a successor: every transition recorded exactly once", async () => {
    const db = await newDatabase();
    const p = fresh();
    const q = `${p}/work`;
    const first = recorder(db.url, [p], { consumer: "first", batchSize: 20 });
    await first.start();
    const w = new Consumer(redis, q, { workerId: "w", leaseMs: 30_000 });
    const total = 300;
    await producer.enqueueMany(
      q,
      Array.from({ length: total }, (_, i) => ({ id: `job-${i}`, data: i })),
    );
    let completed = 0;
    let second: JobRecorder | null = null;
    while (completed < total) {
      const { jobs } = await w.claim(10);
      for (const job of jobs) await w.complete(job, 1);
      completed += jobs.length;
      if (!second && completed >= total / 2) {
        await first.stop();
        second = recorder(db.url, [p], { consumer: "second" });
        await second.start();
      }
    }
    await waitDrained(p);
    const jobs = await jobRows(db.name, p);
    assert.equal(jobs.size, total);
    for (const [id, row] of jobs) assert.equal(row.state, "completed", id);
    const attempts = await pgServer.query<{ n: string }>(
      "SELECT count(*) AS n FROM conveyor_attempts",
      [],
      db.name,
    );
    assert.equal(attempts[0]?.n, String(total));
    const groups = (await redis.xinfo(
      "CONSUMERS",
      new PipelineKeys(p).outbox,
      RECORDER_GROUP,
    )) as unknown[][];
    const names = groups.map((c) => String(c[1]));
    assert.ok(!names.includes("first"), `a cleanly stopped recorder leaves the group: ${names.join(",")}`);
  });

  test("migration 9 adds a flow's columns to a database of migration 8, keeping its rows; a recorded flow is read back by key", async () => {
    const db = await newDatabase();
    const pool = createPool(db.url);
    try {
      assert.deepEqual(await migrate(pool, MIGRATIONS.slice(0, 8)), [1, 2, 3, 4, 5, 6, 7, 8]);
      // (a row as the recorder of migration 8 wrote it: its upsert names no flow column)
      await pgServer.query(
        `INSERT INTO conveyor_jobs (pipeline, id, queue, state, data, attempts, updated_at, last_event, v_event, v_data, v_created, created_at)
        VALUES ('p', 'old', 'p/a', 'queued', '{}', 0, to_timestamp(1), '1-0', 100000000000000000000, 100000000000000000000, 100000000000000000000, to_timestamp(1))`,
        [],
        db.name,
      );
      // (every migration after 8 applies, in order: the later ones must not trip on its rows)
      assert.deepEqual(
        await migrate(pool),
        MIGRATIONS.slice(8).map((m) => m.id),
      );
      const [old] = await pgServer.query<JobRow>("SELECT * FROM conveyor_jobs", [], db.name);
      assert.deepEqual(
        [old!.id, old!.state, old!.flow_id, old!.flow_parents],
        ["old", "queued", null, null],
        "the row is kept, outside any flow",
      );
      const at = (ms: number) => String(ms);
      const entry = (id: string, fields: string[]): RawEntry => [id, fields];
      await writeBatch(
        pool,
        foldEvents(
          [
            entry("2-0", [
              "type",
              "enqueued",
              "id",
              "j-a",
              "queue",
              "p/a",
              "at",
              at(2),
              "flow",
              "f1",
              "flowKey",
              "a",
              "data",
              "{}",
            ]),
            entry("2-1", [
              ...[
                "type",
                "enqueued",
                "id",
                "j-d",
                "queue",
                "p/d",
                "at",
                at(2),
                "from",
                "flow",
                "state",
                "waiting-children",
              ],
              ...[
                "flow",
                "f1",
                "flowKey",
                "d",
                "parents",
                "a",
                "parentIds",
                "j-a",
                "onParentFailure",
                "ignore",
                "data",
                "{}",
              ],
            ]),
          ].map((e) => parseEntry("p", e)!),
        ),
      );
      const queries = new RecordsQueries(pool);
      const waiting = await queries.flowJobs("f1");
      assert.deepEqual(
        waiting.map((j) => [
          j.key,
          j.id,
          j.queue,
          j.state,
          j.parents,
          j.parentIds,
          j.onParentFailure,
          j.createdAt,
        ]),
        [
          ["a", "j-a", "p/a", "queued", [], [], null, 2],
          ["d", "j-d", "p/d", "waiting-children", ["a"], ["j-a"], "ignore", 2],
        ],
      );
      // Released, run and completed: the flow's fields stay as the enqueue set them.
      await writeBatch(
        pool,
        foldEvents(
          [
            entry("3-0", ["type", "completed", "id", "j-a", "queue", "p/a", "at", at(3), "result", "1"]),
            entry("3-1", ["type", "promoted", "id", "j-d", "queue", "p/d", "at", at(3), "from", "flow"]),
            entry("4-0", ["type", "completed", "id", "j-d", "queue", "p/d", "at", at(4), "result", "2"]),
          ].map((e) => parseEntry("p", e)!),
        ),
      );
      const done = await queries.flowJobs("f1");
      assert.deepEqual(
        done.map((j) => [j.key, j.state, j.parents, j.parentIds]),
        [
          ["a", "completed", [], []],
          ["d", "completed", ["a"], ["j-a"]],
        ],
      );
      assert.deepEqual(await queries.flowJobs("f2"), [], "another flow: none");
    } finally {
      await pool.end();
    }
  });
});

describe("job records on a Redis Cluster", () => {
  test("one recorder drains two pipelines living on different nodes", async () => {
    const [pgServer, cluster] = await Promise.all([PostgresServer.start(), RedisClusterServer.start(3)]);
    const redis = connectRedis(cluster.url);
    const rec = new JobRecorder({
      redis,
      redisUrl: cluster.url,
      database: pgServer.url,
      pipelines: ["alpha", "omega"],
      logger: pino({ level: "silent" }),
      blockMs: 200,
      gaugeIntervalMs: 200,
    });
    try {
      assert.notEqual(
        await redis.cluster("KEYSLOT", new PipelineKeys("alpha").outbox),
        await redis.cluster("KEYSLOT", new PipelineKeys("omega").outbox),
      );
      await rec.start();
      const producer = new Producer(redis);
      for (const p of ["alpha", "omega"]) {
        await producer.enqueueMany(
          `${p}/a`,
          Array.from({ length: 50 }, (_, i) => ({ id: `j${i}`, data: i })),
        );
        const a = new Consumer(redis, `${p}/a`, { workerId: "w", leaseMs: 30_000 });
        const b = new Consumer(redis, `${p}/b`, { workerId: "w", leaseMs: 30_000 });
        for (const job of (await a.claim(50)).jobs) assert.equal(await a.advance(job, "a", `${p}/b`), true);
        for (const job of (await b.claim(50)).jobs) assert.equal(await b.complete(job, "b"), true);
      }
      const rows = await waitFor(
        "records of both pipelines",
        async () => {
          const r = await pgServer
            .query<{ pipeline: string; n: string }>(
              "SELECT pipeline, count(*) AS n FROM conveyor_jobs WHERE state = 'completed' AND queue LIKE '%/b' GROUP BY pipeline ORDER BY pipeline",
            )
            .catch(() => []);
          return r.length === 2 && r.every((x) => x.n === "50") ? r : null;
        },
        DEADLINE,
        100,
      );
      assert.deepEqual(rows, [
        { pipeline: "alpha", n: "50" },
        { pipeline: "omega", n: "50" },
      ]);
      const attempts = await pgServer.query<{ n: string }>(
        "SELECT count(*) AS n FROM conveyor_attempts WHERE outcome = 'completed'",
      );
      assert.equal(attempts[0]?.n, "200");
    } finally {
      await rec.stop();
      redis.disconnect();
      await Promise.all([pgServer.stop(), cluster.stop()]);
    }
  });
});

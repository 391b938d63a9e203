// The queue protocol against a real Redis: leases, fencing, retries, dead letters, chaining,
// idempotency, malformed records, and the same scripts on a real 3-node Redis Cluster.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  Consumer,
  Producer,
  QueueAdmin,
  QueueKeys,
  connectRedis,
  eventsOfEntries,
  EVENT_LIST_SEPARATOR,
  waitUntilReady,
  InvalidNameError,
  PayloadTooLargeError,
  type RedisClient,
} from "../../queue/index.ts";
import { runScript, scriptSource } from "../../queue/scripts.ts";
import { RedisClusterServer, RedisServer, startQueueRedis, stopQueueRedis } from "../support/redis.ts";
import { enqueueJobsKeys, enqueueJobsRecord } from "../support/enqueueCall.ts";

function consumer(redis: RedisClient, queue: string, workerId = "w1", leaseMs = 30_000) {
  return new Consumer(redis, queue, { workerId, leaseMs });
}

/** A queue's counters but `runMs` (claim → settle: the clock's, so two equal runs may differ). */
async function countersButRunTime(admin: QueueAdmin, queue: string): Promise<Record<string, number>> {
  const { runMs, ...rest } = await admin.counters(queue);
  assert.ok((runMs ?? 0) >= 0, `${queue}: runMs ${runMs}`);
  return rest;
}

describe("queue protocol (single Redis)", () => {
  let server: RedisServer;
  let redis: RedisClient;
  let producer: Producer;
  let admin: QueueAdmin;
  let n = 0;
  const fresh = () => `t${++n}`;

  before(async () => {
    ({ server, redis, producer, admin } = await startQueueRedis({ maxPayloadBytes: 1024 }));
  });
  after(() => stopQueueRedis({ server, redis }));

  test("claim takes a lease with a fencing token and complete releases it", async () => {
    const q = fresh();
    const { id } = await producer.enqueue(q, { hello: 1 });
    const c = consumer(redis, q);
    const { jobs } = await c.claim(5);
    assert.equal(jobs.length, 1);
    assert.equal(jobs[0]!.id, id);
    assert.deepEqual(JSON.parse(jobs[0]!.rawData), { hello: 1 });
    assert.equal(jobs[0]!.attempt, 1);
    assert.deepEqual(await admin.counts(q), {
      ready: 0,
      delayed: 0,
      dueDelayed: 0,
      inflight: 1,
      dead: 0,
      completed: 0,
      backlog: 1,
    });
    assert.equal(await c.complete(jobs[0]!, { ok: true }), true);
    const info = await admin.job(id);
    assert.equal(info?.state, "completed");
    assert.equal(info?.result, '{"ok":true}');
    assert.equal((await admin.counts(q)).completed, 1);
  });

  test("a waiting job's record holds only what differs from a default; a record of the previous layout (every field) runs the same", async () => {
    const q = fresh();
    const k = new QueueKeys(q);
    const { id } = await producer.enqueue(q, { n: 1 });
    assert.match(id, /^[A-Za-z0-9]{20}$/, "a generated id is 20 base-62 characters");
    const record = await redis.hgetall(k.job(id));
    assert.deepEqual(Object.keys(record).sort(), ["attempts", "createdAt", "data", "queue", "state"]);
    assert.equal(await redis.object("ENCODING", k.job(id)), "listpack");
    assert.deepEqual(
      await redis.lrange(k.line, 0, -1),
      [id],
      "a priority-0 job waits in the line, without a score",
    );
    await producer.enqueue(
      q,
      { n: 2 },
      { id: "opts", priority: 5, timeoutMs: 2500, idempotencyKey: "i", contentHash: "h" },
    );
    const opts = await redis.hgetall(k.job("opts"));
    assert.deepEqual(
      [opts.priority, opts.timeout, opts.idempotencyKey, opts.contentHash, opts.id, opts.attemptsMade],
      ["5", "2500", "i", "h", undefined, undefined],
    );
    // The previous layout, as a producer of the last release writes it: claimed, failed and shown alike.
    const score = String(1000 * 4398046511104 + Number(await redis.incr(k.seq)));
    await redis.hset(k.job("old"), {
      id: "old",
      queue: q,
      data: '{"n":3}',
      priority: 0,
      score,
      attempts: 2,
      attemptsMade: 0,
      stalls: 0,
      handbacks: 0,
      timeout: 0,
      createdAt: 1,
      idempotencyKey: "",
      contentHash: "",
      state: "ready",
    });
    await redis.zadd(k.ready, score, "old");
    const c = consumer(redis, q);
    const jobs = (await c.claim(3)).jobs;
    assert.deepEqual(
      jobs.map((j) => [j.id, j.attempt, j.maxAttempts, j.timeoutMs, j.stalls]),
      // (the sorted set before the line: a job of the previous layout waits there and is older)
      [
        ["opts", 1, 3, 2500, 0],
        ["old", 1, 2, 0, 0],
        [id, 1, 3, 0, 0],
      ],
    );
    for (const job of jobs)
      assert.equal(
        await c.fail(job, { name: "E", message: "x" }, { retryable: true, retryDelayMs: 0 }),
        "retry",
      );
    for (const jobId of [id, "old"]) {
      const info = await admin.job(jobId);
      assert.deepEqual(
        [info?.id, info?.attemptsMade, info?.priority, info?.stalls, info?.state],
        [jobId, 1, 0, 0, "delayed"],
      );
    }
  });

  test("claims never exceed the free slots asked for, and follow priority then FIFO", async () => {
    const q = fresh();
    await producer.enqueueMany(q, [
      { data: 1, id: "a" },
      { data: 2, id: "b" },
      { data: 3, id: "c", priority: 5 },
      { data: 4, id: "d" },
    ]);
    const c = consumer(redis, q);
    const first = await c.claim(2);
    assert.deepEqual(
      first.jobs.map((j) => j.id),
      ["c", "a"],
    );
    const rest = await c.claim(10);
    assert.deepEqual(
      rest.jobs.map((j) => j.id),
      ["b", "d"],
    );
  });

  test("a stale token is fenced off: the late owner cannot complete, renew or fail", async () => {
    const q = fresh();
    await producer.enqueue(q, "x", { id: "job1" });
    const slow = consumer(redis, q, "slow", 50);
    const [job] = (await slow.claim(1)).jobs;
    await new Promise((r) => setTimeout(r, 80));
    const sweep = await slow.sweep({ lockMs: 1 });
    assert.equal(sweep.requeued, 1);
    const fast = consumer(redis, q, "fast");
    const [again] = (await fast.claim(1)).jobs;
    assert.equal(again!.id, "job1");
    assert.notEqual(again!.token, job!.token);
    assert.equal(again!.stalls, 1);
    assert.equal(again!.attempt, 1, "a stall is not a failed attempt");
    assert.deepEqual((await slow.renew([job!])).lost, ["job1"]);
    assert.equal(await slow.complete(job!, "late"), false);
    assert.equal(
      await slow.fail(job!, { name: "E", message: "late" }, { retryable: true, retryDelayMs: 0 }),
      "lost",
    );
    assert.equal(await fast.complete(again!, "on time"), true);
    assert.equal((await admin.job("job1"))?.result, '"on time"');
    assert.equal((await admin.counters(q)).fenced, 2);
  });

  test("renew extends every held lease in one call and records the worker report", async () => {
    const q = fresh();
    await producer.enqueueMany(q, [{ data: 1 }, { data: 2 }]);
    const c = consumer(redis, q, "w-renew", 60_000);
    const { jobs } = await c.claim(2);
    const before = await redis.zrange(new QueueKeys(q).inflight, 0, -1, "WITHSCORES");
    await new Promise((r) => setTimeout(r, 5));
    assert.deepEqual(
      (
        await c.renew(jobs, {
          id: "w-renew",
          pod: "p1",
          slots: 4,
          busy: 2,
          draining: false,
          seen: Date.now(),
        })
      ).lost,
      [],
    );
    const afterScores = await redis.zrange(new QueueKeys(q).inflight, 0, -1, "WITHSCORES");
    assert.ok(Number(afterScores[1]) > Number(before[1]));
    const workers = await admin.workers(q);
    assert.equal(workers.length, 1);
    assert.equal(workers[0]!.busy, 2);
  });

  test("a cordon the operator sets reaches the cordoned pod's workers through their renewal, and lapses or lifts", async () => {
    const q = fresh();
    const report = (pod: string) => ({
      id: `w-${pod}`,
      pod,
      slots: 4,
      busy: 1,
      draining: false,
      seen: Date.now(),
    });
    const c = consumer(redis, q, "w-cordon", 60_000);
    assert.equal((await c.renew([], report("p1"))).cordonedUntil, undefined, "nothing cordoned");
    const until = Date.now() + 30_000;
    await admin.setCordon(q, ["p1", "p2"], until);
    assert.equal((await c.renew([], report("p1"))).cordonedUntil, until);
    assert.equal((await c.renew([], report("p3"))).cordonedUntil, undefined, "another pod");
    assert.equal((await c.renew([])).cordonedUntil, undefined, "no report, no pod");
    const ttl = await redis.pttl(new QueueKeys(q).cordon);
    assert.ok(ttl > 25_000 && ttl <= 30_000, `the key lapses with the cordon (pttl ${ttl})`);
    // The next write replaces the set; a past deadline is no cordon; none lifts it.
    await admin.setCordon(q, ["p3"], until);
    assert.deepEqual(
      [(await c.renew([], report("p1"))).cordonedUntil, (await c.renew([], report("p3"))).cordonedUntil],
      [undefined, until],
    );
    await admin.setCordon(q, ["p3"], Date.now() - 1);
    assert.equal((await c.renew([], report("p3"))).cordonedUntil, undefined, "lapsed");
    await admin.setCordon(q, [], 0);
    assert.equal(await redis.exists(new QueueKeys(q).cordon), 0);
  });

  test("failures retry with backoff, then dead-letter with reason and history; dlq retry revives", async () => {
    const q = fresh();
    await producer.enqueue(q, { n: 1 }, { id: "flaky", attempts: 2 });
    const c = consumer(redis, q);
    let [job] = (await c.claim(1)).jobs;
    assert.equal(
      await c.fail(
        job!,
        { name: "TypeError", message: "boom 1", stack: "at x" },
        { retryable: true, retryDelayMs: 60_000 },
      ),
      "retry",
    );
    assert.equal((await c.claim(1)).jobs.length, 0, "backoff delays the retry");
    const counts = await admin.counts(q);
    assert.equal(counts.delayed, 1);
    assert.equal(counts.dueDelayed, 0);
    await redis.zadd(new QueueKeys(q).delayed, Date.now() - 1, "flaky");
    [job] = (await c.claim(1)).jobs;
    assert.equal(job!.attempt, 2);
    assert.equal(
      await c.fail(
        job!,
        { name: "TypeError", message: "boom 2", stack: "at y" },
        { retryable: true, retryDelayMs: 0 },
      ),
      "dead",
    );
    const [dead] = await admin.deadJobs(q);
    assert.equal(dead!.id, "flaky");
    assert.match(dead!.reason, /attempts exhausted \(2\/2\): boom 2/);
    const info = await admin.job("flaky");
    const history = JSON.parse(info!.errors!);
    assert.deepEqual(
      history.map((h: { message: string }) => h.message),
      ["boom 1", "boom 2"],
    );
    assert.equal(JSON.parse(info!.error!).stack, "at y");
    assert.equal(await admin.retryDead(q), 1);
    [job] = (await c.claim(1)).jobs;
    assert.equal(job!.id, "flaky");
    assert.equal(job!.attempt, 1);
  });

  test("a job that failed once and then succeeded shows 2 attempts and no error; its history keeps the failure", async () => {
    const q = fresh();
    await producer.enqueue(q, 1, { id: "twice", attempts: 3 });
    await producer.enqueue(q, 2, { id: "revived", attempts: 3 });
    const c = consumer(redis, q);
    const boom = { name: "TypeError", message: "boom" };
    const [first, second] = (await c.claim(2)).jobs;
    assert.equal(await c.fail(first!, boom, { retryable: true, retryDelayMs: 0 }), "retry");
    // (failed for good, then retried from the dead letters by a person: a fresh attempt budget)
    assert.equal(await c.fail(second!, boom, { retryable: false, retryDelayMs: 0 }), "dead");
    assert.equal(await admin.retryDead(q), 1);
    const again = (await c.claim(2)).jobs;
    assert.deepEqual(again.map((j) => [j.id, j.attempt]).sort(), [
      ["revived", 1],
      ["twice", 2],
    ]);
    for (const job of again) assert.equal(await c.complete(job, { ok: job.id }), true);
    for (const id of ["twice", "revived"]) {
      const info = (await admin.job(id))!;
      assert.deepEqual([info.state, info.attemptsMade, info.error], ["completed", 2, undefined], id);
      assert.deepEqual(
        JSON.parse(info.errors!).map((h: { message: string }) => h.message),
        ["boom"],
        `${id}: the failure stays in the history`,
      );
      assert.deepEqual(
        info.stages.map(({ queue, state, attempts, result, error }) => ({
          queue,
          state,
          attempts,
          result,
          error,
        })),
        [{ queue: q, state: "completed", attempts: 2, result: JSON.stringify({ ok: id }), error: undefined }],
      );
    }
    // A first-time success: one attempt, and nothing else written for it.
    await producer.enqueue(q, 3, { id: "once" });
    const [once] = (await c.claim(1)).jobs;
    assert.equal(await c.complete(once!, "ok"), true);
    const raw = await redis.hgetall(new QueueKeys(q).job("once"));
    assert.deepEqual([raw.attemptsMade, raw.error, raw.attemptsBefore], ["1", undefined, undefined]);
  });

  test("a stage advance starts the next stage's counters and keeps each finished stage's attempts", async () => {
    const [a, b, c3] = ["pipe7/a", "pipe7/b", "pipe7/c"];
    await producer.enqueue(a, { doc: 1 }, { id: "staged", attempts: 3 });
    const ca = consumer(redis, a);
    let [job] = (await ca.claim(1)).jobs;
    assert.equal(
      await ca.fail(
        job!,
        { name: "E", message: "a failed" },
        { retryable: true, retryDelayMs: 0, kind: "invalid-result", details: [], rejected: "{}" },
      ),
      "retry",
    );
    [job] = (await ca.claim(1)).jobs;
    assert.deepEqual(
      job!.previousErrors.map((e) => [e.attempt, e.kind, e.message]),
      [[1, "invalid-result", "a failed"]],
    );
    assert.equal((await admin.job("staged"))!.rejected, "{}");
    assert.equal(await ca.advance(job!, { a: true }, b), true);
    let info = (await admin.job("staged"))!;
    assert.deepEqual(
      [info.queue, info.state, info.attemptsMade, info.error, info.errors, info.rejected],
      [b, "ready", 0, undefined, undefined, undefined],
      "the next stage starts with no failed attempts",
    );
    const cb = consumer(redis, b);
    [job] = (await cb.claim(1)).jobs;
    assert.deepEqual(job!.previousErrors, []);
    assert.equal(await cb.advance(job!, { b: true }, c3), true);
    const cc = consumer(redis, c3);
    [job] = (await cc.claim(1)).jobs;
    assert.equal(await cc.complete(job!, { c: true }), true);
    info = (await admin.job("staged"))!;
    assert.deepEqual(
      info.stages.map(({ queue, state, attempts, result }) => ({ queue, state, attempts, result })),
      [
        { queue: a, state: "completed", attempts: 2, result: undefined },
        { queue: b, state: "completed", attempts: 1, result: undefined },
        { queue: c3, state: "completed", attempts: 1, result: '{"c":true}' },
      ],
    );
  });

  test("stats say whether any worker ever claimed from the queue", async () => {
    const q = fresh();
    await producer.enqueue(q, 1);
    assert.equal((await admin.stats(q)).served, false, "only a producer knows the queue");
    await consumer(redis, q).claim(1);
    assert.equal((await admin.stats(q)).served, true);
  });

  test("a non-retryable failure dead-letters at once; purge removes dead jobs", async () => {
    const q = fresh();
    await producer.enqueue(q, 1, { id: "final", attempts: 5 });
    const c = consumer(redis, q);
    const [job] = (await c.claim(1)).jobs;
    assert.equal(
      await c.fail(
        job!,
        { name: "MalformedJob", message: "not JSON" },
        { retryable: false, retryDelayMs: 0 },
      ),
      "dead",
    );
    assert.match((await admin.deadJobs(q))[0]!.reason, /not retryable: not JSON/);
    assert.equal(await admin.purgeDead(q), 1);
    assert.equal(await admin.job("final"), null);
    assert.equal((await admin.counts(q)).dead, 0);
  });

  test("dlq retry leaves a dead record another client broke (no numeric score, not a hash) dead, never lost; purge removes a set-aside key", async () => {
    const q = fresh();
    const keys = new QueueKeys(q);
    // (prioritised: a job of priority 0 waits in the line and needs no score)
    await producer.enqueueMany(q, [
      { id: "good", data: 1, attempts: 1, priority: 1 },
      { id: "noscore", data: 2, attempts: 1, priority: 1 },
      { id: "settype", data: 3, attempts: 1, priority: 1 },
    ]);
    const c = consumer(redis, q);
    for (const job of (await c.claim(3)).jobs)
      await c.fail(job, { name: "Error", message: "x" }, { retryable: false, retryDelayMs: 0 });
    assert.equal((await admin.counts(q)).dead, 3);
    await redis.hset(keys.job("noscore"), "score", "not a number");
    await redis.del(keys.job("settype"));
    await redis.sadd(keys.job("settype"), "junk");
    assert.equal(await admin.retryDead(q), 1, "only the intact record is revived");
    assert.match(
      (await admin.job("settype", q))!.deadReason!,
      /job key is a set/,
      "conveyor job explains, not crashes",
    );
    assert.deepEqual((await admin.deadJobs(q)).map((d) => d.id).sort(), ["noscore", "settype"]);
    assert.equal((await c.claim(3)).jobs.map((j) => j.id).join(), "good");
    // a claim sets a wrong-type key aside and dead-letters in its place; purge removes both
    await redis.zadd(keys.ready, 0, "aside");
    await redis.set(keys.job("aside"), "raw");
    assert.equal((await c.claim(1)).jobs.length, 0);
    const aside = (await redis.keys(`*malformed:aside`))[0]!;
    assert.equal(await redis.get(aside), "raw");
    while ((await admin.purgeDead(q)) > 0);
    assert.equal(await redis.exists(aside), 0, "the set-aside key is purged with its dead letter");
  });

  test("a Redis URL naming a database the server does not have fails with the server's reason instead of using database 0", async () => {
    const url = `${server.url}/99`;
    const wrong = connectRedis(url);
    try {
      const queued = wrong.set("conveyor-test-db", "x").then(
        () => "sent",
        (e: Error) => e.message,
      );
      await assert.rejects(waitUntilReady(wrong, url, 5000), /DB index is out of range/);
      assert.match(
        await queued,
        /Connection is closed/,
        "a command queued while connecting is not run in database 0",
      );
      assert.equal(await redis.exists("conveyor-test-db"), 0);
    } finally {
      wrong.disconnect();
    }
  });

  test("release hands a job back at the front without counting an attempt", async () => {
    const q = fresh();
    await producer.enqueueMany(q, [
      { data: 1, id: "first" },
      { data: 2, id: "second" },
    ]);
    const c = consumer(redis, q);
    const [job] = (await c.claim(1)).jobs;
    assert.equal(await c.release(job!, "drain deadline"), true);
    const [again] = (await c.claim(1)).jobs;
    assert.equal(again!.id, "first");
    assert.equal(again!.attempt, 1);
    assert.equal((await admin.job("first"))!.handbacks, 1);
    assert.equal((await admin.counters(q)).handedBack, 1);
  });

  test("a job that keeps stalling is dead-lettered (poison-pill guard)", async () => {
    const q = fresh();
    await producer.enqueue(q, 1, { id: "pill" });
    for (let i = 0; i < 3; i++) {
      const c = consumer(redis, q, `w${i}`, 1);
      const { jobs } = await c.claim(1);
      assert.equal(jobs.length, 1, `claim ${i}`);
      await new Promise((r) => setTimeout(r, 5));
      await c.sweep({ maxStalls: 2, lockMs: 1 });
    }
    const [dead] = await admin.deadJobs(q);
    assert.equal(dead?.id, "pill");
    assert.match(dead!.reason, /stalled 3 times/);
  });

  test("the sweeper mutex makes concurrent sweeps no-ops", async () => {
    const q = fresh();
    const c = consumer(redis, q);
    const results = await Promise.all([c.sweep({ lockMs: 10_000 }), c.sweep({ lockMs: 10_000 })]);
    assert.deepEqual(results.map((r) => r.ran).sort(), [false, true]);
  });

  test("advance completes stage A and enqueues stage B atomically, same id", async () => {
    const a = "pipe1/a";
    const b = "pipe1/b";
    await producer.enqueue(a, { doc: 1 }, { id: "doc1" });
    const ca = consumer(redis, a);
    const [job] = (await ca.claim(1)).jobs;
    assert.equal(await ca.advance(job!, { text: "hi" }, b), true);
    assert.equal(await ca.advance(job!, { text: "again" }, b), false, "a second advance is fenced");
    const [next] = (await consumer(redis, b).claim(5)).jobs;
    assert.equal(next!.id, "doc1");
    assert.deepEqual(JSON.parse(next!.rawData), { text: "hi" });
    assert.equal((await admin.counts(a)).completed, 1);
    await assert.rejects(ca.advance(job!, 1, "other/b"), InvalidNameError);
  });

  test("idempotency key and explicit id dedupe enqueues", async () => {
    const q = fresh();
    const one = await producer.enqueue(q, 1, { idempotencyKey: "k1" });
    const two = await producer.enqueue(q, 2, { idempotencyKey: "k1" });
    assert.equal(two.id, one.id);
    assert.equal(two.created, false);
    await producer.enqueue(q, 1, { id: "fixed" });
    assert.equal((await producer.enqueue(q, 1, { id: "fixed" })).created, false);
    assert.equal((await admin.counts(q)).ready, 2);
  });

  test("payload limit and bad options give clear errors and enqueue nothing", async () => {
    const q = fresh();
    await assert.rejects(producer.enqueue(q, "x".repeat(2000)), PayloadTooLargeError);
    await assert.rejects(producer.enqueue(q, 1, { priority: 5000 }), /priority must be an integer 0..1000/);
    await assert.rejects(producer.enqueue("bad name!", 1), InvalidNameError);
    assert.equal((await admin.counts(q)).ready, 0);
  });

  test("the script enforces the payload limit for producers in other languages", async () => {
    const q = fresh();
    const big = new Producer(redis, { maxPayloadBytes: 1_000_000 });
    // The Lua limit is the one passed by the caller; a direct call with a small limit must refuse.
    const k = new QueueKeys(q);
    await assert.rejects(
      redis.eval(
        (await import("../../queue/index.ts")).scriptSource("enqueue_jobs"),
        8,
        ...enqueueJobsKeys(k),
        JSON.stringify(
          enqueueJobsRecord(k, {
            maxPayloadBytes: 10,
            jobFields: [
              "id",
              "data",
              "priority",
              "delayMs",
              "attempts",
              "timeoutMs",
              "idempotencyKey",
              "contentHash",
            ],
          }),
        ),
        "id1",
        '"0123456789abc"',
        0,
        0,
        1,
        0,
        "",
        "",
      ),
      /ERR_PAYLOAD_TOO_LARGE/,
    );
    assert.equal((await big.enqueue(q, "ok")).created, true);
  });

  test("a job travels to enqueue_jobs as a named record: fields by name in any mix, an unknown one refused before anything is written", async () => {
    const q = fresh();
    const k = new QueueKeys(q);
    const call = (fields: string, ...values: (string | number)[]) =>
      redis.eval(
        scriptSource("enqueue_jobs"),
        8,
        ...enqueueJobsKeys(k),
        JSON.stringify(enqueueJobsRecord(k, { jobFields: fields.split(",") })),
        ...values,
      );
    // (two jobs; the second leaves the group out with '', the first the priority)
    assert.deepEqual(await call("id,data,group,priority", "n1", "1", "g1", "", "n2", "2", "", 7), [
      "ids",
      ["n1", "n2"],
      "codes",
      [1, 1],
    ]);
    assert.deepEqual(await redis.hmget(k.job("n1"), "group", "priority", "attempts"), ["g1", null, "3"]);
    assert.deepEqual(await redis.hmget(k.job("n2"), "group", "priority"), [null, "7"]);
    for (const [fields, values] of [
      ["id,data,colour", ["n3", "3", "red"]],
      ["id,data,group,group", ["n3", "3", "a", "b"]],
      ["data,id", ["3", "n3"]],
      ["id,data,priority", ["n3", "3"]],
    ] as const)
      await assert.rejects(call(fields, ...values), /ERR_INVALID_RECORD enqueue_jobs call: /, fields);
    assert.equal(await redis.exists(k.job("n3")), 0);
  });

  test("malformed entries written straight into Redis are dead-lettered with a reason", async () => {
    const q = fresh();
    const k = new QueueKeys(q);
    await redis.zadd(k.ready, 1, "ghost");
    await redis.hset(k.job("nodata"), "id", "nodata", "score", 2);
    await redis.zadd(k.ready, 2, "nodata");
    await producer.enqueue(q, 1, { id: "good" });
    const { jobs } = await consumer(redis, q).claim(10);
    assert.deepEqual(
      jobs.map((j) => j.id),
      ["good"],
    );
    const dead = await admin.deadJobs(q);
    assert.deepEqual(dead.map((d) => d.id).sort(), ["ghost", "nodata"]);
    for (const d of dead) assert.match(d.reason, /malformed/);
  });

  test("delayed jobs count as backlog once due and are promoted by claim", async () => {
    const q = fresh();
    await producer.enqueue(q, 1, { id: "later", delayMs: 60_000 });
    const c = consumer(redis, q);
    const r = await c.claim(1);
    assert.equal(r.jobs.length, 0);
    assert.ok(r.nextDueAt && r.nextDueAt > Date.now());
    assert.equal((await admin.counts(q)).backlog, 0);
    await redis.zadd(new QueueKeys(q).delayed, Date.now() - 1, "later");
    assert.equal((await admin.counts(q)).backlog, 1);
    assert.equal((await c.claim(1)).jobs[0]?.id, "later");
  });

  test("waitForWork wakes on enqueue", async () => {
    const q = fresh();
    const blocking = connectRedis(server.url, { blocking: true });
    try {
      const c = consumer(redis, q);
      const woke = c.waitForWork(blocking, 30_000).then(() => Date.now());
      await new Promise((r) => setTimeout(r, 50));
      const sent = Date.now();
      await producer.enqueue(q, 1);
      assert.ok((await woke) >= sent);
    } finally {
      blocking.disconnect();
    }
  });

  // Complete-and-claim: complete_job / advance_job with claim_jobs' keys and arguments appended.
  const claimView = (j: import("../../queue/index.ts").ClaimedJob) => ({
    id: j.id,
    data: j.rawData,
    attempt: j.attempt,
    maxAttempts: j.maxAttempts,
    timeoutMs: j.timeoutMs,
    stalls: j.stalls,
    created: j.createdAt > 0,
  });
  const eventsOf = async (q: string) =>
    eventsOfEntries(await redis.xrange(new QueueKeys(q).events, "-", "+")).map((e) => e.fields);

  test("complete-and-claim claims exactly what claim would: leases, fencing tokens, attempts, timeouts, events", async () => {
    const jobs = [
      { data: 0, id: "first" },
      { data: { a: 1 }, id: "x", attempts: 5, timeoutMs: 1234 },
      { data: [2], id: "y", priority: 3 },
      { data: 3, id: "z" },
    ];
    const [q1, q2] = [fresh(), fresh()];
    await producer.enqueueMany(q1, jobs);
    await producer.enqueueMany(q2, jobs);
    const c1 = consumer(redis, q1);
    const c2 = consumer(redis, q2);
    const [h1] = (await c1.claim(1)).jobs;
    const [h2] = (await c2.claim(1)).jobs;
    assert.equal(h1!.id, "y");
    const combined = await c1.settle(h1!, { result: { done: 1 }, claim: 2 });
    assert.equal(await c2.complete(h2!, { done: 1 }), true);
    const separate = await c2.claim(2);
    assert.equal(combined.outcome, "settled");
    assert.deepEqual(combined.jobs.map(claimView), separate.jobs.map(claimView));
    assert.deepEqual(
      combined.jobs.map((j) => j.id),
      ["first", "x"],
    );
    assert.equal(combined.nextDueAt, null);
    // Every claim takes a fresh fencing token, and the lease is held (renewable) under it.
    const tokens = [h1!, ...combined.jobs].map((j) => Number(j.token));
    assert.equal(new Set(tokens).size, 3);
    assert.ok(tokens[1]! > tokens[0]! && tokens[2]! > tokens[1]!);
    assert.deepEqual((await c1.renew(combined.jobs)).lost, []);
    assert.equal((await admin.job("y", q1))?.state, "completed");
    assert.equal((await admin.job("x", q1))?.state, "active");
    assert.deepEqual(await admin.counts(q1), await admin.counts(q2));
    assert.deepEqual(await countersButRunTime(admin, q1), await countersButRunTime(admin, q2));
    const strip = (es: Record<string, string>[]) =>
      es.map(({ at: _at, token: _token, ...rest }) => ({ ...rest, queue: "" }));
    assert.deepEqual(strip(await eventsOf(q1)), strip(await eventsOf(q2)));
    // The claimed jobs complete normally (and may claim again: only "z" is left).
    const again = await c1.settle(combined.jobs[0]!, { result: 1, claim: 3 });
    assert.deepEqual(
      again.jobs.map((j) => j.id),
      ["z"],
    );
  });

  test("complete-and-claim is fenced like complete, and still claims for the freed slot", async () => {
    const q = fresh();
    await producer.enqueueMany(q, [
      { data: 1, id: "held" },
      { data: 2, id: "other" },
    ]);
    const slow = consumer(redis, q, "slow", 50);
    const [job] = (await slow.claim(1)).jobs;
    await new Promise((r) => setTimeout(r, 80));
    assert.equal((await slow.sweep({ lockMs: 1 })).requeued, 1);
    const fast = consumer(redis, q, "fast");
    const [owned] = (await fast.claim(1)).jobs;
    assert.equal(owned!.id, "held");
    const late = await slow.settle(job!, { result: "late", claim: 1 });
    assert.equal(late.outcome, "fenced", "the late owner's result is fenced off");
    assert.deepEqual(
      late.jobs.map((j) => j.id),
      ["other"],
    );
    assert.equal((await admin.counters(q)).fenced, 1);
    assert.equal((await admin.job("held", q))?.state, "active");
    const done = await fast.settle(owned!, { result: "on time", claim: 1 });
    assert.equal(done.outcome, "settled");
    assert.equal(done.jobs.length, 0);
    assert.equal((await admin.job("held", q))?.result, '"on time"');
    assert.equal(
      (await fast.settle(owned!, { result: "twice", claim: 1 })).outcome,
      "fenced",
      "a second completion is fenced",
    );
  });

  test("complete-and-claim promotes due retries with their attempt and stall counts, and reports the next due time", async () => {
    const q = fresh();
    await producer.enqueueMany(q, [
      { data: 1, id: "r", attempts: 3 },
      { data: 2, id: "s" },
      { data: 3, id: "later", delayMs: 60_000 },
    ]);
    const c = consumer(redis, q);
    const [r, s] = (await c.claim(2)).jobs;
    assert.equal(
      await c.fail(r!, { name: "E", message: "boom" }, { retryable: true, retryDelayMs: 0 }),
      "retry",
    );
    await redis.hset(new QueueKeys(q).job("r"), "stalls", 1);
    const out = await c.settle(s!, { result: null, claim: 5 });
    assert.deepEqual(
      out.jobs.map((j) => [j.id, j.attempt, j.maxAttempts, j.stalls]),
      [["r", 2, 3, 1]],
    );
    assert.ok(out.nextDueAt !== null && out.nextDueAt > Date.now());
  });

  test("complete-and-claim with count 0 (a draining worker) claims nothing; complete alone never claims", async () => {
    const q = fresh();
    await producer.enqueueMany(q, [
      { data: 1, id: "a" },
      { data: 2, id: "b" },
      { data: 3, id: "c" },
    ]);
    const c = consumer(redis, q);
    const [a, b] = (await c.claim(2)).jobs;
    const none = await c.settle(a!, { result: 1, claim: 0 });
    assert.equal(none.outcome, "settled");
    assert.deepEqual(none.jobs, []);
    assert.equal(await c.complete(b!, 2), true);
    assert.deepEqual(await admin.counts(q), {
      ready: 1,
      delayed: 0,
      dueDelayed: 0,
      inflight: 0,
      dead: 0,
      completed: 2,
      backlog: 1,
    });
    assert.equal((await admin.counters(q)).started, 2);
  });

  test("advance-and-claim claims from the worker's own stage only, never the next one", async () => {
    const a = "pipe2/a";
    const b = "pipe2/b";
    await producer.enqueueMany(a, [
      { data: 1, id: "d1" },
      { data: 2, id: "d2" },
    ]);
    const ca = consumer(redis, a);
    const [first] = (await ca.claim(1)).jobs;
    const r = await ca.settle(first!, {
      result: { text: 1 },
      next: { queue: b, data: { text: 1 } },
      claim: 2,
    });
    assert.equal(r.outcome, "settled");
    assert.deepEqual(
      r.jobs.map((j) => [j.id, j.queue]),
      [["d2", a]],
    );
    const r2 = await ca.settle(r.jobs[0]!, {
      result: { text: 2 },
      next: { queue: b, data: { text: 2 } },
      claim: 2,
    });
    assert.deepEqual(r2.jobs, [], "d1 now waits in stage b, not a");
    assert.equal(
      (await ca.settle(first!, { result: 0, next: { queue: b, data: 0 }, claim: 1 })).outcome,
      "fenced",
      "fenced",
    );
    assert.deepEqual(
      (await consumer(redis, b).claim(5)).jobs.map((j) => [j.id, JSON.parse(j.rawData)]),
      [
        ["d1", { text: 1 }],
        ["d2", { text: 2 }],
      ],
    );
  });

  test("settleMany settles a batch in one call: each job fenced on its own, then claims for the freed slots", async () => {
    const q = fresh();
    await producer.enqueueMany(
      q,
      ["a", "b", "c", "d", "e", "f"].map((id, i) => ({ data: i, id })),
    );
    const c = consumer(redis, q);
    const [a, b, cc, d] = (await c.claim(4)).jobs;
    assert.equal((await admin.cancel("c", q)).outcome, "cancelled");
    const r = await c.settleMany(
      [
        { job: a!, settlement: { result: "A" } },
        { job: { ...b!, token: "0" }, settlement: { result: "lost" } },
        { job: cc!, settlement: { result: "refused" } },
        { job: d!, settlement: { result: "D" } },
      ],
      3,
    );
    assert.deepEqual(r.outcomes, ["settled", "fenced", "cancelled", "settled"]);
    assert.deepEqual(
      r.jobs.map((j) => j.id),
      ["e", "f"],
    );
    assert.equal((await admin.job("a", q))?.result, '"A"');
    assert.equal((await admin.job("b", q))?.state, "active", "the fenced job keeps its owner's lease");
    assert.equal((await admin.job("d", q))?.result, '"D"');
    const counters = await admin.counters(q);
    assert.equal(counters.completed, 2);
    assert.equal(counters.fenced, 1);
    assert.equal(counters.started, 6);
    // In flight: b (its real owner still holds it), e and f.
    assert.equal((await admin.counts(q)).inflight, 3);
    const tokens = r.jobs.map((j) => Number(j.token));
    assert.ok(tokens[1]! === tokens[0]! + 1 && tokens[0]! > Number(d!.token));
    assert.deepEqual((await c.renew([b!, ...r.jobs])).lost, []);
    const events = (await eventsOf(q)).filter((e) => e.type === "completed").map((e) => e.id);
    assert.deepEqual(events, ["a", "d"]);
  });

  test("a claim's starts and a settle's completions are one event entry each; readers see every job", async () => {
    const q = fresh();
    await producer.enqueueMany(
      q,
      ["a", "b", "c", "d"].map((id, i) => ({ data: i, id })),
    );
    const c = consumer(redis, q);
    const [a, b, cc] = (await c.claim(3)).jobs;
    const r = await c.settleMany(
      [
        { job: a!, settlement: { result: { n: 1 } } },
        { job: { ...b!, token: "0" }, settlement: { result: "lost" } },
        { job: cc!, settlement: { result: "C" } },
      ],
      1,
    );
    const raw = (await redis.xrange(new QueueKeys(q).events, "-", "+")).map(([, f]) => f);
    const byType = (t: string) => raw.filter((f) => f[1] === t);
    assert.equal(byType("enqueued").length, 4, "enqueued one by one (one enqueue call each)");
    // started: the batch of three, then the single claim of d in the per-job form
    const started = byType("started");
    assert.equal(started.length, 2);
    assert.deepEqual(started[0]!.slice(0, 4), ["type", "started", "n", "3"]);
    assert.equal(started[0]![started[0]!.indexOf("id[]") + 1], ["a", "b", "c"].join(EVENT_LIST_SEPARATOR));
    assert.deepEqual(started[1]!.slice(0, 4), ["type", "started", "id", "d"]);
    // completed: one entry for a and c (b was fenced: no event)
    const completed = byType("completed");
    assert.equal(completed.length, 1);
    assert.equal(completed[0]![completed[0]!.indexOf("n") + 1], "2");
    const events = eventsOfEntries(await redis.xrange(new QueueKeys(q).events, "-", "+"), q);
    const pick = ({ attempt, worker, result, reused }: Record<string, string>) =>
      Object.fromEntries(
        Object.entries({ attempt, worker, result, reused }).filter(([, v]) => v !== undefined),
      );
    const view = (t: string) =>
      events
        .filter((e) => e.type === t)
        .map((e) => ({ id: e.id, queue: e.queue, token: e.fields.token, part: e.part, ...pick(e.fields) }));
    assert.deepEqual(view("started"), [
      { id: "a", queue: q, token: a!.token, part: 0, attempt: "1", worker: "w1" },
      { id: "b", queue: q, token: b!.token, part: 1, attempt: "1", worker: "w1" },
      { id: "c", queue: q, token: cc!.token, part: 2, attempt: "1", worker: "w1" },
      { id: "d", queue: q, token: r.jobs[0]!.token, part: 0, attempt: "1", worker: "w1" },
    ]);
    assert.deepEqual(view("completed"), [
      { id: "a", queue: q, token: a!.token, part: 0, result: '{"n":1}', reused: "0" },
      { id: "c", queue: q, token: cc!.token, part: 1, result: '"C"', reused: "0" },
    ]);
    // Events of one entry share its stream id and time.
    assert.equal(new Set(events.filter((e) => e.type === "completed").map((e) => e.eventId)).size, 1);
    assert.ok(events.every((e) => e.at > 0));
  });

  test("a batch whose result holds the list separator is written as per-job entries", async () => {
    const q = fresh();
    await producer.enqueueMany(q, [
      { data: 0, id: "s1" },
      { data: 1, id: "s2" },
    ]);
    const c = consumer(redis, q);
    const [s1, s2] = (await c.claim(2)).jobs;
    // (a client that hands settle_jobs its own JSON text: Conveyor's encoder escapes U+001F)
    const odd = `"a${EVENT_LIST_SEPARATOR}b"`;
    await c.settleMany([
      { job: s1!, settlement: { result: null, encodedResult: odd } },
      { job: s2!, settlement: { result: 2 } },
    ]);
    const completed = (await redis.xrange(new QueueKeys(q).events, "-", "+"))
      .map(([, f]) => f)
      .filter((f) => f[1] === "completed");
    assert.deepEqual(
      completed.map((f) => [f[3], f[f.indexOf("result") + 1]]),
      [
        ["s1", odd],
        ["s2", "2"],
      ],
    );
  });

  test("the one-job complete_job and advance_job scripts (other clients) settle as settle_jobs does", async () => {
    const [p1, p2] = [fresh(), fresh()];
    const [q1, q2] = [`${p1}/a`, `${p2}/a`];
    for (const q of [q1, q2])
      await producer.enqueueMany(q, [
        { data: 1, id: "one" },
        { data: 2, id: "two" },
      ]);
    const c1 = consumer(redis, q1);
    const [j1] = (await c1.claim(1)).jobs;
    const c2 = consumer(redis, q2);
    const [j2] = (await c2.claim(1)).jobs;
    const k = new QueueKeys(q2);
    const reply = await runScript<unknown[]>(
      redis,
      "complete_job",
      [k.inflight, k.counts, k.outbox, k.meta],
      [
        JSON.stringify({
          jobPrefix: k.jobPrefix,
          queue: q2,
          id: j2!.id,
          token: j2!.token,
          now: Date.now(),
          retentionSeconds: 3600,
          claim: 1,
          leaseMs: 30_000,
          workerId: "w1",
        }),
        '{"r":1}',
      ],
    );
    const viaBatch = await c1.settle(j1!, { result: { r: 1 }, claim: 1 });
    // (a named reply: settled, then the claim's fields)
    assert.deepEqual(
      reply.filter((_, i) => i % 2 === 0),
      ["settled", "jobs", "nextDueMs", "startSlackMs"],
    );
    assert.equal(reply[1], 1);
    const claimed = reply[3] as string[];
    // (the claim part names its per-job fields first, then the values)
    assert.equal(claimed[0]!.split(",")[0], "id");
    assert.equal(claimed[1], "two");
    assert.deepEqual(
      viaBatch.jobs.map((j) => j.id),
      ["two"],
    );
    assert.deepEqual(await admin.counts(q1), await admin.counts(q2));
    assert.deepEqual(await countersButRunTime(admin, q1), await countersButRunTime(admin, q2));
    assert.equal((await admin.job("one", q2))?.result, '{"r":1}');
    // advance_job: the second job on to the pipeline's next stage, as advance() does it.
    const next = `${p2}/b`;
    const nk = new QueueKeys(next);
    const j3 = viaBatch.jobs[0]!;
    const owned = (await redis.hget(k.job("two"), "token"))!;
    const adv = await runScript<number>(
      redis,
      "advance_job",
      [k.inflight, k.counts, k.outbox, k.meta, nk.ready, nk.counts, nk.wake],
      [
        JSON.stringify({
          jobPrefix: k.jobPrefix,
          queue: q2,
          id: "two",
          token: owned,
          now: Date.now(),
          nextQueue: next,
        }),
        "2",
        '{"n":2}',
      ],
    );
    assert.equal(adv, 1);
    assert.equal(await c1.advance(j3, 2, `${p1}/b`, { n: 2 }), true);
    assert.deepEqual(await countersButRunTime(admin, q1), await countersButRunTime(admin, q2));
    assert.deepEqual(await admin.counts(`${p1}/b`), await admin.counts(next));
    assert.deepEqual(JSON.parse((await consumer(redis, next).claim(1)).jobs[0]!.rawData), { n: 2 });
  });
});

describe("queue protocol on a real 3-node Redis Cluster", () => {
  let cluster: RedisClusterServer;
  let redis: RedisClient;
  before(async () => {
    cluster = await RedisClusterServer.start(3);
    redis = connectRedis(cluster.url);
  });
  after(async () => {
    redis.disconnect();
    await cluster.stop();
  });

  test("enqueue, claim, renew, advance, fail, sweep, fan-out/fan-in and stats run with no CROSSSLOT error", async () => {
    const producer = new Producer(redis);
    const admin = new QueueAdmin(redis);
    // Several pipelines so that they land on different nodes.
    for (const p of ["alpha", "beta", "gamma", "delta"]) {
      const a = `${p}/a`;
      const b = `${p}/b`;
      await producer.enqueueMany(a, [
        { data: 1, id: `${p}-1` },
        { data: 2, id: `${p}-2` },
      ]);
      const ca = new Consumer(redis, a, { workerId: "w", leaseMs: 30_000 });
      const { jobs } = await ca.claim(2);
      assert.equal(jobs.length, 2);
      assert.deepEqual((await ca.renew(jobs)).lost, []);
      assert.equal(await ca.advance(jobs[0]!, { ok: p }, b), true);
      assert.equal(
        await ca.fail(jobs[1]!, { name: "E", message: "x" }, { retryable: false, retryDelayMs: 0 }),
        "dead",
      );
      assert.equal((await ca.sweep()).ran, true);
      const cb = new Consumer(redis, b, { workerId: "w", leaseMs: 30_000 });
      const [next] = (await cb.claim(1)).jobs;
      assert.equal(next!.id, `${p}-1`);
      assert.equal(await cb.complete(next!, "done"), true);
      // Complete-and-claim / advance-and-claim: the claim keys are in the pipeline's slot too.
      await producer.enqueueMany(a, [
        { data: 3, id: `${p}-3` },
        { data: 4, id: `${p}-4` },
      ]);
      const [third] = (await ca.claim(1)).jobs;
      const adv = await ca.settle(third!, { result: 3, next: { queue: b, data: 3 }, claim: 1 });
      assert.deepEqual([adv.outcome, adv.jobs.map((j) => j.id)], ["settled", [`${p}-4`]]);
      assert.deepEqual((await ca.settle(adv.jobs[0]!, { result: 4, claim: 1 })).outcome, "settled");
      assert.equal((await admin.counts(a)).dead, 1);
      assert.equal((await admin.counts(b)).completed, 1);
      assert.equal((await admin.job(`${p}-1`))?.state, "completed");
      assert.deepEqual(
        (await admin.job(`${p}-1`))?.stages.map((s) => [s.queue, s.attempts]),
        [
          [a, 1],
          [b, 1],
        ],
      );
      assert.equal(await admin.retryDead(a), 1);
    }
    // Fan-out and fan-in on the cluster too: children and join in the pipeline's slot.
    for (const p of ["alpha", "beta"]) {
      await producer.enqueue(`${p}/a`, {}, { id: `${p}-fan` });
      const ca = new Consumer(redis, `${p}/a`, { workerId: "w", leaseMs: 30_000 });
      const parent = (await ca.claim(10)).jobs.find((j) => j.id === `${p}-fan`)!;
      assert.equal(await ca.fanOut(parent, [1, 2, 3], `${p}/kids`, `${p}/join`), 3);
      const kids = new Consumer(redis, `${p}/kids`, { workerId: "w", leaseMs: 30_000 });
      for (const k of (await kids.claim(10)).jobs) assert.equal(await kids.complete(k, "ok"), true);
      assert.equal((await admin.counts(`${p}/join`)).ready, 1);
    }
    const slots = new Set(
      await Promise.all(
        ["alpha", "beta", "gamma", "delta"].map((p) =>
          (redis as import("ioredis").Cluster).cluster("KEYSLOT", `cvy:{${p}}:x`),
        ),
      ),
    );
    assert.ok(slots.size > 1);
  });
});

describe("fan-out / fan-in (single Redis)", () => {
  let server: RedisServer;
  let redis: RedisClient;
  before(async () => {
    server = await RedisServer.start();
    redis = connectRedis(server.url);
  });
  after(async () => {
    redis.disconnect();
    await server.stop();
  });

  test("1 → 100 children; the join is enqueued exactly once, after the last child, with every outcome in order", async () => {
    const producer = new Producer(redis);
    const admin = new QueueAdmin(redis);
    await producer.enqueue("fan/split", { n: 100 }, { id: "p" });
    const split = new Consumer(redis, "fan/split", { workerId: "s", leaseMs: 30_000 });
    const [parent] = (await split.claim(1)).jobs;
    assert.equal(
      await split.fanOut(
        parent!,
        Array.from({ length: 100 }, (_, i) => ({ i })),
        "fan/work",
        "fan/join",
      ),
      100,
    );
    assert.equal(
      await split.fanOut(parent!, [1], "fan/work", "fan/join"),
      null,
      "a second fan-out is fenced",
    );
    const work = new Consumer(redis, "fan/work", { workerId: "w", leaseMs: 30_000 });
    const children = (await work.claim(200)).jobs;
    assert.equal(children.length, 100);
    // Finish in reverse order; child 50 is dead-lettered; a repeated completion is fenced.
    for (const c of children.reverse()) {
      const i = (JSON.parse(c.rawData) as { i: number }).i;
      if (i === 50)
        assert.equal(
          await work.fail(c, { name: "E", message: "child failed" }, { retryable: false, retryDelayMs: 0 }),
          "dead",
        );
      else assert.equal(await work.complete(c, { i }), true);
      if (i === 0) assert.equal(await work.complete(c, { i }), false);
      const joinReady = (await admin.counts("fan/join")).ready;
      assert.equal(joinReady, i === 0 ? 1 : 0, `join appears only after the last child (after child ${i})`);
    }
    const [join] = (await new Consumer(redis, "fan/join", { workerId: "j", leaseMs: 30_000 }).claim(10)).jobs;
    assert.equal(join!.id, "p:join");
    const data = JSON.parse(join!.rawData) as {
      parent: string;
      results: { id: string; result?: { i: number }; error?: string }[];
    };
    assert.equal(data.parent, "p");
    assert.equal(data.results.length, 100);
    assert.deepEqual(
      data.results.map((r) => r.id),
      Array.from({ length: 100 }, (_, i) => `p:${i + 1}`),
    );
    assert.match(data.results[50]!.error!, /child failed/);
    assert.equal(data.results[0]!.result!.i, 0);
    assert.equal((await admin.job("p", "fan"))!.state, "joined");
  });

  test("a fan-out with no children enqueues the join at once", async () => {
    await new Producer(redis).enqueue("fan/split", {}, { id: "empty" });
    const split = new Consumer(redis, "fan/split", { workerId: "s", leaseMs: 30_000 });
    const [parent] = (await split.claim(1)).jobs;
    assert.equal(await split.fanOut(parent!, [], "fan/work", "fan/join"), 0);
    const [join] = (await new Consumer(redis, "fan/join", { workerId: "j", leaseMs: 30_000 }).claim(10)).jobs;
    assert.deepEqual(JSON.parse(join!.rawData), { parent: "empty", results: [] });
  });
});

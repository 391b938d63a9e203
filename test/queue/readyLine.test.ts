// The ready line (docs/protocol.md, "Ready jobs"): priority-0 jobs wait in a list in FIFO order,
// prioritised jobs in the sorted set; cancel and delete leave stale line entries that the claim
// skips and the counts leave out; jobs of the previous layout (priority 0 in the sorted set) run
// first after an upgrade. Against a real Redis and a real 3-node Redis Cluster.
import assert from "node:assert/strict";
import { test } from "node:test";
import { liveJobs } from "../../api/liveJobs.ts";
import { Consumer, Producer, QueueAdmin, QueueKeys, type RedisClient } from "../../queue/index.ts";
import { describeOnRedisAndCluster } from "../support/redis.ts";

const consumer = (redis: RedisClient, queue: string) =>
  new Consumer(redis, queue, { workerId: "w", leaseMs: 30_000 });

/** Claim one at a time until nothing is ready: the ids in claim order. */
async function drainOrder(c: Consumer): Promise<string[]> {
  const order: string[] = [];
  for (;;) {
    const { jobs } = await c.claim(1);
    if (jobs.length === 0) return order;
    order.push(jobs[0]!.id);
    assert.equal(await c.complete(jobs[0]!, null), true);
  }
}

/** The behaviour every layout test checks, on a single server or a cluster. */
function lineCases(
  ctx: () => { redis: RedisClient; producer: Producer; admin: QueueAdmin },
  fresh: () => string,
) {
  test("priority-0 jobs wait in the line in FIFO order, behind every prioritised job", async () => {
    const { redis, producer } = ctx();
    const q = fresh();
    const k = new QueueKeys(q);
    await producer.enqueueMany(q, [
      { id: "a", data: 1 },
      { id: "p1", data: 0, priority: 1 },
      { id: "b", data: 2 },
      { id: "p9", data: 0, priority: 9 },
      { id: "c", data: 3 },
      { id: "p1b", data: 0, priority: 1 },
    ]);
    assert.deepEqual(await redis.lrange(k.line, 0, -1), ["a", "b", "c"]);
    assert.equal(await redis.zcard(k.ready), 3);
    assert.deepEqual(await drainOrder(consumer(redis, q)), ["p9", "p1", "p1b", "a", "b", "c"]);
  });

  test("cancel and delete of a job in the line leave a stale entry: counts leave it out, the claim skips it", async () => {
    const { redis, producer, admin } = ctx();
    const q = fresh();
    const k = new QueueKeys(q);
    await producer.enqueueMany(
      q,
      ["a", "b", "c", "d", "e"].map((id) => ({ id, data: id })),
    );
    assert.equal((await admin.cancel("b", q)).outcome, "cancelled");
    assert.deepEqual(
      (await admin.deleteJobs(q, ["d"])).map((r) => r.outcome),
      ["deleted"],
    );
    assert.equal(await redis.llen(k.line), 5, "O(1): the entries stay");
    assert.equal(await redis.get(k.lineStale), "2");
    const counts = await admin.counts(q);
    assert.deepEqual([counts.ready, counts.backlog], [3, 3]);
    // A deleted id enqueued again is a new job with its own entry; its stale one is skipped.
    await producer.enqueue(q, "again", { id: "d" });
    assert.equal((await admin.counts(q)).ready, 4);
    // (the new d runs at the first of its two entries; the other is skipped, in the same claim)
    const c = consumer(redis, q);
    const first = await c.claim(10);
    assert.deepEqual(
      first.jobs.map((j) => j.id),
      ["a", "c", "d", "e"],
    );
    assert.equal(await redis.exists(k.line, k.lineStale), 0, "an emptied line leaves no stale count");
    assert.equal((await admin.counts(q)).ready, 0);
    assert.equal((await admin.job("b", q))!.state, "cancelled");
  });

  test("a claim that meets stale entries pops others in their place; a partial claim keeps the count right", async () => {
    const { redis, producer, admin } = ctx();
    const q = fresh();
    const k = new QueueKeys(q);
    await producer.enqueueMany(
      q,
      Array.from({ length: 6 }, (_, i) => ({ id: `j${i}`, data: i })),
    );
    for (const id of ["j0", "j1", "j4"]) await admin.cancel(id, q);
    const c = consumer(redis, q);
    assert.deepEqual(
      (await c.claim(2)).jobs.map((j) => j.id),
      ["j2", "j3"],
    );
    assert.equal(await redis.get(k.lineStale), "1", "j4's entry is still waiting");
    assert.equal((await admin.counts(q)).ready, 1);
    assert.deepEqual(
      (await c.claim(5)).jobs.map((j) => j.id),
      ["j5"],
    );
    assert.equal((await admin.counts(q)).ready, 0);
  });

  test("a job that goes back after running (hand-back, stall) goes to the head; a due delayed job and a revived dead letter to the tail", async () => {
    const { redis, producer, admin } = ctx();
    const q = fresh();
    await producer.enqueueMany(q, [
      { id: "first", data: 1 },
      { id: "second", data: 2 },
      { id: "later", data: 3, delayMs: 60_000 },
    ]);
    const c = consumer(redis, q);
    const [first] = (await c.claim(1)).jobs;
    assert.equal(await c.release(first!, "drain"), true);
    assert.equal((await admin.promote("later", q)).outcome, "promoted");
    await producer.enqueue(q, 4, { id: "fourth" });
    const [again] = (await c.claim(1)).jobs;
    assert.equal(again!.id, "first", "a hand-back keeps its place at the head");
    assert.equal(
      await c.fail(again!, { name: "E", message: "x" }, { retryable: false, retryDelayMs: 0 }),
      "dead",
    );
    assert.equal(await admin.retryDead(q), 1);
    assert.deepEqual(await drainOrder(c), ["second", "later", "fourth", "first"]);
  });

  test("the queue page pages ready jobs in claim order: the prioritised set, then the line, without stale entries", async () => {
    const { redis, producer, admin } = ctx();
    const q = fresh();
    await producer.enqueueMany(q, [
      ...Array.from({ length: 120 }, (_, i) => ({ id: `l${i}`, data: i })),
      ...Array.from({ length: 5 }, (_, i) => ({ id: `p${i}`, data: i, priority: 5 - i })),
    ]);
    await admin.cancel("l7", q);
    const seen: string[] = [];
    let cursor: string | undefined;
    do {
      const page = await liveJobs(redis, q, "ready", 50, cursor);
      seen.push(...page.items.map((j) => j.id));
      assert.ok(page.items.every((j) => j.state === "ready"));
      cursor = page.next ?? undefined;
    } while (cursor);
    const expected = [
      ...Array.from({ length: 5 }, (_, i) => `p${i}`),
      ...Array.from({ length: 120 }, (_, i) => `l${i}`).filter((id) => id !== "l7"),
    ];
    assert.deepEqual(seen, expected);
  });

  test("a paused claim puts line jobs back at the head in their order", async () => {
    const { redis, producer, admin } = ctx();
    const q = fresh();
    const k = new QueueKeys(q);
    await producer.enqueueMany(
      q,
      ["a", "b", "c"].map((id) => ({ id, data: id })),
    );
    await admin.pause(q);
    assert.equal((await consumer(redis, q).claim(2)).jobs.length, 0);
    assert.deepEqual(await redis.lrange(k.line, 0, -1), ["a", "b", "c"]);
    await admin.resume(q);
    assert.deepEqual(await drainOrder(consumer(redis, q)), ["a", "b", "c"]);
  });

  test("data longer than 64 B waits in its own key (the record stays a listpack) and joins the record at the claim or a cancel; delete removes it", async () => {
    const { redis, producer, admin } = ctx();
    const q = fresh();
    const k = new QueueKeys(q);
    const big = { text: "x".repeat(1024) };
    await producer.enqueueMany(q, [
      { id: "big", data: big },
      { id: "late", data: big, delayMs: 60_000 },
      { id: "gone", data: big },
      { id: "stop", data: big },
      { id: "small", data: { n: 1 } },
    ]);
    assert.equal(await redis.object("ENCODING", k.job("big")), "listpack");
    assert.equal(await redis.hget(k.job("big"), "data"), null);
    assert.equal(await redis.get(k.data("big")), JSON.stringify(big));
    assert.equal(await redis.exists(k.data("small")), 0);
    assert.equal((await admin.job("big", q))!.data, JSON.stringify(big), "a waiting job shows its data");
    // cancel: the data joins the record (kept for the retention like every finished record)
    assert.equal((await admin.cancel("stop", q)).outcome, "cancelled");
    assert.equal(await redis.hget(k.job("stop"), "data"), JSON.stringify(big));
    assert.equal(await redis.exists(k.data("stop")), 0);
    assert.deepEqual(
      (await admin.deleteJobs(q, ["gone"])).map((r) => r.outcome),
      ["deleted"],
    );
    assert.equal(await redis.exists(k.job("gone"), k.data("gone")), 0);
    assert.equal((await admin.promote("late", q)).outcome, "promoted");
    const c = consumer(redis, q);
    const { jobs } = await c.claim(10);
    assert.deepEqual(
      jobs.map((j) => [j.id, JSON.parse(j.rawData)]),
      [
        ["big", big],
        ["small", { n: 1 }],
        ["late", big],
      ],
    );
    assert.equal(await redis.exists(k.data("big"), k.data("late")), 0);
    assert.equal(await redis.hget(k.job("big"), "data"), JSON.stringify(big));
    // a retry waits with its data in the record, as it ran
    assert.equal(
      await c.fail(jobs[0]!, { name: "E", message: "x" }, { retryable: true, retryDelayMs: 0 }),
      "retry",
    );
    const again = (await c.claim(1)).jobs[0]!;
    assert.deepEqual([again.id, JSON.parse(again.rawData)], ["big", big]);
  });

  test("upgrade: what a worker of the previous layout reads is there — a score on delayed, prioritised and running jobs, the data of every job it can claim in the record", async () => {
    const { redis, producer } = ctx();
    const q = fresh();
    const k = new QueueKeys(q);
    const big = "y".repeat(500);
    await producer.enqueueMany(q, [
      { id: "line", data: big },
      { id: "prio", data: big, priority: 3 },
      { id: "later", data: big, delayMs: 60_000 },
    ]);
    const fields = async (id: string) => redis.hmget(k.job(id), "score", "data");
    const [lineScore] = await fields("line");
    assert.equal(
      lineScore,
      null,
      "a waiting line job needs no score (no worker of the previous layout sees the line)",
    );
    for (const id of ["prio", "later"]) {
      const [score, data] = await fields(id);
      assert.ok(Number.isFinite(Number(score)) && score !== null, `${id}: a numeric score`);
      assert.equal(data, JSON.stringify(big), `${id}: data in the record`);
    }
    const c = consumer(redis, q);
    const { jobs } = await c.claim(2);
    assert.deepEqual(
      jobs.map((j) => j.id),
      ["prio", "line"],
    );
    // a sweeper of the previous layout requeues a lapsed lease by the record's score
    assert.equal((await fields("line"))[0], String(1000 * 4398046511104));
  });

  test("upgrade: jobs of the previous layout (priority 0 in the sorted set, with a score) run first, then the line", async () => {
    const { redis, producer, admin } = ctx();
    const q = fresh();
    const k = new QueueKeys(q);
    // As the previous release's enqueue_jobs wrote them.
    for (const id of ["old1", "old2"]) {
      const score = String(1000 * 4398046511104 + Number(await redis.incr(k.seq)));
      await redis.hset(k.job(id), { queue: q, data: "1", score, attempts: 3, createdAt: 1, state: "ready" });
      await redis.zadd(k.ready, score, id);
    }
    await producer.enqueueMany(q, [
      { id: "new1", data: 1 },
      { id: "new2", data: 2 },
    ]);
    assert.equal((await admin.counts(q)).ready, 4);
    const c = consumer(redis, q);
    const [old1] = (await c.claim(1)).jobs;
    assert.equal(old1!.id, "old1");
    // Going back after running, a job of priority 0 joins the line's head, whatever layout wrote it.
    assert.equal(await c.release(old1!, "drain"), true);
    assert.deepEqual(await redis.lrange(k.line, 0, -1), ["old1", "new1", "new2"]);
    assert.deepEqual(await drainOrder(c), ["old2", "old1", "new1", "new2"]);
  });
}

describeOnRedisAndCluster("the ready line", lineCases, {
  single: (n) => `line${n}`,
  cluster: (n) => `p${n}/line`,
});

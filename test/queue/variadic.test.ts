// Every script path at the worker's concurrency ceiling (10,000 jobs in one call), against a real
// Redis: Lua's unpack() fails past ~8,000 values, so a command built from a table of one value
// or pair per job must be sent in chunks (includes/variadic.lua).
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { pollUntil } from "../support/poll.ts";
import { Consumer, type Producer, type QueueAdmin, type RedisClient } from "../../queue/index.ts";
import { runScript } from "../../queue/scripts.ts";
import { startQueueRedis, stopQueueRedis, type RedisServer } from "../support/redis.ts";

const CEILING = 10_000;

describe("scripts at the concurrency ceiling (10,000 jobs in one call)", () => {
  let server: RedisServer;
  let redis: RedisClient;
  let producer: Producer;
  let admin: QueueAdmin;
  let n = 0;
  const fresh = () => `v${++n}`;
  const consumer = (queue: string, leaseMs = 60_000) =>
    new Consumer(redis, queue, { workerId: "w1", leaseMs, retentionSeconds: 0 });
  const fill = (queue: string, count: number, prefix = "j") =>
    producer.enqueueMany(
      queue,
      Array.from({ length: count }, (_, i) => ({ id: `${prefix}${i}`, data: i })),
    );

  before(async () => {
    ({ server, redis, producer, admin } = await startQueueRedis());
  });
  after(() => stopQueueRedis({ server, redis }));

  test("claim: 10,000 jobs leased in one call, each with its own token", async () => {
    const q = fresh();
    await fill(q, CEILING);
    const { jobs } = await consumer(q).claim(CEILING);
    assert.equal(jobs.length, CEILING);
    assert.equal(new Set(jobs.map((j) => j.token)).size, CEILING);
    const counts = await admin.counts(q);
    assert.equal(counts.inflight, CEILING);
    assert.equal(counts.ready, 0);
  });

  test("renew: 10,000 leases extended in one heartbeat call, none lost", async () => {
    const q = fresh();
    await fill(q, CEILING);
    const c = consumer(q);
    const { jobs } = await c.claim(CEILING);
    const renewedAt = Date.now();
    assert.deepEqual(await c.renew(jobs), { lost: [], cancelled: [] });
    const [, earliest] = await redis.zrange(c.keys.inflight, 0, 0, "WITHSCORES");
    assert.ok(Number(earliest) >= renewedAt + 60_000, "every deadline moved past the renewal");
    assert.equal((await admin.counts(q)).inflight, CEILING);
  });

  test("a paused queue's claim puts all 10,000 popped jobs back, in order", async () => {
    const q = fresh();
    await fill(q, CEILING);
    await admin.pause(q);
    const c = consumer(q);
    assert.equal((await c.claim(CEILING)).jobs.length, 0);
    assert.equal((await admin.counts(q)).ready, CEILING);
    await admin.resume(q);
    const { jobs } = await c.claim(CEILING);
    assert.deepEqual(
      jobs.map((j) => j.id),
      Array.from({ length: CEILING }, (_, i) => `j${i}`),
    );
  });

  test("settle: 10,000 completions in one settle_jobs call, which claims 10,000 more", async () => {
    const q = fresh();
    await fill(q, 2 * CEILING);
    const c = consumer(q);
    const { jobs } = await c.claim(CEILING);
    const args: string[] = [
      JSON.stringify({
        jobPrefix: c.keys.jobPrefix,
        queue: q,
        now: Date.now(),
        claim: CEILING,
        leaseMs: 60_000,
        workerId: "w1",
        jobFields: ["id", "token"],
      }),
    ];
    for (const j of jobs) args.push(j.id, j.token, "null");
    const reply = await runScript<unknown[]>(
      redis,
      "settle_jobs",
      [c.keys.inflight, c.keys.counts, c.keys.outbox, c.keys.meta],
      args,
    );
    // (a named reply: name/value pairs)
    assert.deepEqual(
      reply.filter((_, i) => i % 2 === 0),
      ["codes", "jobs", "nextDueMs", "startSlackMs"],
    );
    const [codes, claimed] = [reply[1] as number[], reply[3] as string[]];
    assert.equal(codes.length, CEILING);
    assert.ok(codes.every((code) => code === 1));
    // (the claim part names its per-job fields first, then the values)
    assert.equal((claimed.length - 1) / claimed[0]!.split(",").length, CEILING);
    const counts = await admin.counts(q);
    assert.equal(counts.completed, CEILING);
    assert.equal(counts.inflight, CEILING);
    assert.equal(counts.ready, 0);
  });

  test("fan-out: 10,000 children enqueued; the join gets all 10,000 outcomes in order", async () => {
    const [a, b, j] = ["fan/a", "fan/b", "fan/join"];
    await producer.enqueue(a, null, { id: "p" });
    const parent = consumer(a);
    const [job] = (await parent.claim(1)).jobs;
    const children = Array.from({ length: CEILING }, (_, i) => i);
    assert.equal(await parent.fanOut(job!, children, b, j), CEILING);
    const child = consumer(b);
    const claimed = (await child.claim(CEILING)).jobs;
    assert.equal(claimed.length, CEILING);
    const settled = await child.settleMany(claimed.map((job) => ({ job, settlement: { result: job.id } })));
    assert.ok(settled.outcomes.every((o) => o === "settled"));
    const [join] = (await consumer(j).claim(1)).jobs;
    const data = JSON.parse(join!.rawData) as { results: { id: string; result: string }[] };
    assert.equal(data.results.length, CEILING);
    assert.deepEqual(data.results[CEILING - 1], { id: `p:${CEILING}`, result: `p:${CEILING}` });
  });

  test("sweep, retry and delete: 10,000 expired leases dead-lettered, revived by id, then deleted", async () => {
    const q = fresh();
    await fill(q, CEILING);
    const c = consumer(q, 1);
    assert.equal((await c.claim(CEILING)).jobs.length, CEILING);
    const ids = Array.from({ length: CEILING }, (_, i) => `j${i}`);
    // (lease 1 ms; maxStalls 0 dead-letters an expired lease at once)
    let dead = 0;
    await pollUntil("every lease swept", async () => {
      dead += (await c.sweep({ maxStalls: 0, limit: CEILING, lockMs: 1 })).deadLettered;
      return dead === CEILING;
    });
    assert.equal(await admin.retryDead(q, ids), CEILING);
    assert.equal((await admin.counts(q)).ready, CEILING);
    const deleted = await admin.deleteJobs(q, ids);
    assert.ok(deleted.every((d) => d.outcome === "deleted"));
    assert.equal((await admin.counts(q)).ready, 0);
    assert.equal((await admin.counters(q)).deleted, CEILING);
  });
});

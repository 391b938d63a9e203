// Debounce and throttle at enqueue (docs/protocol.md, "Debounce and throttle"): a debounced
// burst is one job that runs once with the latest data, a window after the burst's last enqueue;
// a throttled window keeps its first job and reports the rest as existing. Against a real Redis
// and a real 3-node Redis Cluster (the key is in the queue's hash tag).
import assert from "node:assert/strict";
import { test } from "node:test";
import {
  Consumer,
  InvalidJobError,
  Producer,
  QueueAdmin,
  QueueKeys,
  type ClaimedJob,
  type RedisClient,
} from "../../queue/index.ts";
import { pollUntil } from "../support/poll.ts";
import { describeOnRedisAndCluster } from "../support/redis.ts";

const consumer = (redis: RedisClient, queue: string) =>
  new Consumer(redis, queue, { workerId: "w", leaseMs: 30_000, retentionSeconds: 0 });

async function claimOne(c: Consumer): Promise<ClaimedJob> {
  return pollUntil("a job due", async () => (await c.claim(5)).jobs[0], {
    intervalMs: 20,
    timeoutMs: 20_000,
  });
}

function dedupeCases(
  ctx: () => { redis: RedisClient; producer: Producer; admin: QueueAdmin },
  fresh: () => string,
) {
  test("debounce: a burst of 20 is one job that runs once, with the latest data, a window after the last", async () => {
    const { redis, producer, admin } = ctx();
    const q = fresh();
    const dedupe = { key: "doc-7", mode: "debounce", windowMs: 1500 } as const;
    const results = [];
    for (let n = 0; n < 20; n++) results.push(await producer.enqueue(q, { n }, { dedupe }));
    const id = results[0]!.id;
    assert.equal(results[0]!.created, true);
    for (const r of results.slice(1)) assert.deepEqual(r, { id, created: false, replaced: true });
    const lastAt = Date.now();
    assert.equal((await admin.counters(q)).enqueued, 1, "one job for the burst");
    const counts = await admin.counts(q);
    assert.equal(counts.delayed, 1);
    assert.equal(counts.ready, 0);
    const k = new QueueKeys(q);
    assert.equal(await redis.get(`${k.dedupePrefix}doc-7`), id, "the key is in the queue's hash tag");
    const c = consumer(redis, q);
    const job = await claimOne(c);
    assert.ok(Date.now() >= lastAt + 1400, "it waited the window after the burst's last enqueue");
    assert.equal(job.id, id);
    assert.deepEqual(JSON.parse(job.rawData), { n: 19 });
    await c.complete(job, null);
    const after = await admin.counts(q);
    assert.equal(after.delayed + after.ready, 0, "exactly one run");
    // a job that started is never replaced: the next enqueue with the key is a new job
    const next = await producer.enqueue(q, { n: 20 }, { dedupe });
    assert.equal(next.created, true);
    assert.notEqual(next.id, id);
  });

  test("throttle: the first job of a window is created, the rest report it; after the window a new one is", async () => {
    const { redis, producer, admin } = ctx();
    const q = fresh();
    const dedupe = { key: "user:42", mode: "throttle", windowMs: 400 } as const;
    const first = await producer.enqueue(q, { n: 0 }, { dedupe });
    assert.equal(first.created, true);
    const rest = await producer.enqueueMany(
      q,
      [1, 2, 3].map((n) => ({ data: { n }, dedupe })),
    );
    for (const r of rest) assert.deepEqual(r, { id: first.id, created: false });
    assert.equal((await admin.counts(q)).ready, 1, "the first runs at once, alone");
    const c = consumer(redis, q);
    const job = (await c.claim(5)).jobs;
    assert.deepEqual(
      job.map((j) => JSON.parse(j.rawData)),
      [{ n: 0 }],
    );
    const later = await pollUntil(
      "the window to pass",
      async () => {
        const r = await producer.enqueue(q, { n: 4 }, { dedupe });
        return r.created ? r : null;
      },
      { intervalMs: 50, timeoutMs: 20_000 },
    );
    assert.notEqual(later.id, first.id);
    // idempotency keys are unchanged beside it
    const idem = await producer.enqueue(q, 1, { idempotencyKey: "same" });
    assert.deepEqual(await producer.enqueue(q, 2, { idempotencyKey: "same" }), {
      id: idem.id,
      created: false,
    });
  });

  test("debounced grouped jobs join their group when due; a batch mixes modes and plain jobs", async () => {
    const { redis, producer, admin } = ctx();
    const q = fresh();
    const results = await producer.enqueueMany(q, [
      { data: "a1", group: "t", dedupe: { key: "a", mode: "debounce", windowMs: 200 } },
      { data: "a2", group: "t", dedupe: { key: "a", mode: "debounce", windowMs: 200 } },
      { data: "b1", dedupe: { key: "b", mode: "throttle", windowMs: 60_000 } },
      { data: "b2", dedupe: { key: "b", mode: "throttle", windowMs: 60_000 } },
      { data: "plain" },
    ]);
    assert.deepEqual(
      results.map((r) => r.created),
      [true, false, true, false, true],
    );
    assert.equal(results[1]!.replaced, true);
    assert.equal((await admin.counters(q)).enqueued, 3);
    const c = consumer(redis, q);
    const seen: string[] = [];
    await pollUntil(
      "three jobs",
      async () => {
        for (const j of (await c.claim(5)).jobs) {
          seen.push(JSON.parse(j.rawData) as string);
          await c.complete(j, null);
        }
        return seen.length >= 3;
      },
      { intervalMs: 20, timeoutMs: 20_000 },
    );
    assert.deepEqual(seen.sort(), ["a2", "b1", "plain"]);
  });

  test("bad dedupe options are refused naming the field, before anything is written", async () => {
    const { producer, admin } = ctx();
    const q = fresh();
    const bad = [
      [{ key: "k", mode: "squash", windowMs: 10 }, /dedupe\.mode must be debounce or throttle/],
      [{ key: "", mode: "debounce", windowMs: 10 }, /dedupe\.key must be a string of 1\.\.500/],
      [{ key: "k", mode: "throttle", windowMs: 0 }, /dedupe\.windowMs must be an integer 1\.\./],
      [{ key: "k", mode: "throttle", windowMs: 1.5 }, /dedupe\.windowMs must be an integer/],
    ] as const;
    for (const [dedupe, message] of bad)
      await assert.rejects(
        producer.enqueue(q, 1, { id: "x", dedupe: dedupe as never }),
        (err: unknown) =>
          err instanceof InvalidJobError && message.test(err.message) && /job x/.test(err.message),
      );
    await assert.rejects(
      producer.enqueue(q, 1, { delayMs: 5, dedupe: { key: "k", mode: "debounce", windowMs: 10 } }),
      /delayMs must be 0/,
    );
    assert.equal((await admin.counters(q)).enqueued ?? 0, 0);
  });
}

describeOnRedisAndCluster("debounce and throttle", dedupeCases, {
  single: (n) => `dedupe${n}`,
  cluster: (n) => `p${n}/dedupe`,
});

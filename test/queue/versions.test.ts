// Per-version outcome counters (`<queue>versions`): what a canary rollout is judged on.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  Consumer,
  readVersionCounters,
  runTimeQuantile,
  type Producer,
  type RedisClient,
} from "../../queue/index.ts";
import { startQueueRedis, stopQueueRedis, type RedisServer } from "../support/redis.ts";

describe("per-version counters", () => {
  let server: RedisServer;
  let redis: RedisClient;
  let producer: Producer;
  before(async () => {
    ({ server, redis, producer } = await startQueueRedis());
  });
  after(() => stopQueueRedis({ server, redis }));

  test("settles, failures, dead letters and hand-backs are counted per worker version, apart", async () => {
    const q = "vers/a";
    await producer.enqueueMany(
      q,
      Array.from({ length: 8 }, (_, i) => ({ id: `j${i}`, data: i, attempts: 2 })),
    );
    const v1 = new Consumer(redis, q, { workerId: "w1", leaseMs: 60_000, templateVersion: "v1" });
    const v2 = new Consumer(redis, q, { workerId: "w2", leaseMs: 60_000, templateVersion: "v2" });
    const none = new Consumer(redis, q, { workerId: "w3", leaseMs: 60_000 });
    const a = (await v1.claim(3)).jobs;
    const b = (await v2.claim(4)).jobs;
    const c = (await none.claim(1)).jobs;
    // v1: three completions in one settle call
    const settled = await v1.settleMany(a.map((job) => ({ job, settlement: { result: job.id } })));
    assert.deepEqual(settled.outcomes, ["settled", "settled", "settled"]);
    // v2: one completion, one retried failure, one final failure (dead), one deferral
    assert.equal((await v2.settle(b[0]!, { result: 1 })).outcome, "settled");
    assert.equal(
      await v2.fail(b[1]!, { name: "Error", message: "boom" }, { retryable: true, retryDelayMs: 60_000 }),
      "retry",
    );
    assert.equal(
      await v2.fail(b[2]!, { name: "Error", message: "bad" }, { retryable: false, retryDelayMs: 0 }),
      "dead",
    );
    assert.equal(await v2.release(b[3]!, "dependency down", "deferred"), true);
    // no version: counted nowhere
    await none.settle(c[0]!, { result: 1 });

    const all = await readVersionCounters(redis, q);
    assert.deepEqual([...all.keys()].sort(), ["v1", "v2"]);
    const one = all.get("v1")!;
    assert.deepEqual([one.completed, one.failed, one.dead, one.other], [3, 0, 0, 0]);
    const two = all.get("v2")!;
    assert.deepEqual([two.completed, two.failed, two.dead, two.other], [1, 2, 1, 1]);
    assert.equal(
      two.buckets.reduce((x, y) => x + y, 0),
      1,
    );
    assert.ok(runTimeQuantile(one, 0.95)! >= 0);
  });

  test("a settle of many jobs writes one HINCRBY per run time bucket it fills", async () => {
    const q = "vers/b";
    await producer.enqueueMany(
      q,
      Array.from({ length: 50 }, (_, i) => ({ id: `k${i}`, data: i })),
    );
    const v = new Consumer(redis, q, { workerId: "w1", leaseMs: 60_000, templateVersion: "v9" });
    const { jobs } = await v.claim(50);
    const fields = await redis.hgetall(v.keys.versions);
    assert.deepEqual(fields, {});
    await v.settleMany(jobs.map((job) => ({ job, settlement: { result: null } })));
    const after = await redis.hgetall(v.keys.versions);
    const buckets = Object.keys(after);
    assert.ok(
      buckets.every((f) => /^v9:h\d+$/.test(f)),
      JSON.stringify(after),
    );
    assert.equal(
      Object.values(after).reduce((n, x) => n + Number(x), 0),
      50,
    );
  });
});

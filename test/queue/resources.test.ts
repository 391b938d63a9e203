// Resources (docs/protocol.md, "Resources"): API keys with budgets per sliding window, admitted at
// claim time through the group ring. Against a real Redis and a real 3-node Redis Cluster.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  Consumer,
  InvalidJobError,
  Producer,
  QueueAdmin,
  QueueEvents,
  QueueKeys,
  connectRedis,
  correctResourceUsage,
  listResources,
  parseLimits,
  removeResource,
  resourceKey,
  resourceState,
  setResource,
  type ClaimedJob,
  type RedisClient,
} from "../../queue/index.ts";
import { pollUntil } from "../support/poll.ts";
import { RedisClusterServer, RedisServer, startQueueRedis, stopQueueRedis } from "../support/redis.ts";

const consumer = (redis: RedisClient, queue: string, workerId = "w") =>
  new Consumer(redis, queue, { workerId, leaseMs: 30_000, retentionSeconds: 0 });

/** Commands Redis ran (scripts' own calls included), from INFO commandstats. */
async function commandStats(redis: RedisClient): Promise<Map<string, number>> {
  const info = await redis.info("commandstats");
  const out = new Map<string, number>();
  for (const m of info.matchAll(/^cmdstat_(\w+):calls=(\d+)/gm))
    if (!["info", "evalsha", "eval", "script"].includes(m[1]!)) out.set(m[1]!, Number(m[2]));
  return out;
}
function diff(after: Map<string, number>, before: Map<string, number>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [k, v] of after) if (v - (before.get(k) ?? 0) > 0) out[k] = v - (before.get(k) ?? 0);
  return out;
}

async function completeAll(c: Consumer, jobs: ClaimedJob[]): Promise<void> {
  for (const j of jobs) await c.complete(j, null);
}

function resourceCases(
  ctx: () => { redis: RedisClient; producer: Producer; admin: QueueAdmin },
  fresh: () => string,
) {
  test("set, list, state and remove a resource; bad input names the field", async () => {
    const { redis } = ctx();
    const q = fresh();
    const pipeline = q.split("/")[0]!;
    await setResource(redis, q, "openai", [
      { id: "k1", limits: parseLimits("requests=60/m,tokens=200000/m") },
      { id: "k2", limits: parseLimits("requests=10/2s") },
    ]);
    const s = await resourceState(redis, pipeline, "openai");
    assert.equal(s?.ceiling, 0.9);
    assert.deepEqual(
      s?.keys.map((k) => [
        k.id,
        k.limits.map((l) => `${l.unit}=${l.max}/${l.windowMs}:${l.used}`),
        k.benchedUntil,
      ]),
      [
        ["k1", ["requests=60/60000:0", "tokens=200000/60000:0"], null],
        ["k2", ["requests=10/2000:0"], null],
      ],
    );
    assert.deepEqual(
      (await listResources(redis, pipeline)).map((r) => r.name),
      ["openai"],
    );
    // replacing keeps what it keeps
    await setResource(redis, pipeline, "openai", [{ id: "k2", limits: parseLimits("requests=5/s") }], {
      ceiling: 1,
    });
    assert.deepEqual(
      (await resourceState(redis, pipeline, "openai"))?.keys.map((k) => k.id),
      ["k2"],
    );
    assert.equal(await removeResource(redis, pipeline, "openai"), true);
    assert.equal(await removeResource(redis, pipeline, "openai"), false);
    assert.equal(await resourceState(redis, pipeline, "openai"), null);
    assert.throws(
      () => parseLimits("requests=60/week"),
      /--limit: "requests=60\/week" is not <unit>=<max>\/<window>/,
    );
    assert.throws(() => parseLimits("requests=-1/m"), /is not <unit>=<max>/);
    assert.throws(() => parseLimits("Tokens=5/m"), /unit "Tokens" is invalid/);
    assert.throws(() => parseLimits("requests=0/m"), /requests max must be an integer 1/);
    await assert.rejects(setResource(redis, q, "openai", []), /give at least one key/);
    await assert.rejects(
      setResource(redis, q, "openai", [{ id: "k1", limits: parseLimits("requests=1/s") }], { ceiling: 1.5 }),
      /ceiling must be a number in \(0, 1\]/,
    );
    await assert.rejects(
      ctx().producer.enqueue(q, 1, { uses: { openai: { tokens: -5 } } }),
      (err: Error) =>
        err instanceof InvalidJobError && /uses\.openai\.tokens must be an integer 0/.test(err.message),
    );
    await assert.rejects(
      ctx().producer.enqueue(q, 1, { uses: { "bad name": {} } }),
      /uses: resource "bad name" is invalid/,
    );
  });

  test("a key's requests window is never over the ceiling; the key with most room is picked; a job waiting for budget does not block jobs that need nothing", async () => {
    const { redis, producer, admin } = ctx();
    const q = fresh();
    // ceiling 1: exactly 3 per key in the window
    await setResource(
      redis,
      q,
      "api",
      ["k1", "k2"].map((id) => ({ id, limits: parseLimits("requests=3/h") })),
      { ceiling: 1 },
    );
    await producer.enqueueMany(
      q,
      Array.from({ length: 10 }, (_, i) => ({ id: `u${i}`, data: i, uses: { api: {} } })),
    );
    await producer.enqueueMany(
      q,
      Array.from({ length: 4 }, (_, i) => ({ id: `free${i}`, data: i })),
    );
    const c = consumer(redis, q);
    const { jobs, nextDueAt } = await c.claim(20);
    const used = jobs.filter((j) => j.resources);
    assert.equal(used.length, 6);
    assert.equal(jobs.length, 10, "the 4 jobs without uses ran too");
    const perKey = new Map<string, number>();
    for (const j of used) perKey.set(j.resources!.api!.key, (perKey.get(j.resources!.api!.key) ?? 0) + 1);
    assert.deepEqual([...perKey.entries()].sort(), [
      ["k1", 3],
      ["k2", 3],
    ]);
    // alternating: the key with most room first
    assert.deepEqual(
      used.slice(0, 4).map((j) => j.resources!.api!.key),
      ["k1", "k2", "k1", "k2"],
    );
    assert.ok(
      nextDueAt && nextDueAt > Date.now() + 3_000_000,
      `next look when the window frees: ${nextDueAt}`,
    );
    const counts = await admin.counts(q);
    assert.equal(counts.ready, 0, "jobs waiting for budget are not ready");
    assert.equal(counts.waitingForBudget, 4);
    assert.equal((await resourceState(redis, q, "api"))?.waiting, 4);
    await completeAll(c, jobs);
    // still nothing: the window is full for an hour
    assert.equal((await c.claim(5)).jobs.length, 0);
    // a new job that needs nothing is not behind them
    await producer.enqueue(q, "x", { id: "late" });
    assert.deepEqual(
      (await c.claim(5)).jobs.map((j) => j.id),
      ["late"],
    );
  });

  test("tokens: the estimate is reserved, a reported usage corrects it, a job larger than the room waits until the window frees", async () => {
    const { redis, producer } = ctx();
    const q = fresh();
    const pipeline = q.split("/")[0]!;
    await setResource(redis, q, "llm", [{ id: "only", limits: parseLimits("tokens=1000/1500ms") }], {
      ceiling: 1,
    });
    await producer.enqueue(q, 1, { id: "a", uses: { llm: { tokens: 600 } } });
    await producer.enqueue(q, 2, { id: "b", uses: { llm: { tokens: 600 } } });
    const c = consumer(redis, q);
    const first = await c.claim(5);
    assert.deepEqual(
      first.jobs.map((j) => j.id),
      ["a"],
    );
    const grant = first.jobs[0]!.resources!.llm!;
    assert.equal(grant.key, "only");
    assert.deepEqual(grant.amounts, { tokens: 600 });
    let s = await resourceState(redis, pipeline, "llm");
    assert.equal(s?.keys[0]!.limits[0]!.used, 600);
    // a used only 300: b fits now
    await correctResourceUsage(redis, q, "llm", "only", grant.at, { tokens: 300 - 600 });
    s = await resourceState(redis, pipeline, "llm");
    assert.equal(s?.keys[0]!.limits[0]!.used, 300);
    const second = await c.claim(5);
    assert.deepEqual(
      second.jobs.map((j) => j.id),
      ["b"],
    );
    // b used 900 (300 more than reserved): 1200 counted, over the limit only by what was reported
    await correctResourceUsage(redis, q, "llm", "only", second.jobs[0]!.resources!.llm!.at, { tokens: 300 });
    assert.equal((await resourceState(redis, pipeline, "llm"))?.keys[0]!.limits[0]!.used, 1200);
    await producer.enqueue(q, 3, { id: "c", uses: { llm: { tokens: 600 } } });
    const blocked = await c.claim(5);
    assert.equal(blocked.jobs.length, 0);
    assert.ok(blocked.nextDueAt !== null);
    // waits for the window, then runs
    const started = Date.now();
    let got: ClaimedJob[] = [];
    while (got.length === 0 && Date.now() - started < 10_000) {
      got = (await c.claim(5)).jobs;
      if (got.length === 0) await new Promise((r) => setTimeout(r, 50));
    }
    assert.deepEqual(
      got.map((j) => j.id),
      ["c"],
    );
  });

  test("a rate-limited key is benched for every worker; the job goes back without using an attempt; the other key carries on", async () => {
    const { redis, producer, admin } = ctx();
    const q = fresh();
    await setResource(
      redis,
      q,
      "api",
      ["k1", "k2"].map((id) => ({ id, limits: parseLimits("requests=100/m") })),
    );
    await producer.enqueueMany(
      q,
      Array.from({ length: 6 }, (_, i) => ({ id: `j${i}`, data: i, uses: { api: {} } })),
    );
    const w1 = consumer(redis, q, "w1");
    const w2 = consumer(redis, q, "w2");
    const [job] = (await w1.claim(1)).jobs;
    const key = job!.resources!.api!.key;
    assert.equal(
      await w1.releaseOutcome(job!, "429 from provider", "rateLimited", {
        resource: "api",
        key,
        untilMs: Date.now() + 60_000,
      }),
      "settled",
    );
    const s = await resourceState(redis, q, "api");
    assert.ok(s?.keys.find((k) => k.id === key)?.benchedUntil);
    const { jobs } = await w2.claim(10);
    assert.equal(jobs.length, 6, "every job ran, the released one too");
    assert.ok(
      jobs.every((j) => j.resources!.api!.key !== key),
      "none on the benched key",
    );
    const again = jobs.find((j) => j.id === job!.id)!;
    assert.equal(again.attempt, 1, "no attempt used");
    assert.equal((await admin.counters(q)).rateLimited, 1);
    // (a `deferred` transition in the events and records: a type their readers know)
    const events = await new QueueEvents(redis).recent(q);
    assert.ok(events.some((e) => e.type === "deferred" && e.id === job!.id));
  });
}

describe("resources (single Redis)", () => {
  let server: RedisServer;
  let redis: RedisClient;
  let producer: Producer;
  let admin: QueueAdmin;
  let n = 0;
  before(async () => {
    ({ server, redis, producer, admin } = await startQueueRedis());
  });
  after(() => stopQueueRedis({ server, redis }));
  resourceCases(
    () => ({ redis, producer, admin }),
    () => `res${++n}/a`,
  );

  test("a group waiting for budget whose jobs were all cancelled is no longer counted once its time came", async () => {
    const q = "stale/a";
    await setResource(redis, q, "api", [{ id: "k", limits: parseLimits("requests=1/300ms") }], {
      ceiling: 1,
    });
    await producer.enqueue(q, 1, { id: "s1", uses: { api: {} } });
    await producer.enqueue(q, 2, { id: "s2", uses: { api: {} } });
    const c = consumer(redis, q);
    assert.equal((await c.claim(5)).jobs.length, 1);
    assert.equal((await admin.counts(q)).waitingForBudget, 1);
    await admin.cancel("s2", q);
    assert.equal((await admin.counts(q)).waitingForBudget, undefined);
    // once the group's wait (one window) is over, a claim pops it, finds nothing and drops it
    await pollUntil(
      "the group out of <Q>gbudget",
      async () => {
        assert.equal((await c.claim(5)).jobs.length, 0);
        return (await redis.exists(new QueueKeys(q).groupBudget)) === 0;
      },
      { timeoutMs: 10_000 },
    );
  });

  test("jobs without uses run exactly the commands they ran before resources existed", async () => {
    const q = "plain/a";
    await producer.enqueueMany(
      q,
      Array.from({ length: 20 }, (_, i) => ({ id: `n${i}`, data: i })),
    );
    const c = consumer(redis, q);
    const before = await commandStats(redis);
    for (let i = 0; i < 20; i++) {
      const { jobs } = await c.claim(1);
      await c.complete(jobs[0]!, null);
    }
    // (per job: a command run fewer than 20 times is not the loop's; INFO covers every client)
    const ran = Object.fromEntries(
      Object.entries(diff(await commandStats(redis), before)).filter(([, n]) => n >= 20),
    );
    // The exact mix this loop ran on the scripts before resources (main at 51023f0, the same test);
    // since then one HINCRBY more per settle (the run-time counter `runMs`) and one HGET per claim
    // call (the hash of the queue's contract in force: docs/contracts.md).
    const before51023f0 = {
      incrby: 20,
      zrem: 20,
      time: 20,
      zpopmin: 20,
      del: 20,
      zrange: 20,
      hmget: 80,
      xadd: 40,
      hincrby: 60,
      zadd: 20,
      fcall: 40,
      hset: 20,
      lpop: 20,
      llen: 20,
      hget: 20,
    };
    assert.deepEqual(ran, before51023f0);
    assert.equal(await redis.exists(new QueueKeys(q).groupBudget), 0);
  });

  test("the window log stays short at any rate: claims and usage reports merge into its entries", async () => {
    const q = "merge/a";
    await setResource(redis, q, "api", [
      { id: "k", limits: parseLimits("requests=100000/m,tokens=100000000/m") },
    ]);
    await producer.enqueueMany(
      q,
      Array.from({ length: 2000 }, (_, i) => ({ data: i, uses: { api: { tokens: 100 } } })),
    );
    const c = consumer(redis, q);
    let ran = 0;
    for (;;) {
      const { jobs } = await c.claim(50);
      if (jobs.length === 0) break;
      ran += jobs.length;
      // each used 60 of its 100
      for (const j of jobs) await c.correctUsage(j, "api", { tokens: -40 });
    }
    assert.equal(ran, 2000);
    for (const unit of ["requests", "tokens"]) {
      const log = await redis.hget(resourceKey("merge", "api"), `log:k:${unit}`);
      assert.ok(log!.split(",").length <= 70, `${unit}: ${log}`);
    }
    const limits = (await resourceState(redis, q, "api"))!.keys[0]!.limits;
    assert.deepEqual(
      limits.map((l) => [l.unit, l.used]),
      [
        ["requests", 2000],
        ["tokens", 2000 * 60],
      ],
    );
  });
});

describe("resources on a real 3-node Redis Cluster", () => {
  let cluster: RedisClusterServer;
  let redis: RedisClient;
  let producer: Producer;
  let admin: QueueAdmin;
  let n = 0;
  before(async () => {
    cluster = await RedisClusterServer.start(3);
    redis = connectRedis(cluster.url);
    producer = new Producer(redis);
    admin = new QueueAdmin(redis);
  });
  after(async () => {
    redis.disconnect();
    await cluster.stop();
  });
  resourceCases(
    () => ({ redis, producer, admin }),
    () => `p${++n}/res`,
  );
});

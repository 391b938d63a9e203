// Retention (docs/protocol.md, "Retention"): a finished job's record is kept for the retention,
// indexed in `<Q>finished`, and then reclaimed in batches by reclaim_finished (the workers' heartbeat
// calls it) instead of by Redis' expiry; the record's TTL, the retention plus a margin, is the
// fallback. Against a real Redis and a real 3-node Redis Cluster; keys are counted with SCAN.
import assert from "node:assert/strict";
import { test } from "node:test";
import type { Cluster } from "ioredis";
import { pollUntil } from "../support/poll.ts";
import { Consumer, Producer, QueueAdmin, QueueKeys, cancelJob, type RedisClient } from "../../queue/index.ts";
import { runScript } from "../../queue/scripts.ts";
import { describeOnRedisAndCluster } from "../support/redis.ts";

/** The reclaim margin of includes/finished.lua: a kept record's TTL is its retention plus this. */
const MARGIN_SECONDS = 3600;

const consumer = (redis: RedisClient, queue: string, retentionSeconds: number) =>
  new Consumer(redis, queue, { workerId: "w", leaseMs: 30_000, retentionSeconds });

/** Every key of `pipeline`, on one server or every primary of a cluster. */
async function pipelineKeys(redis: RedisClient, pipeline: string): Promise<string[]> {
  const nodes = redis.isCluster ? (redis as Cluster).nodes("master") : [redis];
  const out: string[] = [];
  for (const node of nodes) {
    let cursor = "0";
    do {
      const [next, keys] = await node.scan(cursor, "MATCH", `cvy:{${pipeline}}:*`, "COUNT", 1000);
      out.push(...keys);
      cursor = next;
    } while (cursor !== "0");
  }
  return out.sort();
}

/** Reclaim until nothing is due (what a worker's heartbeat does every tick); the records deleted. */
async function reclaimAll(c: Consumer): Promise<number> {
  let n = 0;
  for (;;) {
    const r = await c.reclaimFinished(50);
    assert.ok(r.reclaimed <= 50, `a call reclaims at most its limit: ${r.reclaimed}`);
    n += r.reclaimed;
    if (!r.more) return n;
  }
}

function retentionCases(
  ctx: () => { redis: RedisClient; producer: Producer; admin: QueueAdmin },
  fresh: () => string,
) {
  test("completed and cancelled jobs' records are all reclaimed after retention; waiting, running, dead, advanced and fanned-out jobs keep every key", async () => {
    const { redis, producer } = ctx();
    const pipeline = fresh();
    const q = `${pipeline}/s`;
    const k = new QueueKeys(q);
    const c = consumer(redis, q, 1);
    const big = "x".repeat(200); // (parked in <P>data:<id> while waiting)
    await producer.enqueueMany(
      q,
      Array.from({ length: 1200 }, (_, i) => ({ id: `done${i}`, data: i })),
    );
    // 1,200 completed in batches of up to 500 (one index member per settle call)
    for (let left = 1200; left > 0;) {
      const { jobs } = await c.claim(Math.min(500, left));
      const r = await c.settleMany(jobs.map((job) => ({ job, settlement: { result: { ok: job.id } } })));
      assert.ok(r.outcomes.every((o) => o === "settled"));
      left -= jobs.length;
    }
    // one completed through the one-job script, complete_job
    await producer.enqueue(q, 0, { id: "single" });
    const [single] = (await c.claim(1)).jobs;
    assert.equal(
      await runScript(
        redis,
        "complete_job",
        [k.inflight, k.counts, k.outbox, k.meta],
        [
          JSON.stringify({
            jobPrefix: k.jobPrefix,
            queue: q,
            id: single!.id,
            token: single!.token,
            now: Date.now(),
            retentionSeconds: 1,
          }),
          "1",
        ],
      ),
      1,
    );
    // a dead letter, a running job, waiting jobs (one with parked data, one delayed, one
    // prioritised) and cancelled ones (waiting, and running)
    await producer.enqueue(q, 0, { id: "dead", attempts: 1 });
    const [dying] = (await c.claim(1)).jobs;
    await c.fail(dying!, { name: "Error", message: "no" }, { retryable: false, retryDelayMs: 0 });
    await producer.enqueue(q, 0, { id: "running" });
    await producer.enqueue(q, 0, { id: "cancelRunning" });
    const running = (await c.claim(2)).jobs;
    assert.deepEqual(running.map((j) => j.id).sort(), ["cancelRunning", "running"]);
    // handed to the next stage (advance) and fanned out: waiting there, not finished
    await producer.enqueueMany(q, [
      { id: "adv", data: 1 },
      { id: "fan", data: 1 },
    ]);
    const [adv, fan] = (await c.claim(2)).jobs;
    assert.equal(
      (await c.settle(adv!, { result: "r", next: { queue: `${pipeline}/t` } })).outcome,
      "settled",
    );
    assert.equal(await c.fanOut(fan!, [1, 2], `${pipeline}/t`, `${pipeline}/t`), 2);
    await producer.enqueueMany(q, [
      { id: "waiting", data: big },
      { id: "later", data: 1, delayMs: 3_600_000 },
      { id: "urgent", data: 1, priority: 5 },
      { id: "cancelWaiting", data: big },
    ]);
    for (const id of ["cancelWaiting", "cancelRunning"])
      assert.equal(
        (await cancelJob(redis, id, { queueOrPipeline: q, retentionSeconds: 1 })).outcome,
        "cancelled",
      );

    const kept = [
      "single",
      "cancelWaiting",
      "cancelRunning",
      ...Array.from({ length: 1200 }, (_, i) => `done${i}`),
    ];
    const ttl = await redis.ttl(`${k.jobPrefix}done7`);
    assert.ok(ttl > MARGIN_SECONDS && ttl <= MARGIN_SECONDS + 1, `kept for retention + margin: ${ttl}`);
    assert.ok((await redis.zcard(k.finished)) >= 6, "indexed: a member per settle call, one per cancel");
    // (the 500-job settles are one member each: a call of 50 splits them, 50 ids examined a call)
    // Not due yet: nothing is reclaimed.
    assert.equal((await c.reclaimFinished()).reclaimed, 0);
    const untouched = new Map<string, Record<string, string>>();
    for (const id of ["dead", "running", "waiting", "later", "urgent", "adv", "fan", "fan:1", "fan:2"])
      untouched.set(id, await redis.hgetall(`${k.jobPrefix}${id}`));
    const parked = await redis.get(k.data("waiting"));
    assert.equal(parked, JSON.stringify(big));

    const before = await pipelineKeys(redis, pipeline);
    let reclaimed = 0;
    await pollUntil(
      "every kept record reclaimed",
      async () => {
        reclaimed += await reclaimAll(c);
        return (await redis.exists(k.finished)) === 0;
      },
      { timeoutMs: 20_000, intervalMs: 100 },
    );
    assert.equal(reclaimed, kept.length);
    const left = await pipelineKeys(redis, pipeline);
    assert.deepEqual(
      left,
      before.filter((key) => !kept.some((id) => key === `${k.jobPrefix}${id}`) && key !== k.finished),
      "exactly the kept records and the emptied index are gone",
    );
    assert.equal(left.filter((key) => key.startsWith(k.jobPrefix)).length, 9);
    for (const [id, fields] of untouched)
      assert.deepEqual(await redis.hgetall(`${k.jobPrefix}${id}`), fields, `${id} untouched`);
    assert.equal(await redis.get(k.data("waiting")), parked);
    // The running and waiting jobs still run to completion.
    const rest = (await c.claim(10)).jobs.map((j) => j.id).sort();
    assert.deepEqual(rest, ["urgent", "waiting"]);
  });

  test("a job finished again after its id was deleted and enqueued again keeps its later retention", async () => {
    const { redis, producer, admin } = ctx();
    const q = `${fresh()}/s`;
    const k = new QueueKeys(q);
    await producer.enqueueMany(q, [
      { id: "x", data: 1 },
      { id: "y", data: 1 },
    ]);
    const short = consumer(redis, q, 1);
    const first = (await short.claim(2)).jobs;
    await short.settleMany(first.map((job) => ({ job, settlement: { result: "first" } })));
    assert.deepEqual(await redis.zrange(k.finished, 0, -1), ["x y"]);
    assert.equal((await admin.deleteJobs(q, ["x"]))[0]!.outcome, "deleted");
    await producer.enqueue(q, 2, { id: "x" });
    const long = consumer(redis, q, 600);
    assert.equal(await long.complete((await long.claim(1)).jobs[0]!, "second"), true);
    // The first settle's entry comes due: y goes, x is kept for its later retention and indexed
    // at its own due time (it was indexed then too; the entry only repeats it).
    await pollUntil("y reclaimed", async () => (await reclaimAll(short)) === 1, { timeoutMs: 10_000 });
    assert.equal(await redis.exists(`${k.jobPrefix}y`), 0);
    assert.equal(await redis.hget(`${k.jobPrefix}x`, "result"), '"second"');
    assert.ok((await redis.ttl(`${k.jobPrefix}x`)) > MARGIN_SECONDS + 500);
    const due = await redis.zrange(k.finished, 0, -1, "WITHSCORES");
    assert.equal(due.length, 2, `one entry: ${due.join(" ")}`);
    assert.equal(due[0], "x");
    assert.ok(Number(due[1]) > Date.now() + 500_000);
  });

  test("result reuse follows --result-ttl, not the record's retention: reused after the record is reclaimed, not after the result's TTL", async () => {
    const { redis, producer } = ctx();
    const q = `${fresh()}/s`;
    const c = consumer(redis, q, 1);
    await producer.enqueue(q, "doc", { id: "a", contentHash: "h1" });
    const [a] = (await c.claim(1)).jobs;
    assert.equal(await c.complete(a!, { text: "A" }, { contentHash: "h1", ttlSeconds: 3 }), true);
    await pollUntil("a's record reclaimed", async () => (await reclaimAll(c)) === 1, { timeoutMs: 10_000 });
    assert.equal(await redis.exists(`${c.keys.jobPrefix}a`), 0);
    assert.equal(await c.reusableResult("h1"), '{"text":"A"}', "still reusable within the result TTL");
    await pollUntil("the result's TTL passed", async () => (await c.reusableResult("h1")) === null, {
      timeoutMs: 10_000,
    });
  });
}

describeOnRedisAndCluster("retention: reclaiming finished jobs", retentionCases, {
  single: (n) => `ret${n}`,
  cluster: (n) => `cret${n}`,
});

// Groups (docs/protocol.md, "Groups"): fair round-robin claiming between the groups of a queue,
// a concurrency limit per group that a lease keeps until it is settled or swept, pause/resume of
// one group, and nothing extra for jobs without a group. Against a real Redis and a real 3-node
// Redis Cluster.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  Consumer,
  InvalidJobError,
  Producer,
  QueueAdmin,
  QueueKeys,
  connectRedis,
  listGroups,
  pauseGroup,
  pauseQueue,
  resumeQueue,
  setRateLimit,
  resumeGroup,
  setGroupLimit,
  type ClaimedJob,
  type RedisClient,
} from "../../queue/index.ts";
import { RedisClusterServer, RedisServer, startQueueRedis, stopQueueRedis } from "../support/redis.ts";

const consumer = (redis: RedisClient, queue: string, leaseMs = 30_000) =>
  new Consumer(redis, queue, { workerId: "w", leaseMs, retentionSeconds: 0 });

const groupOf = (j: ClaimedJob) => (JSON.parse(j.rawData) as { g: string }).g;

/** Claims until a job comes (a retry waiting for its backoff). */
async function pollClaim(c: Consumer): Promise<ClaimedJob[]> {
  for (;;) {
    const { jobs, nextDueAt } = await c.claim(5);
    if (jobs.length > 0) return jobs;
    await new Promise((r) => setTimeout(r, Math.max(5, Math.min(100, (nextDueAt ?? 0) - Date.now()))));
  }
}

/** The queue-wide group keys that exist (`<Q>gring`, `gwaiting`, `grunning`, `gcontrol`, `gnames`). */
async function groupKeys(redis: RedisClient, queue: string): Promise<string[]> {
  const k = new QueueKeys(queue);
  const keys = [k.groupRing, k.groupWaiting, k.groupRunning, k.groupControl, k.groupNames];
  const present = [];
  for (const key of keys) if (await redis.exists(key)) present.push(key);
  return present;
}

function groupCases(
  ctx: () => { redis: RedisClient; producer: Producer; admin: QueueAdmin },
  fresh: () => string,
) {
  test("a group with 10,000 waiting does not delay one with 10: the light group's jobs start within the first 20 claims", async () => {
    const { redis, producer, admin } = ctx();
    const q = fresh();
    for (let start = 0; start < 10_000; start += 2_000) {
      await producer.enqueueMany(
        q,
        Array.from({ length: 2_000 }, (_, i) => ({ data: { g: "heavy", i: start + i }, group: "heavy" })),
      );
    }
    await producer.enqueueMany(
      q,
      Array.from({ length: 10 }, (_, i) => ({ data: { g: "light", i }, group: "light" })),
    );
    assert.equal((await admin.counts(q)).ready, 10_010);
    const c = consumer(redis, q);
    const order: string[] = [];
    for (let i = 0; i < 20; i++) {
      const { jobs } = await c.claim(1);
      order.push(groupOf(jobs[0]!));
      await c.complete(jobs[0]!, null);
    }
    assert.equal(order.filter((g) => g === "light").length, 10, order.join(" "));
    // and a claim of many slots alternates too
    await producer.enqueueMany(
      q,
      Array.from({ length: 5 }, (_, i) => ({ data: { g: "late", i }, group: "late" })),
    );
    const { jobs } = await c.claim(10);
    assert.equal(jobs.filter((j) => groupOf(j) === "late").length, 5);
    assert.equal((await admin.counts(q)).ready, 10_000 - 10 - 5);
  });

  test("fan-out children are jobs of the parent's group in the next stage (its limits hold); an ungrouped parent's are not", async () => {
    const { redis, producer, admin } = ctx();
    const p = fresh();
    const pipeline = p.split("/")[0]!;
    const kids = `${pipeline}/kids`;
    await setGroupLimit(redis, kids, "acme", { concurrency: 1 });
    await producer.enqueueMany(p, [
      { id: "grouped", data: 0, group: "acme" },
      { id: "urgent", data: 0, group: "acme", priority: 5 },
      { id: "plain", data: 0 },
    ]);
    const c = consumer(redis, p);
    const { jobs } = await c.claim(3);
    assert.equal(jobs.length, 3);
    for (const job of jobs) assert.equal(await c.fanOut(job, [1, 2], kids, `${pipeline}/join`), 2);
    const k = new QueueKeys(kids);
    for (const id of ["grouped:1", "grouped:2", "urgent:1", "urgent:2"])
      assert.equal(await redis.hget(k.job(id), "group"), "acme", id);
    assert.equal(await redis.hget(k.job("plain:1"), "group"), null);
    assert.deepEqual(await redis.lrange(k.groupLine("acme"), 0, -1), ["grouped:1", "grouped:2"]);
    assert.deepEqual(await redis.zrange(k.groupReady("acme"), 0, -1), ["urgent:1", "urgent:2"]);
    assert.deepEqual(await redis.lrange(k.line, 0, -1), ["plain:1", "plain:2"]);
    assert.equal((await admin.counts(kids)).ready, 6);
    // acme's concurrency 1 holds for the children: one of its four runs, beside the plain two
    const kc = consumer(redis, kids);
    const claimed = (await kc.claim(10)).jobs.map((j) => j.id);
    assert.deepEqual(claimed.sort(), ["plain:1", "plain:2", "urgent:1"]);
    const listed = (await listGroups(redis, kids)).groups.find((g) => g.group === "acme");
    assert.equal(listed?.waiting, 3);
    assert.equal(listed?.running, 1);
  });

  test("per-group concurrency: the default for every group and one group's override, never exceeded; a settle re-admits", async () => {
    const { redis, producer } = ctx();
    const q = fresh();
    await setGroupLimit(redis, q, undefined, { concurrency: 2 });
    await setGroupLimit(redis, q, "solo", { concurrency: 1 });
    await producer.enqueueMany(q, [
      ...Array.from({ length: 6 }, (_, i) => ({ data: { g: "a", i }, group: "a" })),
      ...Array.from({ length: 6 }, (_, i) => ({ data: { g: "solo", i }, group: "solo" })),
    ]);
    const workers = [consumer(redis, q), consumer(redis, q), consumer(redis, q)];
    const running: ClaimedJob[] = [];
    for (const w of workers) running.push(...(await w.claim(10)).jobs);
    const count = (g: string) => running.filter((j) => groupOf(j) === g).length;
    assert.equal(count("a"), 2);
    assert.equal(count("solo"), 1);
    const listed = await listGroups(redis, q);
    assert.deepEqual(
      listed.groups.map((g) => [g.group, g.waiting, g.running, g.concurrency, g.override]),
      [
        ["solo", 5, 1, 1, true],
        ["a", 4, 2, 2, false],
      ],
    );
    // a settle frees one slot of its group: exactly one more of that group starts
    const soloJob = running.find((j) => groupOf(j) === "solo")!;
    await workers[0]!.complete(soloJob, null);
    const next = (await workers[1]!.claim(10)).jobs;
    assert.deepEqual(next.map(groupOf), ["solo"]);
    // a failed attempt (retry later) frees its slot too
    const aJob = running.find((j) => groupOf(j) === "a")!;
    assert.equal(
      await workers[0]!.fail(
        aJob,
        { name: "Error", message: "x" },
        { retryable: true, retryDelayMs: 60_000 },
      ),
      "retry",
    );
    assert.deepEqual((await workers[2]!.claim(10)).jobs.map(groupOf), ["a"]);
    // raising the default re-admits the blocked group at once
    await setGroupLimit(redis, q, undefined, { concurrency: 4 });
    assert.deepEqual((await workers[2]!.claim(10)).jobs.map(groupOf), ["a", "a"]);
  });

  test("a lease that is not settled (its worker was SIGKILLed) keeps its group slot until it is swept", async () => {
    const { redis, producer, admin } = ctx();
    const q = fresh();
    await setGroupLimit(redis, q, "t", { concurrency: 1 });
    await producer.enqueueMany(
      q,
      Array.from({ length: 3 }, (_, i) => ({ id: `t${i}`, data: { g: "t", i }, group: "t" })),
    );
    const dead = consumer(redis, q, 200);
    assert.equal((await dead.claim(5)).jobs.length, 1);
    // the lease lapses, but until a sweep requeues it the slot stays taken
    await new Promise((r) => setTimeout(r, 300));
    const live = consumer(redis, q);
    assert.equal((await live.claim(5)).jobs.length, 0);
    const swept = await live.sweep({ lockMs: 1 });
    assert.equal(swept.requeued, 1);
    const { jobs } = await live.claim(5);
    assert.deepEqual(
      jobs.map((j) => j.id),
      ["t0"],
      "the swept job goes back to the head of its group's line",
    );
    assert.equal((await admin.counters(q)).stalled, 1);
  });

  test("a sequence (concurrency 1): a failed job's retry holds the group through its backoff and runs before the next job", async () => {
    const { redis, producer, admin } = ctx();
    const q = fresh();
    await setGroupLimit(redis, q, "s", { concurrency: 1 });
    await producer.enqueueMany(
      q,
      Array.from({ length: 3 }, (_, i) => ({ id: `s${i}`, data: { g: "s", i }, group: "s" })),
    );
    const c = consumer(redis, q);
    const first = (await c.claim(5)).jobs;
    assert.deepEqual(
      first.map((j) => j.id),
      ["s0"],
    );
    const error = { name: "Error", message: "boom" };
    assert.equal(await c.fail(first[0]!, error, { retryable: true, retryDelayMs: 300 }), "retry");
    // during the backoff the group's slot stays taken: s1 does not start
    assert.equal((await c.claim(5)).jobs.length, 0);
    assert.equal((await listGroups(redis, q)).groups.find((g) => g.group === "s")?.running, 1);
    const retried = await pollClaim(c);
    assert.deepEqual(
      retried.map((j) => j.id),
      ["s0"],
      "the retry runs before s1",
    );
    assert.equal(retried[0]!.attempt, 2);
    await c.complete(retried[0]!, null);
    // a retry cancelled while it waits frees the slot; one promoted early goes to the head too
    const s1 = (await c.claim(5)).jobs;
    assert.deepEqual(
      s1.map((j) => j.id),
      ["s1"],
    );
    assert.equal(await c.fail(s1[0]!, error, { retryable: true, retryDelayMs: 60_000 }), "retry");
    assert.equal((await c.claim(5)).jobs.length, 0);
    assert.equal((await admin.promote("s1", q)).outcome, "promoted");
    const again = (await c.claim(5)).jobs;
    assert.deepEqual(
      again.map((j) => j.id),
      ["s1"],
    );
    assert.equal(await c.fail(again[0]!, error, { retryable: true, retryDelayMs: 60_000 }), "retry");
    assert.equal((await admin.cancel("s1")).outcome, "cancelled");
    assert.deepEqual(
      (await c.claim(5)).jobs.map((j) => j.id),
      ["s2"],
    );
    // a group with a higher limit is no sequence: its retry waits in the delayed set, the next job runs
    await setGroupLimit(redis, q, "wide", { concurrency: 2 });
    await producer.enqueueMany(q, [
      { id: "w0", data: { g: "wide" }, group: "wide" },
      { id: "w1", data: { g: "wide" }, group: "wide" },
    ]);
    const w0 = (await c.claim(1)).jobs[0]!;
    await c.fail(w0, error, { retryable: true, retryDelayMs: 60_000 });
    assert.deepEqual(
      (await c.claim(5)).jobs.map((j) => j.id),
      ["w1"],
    );
  });

  test("a dead job of a sequence: by default the next job runs; with onDead block the group stops until the job is retried", async () => {
    const { redis, producer } = ctx();
    const q = fresh();
    await setGroupLimit(redis, q, undefined, { concurrency: 1 });
    await setGroupLimit(redis, q, "strict", { onDead: "block" });
    await producer.enqueueMany(q, [
      { id: "c0", data: { g: "loose" }, group: "loose" },
      { id: "c1", data: { g: "loose" }, group: "loose" },
      { id: "b0", data: { g: "strict" }, group: "strict" },
      { id: "b1", data: { g: "strict" }, group: "strict" },
    ]);
    const c = consumer(redis, q);
    const error = { name: "Error", message: "fatal" };
    const firsts = (await c.claim(5)).jobs;
    assert.deepEqual(firsts.map((j) => j.id).sort(), ["b0", "c0"]);
    for (const j of firsts)
      assert.equal(await c.fail(j, error, { retryable: false, retryDelayMs: 0 }), "dead");
    // loose goes on; strict is paused, blocked by b0
    assert.deepEqual(
      (await c.claim(5)).jobs.map((j) => j.id),
      ["c1"],
    );
    const strict = (await listGroups(redis, q)).groups.find((g) => g.group === "strict");
    assert.equal(strict?.paused, true);
    assert.equal(strict?.blockedBy, "b0");
    assert.equal(strict?.onDead, "block");
    // retrying the dead job resumes the group from it: b0 before b1
    const admin = new QueueAdmin(redis);
    assert.equal(await admin.retryDead(q, ["b0"]), 1);
    const next = (await c.claim(5)).jobs;
    assert.deepEqual(
      next.map((j) => j.id),
      ["b0"],
    );
    await c.complete(next[0]!, null);
    assert.deepEqual(
      (await c.claim(5)).jobs.map((j) => j.id),
      ["b1"],
    );
    assert.equal((await listGroups(redis, q)).groups.find((g) => g.group === "strict")?.blockedBy, null);
  });

  test("weights: a group of weight 3 gets three turns per round to a group of weight 1", async () => {
    const { redis, producer } = ctx();
    const q = fresh();
    await setGroupLimit(redis, q, "heavy", { weight: 3 });
    await producer.enqueueMany(q, [
      ...Array.from({ length: 60 }, (_, i) => ({ data: { g: "heavy", i }, group: "heavy" })),
      ...Array.from({ length: 40 }, (_, i) => ({ data: { g: "light", i }, group: "light" })),
    ]);
    const c = consumer(redis, q);
    const order: string[] = [];
    for (let i = 0; i < 20; i++) {
      const { jobs } = await c.claim(1);
      order.push(groupOf(jobs[0]!));
      await c.complete(jobs[0]!, null);
    }
    // claims of one job: heavy keeps its place for three turns in a row
    assert.equal(order.filter((g) => g === "heavy").length, 15, order.join(" "));
    assert.deepEqual(order.slice(0, 8), [
      "heavy",
      "heavy",
      "heavy",
      "light",
      "heavy",
      "heavy",
      "heavy",
      "light",
    ]);
    // claims of many jobs: the same share
    const many: string[] = [];
    for (let i = 0; i < 5; i++) {
      const { jobs } = await c.claim(8);
      many.push(...jobs.map(groupOf));
      await c.settleMany(
        jobs.map((job) => ({ job, settlement: { result: null } })),
        0,
      );
    }
    const heavy = many.filter((g) => g === "heavy").length;
    assert.equal(heavy, 30, many.join(" "));
    assert.equal(many.length - heavy, 10);
    assert.equal((await listGroups(redis, q)).groups.find((g) => g.group === "heavy")?.weight, 3);
    // mid-round, heavy's used turns are kept; a weight change starts afresh, and a group with
    // nothing waiting keeps nothing of its round
    const k = new QueueKeys(q);
    const one = (await c.claim(1)).jobs;
    await c.complete(one[0]!, null);
    assert.equal(await redis.hget(`${k.prefix}q:${q}:gturns`, "heavy"), "1");
    await setGroupLimit(redis, q, "heavy", { weight: 2 });
    assert.equal(await redis.hget(`${k.prefix}q:${q}:gturns`, "heavy"), null);
    for (;;) {
      const { jobs } = await c.claim(50);
      if (jobs.length === 0) break;
      await c.settleMany(
        jobs.map((job) => ({ job, settlement: { result: null } })),
        0,
      );
    }
    assert.equal(await redis.exists(`${k.prefix}q:${q}:gturns`), 0);
    await assert.rejects(setGroupLimit(redis, q, undefined, { weight: 2 }), /weight is set per group/);
    await assert.rejects(
      setGroupLimit(redis, q, "heavy", { weight: 0 }),
      /weight must be an integer 1\.\.1000/,
    );
  });

  test("jobs without a group take one turn of the round-robin once grouped jobs wait (in complete-and-claim); alone, they go first", async () => {
    const { redis, producer } = ctx();
    const q = fresh();
    await producer.enqueueMany(q, [
      ...Array.from({ length: 100 }, (_, i) => ({ data: { g: "", i } })),
      ...Array.from({ length: 5 }, (_, i) => ({ data: { g: "a", i }, group: "a" })),
      ...Array.from({ length: 5 }, (_, i) => ({ data: { g: "b", i }, group: "b" })),
    ]);
    const c = consumer(redis, q);
    // a plain claim does not know yet: the queue's own job first
    let [job] = (await c.claim(1)).jobs;
    const order = [groupOf(job!)];
    for (let i = 0; i < 19; i++) {
      const r = await c.settle(job!, { result: null, claim: 1 });
      job = r.jobs[0];
      order.push(groupOf(job!));
    }
    // every grouped job ran within the first 20 claims, beside one ungrouped job per round
    assert.equal(order.filter((g) => g === "a").length, 5, order.join(" "));
    assert.equal(order.filter((g) => g === "b").length, 5, order.join(" "));
    assert.ok(order.filter((g) => g === "").length >= 8, order.join(" "));
    // once no grouped job waits, the queue's own go first again and the ring empties
    const k = new QueueKeys(q);
    let left = 0;
    for (;;) {
      const r = await c.settle(job!, { result: null, claim: 1 });
      if (!r.jobs[0]) break;
      job = r.jobs[0];
      left++;
    }
    assert.equal(left, 100 - order.filter((g) => g === "").length);
    assert.deepEqual(await groupKeys(redis, q), []);
    assert.equal(await redis.hget(k.meta, `groups:${q}`), null);
  });

  test("pause and resume one group: the others go on, a paused group's jobs wait, resume wakes a consumer", async () => {
    const { redis, producer } = ctx();
    const q = fresh();
    const k = new QueueKeys(q);
    await producer.enqueueMany(q, [
      ...Array.from({ length: 3 }, (_, i) => ({ data: { g: "p", i }, group: "p" })),
      ...Array.from({ length: 3 }, (_, i) => ({ data: { g: "o", i }, group: "o" })),
    ]);
    await pauseGroup(redis, q, "p");
    await redis.del(k.wake);
    const c = consumer(redis, q);
    assert.deepEqual((await c.claim(10)).jobs.map(groupOf), ["o", "o", "o"]);
    assert.equal((await c.claim(10)).jobs.length, 0);
    const listed = await listGroups(redis, q);
    assert.deepEqual(
      listed.groups.map((g) => [g.group, g.waiting, g.paused]),
      [
        ["p", 3, true],
        ["o", 0, false],
      ],
    );
    await resumeGroup(redis, q, "p");
    assert.equal(await redis.llen(k.wake), 1);
    assert.deepEqual((await c.claim(10)).jobs.map(groupOf), ["p", "p", "p"]);
  });

  test("the queue's pause and rate limit gate grouped jobs too, without using an attempt", async () => {
    const { redis, producer, admin } = ctx();
    const q = fresh();
    await producer.enqueueMany(
      q,
      Array.from({ length: 6 }, (_, i) => ({ data: { g: `g${i % 2}`, i }, group: `g${i % 2}` })),
    );
    await pauseQueue(redis, q);
    const c = consumer(redis, q);
    assert.equal((await c.claim(10)).jobs.length, 0);
    await resumeQueue(redis, q);
    await setRateLimit(redis, q, { max: 4, perMs: 60_000 });
    const first = await c.claim(10);
    assert.equal(first.jobs.length, 4);
    assert.ok((first.nextDueAt ?? 0) > Date.now(), "limited: the claim says when the window has room");
    assert.equal((await c.claim(10)).jobs.length, 0);
    assert.equal((await admin.counts(q)).ready, 2);
    await setRateLimit(redis, q, null);
    assert.equal((await c.claim(10)).jobs.length, 2);
  });

  test("per-group rate limits: no window of a group ever holds more starts than its limit; the others go on", async () => {
    const { redis, producer } = ctx();
    const q = fresh();
    await setGroupLimit(redis, q, undefined, { rate: { max: 3, perMs: 500 } });
    await setGroupLimit(redis, q, "fast", { rate: { max: 6, perMs: 500 } });
    await producer.enqueueMany(q, [
      ...Array.from({ length: 12 }, (_, i) => ({ data: { g: "slow", i }, group: "slow" })),
      ...Array.from({ length: 18 }, (_, i) => ({ data: { g: "fast", i }, group: "fast" })),
    ]);
    const c = consumer(redis, q);
    const starts = new Map<string, number[]>([
      ["slow", []],
      ["fast", []],
    ]);
    let claimed = 0;
    let sawDue = false;
    while (claimed < 30) {
      const { jobs, nextDueAt } = await c.claim(10);
      for (const j of jobs) {
        starts.get(groupOf(j))!.push(j.claimedAt);
        await c.complete(j, null);
      }
      claimed += jobs.length;
      if (jobs.length === 0) {
        // the claim says when a window has room: nothing is started before
        assert.ok(nextDueAt !== null && nextDueAt > Date.now() - 50, `nextDueAt ${nextDueAt}`);
        sawDue = true;
        await new Promise((r) => setTimeout(r, Math.max(1, Math.min(100, nextDueAt! - Date.now()))));
      }
    }
    assert.ok(sawDue, "the limits held claims back");
    for (const [g, max] of [
      ["slow", 3],
      ["fast", 6],
    ] as const) {
      const t = starts.get(g)!;
      // every window (t − 500 ms, t] ending at a start holds at most max starts
      for (const end of t) {
        const inWindow = t.filter((x) => x > end - 500 && x <= end).length;
        assert.ok(inWindow <= max, `${g}: ${inWindow} starts in the 500 ms up to ${end}, limit ${max}`);
      }
    }
    const listed = await listGroups(redis, q);
    assert.equal(listed.defaultRate, "3/500ms");
    // (slow has no setting of its own and nothing waiting or running: not listed)
    assert.deepEqual(
      listed.groups.map((g) => [g.group, g.rate]),
      [["fast", "6/500ms"]],
    );
    // the window logs expire a window (and its 25 ms start slack) after their last start: an
    // idle group keeps nothing
    const ttl = await redis.pttl(new QueueKeys(q).groupRateLog("slow"));
    assert.ok(ttl > 0 && ttl <= 525, `pttl ${ttl}`);
  });

  test("cancel and delete of waiting grouped jobs: counts follow, and an idle group keeps nothing but its settings", async () => {
    const { redis, producer, admin } = ctx();
    const q = fresh();
    await setGroupLimit(redis, q, "x", { concurrency: 3 });
    await producer.enqueueMany(q, [
      { id: "x1", data: { g: "x" }, group: "x" },
      { id: "x2", data: { g: "x" }, group: "x", priority: 5 },
      { id: "x3", data: { g: "x" }, group: "x" },
      { id: "y1", data: { g: "y" }, group: "y" },
    ]);
    assert.equal((await admin.counts(q)).ready, 4);
    assert.equal((await admin.cancel("x1", q)).outcome, "cancelled");
    assert.deepEqual(await admin.deleteJobs(q, ["x2"]), [{ id: "x2", outcome: "deleted", state: "ready" }]);
    assert.equal((await admin.counts(q)).ready, 2);
    const c = consumer(redis, q);
    const { jobs } = await c.claim(10);
    assert.deepEqual(jobs.map((j) => j.id).sort(), ["x3", "y1"]);
    for (const j of jobs) await c.complete(j, null);
    const k = new QueueKeys(q);
    assert.deepEqual(await groupKeys(redis, q), [k.groupControl]);
    for (const g of ["x", "y"]) {
      assert.equal(await redis.exists(k.groupLine(g), k.groupReady(g)), 0);
    }
    assert.equal((await admin.counts(q)).ready, 0);
  });

  test("a grouped job keeps its group in the next stage; a prioritised grouped job runs first within its group", async () => {
    const { redis, producer } = ctx();
    const pipeline = fresh().replace("/", "-");
    const q = `${pipeline}/one`;
    const next = `${pipeline}/two`;
    await producer.enqueueMany(q, [
      { id: "low", data: { g: "z" }, group: "z" },
      { id: "high", data: { g: "z" }, group: "z", priority: 9 },
    ]);
    const c = consumer(redis, q);
    const first = (await c.claim(1)).jobs[0]!;
    assert.equal(first.id, "high");
    assert.equal(await c.advance(first, { g: "z" }, next), true);
    const n = consumer(redis, next);
    await setGroupLimit(redis, next, "z", { concurrency: 1 });
    const moved = (await n.claim(5)).jobs;
    assert.deepEqual(
      moved.map((j) => j.id),
      ["high"],
    );
    assert.equal((await listGroups(redis, next)).groups[0]!.running, 1);
  });

  test("jobs without a group touch no group key and keep their record as before", async () => {
    const { redis, producer } = ctx();
    const q = fresh();
    await producer.enqueueMany(
      q,
      Array.from({ length: 5 }, (_, i) => ({ id: `n${i}`, data: i })),
    );
    const c = consumer(redis, q);
    const { jobs } = await c.claim(10);
    assert.equal(jobs.length, 5);
    for (const j of jobs) await c.complete(j, null);
    assert.deepEqual(await groupKeys(redis, q), []);
  });

  test("a group over 128 bytes is refused with an error naming the field, before anything is written", async () => {
    const { redis, producer } = ctx();
    const q = fresh();
    await assert.rejects(
      producer.enqueueMany(q, [
        { id: "ok", data: 1, group: "fine" },
        { id: "bad", data: 1, group: "é".repeat(65) },
      ]),
      (err: Error) =>
        err instanceof InvalidJobError && /job bad: group is 130 bytes, limit 128/.test(err.message),
    );
    await assert.rejects(producer.enqueue(q, 1, { group: "" }), /group must be a non-empty string/);
    assert.equal(await redis.exists(new QueueKeys(q).job("ok")), 0);
    await assert.rejects(
      setGroupLimit(redis, q, "g", { concurrency: 0 }),
      /concurrency must be an integer 1/,
    );
  });
}

describe("groups (single Redis)", () => {
  let server: RedisServer;
  let redis: RedisClient;
  let producer: Producer;
  let admin: QueueAdmin;
  let n = 0;
  before(async () => {
    ({ server, redis, producer, admin } = await startQueueRedis());
  });
  after(() => stopQueueRedis({ server, redis }));
  groupCases(
    () => ({ redis, producer, admin }),
    () => `groups${++n}`,
  );

  test("100,000 groups with one job each: every group is served once, in the order its work arrived", async () => {
    const q = "many";
    const G = 100_000;
    for (let start = 0; start < G; start += 5_000) {
      await producer.enqueueMany(
        q,
        Array.from({ length: 5_000 }, (_, i) => ({
          id: `m${start + i}`,
          data: 0,
          group: `tenant-${start + i}`,
        })),
      );
    }
    const k = new QueueKeys(q);
    assert.equal(await redis.zcard(k.groupRing), G);
    const c = consumer(redis, q);
    let seen = 0;
    for (;;) {
      const { jobs } = await c.claim(500);
      if (jobs.length === 0) break;
      for (const j of jobs) assert.equal(j.id, `m${seen++}`);
      await c.settleMany(
        jobs.map((job) => ({ job, settlement: { result: null } })),
        0,
      );
    }
    assert.equal(seen, G);
    assert.deepEqual(await groupKeys(redis, q), []);
  });
});

describe("groups on a real 3-node Redis Cluster", () => {
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
  // (a pipeline per test: they spread over the nodes)
  groupCases(
    () => ({ redis, producer, admin }),
    () => `p${++n}/groups`,
  );
});

// The operator's batched backlog poll (queue/backlogPoll.ts, poll_queues.lua): one call for many
// queues must read exactly what QueueAdmin.counts reads queue by queue (oldest ready job
// included), sweep when asked, and keep one queue's failure to that queue.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  Consumer,
  POLL_CHUNK,
  QueueKeys,
  pollQueues,
  polledQueue,
  type Producer,
  type QueueAdmin,
  type RedisClient,
} from "../../queue/index.ts";
import { RedisServer, startQueueRedis, stopQueueRedis } from "../support/redis.ts";

describe("pollQueues", () => {
  let server: RedisServer;
  let redis: RedisClient;
  let producer: Producer;
  let admin: QueueAdmin;

  before(async () => {
    ({ server, redis, producer, admin } = await startQueueRedis());
  });
  after(() => stopQueueRedis({ server, redis }));

  test("reads the same counts as QueueAdmin.counts, for many queues in one call", async () => {
    await producer.enqueueMany("poll-a", [{ data: 1 }, { data: 2 }, { data: 3, delayMs: 3_600_000 }]);
    await producer.enqueueMany("poll-b", [{ data: 1 }, { data: 2 }]);
    await new Consumer(redis, "poll-b", { workerId: "w1", leaseMs: 60_000 }).claim(1);
    const queues = ["poll-a", "poll-b", "poll-empty"];
    const polls = await pollQueues(redis, queues);
    for (const [i, q] of queues.entries()) {
      const expected = await admin.counts(q, { oldestReady: true, counters: true });
      assert.deepEqual(polls[i]!.counts, expected, q);
      assert.equal(polls[i]!.sweep, undefined, "no sweep unless asked");
    }
    assert.equal(polls[0]!.counts!.backlog, 2);
    assert.equal(polls[0]!.counts!.delayed, 1);
    assert.equal(polls[1]!.counts!.inflight, 1);
    assert.equal(polls[1]!.counts!.backlog, 2);
    assert.ok(polls[1]!.counts!.oldestReadyAt! > 0);
    assert.equal(polls[2]!.counts!.backlog, 0);
    assert.equal(polls[2]!.counts!.oldestReadyAt, undefined);
    // The arrival counter: every enqueue, delayed ones included; 0 for a queue never used.
    assert.equal(polls[0]!.counts!.enqueued, 3);
    assert.equal(polls[1]!.counts!.enqueued, 2);
    assert.equal(polls[2]!.counts!.enqueued, 0);
  });

  test("counts the attempts that ended, completed or failed, and their run time from claim to settle", async () => {
    const q = "poll-ran";
    await producer.enqueueMany(q, [{ data: 1 }, { data: 2 }, { data: 3 }]);
    const consumer = new Consumer(redis, q, { workerId: "w1", leaseMs: 60_000 });
    const ended = async () => (await pollQueues(redis, [q]))[0]!.counts!.attemptsEnded;
    assert.deepEqual(await ended(), { count: 0, runMs: 0 });
    const beforeClaim = Date.now();
    const { jobs } = await consumer.claim(3);
    const claimed = Date.now();
    // (a run time the bounds below can tell from zero)
    while (Date.now() - claimed < 20) await new Promise((r) => setTimeout(r, 5));
    const beforeSettle = Date.now();
    assert.equal(await consumer.complete(jobs[0]!, "ok"), true);
    assert.equal(
      await consumer.fail(
        jobs[1]!,
        { name: "Error", message: "boom" },
        { retryable: false, retryDelayMs: 0 },
      ),
      "dead",
    );
    const settled = Date.now();
    const after = await ended();
    // Two attempts ended (the third still runs); each ran from its claim to its settle.
    assert.equal(after!.count, 2);
    assert.ok(
      after!.runMs >= 2 * (beforeSettle - claimed) && after!.runMs <= 2 * (settled - beforeClaim),
      `runMs ${after!.runMs} outside [${2 * (beforeSettle - claimed)}, ${2 * (settled - beforeClaim)}]`,
    );
    assert.deepEqual((await admin.counts(q, { counters: true })).attemptsEnded, after);
    assert.equal((await admin.counts(q)).attemptsEnded, undefined, "read only with the counters");
  });

  test("the oldest ready job is the earliest head of the line, the prioritised set and the next group", async () => {
    const at = async (q: string) => (await pollQueues(redis, [q]))[0]!.counts!.oldestReadyAt;
    // A newer prioritised job runs first, but the older priority-0 job is the one waiting longest.
    await producer.enqueue("poll-oldest", { n: 1 });
    const first = await at("poll-oldest");
    assert.ok(first! > 0);
    await new Promise((r) => setTimeout(r, 5));
    await producer.enqueue("poll-oldest", { n: 2 }, { priority: 5 });
    assert.equal(await at("poll-oldest"), first);
    // Only grouped jobs: the head of the group next in the ring.
    await producer.enqueue("poll-oldest-g", { n: 1 }, { group: "tenant-a" });
    const grouped = await at("poll-oldest-g");
    assert.ok(grouped! > 0);
    await new Promise((r) => setTimeout(r, 5));
    await producer.enqueue("poll-oldest-g", { n: 2 }, { group: "tenant-b" });
    assert.equal(await at("poll-oldest-g"), grouped);
  });

  test("reads each queue's pause and rate limit with its counts", async () => {
    await admin.pause("poll-paused");
    await admin.setRateLimit("poll-limited", { max: 20, perMs: 1000 });
    const queues = ["poll-paused", "poll-limited", "poll-free"];
    const polls = await pollQueues(redis, queues);
    for (const [i, q] of queues.entries()) assert.deepEqual(polls[i]!.control, await admin.control(q), q);
    assert.equal(polls[0]!.control!.paused, true);
    assert.deepEqual(polls[1]!.control!.rateLimit, { max: 20, perMs: 1000 });
    assert.deepEqual(polls[2]!.control, { paused: false, rateLimit: null });
  });

  test("sweeps each queue when asked: an expired lease goes back to ready", async () => {
    await producer.enqueue("poll-sweep", { x: 1 });
    await new Consumer(redis, "poll-sweep", { workerId: "gone", leaseMs: 1 }).claim(1);
    await new Promise((r) => setTimeout(r, 20));
    const [poll] = await pollQueues(redis, ["poll-sweep"], { sweep: true });
    assert.ok(poll!.sweep && !(poll!.sweep instanceof Error), String(poll!.sweep));
    assert.equal(poll!.sweep.requeued, 1);
    const after = await admin.counts("poll-sweep");
    assert.equal(after.ready, 1);
    assert.equal(after.inflight, 0);
  });

  test("a queue whose keys hold the wrong type fails alone", async () => {
    await redis.set(new QueueKeys("poll-broken").ready, "not a sorted set");
    await producer.enqueue("poll-fine", { x: 1 });
    const [broken, fine] = await pollQueues(redis, ["poll-broken", "poll-fine"]);
    assert.ok(broken!.error instanceof Error);
    assert.match(broken!.error.message, /WRONGTYPE/);
    assert.equal(fine!.counts!.ready, 1);
  });

  test("a failed sweep is that queue's sweep error; its counts and the other queues are read", async () => {
    await redis.set(new QueueKeys("poll-badsweep").sweeper, "not a hash");
    await producer.enqueue("poll-badsweep", { x: 1 });
    const [bad, other] = await pollQueues(redis, ["poll-badsweep", "poll-fine2"], { sweep: true });
    assert.ok(bad!.sweep instanceof Error, String(bad!.sweep));
    assert.match(bad!.sweep.message, /WRONGTYPE/);
    assert.equal(bad!.counts!.ready, 1);
    assert.ok(other!.sweep && !(other!.sweep instanceof Error) && other!.sweep.ran);
  });

  test("more queues than one call takes: every queue read, in order, kept parts reused", async () => {
    const queues = Array.from({ length: POLL_CHUNK + 7 }, (_, i) => `poll-many-${i}`);
    await producer.enqueueMany(queues[3]!, [{ data: 1 }]);
    await producer.enqueueMany(queues[POLL_CHUNK + 5]!, [{ data: 1 }, { data: 2 }]);
    const polled = queues.map(polledQueue);
    for (const round of [1, 2]) {
      const polls = await pollQueues(redis, polled);
      assert.equal(polls.length, queues.length);
      const ready = polls.map((p) => p.counts!.ready);
      assert.equal(ready[3], 1, `round ${round}`);
      assert.equal(ready[POLL_CHUNK + 5], 2, `round ${round}`);
      assert.equal(
        ready.reduce((a, b) => a + b, 0),
        3,
        `round ${round}: nothing read from the wrong queue`,
      );
    }
  });

  test("no queues: no call", async () => {
    assert.deepEqual(await pollQueues(redis, []), []);
  });
});

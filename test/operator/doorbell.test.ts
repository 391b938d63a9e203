// The operator's side of the doorbell (operator/scaling/doorbell.ts, backlog.ts) against a real
// Redis: a bell is left in `<Q>doorbell` only while the operator has the pool at zero and its
// latest reading — taken after the last ring — shows nothing waiting. The orderings that could
// leave one otherwise (a reconcile acting on a reading from before a ring, a pool woken while
// its bell is being left or after it was left) are driven here one by one.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  DOORBELL_CHANNEL,
  Producer,
  QueueAdmin,
  QueueKeys,
  connectRedis,
  type RedisClient,
} from "../../queue/index.ts";
import { BacklogPoller, type BacklogSample } from "../../operator/scaling/backlog.ts";
import { RedisConnections } from "../../operator/scaling/redisConnections.ts";
import { pollUntil } from "../support/poll.ts";
import { RedisServer } from "../support/redis.ts";
import { drainQueue } from "../support/workers.ts";

describe("the operator's doorbell", { timeout: 120_000 }, () => {
  let server: RedisServer;
  let redis: RedisClient;
  let producer: Producer;
  let admin: QueueAdmin;
  let conns: RedisConnections;
  let poller: BacklogPoller;
  const samples = new Map<string, BacklogSample[]>();
  /** Called when a pool's bell rings, before the ring's poll (as the operator's hook is). */
  const onRing = new Map<string, () => void>();
  let n = 0;

  before(async () => {
    server = await RedisServer.start();
    redis = connectRedis(server.url, { name: "doorbell-operator-test" });
    producer = new Producer(redis);
    admin = new QueueAdmin(redis);
    conns = new RedisConnections();
    poller = new BacklogPoller(conns, {
      onSample: (key, s) => samples.get(key)?.push(s),
      shouldSweep: () => false,
      onRing: (key) => onRing.get(key)?.(),
    });
  });
  after(async () => {
    poller?.stop();
    conns?.closeAll();
    redis?.disconnect();
    await server?.stop();
  });

  /** A pool on a fresh queue, polled only when asked (or rung), with its first reading taken. */
  async function pool(): Promise<{
    key: string;
    queue: string;
    bell: string;
    nextSample: () => Promise<BacklogSample>;
  }> {
    const queue = `bell${++n}/work`;
    const key = `default/pool${n}`;
    const seen: BacklogSample[] = [];
    samples.set(key, seen);
    poller.upsert({ key, queue, url: server.url, pollSeconds: 3600 });
    await pollUntil("the first reading", () => seen.length > 0, { timeoutMs: 30_000 });
    /** The reading of a poll started from now on (so after every command the poller sent before it). */
    const nextSample = async () => {
      const had = seen.length;
      poller.pollNow(key);
      return pollUntil("a new reading", () => seen[had], { timeoutMs: 30_000 });
    };
    return { key, queue, bell: new QueueKeys(queue).doorbell, nextSample };
  }

  test("a reconcile acting on a reading from before the ring leaves no bell: the ring's poll decides", async () => {
    const { key, queue, bell, nextSample } = await pool();
    poller.bell(key, "asleep");
    await pollUntil("the bell left", async () => (await redis.get(bell)) === DOORBELL_CHANNEL, {
      timeoutMs: 30_000,
    });
    // The pool's reconcile ends (afterScale: still at zero) right after the ring is heard and
    // before the ring's poll, with the reading taken before the job came.
    let staleSleep = true;
    onRing.set(key, () => {
      if (staleSleep) queueMicrotask(() => poller.bell(key, "asleep"));
      staleSleep = false;
    });
    const ringsPoll = samples.get(key)!.length;
    await producer.enqueue(queue, { i: 1 });
    const ring = await pollUntil("the ring's poll", () => samples.get(key)![ringsPoll], {
      timeoutMs: 30_000,
    });
    assert.equal(ring.counts?.backlog, 1);
    // (that poll's reply follows every command sent before it on the poller's connection)
    assert.equal(await redis.exists(bell), 0, "a job waits: no bell left for it");

    // Asleep again with the job gone: the bell is left again.
    await drainQueue(redis, queue);
    assert.equal((await nextSample()).counts?.backlog, 0);
    poller.bell(key, "asleep");
    await pollUntil("the bell left again", async () => (await redis.get(bell)) === DOORBELL_CHANNEL, {
      timeoutMs: 30_000,
    });
  });

  test("a pool that wakes with its bell left takes it back", async () => {
    const { key, bell, nextSample } = await pool();
    poller.bell(key, "asleep");
    await pollUntil("the bell left", async () => (await redis.get(bell)) === DOORBELL_CHANNEL, {
      timeoutMs: 30_000,
    });
    poller.bell(key, undefined); // scaled up (or pinned) with no ring
    await nextSample();
    assert.equal(await redis.exists(bell), 0, "no bell for a pool that is not asleep");
  });

  test("a pool woken while its bell is being left keeps none", async () => {
    // Another pool on the same Redis asleep: the doorbell subscriber listens already, so a SET
    // of the bell would go on the poller's connection before the next poll's reads.
    const other = await pool();
    poller.bell(other.key, "asleep");
    await pollUntil("the other pool's bell", async () => (await redis.get(other.bell)) === DOORBELL_CHANNEL, {
      timeoutMs: 30_000,
    });
    const { key, bell, nextSample } = await pool();
    poller.bell(key, "asleep");
    poller.bell(key, undefined);
    await nextSample();
    assert.equal(await redis.exists(bell), 0, "no bell for a pool that is not asleep");
  });

  test("a ring that finds nothing waiting leaves the bell again at its poll", async () => {
    const { key, queue, bell } = await pool();
    poller.bell(key, "asleep");
    await pollUntil("the bell left", async () => (await redis.get(bell)) === DOORBELL_CHANNEL, {
      timeoutMs: 30_000,
    });
    let rung = 0;
    onRing.set(key, () => rung++);
    await admin.resume(queue); // rings, and takes the bell, with nothing waiting
    await pollUntil("the ring", () => rung === 1, { timeoutMs: 30_000 });
    // The counts did not change: no reconcile follows this poll, so the poller leaves the bell.
    await pollUntil("the bell left again", async () => (await redis.get(bell)) === DOORBELL_CHANNEL, {
      timeoutMs: 15_000,
    });
  });
});

// Leases across a Redis outage: while nobody can reach Redis nobody can renew, so the first
// sweep after a gap in sweep calls opens a grace (no lease expires) until every live worker
// renewed; after it, a lease still not renewed is a dead worker's and is swept as usual. Plus
// the sweeper's handling of job records with a missing or non-numeric score. Outages are
// simulated by moving the sweeper's `sweptAt` stamp back (deterministic) and, once, by
// killing and restarting a real redis-server with AOF on the same data directory.
import assert from "node:assert/strict";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { after, before, describe, test } from "node:test";
import {
  Consumer,
  Producer,
  QueueAdmin,
  QueueKeys,
  connectRedis,
  sweepQueue,
  type Lease,
  type RedisClient,
} from "../../queue/index.ts";
import { RedisServer, startQueueRedis, stopQueueRedis } from "../support/redis.ts";

const worker = (redis: RedisClient, queue: string, workerId: string, leaseMs: number) =>
  new Consumer(redis, queue, { workerId, leaseMs });
const GAP = { gapMs: 1000, graceMs: 60_000 };

describe("leases across a Redis outage", () => {
  let server: RedisServer;
  let redis: RedisClient;
  let producer: Producer;
  let admin: QueueAdmin;
  let n = 0;
  const fresh = () => `lease${++n}`;
  /** Nobody reached Redis for ten minutes: the sweeper's last stamp is that old. */
  const outage = async (q: string) => {
    const k = new QueueKeys(q);
    const at = Number(await redis.hget(k.sweeper, "sweptAt"));
    assert.ok(at > 0, "a sweep stamped the queue before the outage");
    await redis.hset(k.sweeper, "sweptAt", at - 600_000);
    // ten minutes on, the mutex of the sweep before (1 ms) is long gone: without this the next
    // sweep could land in that same millisecond and lose it
    await redis.del(k.sweepLock);
  };
  const endGrace = async (q: string) => {
    const k = new QueueKeys(q);
    await redis.hset(k.sweeper, "graceUntil", 1);
    // (and the sweep before's 1 ms mutex: with FCALL the next sweep can come within that millisecond)
    await redis.del(k.sweepLock);
  };
  const inflightDeadline = async (q: string, id: string) =>
    Number(await redis.zscore(new QueueKeys(q).inflight, id));

  before(async () => {
    ({ server, redis, producer, admin } = await startQueueRedis());
  });
  after(() => stopQueueRedis({ server, redis }));

  test("the first sweep after a long gap requeues nothing; the live worker renews and keeps its job; a lease still lapsed after the grace is swept", async () => {
    const q = fresh();
    await producer.enqueueMany(q, [
      { id: "alive", data: 1 },
      { id: "orphan", data: 2 },
    ]);
    const live = worker(redis, q, "live", 50);
    const dead = worker(redis, q, "dead", 50);
    assert.equal((await live.sweep({ ...GAP, lockMs: 1 })).graceLeftMs, 0, "a new queue has no gap to heal");
    const [mine] = (await live.claim(1)).jobs;
    const [theirs] = (await dead.claim(1)).jobs;
    assert.equal(mine!.id, "alive");
    assert.equal(theirs!.id, "orphan");
    await redis.hset(
      new QueueKeys(q).workers,
      "gone",
      JSON.stringify({ id: "gone", pod: "p", slots: 1, busy: 0, draining: false, seen: 1 }),
    );

    // Redis was unreachable: both leases lapsed meanwhile
    await outage(q);
    await sleep(80);
    const first = await live.sweep({ ...GAP, lockMs: 1 });
    assert.equal(first.ran, true);
    assert.equal(first.requeued, 0);
    assert.equal(first.deadLettered, 0);
    assert.ok(first.graceLeftMs > 55_000 && first.graceLeftMs <= 60_000, `grace ${first.graceLeftMs}`);
    assert.equal((await admin.counts(q)).inflight, 2);
    assert.equal((await admin.counters(q)).stalled ?? 0, 0);
    assert.ok(
      await redis.hexists(new QueueKeys(q).workers, "gone"),
      "no worker report is pruned during the grace",
    );
    // a second sweep inside the grace changes nothing either
    assert.equal((await live.sweep({ ...GAP, lockMs: 1 })).requeued, 0);

    // the live worker renews (its renewal extends a lapsed lease whose token still matches)
    const renewing = worker(redis, q, "live", 60_000);
    assert.deepEqual((await renewing.renew([mine!])).lost, []);
    assert.ok((await inflightDeadline(q, "alive")) > Date.now() + 50_000);

    // the grace ends: the orphan (its worker never renewed) is swept, the live job is kept
    await endGrace(q);
    const after = await live.sweep({ ...GAP, lockMs: 1 });
    assert.deepEqual(
      { requeued: after.requeued, graceLeftMs: after.graceLeftMs },
      { requeued: 1, graceLeftMs: 0 },
    );
    assert.equal((await admin.job("orphan"))!.state, "ready");
    assert.equal((await admin.job("orphan"))!.stalls, 1);
    assert.equal((await admin.job("alive"))!.state, "active");
    assert.equal(
      await live.complete(mine!, "done"),
      true,
      "the live worker's result is accepted: it ran once",
    );
    assert.equal(
      await dead.complete(theirs as Lease, "late"),
      false,
      "the orphan's late result is fenced off",
    );
    assert.equal(
      await redis.hexists(new QueueKeys(q).workers, "gone"),
      0,
      "stale reports are pruned again after the grace",
    );
  });

  test("a sweep that lost the mutex still stamps the queue and opens the grace; the operator's sweep (no settings) uses the workers' stored ones", async () => {
    const q = fresh();
    const c = worker(redis, q, "w", 50);
    await c.sweep({ ...GAP, lockMs: 1 });
    await outage(q);
    const [a, b] = await Promise.all([
      c.sweep({ ...GAP, lockMs: 10_000 }),
      c.sweep({ ...GAP, lockMs: 10_000 }),
    ]);
    assert.deepEqual([a.ran, b.ran].sort(), [false, true]);
    assert.ok(a.graceLeftMs > 0 && b.graceLeftMs > 0);

    const q2 = fresh();
    const c2 = worker(redis, q2, "w", 50);
    await c2.sweep({ gapMs: 1000, graceMs: 40_000, lockMs: 1 });
    await producer.enqueue(q2, 1, { id: "op" });
    const [job] = (await c2.claim(1)).jobs;
    await outage(q2);
    await sleep(80);
    const op = await sweepQueue(redis, q2, { lockMs: 1 });
    assert.equal(op.requeued, 0);
    assert.ok(
      op.graceLeftMs > 35_000 && op.graceLeftMs <= 40_000,
      `the stored grace applies: ${op.graceLeftMs}`,
    );
    assert.equal((await admin.job(job!.id))!.state, "active");
  });

  test("no gap, no grace: a dead worker's lapsed lease is swept at once (and on a queue never swept before)", async () => {
    const q = fresh();
    await producer.enqueue(q, 1, { id: "j" });
    const c = worker(redis, q, "w", 1);
    await c.claim(1);
    await sleep(10);
    const r = await c.sweep({ ...GAP, lockMs: 1 });
    assert.deepEqual(r, { ran: true, requeued: 1, deadLettered: 0, graceLeftMs: 0 });
  });

  test("a prioritised job whose score is missing, not a number, nan or inf is dead-lettered with a reason; the sweep goes on", async () => {
    const q = fresh();
    const k = new QueueKeys(q);
    // (a job of priority 0 goes back to the line and needs no score: "plain" below)
    await producer.enqueueMany(q, [
      ...["text", "missing", "nan", "inf", "good"].map((id, i) => ({ id, data: i, priority: 2 })),
      { id: "plain", data: 5 },
    ]);
    const c = worker(redis, q, "w", 1);
    assert.equal((await c.claim(10)).jobs.length, 6);
    await redis.hset(k.job("text"), "score", "abc");
    await redis.hset(k.job("plain"), "score", "abc");
    await redis.hdel(k.job("missing"), "score");
    await redis.hset(k.job("nan"), "score", "nan");
    await redis.hset(k.job("inf"), "score", "inf");
    await sleep(10);
    const r = await c.sweep({ lockMs: 1 });
    assert.deepEqual(
      { requeued: r.requeued, deadLettered: r.deadLettered },
      { requeued: 2, deadLettered: 4 },
    );
    assert.equal((await admin.job("good"))!.state, "ready");
    assert.equal((await admin.job("plain"))!.state, "ready");
    assert.deepEqual(await redis.lrange(k.line, 0, -1), ["plain"]);
    const dead = await admin.deadJobs(q);
    assert.deepEqual(dead.map((d) => d.id).sort(), ["inf", "missing", "nan", "text"]);
    for (const d of dead) assert.match(d.reason, /malformed: .*score is not a number/);
    assert.equal((await admin.counts(q)).inflight, 0);
  });
});

describe("leases across a real Redis restart (AOF, same data directory)", () => {
  test("leases lapsed while Redis was down are not swept by the first sweep after the restart; the worker's renewal keeps its job", async () => {
    const dir = mkdtempSync(join(tmpdir(), "cvy-lease-aof-"));
    const server = await RedisServer.start({ dir, args: ["--appendonly", "yes", "--appendfsync", "always"] });
    const redis = connectRedis(server.url);
    try {
      const q = "restart";
      await new Producer(redis).enqueue(q, 1, { id: "r1" });
      const c = worker(redis, q, "w", 300);
      const [job] = (await c.claim(1)).jobs;
      await c.sweep({ gapMs: 500, graceMs: 60_000, lockMs: 1 });
      await server.kill("SIGKILL");
      await sleep(1200); // longer than the lease and the gap
      await server.resume();
      const r = await c.sweep({ gapMs: 500, graceMs: 60_000, lockMs: 1 });
      assert.equal(r.requeued, 0);
      assert.ok(r.graceLeftMs > 0, "the gap opened the grace");
      assert.ok(
        Number(await redis.zscore(new QueueKeys(q).inflight, "r1")) < Date.now(),
        "the lease lapsed during the outage",
      );
      assert.deepEqual((await c.renew([job!])).lost, [], "the lease is still the worker's");
      assert.equal(await c.complete(job!, "ok"), true);
      assert.equal((await new QueueAdmin(redis).counters(q)).stalled ?? 0, 0);
    } finally {
      redis.disconnect();
      await server.stop();
    }
  });
});

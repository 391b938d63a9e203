// Waiting for results against a real Redis (and one case on a real 3-node Cluster): jobs that
// complete, die, are cancelled or stay open past the timeout, answered from the event streams
// (one reader) or, when already ended, from their records.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { Redis } from "ioredis";
import {
  Consumer,
  JobWaiter,
  PipelineKeys,
  QueueKeys,
  type ClaimedJob,
  type RedisClient,
} from "../../queue/index.ts";
import { pollUntil } from "../support/poll.ts";
import { describeOnRedisAndCluster, useQueueRedis } from "../support/redis.ts";

function consumer(redis: RedisClient, queue: string) {
  return new Consumer(redis, queue, { workerId: "w1", leaseMs: 30_000, retentionSeconds: 3600 });
}

async function claim(redis: RedisClient, queue: string, count = 1000): Promise<ClaimedJob[]> {
  return (await consumer(redis, queue).claim(count)).jobs;
}

async function kill(redis: RedisClient, job: ClaimedJob): Promise<void> {
  const out = await consumer(redis, job.queue).fail(
    job,
    { name: "Error", message: "boom" },
    { retryable: false, retryDelayMs: 0 },
  );
  assert.equal(out, "dead");
}

describeOnRedisAndCluster(
  "waiting for results",
  (clients, name) => {
    test("a wait answers each job's end: completed (at its last stage), dead, cancelled", async () => {
      const { redis, producer, admin } = clients();
      const p = name();
      const one = `${p}/one`;
      const two = `${p}/two`;
      const [a, b, c] = await producer.enqueueMany(one, [{ data: 1 }, { data: 2 }, { data: 3 }]);
      const waiter = new JobWaiter(redis);
      const waiting = waiter.wait([a!.id, b!.id, c!.id], { timeoutMs: 60_000 });
      // (the wait is following the streams once its reader has sent its first XREAD)
      await pollUntil("the wait's reader to start", () => waiter.following === 1);

      const jobs = await claim(redis, one);
      const byId = new Map(jobs.map((j) => [j.id, j]));
      assert.equal(await consumer(redis, one).advance(byId.get(a!.id)!, { stage: 1 }, two), true);
      await kill(redis, byId.get(b!.id)!);
      assert.equal((await admin.cancel(c!.id)).outcome !== undefined, true);
      const [a2] = await claim(redis, two);
      assert.equal(a2!.id, a!.id);
      assert.equal(await consumer(redis, two).complete(a2!, { stage: 2 }), true);

      const { jobs: out, open } = await waiting;
      assert.deepEqual(open, []);
      assert.deepEqual(out[a!.id], { id: a!.id, queue: two, state: "completed", result: { stage: 2 } });
      assert.equal(out[b!.id]!.state, "dead");
      assert.equal(out[b!.id]!.queue, one);
      assert.match(out[b!.id]!.error ?? "", /boom/);
      assert.equal(out[c!.id]!.state, "cancelled");

      // Ended before the wait starts: answered from the records at once.
      const again = await producer.waitFor([a!.id, b!.id, c!.id, "no-such-job"], { timeoutMs: 0 });
      assert.deepEqual(again.open, []);
      assert.deepEqual(again.jobs[a!.id], out[a!.id]);
      assert.equal(again.jobs[b!.id]!.state, "dead");
      assert.equal(again.jobs[c!.id]!.state, "cancelled");
      assert.equal(again.jobs["no-such-job"]!.state, "unknown");
    });
  },
  { single: (n) => `wt${n}`, cluster: (n) => `wtc${n}` },
);

describe("waiting for results (single Redis)", () => {
  const q = useQueueRedis();
  let n = 0;
  const fresh = () => `wx${++n}`;

  test("a timeout names the jobs still open and returns the ended ones", async () => {
    const { redis, producer } = q();
    const queue = `${fresh()}/w`;
    const [a, b] = await producer.enqueueMany(queue, [{ data: 1 }, { data: 2 }]);
    const [first] = await claim(redis, queue, 1);
    assert.equal(await consumer(redis, queue).complete(first!, "ok"), true);
    const other = first!.id === a!.id ? b!.id : a!.id;
    const t0 = Date.now();
    const { jobs, open } = await producer.waitFor(
      [
        { id: a!.id, queue },
        { id: b!.id, queue },
      ],
      {
        timeoutMs: 300,
      },
    );
    assert.ok(Date.now() - t0 >= 290);
    assert.deepEqual(open, [other]);
    assert.deepEqual(Object.keys(jobs), [first!.id]);
    assert.equal(jobs[first!.id]!.result, "ok");
  });

  test("a wait on 1,000 ids of two queues ends when the last one does, with one reader", async () => {
    const { redis, producer } = q();
    const p = fresh();
    const qa = `${p}/a`;
    const qb = `${p}/b`;
    const ids = [
      ...(await producer.enqueueMany(
        qa,
        Array.from({ length: 500 }, (_, i) => ({ data: i })),
      )),
      ...(await producer.enqueueMany(
        qb,
        Array.from({ length: 500 }, (_, i) => ({ data: i })),
      )),
    ].map((r) => r.id);
    const waiter = new JobWaiter(redis);
    const waiting = waiter.wait(ids, { timeoutMs: 120_000 });
    await pollUntil("the wait's reader to start", () => waiter.following === 1);
    for (const queue of [qa, qb]) {
      const c = consumer(redis, queue);
      for (const job of await claim(redis, queue)) assert.equal(await c.complete(job, job.rawData), true);
    }
    const { jobs, open } = await waiting;
    assert.deepEqual(open, []);
    assert.equal(Object.keys(jobs).length, 1000);
    assert.ok(Object.values(jobs).every((j) => j.state === "completed"));
    // The records read in a few calls (found, then read) and at most one read per stream entry
    // written meanwhile (the reader's cost follows the queues' traffic, not the ids): no poll per job.
    const events = (await Promise.all([qa, qb].map((x) => redis.xlen(new QueueKeys(x).events)))).reduce(
      (s, n) => s + n,
      0,
    );
    assert.ok(waiter.commands <= events + 20, `${waiter.commands} commands, ${events} stream entries`);
  });

  test("the start of a wait on 2,000 ids reads their records in a few script calls, not a command per id", async () => {
    const { redis, producer } = q();
    const queue = `${fresh()}/w`;
    const ids = (
      await producer.enqueueMany(
        queue,
        Array.from({ length: 2000 }, (_, i) => ({ data: i })),
      )
    ).map((r) => r.id);
    const c = consumer(redis, queue);
    for (const job of await claim(redis, queue, 1000)) assert.equal(await c.complete(job, job.rawData), true);
    // (a key that is not a hash, and an id with no record: both answered as unknown)
    const malformed = "wx-malformed";
    await redis.set(new PipelineKeys(queue.split("/")[0]!).job(malformed), "not a hash");

    const monitor = await (redis as Redis).monitor();
    const sent: string[] = [];
    // (the commands clients send; a script's own calls show as from "lua")
    monitor.on("monitor", (_time: string, args: string[], source: string) => {
      if (source !== "lua") sent.push(args.join(" "));
    });
    const { jobs, open } = await new JobWaiter(redis).wait([...ids, malformed, "wx-no-record"], {
      timeoutMs: 0,
    });
    const marker = `wait started ${Date.now()}`;
    await redis.echo(marker);
    await pollUntil("the monitor to see the marker", () => sent.some((s) => s.endsWith(marker)));
    monitor.disconnect();

    assert.equal(Object.values(jobs).filter((j) => j.state === "completed").length, 1000);
    assert.equal(open.length, 1000);
    assert.equal(jobs[malformed]!.state, "unknown");
    assert.equal(jobs["wx-no-record"]!.state, "unknown");
    const start = sent.slice(
      0,
      sent.findIndex((s) => s.endsWith(marker)),
    );
    // (before: an EXISTS and an HMGET per id, 4,000 here)
    const names = start.map((s) => s.split(" ")[0]);
    assert.ok(start.length <= 20, `${start.length} commands: ${names.slice(0, 8).join(", ")} …`);
  });

  test("a wait that starts as the last one leaves is still answered by the reader", async () => {
    const { redis, producer } = q();
    const queue = `${fresh()}/w`;
    const { id } = await producer.enqueue(queue, 1);
    const waiter = new JobWaiter(redis);
    await pollUntil(
      "nothing ends yet",
      async () => (await waiter.wait([id], { timeoutMs: 50 })).open.length === 1,
    );
    // (the first wait's reader is closing: this one registers before it has ended)
    const second = waiter.wait([{ id, queue }], { timeoutMs: 60_000 });
    await pollUntil("the reader following again", () => waiter.following === 1);
    const [job] = await claim(redis, queue);
    assert.equal(await consumer(redis, queue).complete(job!, "late"), true);
    const t0 = Date.now();
    const { jobs, open } = await second;
    assert.deepEqual(open, []);
    assert.equal(jobs[id]!.result, "late");
    assert.ok(Date.now() - t0 < 30_000);
  });

  test("bad input is refused naming it", async () => {
    await assert.rejects(q().producer.waitFor(["a b"]), /invalid job id "a b"/);
    await assert.rejects(q().producer.waitFor(["x"], { timeoutMs: -1 }), /timeoutMs must be/);
  });
});

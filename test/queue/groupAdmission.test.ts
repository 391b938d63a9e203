// What the operator reads for its groups' replica cap (queue/groupAdmission.ts,
// group_admission.lua): how many grouped waiting jobs could start now — groups at their limit or
// paused add none — read in a bounded walk of the ring, also with 100,000 groups. Real Redis.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  Consumer,
  GROUP_ADMISSION_SCAN_LIMIT,
  Producer,
  QueueAdmin,
  groupAdmission,
  pauseGroup,
  pollQueues,
  setGroupLimit,
  topGroups,
  groupJobs,
  type RedisClient,
} from "../../queue/index.ts";
import { RedisServer, startQueueRedis, stopQueueRedis } from "../support/redis.ts";

describe("group admission (the operator's read)", () => {
  let server: RedisServer;
  let redis: RedisClient;
  let producer: Producer;
  let n = 0;
  const fresh = () => `gadm${++n}`;
  before(async () => {
    ({ server, redis, producer } = await startQueueRedis());
  });
  after(() => stopQueueRedis({ server, redis }));

  const enqueue = (q: string, group: string, count: number) =>
    producer.enqueueMany(
      q,
      Array.from({ length: count }, (_, i) => ({ data: { i }, group })),
    );

  test("groups at their limit or paused add nothing; the others add min(waiting, room)", async () => {
    const q = fresh();
    await setGroupLimit(redis, q, undefined, { concurrency: 2 });
    await setGroupLimit(redis, q, "big", { concurrency: 10 });
    await enqueue(q, "a", 50); // limit 2 → 2
    await enqueue(q, "b", 1); // limit 2, one waiting → 1
    await enqueue(q, "big", 30); // limit 10 → 10
    await enqueue(q, "off", 20); // paused → 0
    await pauseGroup(redis, q, "off");
    assert.deepEqual(await groupAdmission(redis, q, 1_000), {
      waiting: 101,
      admissible: 13,
      scanned: 4,
      ring: 4,
      complete: true,
    });
    // A claim of 20 starts the 13 admissible jobs; then every group with work is at its limit or paused.
    const c = new Consumer(redis, q, { workerId: "w", leaseMs: 30_000, retentionSeconds: 0 });
    const { jobs: claimed } = await c.claim(20);
    assert.equal(claimed.length, 13);
    const after = await groupAdmission(redis, q, 1_000);
    assert.equal(after.waiting, 101 - 13);
    assert.equal(after.admissible, 0, "every group with work is at its limit or paused");
    // The poll says jobs wait in groups (so the operator asks), 0 for a queue without groups.
    const [polled, plain] = await pollQueues(redis, [q, fresh()]);
    assert.equal(polled!.groupedWaiting, 88);
    assert.equal(plain!.groupedWaiting, 0);
  });

  test("a group rate limit bounds its room by the window's max", async () => {
    const q = fresh();
    await setGroupLimit(redis, q, "r", { rate: { max: 3, perMs: 60_000 } });
    await enqueue(q, "r", 40);
    await enqueue(q, "free", 5);
    assert.equal((await groupAdmission(redis, q, 1_000)).admissible, 3 + 5);
  });

  test("100,000 groups: the walk stops at `enough`, or estimates past the scan limit", async () => {
    const q = fresh();
    for (let start = 0; start < 100_000; start += 5_000)
      await producer.enqueueMany(
        q,
        Array.from({ length: 5_000 }, (_, i) => ({ data: {}, group: `t${start + i}` })),
      );
    const t0 = process.hrtime.bigint();
    const enough = await groupAdmission(redis, q, 320);
    const ms = Number(process.hrtime.bigint() - t0) / 1e6;
    assert.deepEqual(enough, {
      waiting: 100_000,
      admissible: 400,
      scanned: 400,
      ring: 100_000,
      complete: true,
    });
    const capped = await groupAdmission(redis, q, 1_000_000);
    assert.equal(capped.scanned, GROUP_ADMISSION_SCAN_LIMIT);
    assert.equal(capped.complete, false);
    assert.equal(capped.admissible, 100_000, "the rest estimated like the scanned ones");
    // (a bound read: no timing assertion here, the figure is for the reader)
    console.log(`group_admission with 100,000 groups, enough 320: ${ms.toFixed(1)} ms round trip`);
    // The dashboard's bounded views of the same queue.
    const top = await topGroups(redis, q, { top: 5 });
    assert.equal(top.groupsWaiting, 100_000);
    assert.equal(top.waiting, 100_000);
    assert.equal(top.groups.length, 5);
    const found = await topGroups(redis, q, { top: 50, search: "t9999" });
    assert.equal(found.groups[0]!.group, "t9999");
    assert.deepEqual(
      found.groups.map((g) => g.group).sort(),
      ["t9999", ...Array.from({ length: 10 }, (_, i) => `t9999${i}`)].sort(),
    );
    const one = await groupJobs(redis, q, "t42");
    assert.deepEqual([one.waiting, one.running, one.jobs.length, one.jobs[0]!.state], [1, 0, 1, "ready"]);
  });
});

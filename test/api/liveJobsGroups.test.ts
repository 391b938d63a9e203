// The dashboard's ready-job listing (api/liveJobs.ts, GET /queues/{queue}/jobs?state=ready) and
// the admin counts with groups (docs/protocol.md, "Groups"): grouped waiting jobs are listed
// after the queue's own, group by group in name order, page by page with the cursor; paused
// groups' jobs too; stale entries of a group's line are not shown. Against a real Redis.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { liveJobs, type LiveJob } from "../../api/liveJobs.ts";
import {
  Consumer,
  pauseGroup,
  QueueKeys,
  type Producer,
  type QueueAdmin,
  type RedisClient,
} from "../../queue/index.ts";
import { RedisServer, startQueueRedis, stopQueueRedis } from "../support/redis.ts";

describe("ready listings and counts with groups", () => {
  let server: RedisServer;
  let redis: RedisClient;
  let producer: Producer;
  let admin: QueueAdmin;
  before(async () => {
    ({ server, redis, producer, admin } = await startQueueRedis());
  });
  after(() => stopQueueRedis({ server, redis }));

  async function allPages(queue: string, limit: number): Promise<LiveJob[]> {
    const items: LiveJob[] = [];
    let cursor: string | undefined;
    for (let pages = 0; pages < 100; pages++) {
      const page = await liveJobs(redis, queue, "ready", limit, cursor);
      items.push(...page.items);
      if (!page.next) return items;
      cursor = page.next;
    }
    throw new Error("more than 100 pages");
  }

  test("grouped jobs are listed after the queue's own, group by group, across pages", async () => {
    const q = "lg/ready";
    await producer.enqueueMany(q, [
      { id: "u1", data: 1 },
      { id: "b1", data: 1, group: "beta" },
      { id: "a1", data: 1, group: "alpha" },
      { id: "b2", data: 1, group: "beta" },
      { id: "up", data: 1, priority: 4 },
      { id: "bp", data: 1, group: "beta", priority: 9 },
      { id: "a2", data: 1, group: "alpha" },
      { id: "gone", data: 1, group: "alpha" },
      { id: "c1", data: 1, group: "gamma" },
      { id: "u2", data: 1 },
    ]);
    await admin.cancel("gone", q); // leaves a stale entry in alpha's line
    await pauseGroup(redis, q, "gamma"); // a paused group's jobs still wait
    const expected = ["up", "u1", "u2", "a1", "a2", "bp", "b1", "b2", "c1"];
    const whole = await allPages(q, 100);
    assert.deepEqual(
      whole.map((j) => j.id),
      expected,
    );
    assert.deepEqual(
      whole.map((j) => j.group),
      [null, null, null, "alpha", "alpha", "beta", "beta", "beta", "gamma"],
    );
    for (const limit of [1, 2, 3, 4]) {
      assert.deepEqual(
        (await allPages(q, limit)).map((j) => j.id),
        expected,
        `pages of ${limit}`,
      );
    }
    // The counts the dashboard, `conveyor stats` and the API read agree with the listing.
    assert.equal((await admin.stats(q)).ready, expected.length);
    assert.equal((await admin.counts(q)).backlog, expected.length);
  });

  test("a queue with only grouped jobs lists them from the first page", async () => {
    const q = "lg/only";
    await producer.enqueueMany(
      q,
      Array.from({ length: 5 }, (_, i) => ({ id: `j${i}`, data: i, group: `t${i % 2}` })),
    );
    const first = await liveJobs(redis, q, "ready", 3);
    assert.deepEqual(
      first.items.map((j) => j.id),
      ["j0", "j2", "j4"],
    );
    assert.ok(first.next);
    const second = await liveJobs(redis, q, "ready", 3, first.next);
    assert.deepEqual(
      second.items.map((j) => j.id),
      ["j1", "j3"],
    );
    assert.equal(second.next, null);
  });

  test("group names are paged from their index (<Q>gnames); without it (groups from before it) every name is read", async () => {
    const q = "lg/index";
    await producer.enqueueMany(
      q,
      Array.from({ length: 12 }, (_, i) => ({
        id: `x${i}`,
        data: i,
        group: `g${String(i % 6).padStart(2, "0")}`,
      })),
    );
    const k = new QueueKeys(q);
    assert.deepEqual(await redis.zrange(k.groupNames, 0, -1), ["g00", "g01", "g02", "g03", "g04", "g05"]);
    const expected = ["x0", "x6", "x1", "x7", "x2", "x8", "x3", "x9", "x4", "x10", "x5", "x11"];
    assert.deepEqual(
      (await allPages(q, 5)).map((j) => j.id),
      expected,
    );
    // a group that empties leaves the index
    await admin.cancel("x0", q);
    await admin.cancel("x6", q);
    assert.equal(await redis.zscore(k.groupNames, "g00"), null);
    // and one that is claimed empty too
    const c = new Consumer(redis, q, { workerId: "w", leaseMs: 30_000, retentionSeconds: 0 });
    const claimed = (await c.claim(6)).jobs.map((j) => j.id);
    assert.deepEqual(claimed, ["x1", "x2", "x3", "x4", "x5", "x7"]);
    assert.equal(await redis.zscore(k.groupNames, "g01"), null);
    // groups enqueued before the index: found all the same
    await redis.del(k.groupNames);
    assert.deepEqual(
      (await allPages(q, 4)).map((j) => j.id),
      ["x8", "x9", "x10", "x11"],
    );
    assert.deepEqual(
      (await allPages(q, 1)).map((j) => j.id),
      ["x8", "x9", "x10", "x11"],
    );
  });
});

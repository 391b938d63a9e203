// The doorbell (docs/protocol.md, "Doorbell"), against a real Redis and a real Redis Cluster: a
// bell left in `<Q>doorbell` is rung once by the next wake — an enqueue from the scripts, a
// fan-out, a resume — as a PUBLISH of the bell's key on the channel it holds, and taken; without
// a bell an enqueue publishes nothing; a resume always rings (a pool held at zero while paused).
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { pollUntil } from "../support/poll.ts";
import {
  DOORBELL_CHANNEL,
  Producer,
  QueueAdmin,
  QueueKeys,
  connectRedis,
  type RedisClient,
} from "../../queue/index.ts";
import { RedisClusterServer, RedisServer } from "../support/redis.ts";

/** A subscriber on DOORBELL_CHANNEL and the bells it heard, in order. */
async function listen(url: string): Promise<{ heard: string[]; client: RedisClient }> {
  const client = connectRedis(url, { name: "doorbell-test-listener" });
  const heard: string[] = [];
  // (a marker on a second channel: Redis delivers one connection's messages in publish order)
  client.on("message", (channel: string, m: string) =>
    heard.push(channel === DOORBELL_CHANNEL ? m : `marker:${m}`),
  );
  await client.subscribe(DOORBELL_CHANNEL, "doorbell-test-marker");
  return { heard, client };
}

for (const topology of ["Redis", "Redis Cluster"] as const) {
  describe(`the doorbell on ${topology}`, { timeout: 120_000 }, () => {
    let stop: () => Promise<void>;
    let url: string;
    let redis: RedisClient;
    let producer: Producer;
    let admin: QueueAdmin;
    let n = 0;
    const fresh = () => `bell${++n}/work`;

    before(async () => {
      if (topology === "Redis") {
        const server = await RedisServer.start();
        url = server.url;
        stop = () => server.stop();
      } else {
        const cluster = await RedisClusterServer.start(3);
        url = cluster.url;
        stop = () => cluster.stop();
      }
      redis = connectRedis(url, { name: "doorbell-test" });
      producer = new Producer(redis);
      admin = new QueueAdmin(redis);
    });
    after(async () => {
      redis?.disconnect();
      await stop?.();
    });

    test("an enqueue rings a bell once and takes it; no bell, no ring", async () => {
      const q = fresh();
      const bell = new QueueKeys(q).doorbell;
      const { heard, client } = await listen(url);
      try {
        await producer.enqueue(q, { i: 0 }); // no bell yet
        await redis.set(bell, DOORBELL_CHANNEL);
        await producer.enqueue(q, { i: 1 });
        await pollUntil("the ring", () => heard.includes(bell), { timeoutMs: 30_000 });
        assert.equal(await redis.exists(bell), 0, "the ring takes the bell");
        await producer.enqueueMany(
          q,
          Array.from({ length: 5 }, (_, i) => ({ data: { i } })),
        );
        if (topology === "Redis") {
          // Everything published before the marker has arrived once the marker has.
          await redis.publish("doorbell-test-marker", "1");
          await pollUntil("the marker", () => heard.includes("marker:1"), { timeoutMs: 30_000 });
          assert.deepEqual(
            heard,
            [bell, "marker:1"],
            "one ring: none without a bell, none for the later jobs",
          );
        } else {
          assert.equal(await redis.exists(bell), 0);
        }
      } finally {
        client.disconnect();
      }
    });

    test("a surge bell rings only once its count of jobs waits, and is taken then", async () => {
      const q = fresh();
      const bell = new QueueKeys(q).doorbell;
      const { heard, client } = await listen(url);
      try {
        await redis.set(bell, `${DOORBELL_CHANNEL} 10`);
        // 4 + 5 waiting: under 10, no ring, the bell stays.
        await producer.enqueueMany(
          q,
          Array.from({ length: 4 }, (_, i) => ({ data: { i } })),
        );
        await producer.enqueueMany(
          q,
          Array.from({ length: 5 }, (_, i) => ({ data: { i } })),
        );
        assert.equal(await redis.get(bell), `${DOORBELL_CHANNEL} 10`, "under the count the bell stays");
        // Grouped jobs wait too: the tenth, grouped, rings.
        await producer.enqueue(q, { i: 9 }, { group: "tenant-a" });
        await pollUntil("the ring", () => heard.includes(bell), { timeoutMs: 30_000 });
        assert.equal(await redis.exists(bell), 0, "the ring takes the bell");
        assert.deepEqual(
          heard.filter((m) => m === bell),
          [bell],
          "rung once",
        );
      } finally {
        client.disconnect();
      }
    });

    test("a producer whose ACL user may not publish still enqueues and resumes; the bell only stays silent", async () => {
      if (topology !== "Redis") return; // (one topology is enough for an ACL)
      const q = fresh();
      const bell = new QueueKeys(q).doorbell;
      await redis.call(
        "ACL",
        "SETUSER",
        "nopublish",
        "on",
        ">pw",
        "~*",
        "+@all",
        "-@dangerous",
        "resetchannels",
      );
      const limited = connectRedis(url.replace("redis://", "redis://nopublish:pw@"), {
        name: "doorbell-test-acl",
      });
      try {
        await redis.set(bell, DOORBELL_CHANNEL);
        const id = await new Producer(limited).enqueue(q, { i: 1 });
        assert.equal((await admin.counts(q)).ready, 1, `the job ${id} is enqueued`);
        await new QueueAdmin(limited).pause(q);
        await new QueueAdmin(limited).resume(q);
        assert.equal((await admin.stats(q)).paused, false);
      } finally {
        limited.disconnect();
      }
    });

    test("a resume rings, bell or not, and takes a bell left behind", async () => {
      const q = fresh();
      const bell = new QueueKeys(q).doorbell;
      const { heard, client } = await listen(url);
      try {
        await admin.pause(q);
        await producer.enqueue(q, { i: 0 });
        await admin.resume(q);
        await pollUntil("the resume's ring", () => heard.filter((b) => b === bell).length === 1, {
          timeoutMs: 30_000,
        });
        await redis.set(bell, DOORBELL_CHANNEL);
        await admin.resume(q);
        await pollUntil("the second resume's ring", () => heard.filter((b) => b === bell).length === 2, {
          timeoutMs: 30_000,
        });
        assert.equal(await redis.exists(bell), 0, "a resume takes the bell");
      } finally {
        client.disconnect();
      }
    });
  });
}

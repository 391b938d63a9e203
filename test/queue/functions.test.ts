// How the scripts are called, against a real Redis 7: as one Function library (FUNCTION LOAD once
// per server, FCALL per call), reloaded after FUNCTION FLUSH, and by EVALSHA when FUNCTION/FCALL
// is refused (an ACL here, as on Redis 6 or a managed Redis) or forced. The protocol tests in
// queue.test.ts run on the default (Functions) path; this file checks both paths do the same.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { connectRedis, Consumer, Producer, QueueKeys, type RedisClient } from "../../queue/index.ts";
import { forceScriptMode, functionLibrary, scriptMode } from "../../queue/scripts.ts";
import { RedisServer } from "../support/redis.ts";

/** Enqueue two jobs, claim both, settle both in one call: what every path must do alike. */
async function roundTrip(redis: RedisClient, queue: string): Promise<void> {
  const producer = new Producer(redis);
  await producer.enqueue(queue, { n: 1 });
  await producer.enqueue(queue, { n: 2 });
  const consumer = new Consumer(redis, queue, { workerId: "w1", leaseMs: 30_000 });
  const { jobs } = await consumer.claim(5);
  assert.equal(jobs.length, 2);
  const { outcomes } = await consumer.settleMany(
    jobs.map((job) => ({ job, settlement: { result: { ok: true } } })),
    0,
  );
  assert.deepEqual(outcomes, ["settled", "settled"]);
  assert.equal(await redis.hget(new QueueKeys(queue).counts, "completed"), "2");
}

describe("script calls: Redis Functions, with EVALSHA as the fallback", () => {
  let server: RedisServer;
  let admin: RedisClient;
  const clients: RedisClient[] = [];
  const connect = (url = server.url) => {
    const c = connectRedis(url);
    clients.push(c);
    return c;
  };

  before(async () => {
    server = await RedisServer.start();
    admin = connect();
  });
  after(async () => {
    for (const c of clients) c.disconnect();
    await server.stop();
  });

  test("the first call loads the library once; calls then go by FCALL", async () => {
    const redis = connect();
    await redis.config("RESETSTAT");
    await roundTrip(redis, "fn1");
    assert.equal(scriptMode(redis), "functions");
    const libs = (await admin.function("LIST")) as unknown[][];
    const names = libs.map((l) => l[1]);
    assert.deepEqual(names, [functionLibrary().name]);
    const stats = await admin.info("commandstats");
    assert.match(stats, /cmdstat_fcall:calls=\d+/);
    assert.doesNotMatch(stats, /cmdstat_evalsha:/);
    // (a second client of the same version finds it loaded)
    await roundTrip(connect(), "fn2");
    assert.equal(((await admin.function("LIST")) as unknown[]).length, 1);
  });

  test("after FUNCTION FLUSH (or a restart without persistence) the next call loads it again", async () => {
    const redis = connect();
    await roundTrip(redis, "fn3");
    await admin.function("FLUSH");
    await roundTrip(redis, "fn4");
    assert.equal(scriptMode(redis), "functions");
  });

  test("a library keeps no state between calls: the outbox switch is read afresh by each call", async () => {
    const redis = connect();
    const keys = new QueueKeys("fn5");
    await admin.hdel(keys.meta, "records");
    await new Producer(redis).enqueue("fn5", { n: 1 });
    assert.equal(await admin.xlen(keys.outbox), 0);
    await admin.hset(keys.meta, "records", "1");
    await new Producer(redis).enqueue("fn5", { n: 2 });
    assert.equal(await admin.xlen(keys.outbox), 1);
  });

  test("FCALL refused by an ACL: the client falls back to EVALSHA and works the same", async () => {
    await admin.acl("SETUSER", "nofn", "on", ">pw", "~*", "&*", "+@all", "-fcall", "-function");
    const redis = connect(server.url.replace("redis://", "redis://nofn:pw@"));
    await roundTrip(redis, "fn6");
    assert.equal(scriptMode(redis), "scripts");
  });

  test("FUNCTION LOAD refused (FCALL allowed): falls back to EVALSHA", async () => {
    await admin.function("FLUSH");
    await admin.acl("SETUSER", "noload", "on", ">pw", "~*", "&*", "+@all", "-function");
    const redis = connect(server.url.replace("redis://", "redis://noload:pw@"));
    await roundTrip(redis, "fn7");
    assert.equal(scriptMode(redis), "scripts");
  });

  test("FCALL unknown to the server (Redis 6, a managed Redis that disables it): falls back to EVALSHA", async () => {
    const noFcall = await RedisServer.start({ args: ["--rename-command", "FCALL", ""] });
    try {
      const redis = connect(noFcall.url);
      await roundTrip(redis, "fn9");
      assert.equal(scriptMode(redis), "scripts");
    } finally {
      await noFcall.stop();
    }
  });

  test("forced to EVALSHA (the Redis 6 path): same results, no FCALL", async () => {
    const redis = connect();
    forceScriptMode(redis, "scripts");
    await redis.config("RESETSTAT");
    await roundTrip(redis, "fn8");
    const stats = await admin.info("commandstats");
    assert.match(stats, /cmdstat_evalsha:calls=\d+/);
    assert.doesNotMatch(stats, /cmdstat_fcall:/);
  });
});

// Fencing tokens across a failover: the promoted replica may lack the INCRBY of the last claims
// (asynchronous replication), so a counter alone would issue their tokens again — two
// executions of a job passing the same fence. Tokens have a floor from the server clock
// (includes/fencingTokens.lua); the failover is simulated by rewinding the counter to what a
// replica that missed the claim holds, on a real Redis.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { pollUntil } from "../support/poll.ts";
import { Consumer, QueueKeys, type Producer, type RedisClient } from "../../queue/index.ts";
import { startQueueRedis, stopQueueRedis, type RedisServer } from "../support/redis.ts";

describe("fencing tokens", () => {
  let server: RedisServer;
  let redis: RedisClient;
  let producer: Producer;
  before(async () => {
    ({ server, redis, producer } = await startQueueRedis());
  });
  after(() => stopQueueRedis({ server, redis }));

  const serverSecond = async () => Number(((await redis.call("TIME")) as string[])[0]);
  const claimOne = async (consumer: Consumer) => {
    const [job] = (await consumer.claim(1)).jobs;
    assert.ok(job, "a job was claimed");
    return job;
  };

  test("a promoted replica that missed a claim's increment issues a higher token, not the same one", async () => {
    const q = "tokens-failover";
    const fence = new QueueKeys(q).fence;
    const consumer = new Consumer(redis, q, { workerId: "w", leaseMs: 30_000 });
    await producer.enqueue(q, 1, { id: "before" });
    const replicaCounter = await redis.get(fence); // what the replica has: the claim never reached it
    const lost = await claimOne(consumer);
    const claimedIn = await serverSecond();
    if (replicaCounter === null) await redis.del(fence);
    else await redis.set(fence, replicaCounter);
    // A failover takes seconds; one second is what the floor needs.
    await pollUntil("the next second on the server clock", async () => (await serverSecond()) > claimedIn, {
      timeoutMs: 5000,
      intervalMs: 50,
    });
    await producer.enqueue(q, 2, { id: "after" });
    const next = await claimOne(consumer);
    assert.ok(
      BigInt(next.token) > BigInt(lost.token),
      `token ${next.token} after the failover > ${lost.token}`,
    );
  });

  test("tokens of one claim and of claims in the same second are distinct and increasing; a counter above the floor keeps counting", async () => {
    const q = "tokens-burst";
    const fence = new QueueKeys(q).fence;
    const consumer = new Consumer(redis, q, { workerId: "w", leaseMs: 30_000 });
    await producer.enqueueMany(
      q,
      Array.from({ length: 40 }, (_, i) => ({ id: `j${i}`, data: i })),
    );
    const tokens: bigint[] = [];
    for (let i = 0; i < 4; i++)
      for (const job of (await consumer.claim(5)).jobs) tokens.push(BigInt(job.token));
    for (let i = 1; i < tokens.length; i++)
      assert.ok(tokens[i]! > tokens[i - 1]!, `${tokens[i]} > ${tokens[i - 1]}`);
    // An old counter (or a rate above the floor's) ahead of the clock is never moved back.
    const ahead = tokens.at(-1)! + 10_000_000n;
    await redis.set(fence, ahead.toString());
    const [a, b] = (await consumer.claim(2)).jobs;
    assert.deepEqual([a!.token, b!.token], [String(ahead + 1n), String(ahead + 2n)]);
  });
});

// The job API's rollout samples (api/rolloutHistory.ts) on a real Redis: only rollouts in
// progress are sampled, a sample holds both versions' totals from `<queue>versions` as they
// stand, a new canary's samples replace the last one's, and the hash expires by itself.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { RolloutHistory } from "../../api/rolloutHistory.ts";
import { connectRedis, QueueKeys, type RedisClient } from "../../queue/index.ts";
import { RedisServer } from "../support/redis.ts";

describe("api: rollout samples", () => {
  let server: RedisServer;
  let redis: RedisClient;
  before(async () => {
    server = await RedisServer.start();
    redis = connectRedis(server.url);
  });
  after(async () => {
    redis?.disconnect();
    await server?.stop();
  });

  const rollout = (canaryHash: string, step: number, weight: number, phase = "Progressing") => ({
    phase,
    step,
    weight,
    stableHash: "s1",
    canaryHash,
  });

  it("samples rollouts in progress only, both versions' totals; a new canary replaces the last one's", async () => {
    const q = "p/rollhist";
    const other = "p/idle";
    await redis.hset(new QueueKeys(q).versions, {
      "s1:h3": 90,
      "s1:f": 10,
      "c1:h3": 7,
      "c1:h5": 1,
      "c1:f": 2,
      "c1:o": 5,
    });
    let rows = [
      { queue: q, rollout: rollout("c1", 0, 30) },
      { queue: other, rollout: rollout("c0", 1, 60, "Promoted") },
    ];
    // (the Pools list's rows: the sampler reads their queue and rollout only)
    const h = new RolloutHistory(redis, { list: async () => rows }, 1000);
    const t0 = 1_800_000_000_000;
    await h.sample(t0 + 10);
    await redis.hincrby(new QueueKeys(q).versions, "c1:f", 3);
    rows = [{ queue: q, rollout: rollout("c1", 1, 60) }, rows[1]!];
    await h.sample(t0 + 1010);
    const got = await h.read(q, "c1", t0 + 2000);
    assert.deepEqual(got, [
      {
        at: t0,
        canaryHash: "c1",
        step: 0,
        weight: 30,
        stable: { attempts: 100, failed: 10 },
        canary: { attempts: 10, failed: 2 },
      },
      {
        at: t0 + 1000,
        canaryHash: "c1",
        step: 1,
        weight: 60,
        stable: { attempts: 100, failed: 10 },
        canary: { attempts: 13, failed: 5 },
      },
    ]);
    assert.equal(
      await redis.exists(new QueueKeys(other).rolloutHistory),
      0,
      "a finished rollout is not sampled",
    );
    const ttl = await redis.pttl(new QueueKeys(q).rolloutHistory);
    assert.ok(ttl > 0 && ttl <= 2 * 3_600_000, `expires by itself (pttl ${ttl})`);
    // the next rollout's first sample: the last canary's are gone
    rows = [{ queue: q, rollout: rollout("c2", 0, 30) }];
    await h.sample(t0 + 2010);
    assert.deepEqual(await h.read(q, "c1", t0 + 3000), []);
    assert.equal((await h.read(q, "c2", t0 + 3000)).length, 1);
    assert.equal(await redis.hlen(new QueueKeys(q).rolloutHistory), 1);
  });
});

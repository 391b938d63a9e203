// The job API's per-token rate (token_rate.lua) against a real Redis: a burst of `max`, then one
// request per window/max — never the twice-the-rate a fixed window lets through at its edge.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { admitTokenRequest } from "../../queue/index.ts";
import { waitFor } from "../support/processes.ts";
import { useQueueRedis } from "../support/redis.ts";

describe("token_rate", () => {
  const q = useQueueRedis();

  test("a burst of max, then a refusal saying when one more fits; at that time exactly one more", async () => {
    const rate = { max: 2, perMs: 2000 };
    const admit = () => admitTokenRequest(q().redis, "burst", rate);
    assert.deepEqual(await admit(), { admitted: true, retryAfterMs: 0 });
    assert.deepEqual(await admit(), { admitted: true, retryAfterMs: 0 });
    const refused = await admit();
    assert.equal(refused.admitted, false);
    assert.ok(
      refused.retryAfterMs > 0 && refused.retryAfterMs <= 1000,
      `retry after ${refused.retryAfterMs} ms`,
    );
    // (a refused request takes nothing: polling until one fits admits one, and the next is refused)
    await waitFor("one more fits", async () => (await admit()).admitted, 10_000, 50);
    assert.equal(
      (await admit()).admitted,
      false,
      "one per window/max after the burst, not a fresh window's max",
    );
  });

  test("tokens are apart, and the key expires once its time has passed", async () => {
    const rate = { max: 1, perMs: 300 };
    assert.equal((await admitTokenRequest(q().redis, "a", rate)).admitted, true);
    assert.equal((await admitTokenRequest(q().redis, "b", rate)).admitted, true, "another token");
    assert.equal((await admitTokenRequest(q().redis, "a", rate)).admitted, false);
    const ttl = await q().redis.pttl("cvy:tokenrate:a");
    assert.ok(ttl > 0 && ttl <= 300, `PTTL ${ttl}`);
  });
});

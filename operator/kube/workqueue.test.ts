// The work queue: de-duplication, per-key backoff, the overall rate limit.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { WorkQueue } from "./workqueue.ts";

describe("work queue", () => {
  it("de-duplicates and never hands out a key twice at once", async () => {
    const q = new WorkQueue();
    q.add("a");
    q.add("a");
    q.add("b");
    assert.equal(q.length, 2);
    const k1 = await q.get();
    assert.equal(k1, "a");
    q.add("a"); // while processing: marked dirty, not queued
    assert.equal(q.length, 1);
    assert.equal(await q.get(), "b");
    q.done("b");
    q.done("a"); // dirty: re-queued now
    assert.equal(q.length, 1);
    assert.equal(await q.get(), "a");
    q.done("a");
    q.shutDown();
    assert.equal(await q.get(), undefined);
  });

  it("backs off per key after failures and forgets on success", async () => {
    const q = new WorkQueue({ baseDelayMs: 10, maxDelayMs: 1000 });
    assert.equal(q.addRateLimited("k"), 10);
    assert.equal(q.addRateLimited("k"), 20);
    assert.equal(q.addRateLimited("k"), 40);
    q.forget("k");
    assert.equal(q.addRateLimited("k"), 10);
    assert.equal(await q.get(), "k", "the delayed add arrives");
    q.done("k");
    q.shutDown();
  });
});

import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Backoff, exponentialDelay, retryDelay } from "./backoff.ts";

describe("backoff", () => {
  it("doubles from the base and stops at the cap", () => {
    const policy = { baseMs: 100, maxMs: 1000 };
    assert.deepEqual(
      [1, 2, 3, 4, 5, 6].map((n) => exponentialDelay(n, policy)),
      [100, 200, 400, 800, 1000, 1000],
    );
    assert.equal(exponentialDelay(0, policy), 100);
    assert.equal(exponentialDelay(10_000, { baseMs: 1, maxMs: Number.MAX_SAFE_INTEGER }), 2 ** 30);
  });

  it("a failure streak starts over after reset", () => {
    const b = new Backoff({ baseMs: 250, maxMs: 600 });
    assert.deepEqual([b.next(), b.next(), b.next()], [250, 500, 600]);
    b.reset();
    assert.equal(b.next(), 250);
  });

  it("retry delays are a uniform draw below the exponential bound", () => {
    const policy = { baseMs: 1000, maxMs: 5000 };
    assert.equal(
      retryDelay(3, policy, () => 0),
      0,
    );
    assert.equal(
      retryDelay(3, policy, () => 0.5),
      2000,
    );
    assert.equal(
      retryDelay(9, policy, () => 0.999),
      4995,
    );
  });
});

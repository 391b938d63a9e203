import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { StringPool } from "./stringPool.ts";

describe("string pool", () => {
  test("two parsed objects end up sharing one copy of each repeated value, unchanged in content", () => {
    const text = JSON.stringify({
      apiVersion: "conveyor.dev/v1alpha1",
      status: { conditions: [{ type: "Ready", reason: "ScaledToZero" }], n: 3, ok: true, none: null },
      tags: ["a", "b"],
    });
    const pool = new StringPool();
    const a = pool.internAll(JSON.parse(text));
    const b = pool.internAll(JSON.parse(text));
    assert.deepEqual(a, JSON.parse(text));
    assert.deepEqual(b, a);
    assert.equal(pool.size, 5, "apiVersion, type, reason and the two tags");
  });

  test("long strings are left alone, and the pool starts over when full instead of growing", () => {
    const pool = new StringPool();
    pool.intern("x".repeat(300));
    assert.equal(pool.size, 0);
    for (let i = 0; i < 25_000; i++) pool.intern(`uid-${i}`);
    assert.ok(pool.size <= 20_000, `size ${pool.size}`);
  });
});

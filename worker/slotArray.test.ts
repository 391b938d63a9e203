import { test, describe } from "node:test";
import assert from "node:assert/strict";
import { SlotArray } from "./slotArray.ts";

describe("slot array", () => {
  test("add, remove, find and values; a freed slot is reused and removing it twice changes nothing", () => {
    const s = new SlotArray<string>();
    const a = s.add("a");
    const b = s.add("b");
    assert.notEqual(a, b);
    assert.equal(s.size, 2);
    s.remove(a);
    s.remove(a);
    assert.equal(s.size, 1);
    assert.deepEqual(s.values(), ["b"]);
    assert.equal(s.add("c"), a, "the freed slot");
    assert.equal(
      s.find((v) => v === "c"),
      "c",
    );
    assert.equal(
      s.find((v) => v === "a"),
      undefined,
    );
    assert.deepEqual(s.values(), ["c", "b"]);
  });

  test("churn stays within the slots ever used at once", () => {
    const s = new SlotArray<number>();
    const held: number[] = [];
    for (let i = 0; i < 1000; i++) {
      held.push(s.add(i));
      if (held.length > 3) s.remove(held.shift()!);
    }
    assert.equal(s.size, 3);
    assert.ok(Math.max(...held) < 4, `slots ${held}`);
  });
});

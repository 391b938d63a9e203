import assert from "node:assert/strict";
import { test } from "node:test";
import { entriesToKeep } from "./outboxBudget.ts";

test("within the budget nothing is shed; over it, the newest entries that fill 90 % of it are kept", () => {
  assert.equal(entriesToKeep(1000, 100, 100), null);
  assert.equal(entriesToKeep(0, 500, 100), null);
  assert.equal(entriesToKeep(1000, 200, 100), 450);
  assert.equal(entriesToKeep(3, 10_000, 100), 0);
});

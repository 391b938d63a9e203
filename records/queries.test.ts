// The records' query helpers (JSON containment, the minutes of a window) without a database.
import assert from "node:assert/strict";
import { test } from "node:test";
import { containment, recentMinutes } from "./queries.ts";

test("the value is JSON when it parses, else text; the path nests", () => {
  assert.deepEqual(containment(["customer", "id"], "42"), { customer: { id: 42 } });
  assert.deepEqual(containment(["ok"], "true"), { ok: true });
  assert.deepEqual(containment(["name"], "Ada"), { name: "Ada" });
  assert.deepEqual(containment(["name"], '"42"'), { name: "42" });
});

test("the last hour is 60 minutes ending at now's, zero where there were no rows", () => {
  const now = Date.UTC(2026, 10, 25, 5, 30, 42);
  const minute = Date.UTC(2026, 10, 25, 5, 30);
  const hour = recentMinutes([{ minute, completed: 5900, failed: 3, p50: 10, p95: 40 }], now);
  assert.equal(hour.length, 60);
  assert.equal(hour[0]!.minute, minute - 59 * 60_000);
  assert.deepEqual(hour[59], { minute, completed: 5900, failed: 3, p50: 10, p95: 40 });
  assert.deepEqual(hour[58], { minute: minute - 60_000, completed: 0, failed: 0, p50: null, p95: null });
  // A row older than the hour (the query's `now` ran a moment earlier) is not shown.
  assert.ok(
    recentMinutes([{ minute: minute - 61 * 60_000, completed: 1, failed: 0, p50: 1, p95: 1 }], now).every(
      (m) => m.completed === 0,
    ),
  );
});

test("a window of 15 minutes or 6 hours is as many minutes, ending at now's", () => {
  const now = Date.UTC(2026, 10, 25, 5, 30, 42);
  const minute = Date.UTC(2026, 10, 25, 5, 30);
  const six = recentMinutes(
    [{ minute: minute - 300 * 60_000, completed: 7, failed: 0, p50: 1, p95: 2 }],
    now,
    360,
  );
  assert.equal(six.length, 360);
  assert.equal(six[0]!.minute, minute - 359 * 60_000);
  assert.equal(six.at(-1)!.minute, minute);
  assert.equal(six[59]!.completed, 7);
  assert.equal(recentMinutes([], now, 15).length, 15);
});

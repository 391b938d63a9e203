// The event hub's pure parts: SSE ids, and which streams one Redis Cluster XREAD may name.
import assert from "node:assert/strict";
import { test } from "node:test";
import { parseEventId, slotGroups, sseEventId } from "./eventHub.ts";

test("streams are grouped by pipeline (one hash tag, one slot), in first-seen order", () => {
  assert.deepEqual(slotGroups(["a/x", "b/y", "a/z", "c", "b/w"]), [["a/x", "a/z"], ["b/y", "b/w"], ["c"]]);
  assert.deepEqual(slotGroups([]), []);
});

test("an SSE id round-trips; anything else is refused", () => {
  assert.equal(sseEventId({ eventId: "1700000000000-0", part: 0 }), "1700000000000-0");
  assert.deepEqual(parseEventId(sseEventId({ eventId: "1700000000000-1", part: 3 })), {
    eventId: "1700000000000-1",
    part: 3,
  });
  assert.equal(parseEventId("yesterday"), null);
});

// Scale decisions as the Pools page shows them, parsed from the operator's Event messages.
import assert from "node:assert/strict";
import { test } from "node:test";
import { parseDecision } from "./poolReader.ts";

test("a ScaledUp Event gives from, to, reason and the backlog", () => {
  const d = parseDecision({
    type: "Normal",
    reason: "ScaledUp",
    lastTimestamp: new Date("2026-11-23T10:00:00Z"),
    message: "0 → 1: ActivateFromZero: backlog 12 > activationBacklog 0: starting a worker",
  });
  assert.deepEqual(d, {
    at: "2026-11-23T10:00:00.000Z",
    type: "Normal",
    reason: "ActivateFromZero",
    from: 0,
    to: 1,
    backlog: 12,
    message: "0 → 1: ActivateFromZero: backlog 12 > activationBacklog 0: starting a worker",
    count: 1,
  });
});

test("other Events (warnings) keep their reason and message", () => {
  const d = parseDecision({
    type: "Warning",
    reason: "RedisUnreachable",
    message: "connect ECONNREFUSED",
    count: 3,
  });
  assert.equal(d.reason, "RedisUnreachable");
  assert.equal(d.from, null);
  assert.equal(d.backlog, null);
  assert.equal(d.count, 3);
});

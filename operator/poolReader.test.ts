// Scale decisions as the Pools page shows them: from status.recentDecisions and the Degraded condition.
import assert from "node:assert/strict";
import { test } from "node:test";
import { poolCap, poolDecisions } from "./poolReader.ts";
import { withDecision } from "./controllers/status.ts";
import { RECENT_DECISIONS } from "./apis/v1alpha1/schema.ts";

const decision = (i: number) => ({
  replicas: i + 1,
  from: i,
  reason: "DirectScaleUp" as const,
  message: `backlog ${i * 10}`,
  at: `2026-11-23T10:00:${String(i).padStart(2, "0")}Z`,
  backlog: i * 10,
});

test("recent decisions give from, to, reason and the backlog; a Degraded condition is a warning", () => {
  const d = poolDecisions({
    recentDecisions: [decision(1)],
    conditions: [
      {
        type: "Degraded",
        status: "True",
        reason: "RedisUnreachable",
        message: "connect ECONNREFUSED",
        lastTransitionTime: "2026-11-23T10:00:05Z",
      },
    ],
  } as never);
  assert.deepEqual(d, [
    {
      at: "2026-11-23T10:00:01Z",
      type: "Normal",
      reason: "DirectScaleUp",
      from: 1,
      to: 2,
      backlog: 10,
      message: "backlog 10",
      count: 1,
    },
    {
      at: "2026-11-23T10:00:05Z",
      type: "Warning",
      reason: "RedisUnreachable",
      from: null,
      to: null,
      backlog: null,
      message: "connect ECONNREFUSED",
      count: 1,
    },
  ]);
  assert.deepEqual(poolDecisions(undefined), []);
});

test("the history keeps each decision once and only the last RECENT_DECISIONS", () => {
  let history = withDecision([], decision(0));
  assert.equal(withDecision(history, decision(0)), history, "the same decision again: unchanged");
  for (let i = 1; i < RECENT_DECISIONS + 3; i++) history = withDecision(history, decision(i));
  assert.equal(history.length, RECENT_DECISIONS);
  assert.equal(history.at(-1)?.from, RECENT_DECISIONS + 2);
  assert.equal(withDecision(history, undefined), history);
});

test("the replica cap in force, what binds it and why (the Pools page's 'Why it scaled')", () => {
  assert.equal(poolCap(undefined), null);
  assert.equal(poolCap({ control: { paused: false } }), null);
  assert.deepEqual(
    poolCap({
      control: { paused: false, replicaCap: 7, capBy: "resources", capReason: "resource openai …" },
    }),
    { replicas: 7, by: "resources", reason: "resource openai …" },
  );
});

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import {
  EVENT_REASONS,
  PROBLEM_REASONS,
  READY_REASONS,
  Reason,
  SCALE_REASONS,
  SCALING_ACTIVE_REASONS,
} from "./reasons.ts";

const doc = readFileSync(new URL("../../docs/workerpool.md", import.meta.url), "utf8");

/** The reasons docs/workerpool.md lists for a condition (`- type: X  # True: A | B; False: C`). */
function documented(type: string): string[] {
  const line = doc.split("\n").find((l) => l.includes(`- type: ${type} `));
  assert.ok(line, `docs/workerpool.md lists condition ${type}`);
  return [...line.split("#")[1]!.matchAll(/[A-Z][A-Za-z]+/g)]
    .map((m) => m[0])
    .filter((w) => !["True", "False", "Unknown", "Degraded"].includes(w));
}

describe("reasons", () => {
  it("every reason is its own name, declared once", () => {
    for (const [k, v] of Object.entries(Reason)) assert.equal(k, v);
    for (const group of [
      PROBLEM_REASONS,
      READY_REASONS,
      SCALING_ACTIVE_REASONS,
      SCALE_REASONS,
      EVENT_REASONS,
    ])
      assert.equal(new Set(group).size, group.length);
  });

  it("the user documentation lists exactly the condition reasons the operator writes", () => {
    assert.deepEqual(documented("Degraded").sort(), [...PROBLEM_REASONS].sort());
    assert.deepEqual(documented("Ready").sort(), [...READY_REASONS].sort());
    assert.deepEqual(documented("ScalingActive").sort(), [...SCALING_ACTIVE_REASONS].sort());
  });
});

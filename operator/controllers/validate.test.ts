import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { withDefaults } from "../apis/v1alpha1/types.ts";
import { validateSpec } from "./validate.ts";

const spec = (rollout: unknown) =>
  withDefaults({
    queue: "q",
    redis: { url: "redis://r:6379" },
    handler: { module: "/h.js" },
    rollout,
  } as Parameters<typeof withDefaults>[0]);

describe("spec.rollout", () => {
  test("a valid canary gets its defaults and no problem", () => {
    const s = spec({ canary: { steps: [{ weight: 10 }, { weight: 50, holdSeconds: 60 }] } });
    assert.deepEqual(validateSpec(s), []);
    assert.equal(s.rollout!.canary.steps[0]!.holdSeconds, 300);
    assert.deepEqual(s.rollout!.canary.analysis, {
      minJobs: 100,
      maxFailureRatio: 2,
      maxFailureRate: 0.05,
      maxP95Ratio: 2,
    });
  });

  test("each bad value is named by its field", () => {
    assert.deepEqual(validateSpec(spec({ canary: { steps: [] } })), [
      "spec.rollout.canary.steps: expected at least one step {weight, holdSeconds}",
    ]);
    assert.deepEqual(validateSpec(spec({ canary: { steps: [{ weight: 50 }, { weight: 20 }] } })), [
      "spec.rollout.canary.steps[1].weight: weights must rise step by step (20 after 50)",
    ]);
    assert.deepEqual(
      validateSpec(
        spec({
          canary: {
            steps: [{ weight: 100, holdSeconds: -1 }],
            analysis: { minJobs: 0, maxFailureRatio: 0.5, maxFailureRate: 2, maxP95Ratio: "x" },
          },
        }),
      ),
      [
        "spec.rollout.canary.steps[0].weight: expected a whole percent from 1 to 99, got 100",
        "spec.rollout.canary.steps[0].holdSeconds: expected whole seconds from 0 to 86400, got -1",
        "spec.rollout.canary.analysis.minJobs: expected a whole number from 1 to 1000000, got 0",
        "spec.rollout.canary.analysis.maxFailureRatio: expected a number from 1 to 1000, got 0.5",
        "spec.rollout.canary.analysis.maxFailureRate: expected a number from 0 to 1, got 2",
        'spec.rollout.canary.analysis.maxP95Ratio: expected a number from 1 to 1000, got "x"',
      ],
    );
  });
});

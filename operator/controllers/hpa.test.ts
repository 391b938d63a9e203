// The HPA's replica changes as the decisions the Pools page lists ("Why it scaled").
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { withDefaults } from "../apis/v1alpha1/types.ts";
import { hpaScaleDecision } from "./hpa.ts";
import type { HPA } from "./objects.ts";

describe("the HPA's scale changes as decisions", () => {
  const spec = withDefaults({
    queue: "q",
    redis: { url: "redis://r" },
    handler: { module: "/m.js" },
    scaling: { maxReplicas: 6, targetBacklogPerReplica: 100 },
  });
  const hpa = (averageValue?: string, limited?: string): HPA => ({
    metadata: { name: "p" },
    status: {
      ...(averageValue ? { currentMetrics: [{ external: { current: { averageValue } } }] } : {}),
      conditions: limited
        ? [{ type: "ScalingLimited", status: "True", reason: "TooManyReplicas", message: limited }]
        : [],
    },
  });

  it("up: the backlog per replica, above the target, and the limit that held it", () => {
    const d = hpaScaleDecision(
      hpa("1", "the desired replica count is more than the maximum replica count"),
      spec,
      1,
      6,
      750,
    );
    assert.equal(d.reason, "HPAScaleUp");
    assert.equal(
      d.message,
      "HPA: backlog/replica above target: 750 > 100 → 6 replica(s) (backlog 750); TooManyReplicas: the desired replica count is more than the maximum replica count",
    );
  });

  it("down: the backlog over the replicas it had; without a reading, the HPA's metric when it agrees", () => {
    assert.equal(
      hpaScaleDecision(hpa("12500m"), spec, 6, 1, undefined).message,
      "HPA: backlog/replica below target: 12.5 < 100 → 1 replica(s)",
    );
    // (the HPA's status written before the scale: its metric is the sync before, and says nothing of this change)
    assert.equal(
      hpaScaleDecision(hpa("250"), spec, 6, 1, undefined).message,
      "HPA: backlog/replica below target 100 → 1 replica(s)",
    );
    const d = hpaScaleDecision(undefined, spec, 6, 2, 90);
    assert.equal(d.reason, "HPAScaleDown");
    assert.equal(d.message, "HPA: backlog/replica below target: 15 < 100 → 2 replica(s) (backlog 90)");
    assert.equal(
      hpaScaleDecision(undefined, spec, 2, 3, undefined).message,
      "HPA: backlog/replica above target 100 → 3 replica(s)",
    );
  });
});

// Scaling decisions the operator makes itself: 0 ↔ 1, direct mode, idle-first deletion costs.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { withDefaults } from "../apis/v1alpha1/types.ts";
import { decideScale, deletionCosts, newPoolScaler, BUSY_COST, IDLE_COST } from "./scaling.ts";
import type { QueueCounts } from "../../queue/index.ts";
import { counts } from "./fixtures.ts";

describe("scaling decisions", () => {
  const base = { queue: "q", redis: { url: "redis://r" }, handler: { module: "/m.js" } };

  it("activates from zero above the activation threshold only", () => {
    const spec = withDefaults({ ...base, scaling: { activationBacklog: 5 } });
    const s = newPoolScaler(0);
    assert.equal(
      decideScale(s, { now: 1000, spec, current: 0, statusReplicas: 0, counts: counts(5) }),
      undefined,
    );
    const d = decideScale(s, { now: 2000, spec, current: 0, statusReplicas: 0, counts: counts(6) });
    assert.equal(d?.replicas, 1);
    assert.equal(d?.reason, "Activated");
  });

  it("a paused queue drains to its running jobs only on counts read after the pause", () => {
    const spec = withDefaults({ ...base, concurrency: 2, scaling: { mode: "direct" } });
    const s = newPoolScaler(0);
    const input = { now: 1000, spec, current: 5, statusReplicas: 5, queuePaused: true };
    // Counts from before the pause may miss jobs claimed since: no change yet (and never up).
    assert.equal(decideScale(s, { ...input, counts: counts(10, 0) }), undefined);
    const d = decideScale(s, { ...input, counts: counts(3, 3), pauseSeenByPoll: true });
    assert.deepEqual([d?.replicas, d?.reason], [2, "QueuePaused"]);
  });

  it("scales to zero only after the cooldown with no backlog and nothing in flight", () => {
    const spec = withDefaults({ ...base, scaling: { cooldownSeconds: 30 } });
    const s = newPoolScaler(0);
    assert.equal(
      decideScale(s, { now: 10_000, spec, current: 3, statusReplicas: 3, counts: counts(1, 1) }),
      undefined,
      "a running job keeps the pool",
    );
    assert.equal(
      decideScale(s, { now: 20_000, spec, current: 3, statusReplicas: 3, counts: counts(0) }),
      undefined,
    );
    assert.equal(
      decideScale(s, { now: 39_999, spec, current: 3, statusReplicas: 3, counts: counts(0) }),
      undefined,
    );
    const d = decideScale(s, { now: 40_000, spec, current: 3, statusReplicas: 3, counts: counts(0) });
    assert.equal(d?.replicas, 0);
    assert.equal(d?.reason, "CooledDown");
    const withMin = withDefaults({ ...base, scaling: { cooldownSeconds: 0, minReplicas: 1 } });
    assert.equal(
      decideScale(newPoolScaler(0), {
        now: 99_999,
        spec: withMin,
        current: 2,
        statusReplicas: 2,
        counts: counts(0),
      }),
      undefined,
      "minReplicas > 0 never goes to zero",
    );
  });

  it("never decides without a backlog reading, when paused, and pins spec.replicas", () => {
    const s = newPoolScaler(0);
    assert.equal(
      decideScale(s, {
        now: 1e9,
        spec: withDefaults({ ...base, scaling: { cooldownSeconds: 0 } }),
        current: 2,
        statusReplicas: 2,
        counts: undefined,
      }),
      undefined,
    );
    assert.equal(
      decideScale(s, {
        now: 1e9,
        spec: withDefaults({ ...base, scaling: { paused: true } }),
        current: 0,
        statusReplicas: 0,
        counts: counts(100),
      }),
      undefined,
    );
    const pinned = decideScale(s, {
      now: 1e9,
      spec: withDefaults({ ...base, replicas: 4 }),
      current: 1,
      statusReplicas: 1,
      counts: undefined,
    });
    assert.equal(pinned?.replicas, 4);
    assert.equal(pinned?.reason, "ManualReplicas");
    const below = decideScale(newPoolScaler(0), {
      now: 1,
      spec: withDefaults({ ...base, scaling: { minReplicas: 2 } }),
      current: 0,
      statusReplicas: 0,
      counts: counts(0),
    });
    assert.equal(below?.replicas, 2);
  });

  it("direct mode runs the HPA algorithm between 1 and max", () => {
    const spec = withDefaults({
      ...base,
      scaling: { mode: "direct", maxReplicas: 8, targetBacklogPerReplica: 10 },
    });
    const s = newPoolScaler(0);
    const d = decideScale(s, { now: 1000, spec, current: 1, statusReplicas: 1, counts: counts(500) });
    assert.equal(d?.replicas, 5);
    assert.equal(d?.reason, "DirectScaleUp");
    const hpaMode = withDefaults({ ...base, scaling: { maxReplicas: 8 } });
    assert.equal(
      decideScale(newPoolScaler(0), {
        now: 1000,
        spec: hpaMode,
        current: 1,
        statusReplicas: 1,
        counts: counts(500),
      }),
      undefined,
      "in hpa mode the HPA does 1..N",
    );
  });

  it("pod-deletion-cost: idle pods cheapest, busy pods expensive, unknown untouched", () => {
    const now = 1_000_000;
    const costs = deletionCosts(
      ["a", "b", "c", "d"],
      [
        { id: "a", pod: "a", slots: 4, busy: 0, draining: false, seen: now - 1000 },
        { id: "b", pod: "b", slots: 4, busy: 2, draining: false, seen: now - 1000 },
        { id: "c", pod: "c", slots: 4, busy: 0, draining: false, seen: now - 120_000 },
      ],
      now,
    );
    assert.equal(costs.get("a"), IDLE_COST);
    assert.equal(costs.get("b"), BUSY_COST);
    assert.equal(costs.get("c"), undefined, "a stale report says nothing");
    assert.equal(costs.get("d"), undefined);
    assert.ok(
      Number(IDLE_COST) < 0 && Number(BUSY_COST) > 0,
      "idle below an unannotated pod (0), busy above",
    );
  });
});

// Scaling decisions the operator makes itself: 0 ↔ 1, direct mode, idle-first deletion costs.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { withDefaults } from "../apis/v1alpha1/types.ts";
import { decideScale, hpaMinReplicasFloor, medianPodStartMs, newPoolScaler } from "./decide.ts";
import { busyPods, deletionCosts, podsToCordon, BUSY_COST, IDLE_COST } from "./pods.ts";
import { desiredHPA } from "../controllers/hpa.ts";
import type { QueueCounts } from "../../queue/index.ts";
import { counts, pool } from "../controllers/fixtures.ts";

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

  it("a batch pool is sized in batches: a replica holds concurrency × batch.size jobs", () => {
    const spec = withDefaults({ ...base, concurrency: 2, batch: { size: 10 }, scaling: { mode: "direct" } });
    const s = newPoolScaler(0);
    const input = {
      now: 1000,
      spec,
      current: 5,
      statusReplicas: 5,
      queuePaused: true,
      pauseSeenByPoll: true,
    };
    // 30 running jobs: 2 replicas of 2 calls × 10 jobs (without batches, 15 replicas of 2 jobs)
    const d = decideScale(s, { ...input, counts: counts(30, 30) });
    assert.deepEqual([d?.replicas, d?.reason], [2, "QueuePaused"]);
    assert.match(d!.message, /concurrency 2 × batch 10/);
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

  it("a queue-control cap passed as maxReplicas bounds the decision; the spec stays as written", () => {
    const spec = withDefaults({
      ...base,
      scaling: { mode: "direct", maxReplicas: 8, targetBacklogPerReplica: 10 },
    });
    const d = decideScale(newPoolScaler(0), {
      now: 1000,
      spec,
      current: 1,
      statusReplicas: 1,
      counts: counts(5000),
      maxReplicas: 3,
    });
    assert.deepEqual([d?.replicas, d?.reason], [3, "DirectScaleUp"]);
    assert.equal(spec.scaling.maxReplicas, 8);
    assert.equal(
      desiredHPA(pool({ ...base, scaling: { mode: "direct", maxReplicas: 8 } }), spec, 0, 3).spec
        ?.maxReplicas,
      3,
    );
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

  describe("scale-in held at the pods running jobs", () => {
    // 30 s drain, jobs up to 120 s: a deleted busy pod may hand a job back.
    const spec = withDefaults({
      ...base,
      maxJobSeconds: 120,
      drainSeconds: 30,
      scaling: {
        mode: "direct",
        maxReplicas: 8,
        targetBacklogPerReplica: 10,
        behavior: { scaleDown: { stabilizationWindowSeconds: 0 } },
      },
    });
    const at = (now: number, current: number, busy: number | undefined, backlog = 3) => ({
      now,
      spec,
      current,
      statusReplicas: current,
      counts: counts(backlog, backlog),
      busyPods: busy,
    });

    it("goes no lower than the busy pods, then steps down as each goes idle", () => {
      const s = newPoolScaler(0);
      // 3 jobs running on 3 of 8 pods: the backlog wants 1.
      const d = decideScale(s, at(1000, 8, 3));
      assert.deepEqual([d?.from, d?.replicas, d?.reason], [8, 3, "ScaleInHeld"]);
      assert.match(
        d!.message,
        /^scale-in to 1 held at 3: 3 pod\(s\) running jobs that may outlast drainSeconds 30/,
      );
      assert.match(
        d!.message,
        /\(DirectScaleDown: backlog 3 at target 10\/replica wants 1;/,
        "what wanted it",
      );
      assert.deepEqual(s.scaleInHold && [s.scaleInHold.replicas, s.scaleInHold.wanted], [3, 1]);
      // At the floor: no change while all 3 run.
      assert.equal(decideScale(s, at(2000, 3, 3)), undefined);
      assert.equal(s.scaleInHold?.replicas, 3, "still held (status says so)");
      // One finishes: one step down (the idle pod is the cheapest to delete).
      const step = decideScale(s, at(3000, 3, 2, 2));
      assert.deepEqual([step?.replicas, step?.reason], [2, "ScaleInHeld"]);
      // The last busy pods go idle: the scale-in the backlog wanted, and no hold left.
      const last = decideScale(s, at(4000, 2, 0, 0));
      assert.deepEqual([last?.replicas, last?.reason], [1, "DirectScaleDown"]);
      assert.equal(s.scaleInHold, undefined);
    });

    it("holds nothing when the drain outlasts every job, the reports are unread, or it scales up", () => {
      const drainAll = withDefaults({ ...spec, drainSeconds: undefined });
      assert.equal(drainAll.drainSeconds, undefined, "drainSeconds follows maxJobSeconds");
      const d = decideScale(newPoolScaler(0), { ...at(1000, 8, 3), spec: drainAll });
      assert.deepEqual([d?.replicas, d?.reason], [1, "DirectScaleDown"], "a drained pod finishes its jobs");
      const unread = decideScale(newPoolScaler(0), at(1000, 8, undefined));
      assert.deepEqual([unread?.replicas, unread?.reason], [1, "DirectScaleDown"]);
      const up = decideScale(newPoolScaler(0), at(1000, 2, 2, 50));
      assert.deepEqual([up?.replicas, up?.reason], [5, "DirectScaleUp"]);
    });

    it("holds at most maxJobSeconds − drainSeconds: by then the jobs it held for have ended", () => {
      const s = newPoolScaler(0);
      assert.equal(decideScale(s, at(1000, 3, 3)), undefined, "held from 1 s");
      assert.equal(decideScale(s, at(1000 + 89_999, 3, 3)), undefined, "held for 90 s");
      const d = decideScale(s, at(1000 + 90_000, 3, 3));
      assert.deepEqual([d?.replicas, d?.reason], [1, "DirectScaleDown"], "a steady load on every pod");
      assert.equal(s.scaleInHold?.replicas, 1, "not shown as held");
    });

    it("wanting fewer pods during a hold starts its time limit again: the pods cordoned then may have just claimed a job", () => {
      const s = newPoolScaler(0);
      // Held from 1 s: the backlog (15) wants 2 of 4 busy pods.
      assert.equal(decideScale(s, at(1000, 4, 4, 15)), undefined);
      assert.deepEqual(s.scaleInHold && [s.scaleInHold.wanted, s.scaleInHold.since], [2, 1000]);
      // At 60 s it wants 1: a pod kept until now is cordoned now; its job may run 120 s from here.
      assert.equal(decideScale(s, at(60_000, 4, 4, 3)), undefined);
      assert.equal(decideScale(s, at(91_000, 4, 4, 3)), undefined, "90 s after the first hold: still held");
      assert.equal(decideScale(s, at(60_000 + 89_999, 4, 4, 3)), undefined, "held for 90 s from the change");
      // Wanting more again does not start it again (a backlog that comes and goes would hold forever).
      assert.equal(decideScale(s, at(140_000, 4, 4, 15)), undefined);
      const d = decideScale(s, at(60_000 + 90_000, 4, 4, 15));
      assert.deepEqual([d?.replicas, d?.reason], [2, "DirectScaleDown"]);
    });

    it("a paused queue drains to its busy pods; spec.replicas and the cooldown to zero are not held", () => {
      const paused = decideScale(newPoolScaler(0), {
        ...at(1000, 8, 4),
        counts: counts(3, 3),
        queuePaused: true,
        pauseSeenByPoll: true,
      });
      assert.deepEqual([paused?.replicas, paused?.reason], [4, "ScaleInHeld"]);
      assert.match(paused!.message, /\(QueuePaused: queue paused: 3 running job/);
      const pinned = decideScale(newPoolScaler(0), { ...at(1000, 8, 4), spec: { ...spec, replicas: 2 } });
      assert.deepEqual([pinned?.replicas, pinned?.reason], [2, "ManualReplicas"]);
      const cool = withDefaults({ ...spec, scaling: { ...spec.scaling, cooldownSeconds: 0 } });
      const zero = decideScale(newPoolScaler(0), { ...at(1000, 3, 1, 0), spec: cool });
      assert.deepEqual([zero?.replicas, zero?.reason], [0, "CooledDown"], "nothing in flight: Redis says so");
    });

    it("hpa mode: the HPA's minReplicas is raised to the busy pods while their floor binds", () => {
      const hpaSpec = withDefaults({ ...spec, scaling: { ...spec.scaling, mode: "hpa" } });
      const s = newPoolScaler(0);
      const floor = (current: number, backlog: number, busy: number | undefined, now = 1000) =>
        hpaMinReplicasFloor(s, { now, spec: hpaSpec, current, backlog, busyPods: busy });
      assert.equal(floor(5, 3, 3), 3, "the HPA would go to 1 with 3 pods busy");
      assert.equal(s.scaleInHold?.replicas, 3, "held (status says so)");
      assert.equal(
        floor(5, 40, 3),
        3,
        "the HPA wants 4 ≥ 3 busy: the floor is there before the backlog drops",
      );
      assert.equal(s.scaleInHold, undefined, "nothing held");
      assert.equal(floor(5, 3, 1), undefined, "1 busy: the HPA's own minimum");
      assert.equal(floor(5, 3, 0), undefined, "all idle");
      assert.equal(floor(5, 3, undefined), undefined);
      assert.equal(floor(2, 3, 3), 2, "never above the replicas there are");
      // The hold's time limit (maxJobSeconds 120 − drainSeconds 30) applies here too.
      const t = newPoolScaler(0);
      const heldAt = (now: number) =>
        hpaMinReplicasFloor(t, { now, spec: hpaSpec, current: 5, backlog: 3, busyPods: 3 });
      assert.equal(heldAt(1000), 3);
      assert.equal(heldAt(1000 + 90_000), undefined, "held 90 s: the HPA may scale in");
      const drainAll = withDefaults({ ...hpaSpec, drainSeconds: undefined });
      assert.equal(
        hpaMinReplicasFloor(newPoolScaler(0), {
          now: 0,
          spec: drainAll,
          current: 5,
          backlog: 3,
          busyPods: 3,
        }),
        undefined,
        "a drained pod finishes its jobs",
      );
      const hpa = desiredHPA(pool({ ...hpaSpec }), hpaSpec, 3);
      assert.equal(hpa.spec?.minReplicas, 3);
      // decideScale in hpa mode (no change of its own) leaves the HPA's hold in place
      floor(5, 3, 3, 2000);
      decideScale(s, { ...at(3000, 5, 3), spec: hpaSpec });
      assert.equal((s.scaleInHold as { replicas: number } | undefined)?.replicas, 3);
    });

    const now = 1_000_000;
    /** A worker report of `pod`, `age` ms old. */
    const r = (pod: string, busy: number, age = 1000) => ({
      id: `${pod}-w`,
      pod,
      slots: 4,
      busy,
      draining: false,
      seen: now - age,
    });

    it("busy pods: fresh reports of busy workers among the pool's pods", () => {
      assert.equal(
        busyPods(["a", "b", "c", "d"], [r("a", 2), r("b", 0), r("c", 1, 120_000), r("gone", 3)], now),
        1,
      );
    });

    it("cordons every pod but the busiest the scale-in wants, and keeps the ones it kept", () => {
      const s = newPoolScaler(0);
      // 3 long jobs on 3 of 8 pods, 1 replica wanted: held at 3, and 2 of the busy pods cordoned.
      decideScale(s, at(1000, 8, 3));
      const pods = ["p1", "p2", "p3", "p4"];
      const reports = [r("p1", 1), r("p2", 2), r("p3", 1), r("p4", 0)];
      assert.deepEqual(podsToCordon(s.scaleInHold, pods, reports, now), ["p1", "p3", "p4"]);
      // The pod kept before stays kept though a (lagging) report says another is busier.
      assert.deepEqual(
        podsToCordon(s.scaleInHold, ["p1", "p2", "p3"], [r("p1", 1), r("p2", 4), r("p3", 1)], now, [
          "p1",
          "p2",
        ]),
        ["p1", "p2"],
      );
      // A tie keeps the pod kept before, wherever its name sorts.
      const tie = [r("p1", 1), r("p2", 1), r("p3", 1)];
      assert.deepEqual(podsToCordon(s.scaleInHold, ["p1", "p2", "p3"], tie, now, ["p1", "p2"]), ["p1", "p2"]);
      // A stale report counts as idle.
      assert.deepEqual(podsToCordon(s.scaleInHold, ["p1", "p2"], [r("p1", 5, 120_000), r("p2", 1)], now), [
        "p1",
      ]);
      // No hold, or a hold that ran out of time: no cordon.
      assert.deepEqual(podsToCordon(undefined, pods, reports, now), []);
      assert.deepEqual(podsToCordon({ ...s.scaleInHold!, message: "" }, pods, reports, now), []);
    });
  });
});

describe("pod start-up (latency mode's budget)", () => {
  const pod = (created: string, ready?: string, status = "True") => ({
    metadata: { name: "p", creationTimestamp: created },
    status: {
      conditions: ready ? [{ type: "Ready", status, lastTransitionTime: ready }] : [],
    },
  });
  it("is the median creation → Ready of the pods that are Ready", () => {
    assert.equal(
      medianPodStartMs([
        pod("2026-11-26T10:00:00Z", "2026-11-26T10:00:02Z"),
        pod("2026-11-26T10:00:00Z", "2026-11-26T10:00:09Z"),
        pod("2026-11-26T10:00:00Z", "2026-11-26T10:00:03Z"),
        pod("2026-11-26T10:00:00Z"), // starting: not counted
        pod("2026-11-26T10:00:00Z", "2026-11-26T10:00:01Z", "False"), // not ready
      ]),
      3000,
    );
  });
  it("is unknown without a Ready pod", () => {
    assert.equal(medianPodStartMs([pod("2026-11-26T10:00:00Z")]), undefined);
    assert.equal(medianPodStartMs([]), undefined);
  });
});

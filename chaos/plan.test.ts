// The seeded plan of a chaos run (chaos/plan.ts): the same seed gives the same schedule and jobs.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import {
  FAILOVER_FAULT_KINDS,
  faultSchedule,
  FAULT_KINDS,
  flowPlans,
  jobGroup,
  jobPlans,
  SEQUENCE_GROUP,
  withUpgrade,
} from "./plan.ts";

describe("chaos runner logic", () => {
  test("the same seed gives the same fault schedule and the same jobs; another seed does not", () => {
    const o = { windowMs: 600_000, meanGapMs: 3000, leaseMs: 2000 };
    assert.deepEqual(faultSchedule(1234, o), faultSchedule(1234, o));
    assert.notDeepEqual(faultSchedule(1234, o), faultSchedule(1235, o));
    assert.deepEqual(jobPlans(99, 50, 3), jobPlans(99, 50, 3));
    const s = faultSchedule(1234, { windowMs: 30_000, meanGapMs: 2000, leaseMs: 2000 });
    // even a short window injects every kind: the first round is one of each
    assert.deepEqual(new Set(s.slice(0, FAULT_KINDS.length).map((f) => f.kind)), new Set(FAULT_KINDS));
    // on Redis that fails over, the same schedule with failover in place of redis_restart
    const f = faultSchedule(1234, {
      windowMs: 30_000,
      meanGapMs: 2000,
      leaseMs: 2000,
      kinds: FAILOVER_FAULT_KINDS,
    });
    assert.deepEqual(
      f.map((x) => [x.at, x.kind === "failover" ? "redis_restart" : x.kind]),
      s.map((x) => [x.at, x.kind]),
    );
    for (const f of s.filter((x) => x.kind === "sigstop"))
      assert.ok(f.durationMs > 2000, "a SIGSTOP lasts past the lease");
    // a job carries one level per stage; the recording handler returns `result` as the next stage's data
    const [j] = jobPlans(5, 1, 3);
    const d = j!.data as {
      sleepMs: number;
      result: { sleepMs: number; result: { sleepMs: number; result: unknown } };
    };
    assert.equal(typeof d.result.result.sleepMs, "number");
    assert.deepEqual(d.result.result.result, { done: 0 });
  });

  test("an upgrade run: every kind plus upgrade in the first round, upgrades alternate previous → this, this → previous", () => {
    const o = { windowMs: 120_000, meanGapMs: 1000, leaseMs: 2000 };
    const kinds = withUpgrade(FAULT_KINDS);
    const s = faultSchedule(77, { ...o, kinds });
    assert.deepEqual(faultSchedule(77, { ...o, kinds }), s);
    assert.deepEqual(new Set(s.slice(0, kinds.length).map((f) => f.kind)), new Set(kinds));
    const upgrades = s.filter((f) => f.kind === "upgrade");
    assert.ok(upgrades.length >= 4, `${upgrades.length} upgrades in 120 faults' time`);
    assert.deepEqual(
      upgrades.map((f) => f.to),
      upgrades.map((_, i) => (i % 2 === 0 ? "this" : "previous")),
    );
    // drawn by weight among the others, not instead of them
    for (const k of FAULT_KINDS) assert.ok(s.filter((f) => f.kind === k).length >= 2, k);
    assert.ok(
      s.every((f) => (f.kind === "upgrade") === (f.to !== undefined)),
      "only upgrade faults carry a direction",
    );
    // a run without --upgrade draws none
    assert.ok(faultSchedule(77, o).every((f) => f.kind !== "upgrade"));
  });

  test("a grouped run: every 20th job in the sequence, odd jobs without a group, the rest over g1..g<N−1>", () => {
    const groups = Array.from({ length: 40 }, (_, i) => jobGroup(i, 4));
    assert.equal(groups[0], SEQUENCE_GROUP);
    assert.equal(groups[20], SEQUENCE_GROUP);
    assert.equal(groups[1], undefined);
    assert.deepEqual(new Set(groups.filter((g) => g && g !== SEQUENCE_GROUP)), new Set(["g1", "g2", "g3"]));
    assert.equal(jobGroup(2, 0), undefined, "no groups: none");
  });
  test("flows: a root, 2–4 middles waiting for it, a sink waiting for them all, the same for a seed", () => {
    const flows = flowPlans(7, 6, 3);
    assert.deepEqual(flows, flowPlans(7, 6, 3));
    assert.notDeepEqual(flows, flowPlans(8, 6, 3));
    assert.deepEqual(
      flows.map((f) => f.length),
      [4, 5, 6, 4, 5, 6],
    );
    for (const f of flows) {
      const mids = f.slice(1, -1).map((j) => j.key);
      assert.deepEqual(f[0]!.parents, []);
      for (const j of f.slice(1, -1)) assert.deepEqual(j.parents, ["root"]);
      assert.deepEqual(f.at(-1)!, { ...f.at(-1)!, key: "sink", parents: mids });
      // each job's data has a level per stage, as a plain job's
      for (const j of f)
        assert.equal(typeof (j.data.result as { result: { sleepMs: number } }).result.sleepMs, "number");
    }
  });
});

import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { emptyCounters, type VersionCounters } from "../../queue/versions.ts";
import { judge, type Analysis } from "./judge.ts";

const analysis: Analysis = { minJobs: 100, maxFailureRatio: 2, maxFailureRate: 0.05, maxP95Ratio: 2 };

/** `completed` attempts all in run time bucket `bucket`, and `failed` handler failures. */
function counters(completed: number, failed: number, bucket = 6): VersionCounters {
  const c = emptyCounters();
  c.completed = completed;
  c.failed = failed;
  c.buckets[bucket] = completed;
  return c;
}

const at = (stable: VersionCounters, canary: VersionCounters, elapsedMs = 60_000, more = {}) =>
  judge({ stable, canary, analysis, elapsedMs, holdMs: 30_000, ...more });

describe("canary judgement", () => {
  test("minJobs not reached on either version: wait", () => {
    const j = at(counters(500, 0), counters(99, 0));
    assert.equal(j.verdict, "wait");
    assert.equal(j.reason, "RolloutNotEnoughJobs");
    assert.equal(at(counters(99, 0), counters(500, 0)).verdict, "wait");
    // a bad canary below minJobs is not judged yet
    assert.equal(at(counters(500, 0), counters(50, 40)).verdict, "wait");
  });

  test("absolute failure rate above maxFailureRate: roll back, even while the step holds", () => {
    const j = at(counters(900, 90), counters(140, 60), 1_000);
    assert.equal(j.verdict, "rollback");
    assert.equal(j.reason, "RolloutFailureRate");
    assert.equal(j.canary.attempts, 200);
    assert.equal(j.canary.failureRate, 0.3);
    assert.match(
      j.message,
      /canary failure rate 30\.0% above maxFailureRate 5\.0%: canary 60\/200 failed \(30\.0%\)/,
    );
  });

  test("failure ratio to stable above maxFailureRatio: roll back", () => {
    // 4% on the canary (under the 5% ceiling) against 1% on stable
    const j = at(counters(990, 10), counters(192, 8));
    assert.equal(j.verdict, "rollback");
    assert.equal(j.reason, "RolloutFailureRatio");
    // 1.5% against 1%: within the ratio
    assert.equal(at(counters(990, 10), counters(197, 3)).verdict, "promote");
    // one failure against none is not an infinite ratio
    assert.equal(at(counters(1000, 0), counters(199, 1)).verdict, "promote");
  });

  test("p95 ratio above maxP95Ratio: roll back; tiny durations are compared from a floor", () => {
    // bucket 6 = [32, 64) ms, bucket 8 = [128, 256) ms
    const j = at(counters(1000, 0, 6), counters(200, 0, 8));
    assert.equal(j.verdict, "rollback");
    assert.equal(j.reason, "RolloutP95Ratio");
    assert.equal(at(counters(1000, 0, 6), counters(200, 0, 7)).verdict, "promote");
    // under 1 ms against 2-4 ms: noise, not a slower version
    assert.equal(at(counters(1000, 0, 0), counters(200, 0, 2)).verdict, "promote");
  });

  test("a good canary waits out the hold, then promotes", () => {
    const holding = at(counters(1000, 1), counters(200, 0), 10_000);
    assert.equal(holding.verdict, "wait");
    assert.equal(holding.reason, "RolloutHolding");
    const passed = at(counters(1000, 1), counters(200, 0), 30_000);
    assert.equal(passed.verdict, "promote");
    assert.equal(passed.reason, "RolloutStepPassed");
  });

  test("with the stable version idle (one replica, on the canary), the absolute ceiling alone judges", () => {
    assert.equal(at(emptyCounters(), counters(200, 0), 60_000, { stableIdle: true }).verdict, "promote");
    assert.equal(at(emptyCounters(), counters(180, 20), 60_000, { stableIdle: true }).verdict, "rollback");
  });
});

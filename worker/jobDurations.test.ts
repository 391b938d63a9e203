// Unit tier: the median of recent job durations a worker reports.
import assert from "node:assert/strict";
import { test } from "node:test";
import { JobDurations } from "./jobDurations.ts";

test("the median of the last completions, reported when it changes", () => {
  const reported: number[] = [];
  const d = new JobDurations((ms) => reported.push(ms));
  assert.equal(d.p50Ms, 0);
  d.add(100);
  assert.equal(d.p50Ms, 100);
  d.add(300);
  d.add(200);
  assert.equal(d.p50Ms, 200);
  for (let i = 0; i < 200; i++) d.add(50); // the window moves on: old durations drop out
  assert.equal(d.p50Ms, 50);
  assert.deepEqual(reported.slice(0, 2), [100, 200]);
  assert.equal(reported.at(-1), 50);
});

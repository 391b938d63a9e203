import assert from "node:assert/strict";
import { test } from "node:test";
import { arrivalBatches, buildWorkload, PROFILES, WORKLOADS } from "./traces.ts";

test("every workload of every profile is the same trace for the same seed, in time order, inside its window", () => {
  for (const profile of PROFILES)
    for (const name of WORKLOADS) {
      const a = buildWorkload(name, profile, 7);
      assert.deepEqual(buildWorkload(name, profile, 7), a, `${profile}/${name} repeats`);
      assert.ok(a.arrivals.length > 0);
      for (let i = 1; i < a.arrivals.length; i++) assert.ok(a.arrivals[i]!.at >= a.arrivals[i - 1]!.at);
      assert.ok(a.arrivals.at(-1)!.at < a.windowMs, `${profile}/${name}: arrivals end inside the window`);
    }
});

test("the full profile is the issue's: 10,000 after idle, spikes every 2 min, 30–60 s jobs, a paused backlog", () => {
  const burst = buildWorkload("burst", "full");
  assert.equal(burst.arrivals.length, 10_000);
  assert.ok(burst.arrivals.every((a) => a.at === 0));
  const spikes = buildWorkload("spikes", "full");
  assert.deepEqual([...new Set(spikes.arrivals.map((a) => a.at))], [0, 120_000, 240_000, 360_000, 480_000]);
  const long = buildWorkload("long", "full").arrivals.filter((a) => a.sleepMs > 1000);
  assert.ok(long.length > 0 && long.every((a) => a.sleepMs >= 30_000 && a.sleepMs <= 60_000));
  assert.ok(buildWorkload("paused", "full").resumeAtMs! > 0);
});

test("ramp: the arrival rate rises to its peak and falls back (more jobs in the middle half)", () => {
  const w = buildWorkload("ramp", "full", 1);
  const total = 600_000;
  const middle = w.arrivals.filter((a) => a.at > total / 4 && a.at < (3 * total) / 4).length;
  assert.ok(middle > w.arrivals.length * 0.65, `${middle} of ${w.arrivals.length} in the middle half`);
  // 0 → 20/s → 0 over 600 s: about 6,000 jobs
  assert.ok(Math.abs(w.arrivals.length - 6000) < 300, `${w.arrivals.length} jobs`);
  assert.notDeepEqual(buildWorkload("ramp", "full", 2).arrivals, w.arrivals, "another seed, another trace");
});

test("arrivalBatches: one batch per instant, at most maxBatch jobs each, order kept", () => {
  const arrivals = [0, 0, 0, 5, 5, 9].map((at, i) => ({ at, sleepMs: i }));
  const b = arrivalBatches(arrivals, 2);
  assert.deepEqual(
    b.map((x) => x.map((a) => a.sleepMs)),
    [[0, 1], [2], [3, 4], [5]],
  );
});

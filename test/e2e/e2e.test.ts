// The run behind `make demo`, as a test: 2,000 jobs through a two-stage pipeline on a real
// control plane with the real HPA controller and real worker processes for the pods.
import assert from "node:assert/strict";
import { test } from "node:test";
import { assertStages, runScenario } from "./scenario.ts";

test(
  "2,000 jobs through two stages: both pools scale 0 → N → 0, each job runs once per stage, scale-down re-runs nothing",
  { timeout: 30 * 60_000 },
  async () => {
    const jobs = 2000;
    const report = await runScenario({ jobs, jobMs: 100, say: (line) => console.log(line) });
    assertStages(report.stages, jobs);
    assert.deepEqual([...new Set(report.workerExitCodes)], [0], "every worker drained and exited 0");
    for (const [pool, reasons] of Object.entries(report.events)) {
      assert.ok(reasons.includes("ScaledUp"), `${pool} has a scale-up Event: ${reasons}`);
      assert.ok(reasons.includes("ScaledDown"), `${pool} has a scale-down Event: ${reasons}`);
    }
    assert.equal(
      report.records,
      jobs,
      "every job's record reached PostgreSQL, from its enqueue (created_at and data) on",
    );
  },
);

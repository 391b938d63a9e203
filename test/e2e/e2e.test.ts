// The run behind `make demo`, as a test: 2,000 jobs through a two-stage pipeline on a real
// control plane with the real HPA controller and real worker processes for the pods.
import assert from "node:assert/strict";
import { test } from "node:test";
import { runScenario } from "./scenario.ts";

test(
  "2,000 jobs through two stages: both pools scale 0 → N → 0, each job runs once per stage, scale-down re-runs nothing",
  { timeout: 30 * 60_000 },
  async () => {
    const jobs = 2000;
    const report = await runScenario({ jobs, jobMs: 100, say: (line) => console.log(line) });
    for (const s of report.stages) {
      assert.equal(s.completed, jobs, `${s.pool} completed`);
      assert.equal(s.executions, jobs, `${s.pool}: every job ran exactly once at this stage`);
      assert.equal(s.ranTwice, 0);
      assert.equal(s.handedBack, 0, `${s.pool}: nothing handed back by a scale-down`);
      assert.equal(s.stalled, 0, `${s.pool}: no lease expired`);
      assert.ok(s.maxReplicas > 1, `${s.pool} scaled beyond one replica (peak ${s.maxReplicas})`);
    }
    assert.deepEqual([...new Set(report.workerExitCodes)], [0], "every worker drained and exited 0");
    for (const [pool, reasons] of Object.entries(report.events)) {
      assert.ok(reasons.includes("ScaledUp"), `${pool} has a scale-up Event: ${reasons}`);
      assert.ok(reasons.includes("ScaledDown"), `${pool} has a scale-down Event: ${reasons}`);
    }
    assert.equal(report.records, jobs, "every job's record reached PostgreSQL");
  },
);

// The day-one path with real containers (`make demo RUNTIME=containers`): `helm install` of
// charts/conveyor runs the operator from the built conveyor-operator image, and both pools' pods
// run the conveyor-worker image (podman, host network, read-only root). Fewer jobs than the
// process e2e beside this: the point is the images and the chart together, not the load.
import assert from "node:assert/strict";
import { test } from "node:test";
import { containersUnavailable } from "../support/containers.ts";
import { runScenario } from "./scenario.ts";

test(
  "in containers: helm-installed operator image, worker image pods; both pools 0 → N → 0, each job once per stage",
  { skip: containersUnavailable(), timeout: 40 * 60_000 },
  async () => {
    const jobs = 400;
    const lines: string[] = [];
    const report = await runScenario({
      jobs,
      jobMs: 100,
      runtime: "containers",
      say: (line) => {
        lines.push(line);
        console.log(line);
      },
    });
    for (const s of report.stages) {
      assert.equal(s.completed, jobs, `${s.pool} completed`);
      assert.equal(s.executions, jobs, `${s.pool}: every job ran exactly once at this stage`);
      assert.equal(s.ranTwice, 0);
      assert.equal(s.handedBack, 0, `${s.pool}: nothing handed back by a scale-down`);
      assert.equal(s.stalled, 0, `${s.pool}: no lease expired`);
      assert.ok(s.maxReplicas > 1, `${s.pool} scaled beyond one replica (peak ${s.maxReplicas})`);
    }
    assert.deepEqual(
      [...new Set(report.workerExitCodes)],
      [0],
      "every worker container drained and exited 0",
    );
    assert.ok(
      lines.some((l) => /container ghcr\.io\/conveyor-dev\/conveyor-operator:\S+ started/.test(l)),
      "the operator ran from its image",
    );
    const workerContainers = lines.filter((l) =>
      /pod demo-.*: container ghcr\.io\/conveyor-dev\/conveyor-worker:\S+ started/.test(l),
    );
    assert.equal(workerContainers.length, report.podsRun, "every worker pod ran the worker image");
    for (const [pool, reasons] of Object.entries(report.events)) {
      assert.ok(reasons.includes("ScaledUp"), `${pool} has a scale-up Event: ${reasons}`);
      assert.ok(reasons.includes("ScaledDown"), `${pool} has a scale-down Event: ${reasons}`);
    }
    assert.equal(report.records, jobs, "every job's record reached PostgreSQL");
  },
);

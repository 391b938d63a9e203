// The day-one path with real containers (`make demo RUNTIME=containers`): `helm install` of
// charts/conveyor runs the operator from the built conveyor-operator image, and both pools' pods
// run the conveyor-worker image (podman, host network, read-only root). Fewer jobs than the
// process e2e beside this: the point is the images and the chart together, not the load.
import assert from "node:assert/strict";
import { test } from "node:test";
import { containersUnavailable } from "../support/containers.ts";
import { assertStages, runScenario } from "./scenario.ts";

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
    assertStages(report.stages, jobs);
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
    assert.equal(
      report.records,
      jobs,
      "every job's record reached PostgreSQL, from its enqueue (created_at and data) on",
    );
  },
);

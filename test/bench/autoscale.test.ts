// The autoscaling comparison (bench/autoscale.ts) end to end on its smallest profile, so the
// harness cannot rot: KEDA (built from the Go module proxy on first use, then cached in
// ~/.cache/conveyor; 7 min cold on an idle machine, much longer under load) and Conveyor's
// backlog mode each scale a pool of real worker processes from zero for a burst of 100 jobs.
// Figures are asserted only for what must hold on any machine: every job ran once, each arm
// scaled from zero within its cap, the chart and tables were written. Timing targets
// belong to the bench, not here.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import type { AutoscaleReport } from "../../bench/autoscale.ts";
import { NODE, REPO } from "../support/workers.ts";

const out = mkdtempSync(join(tmpdir(), "cvy-autoscale-test-"));
after(() => rmSync(out, { recursive: true, force: true }));

test(
  "bench/autoscale.ts: a burst after idle, scaled by KEDA (metrics-api) and by Conveyor's backlog mode",
  { timeout: 40 * 60_000 },
  async () => {
    const args = [
      join(REPO, "bench/autoscale.ts"),
      "--profile",
      "smoke",
      "--workloads",
      "burst",
      "--arms",
      "keda-tuned,conveyor-backlog",
      "--max-replicas",
      "4",
      "--out",
      out,
      "--name",
      "smoke",
    ];
    const child = spawn(NODE, args, { cwd: REPO, stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    child.stdout.on("data", (c: Buffer) => (output += c.toString()));
    child.stderr.on("data", (c: Buffer) => {
      output += c.toString();
      process.stderr.write(c); // KEDA's first build shows its progress
    });
    const code = await new Promise<number | null>((resolve) => child.on("exit", resolve));
    assert.equal(code, 0, `bench/autoscale.ts exited ${code}:\n${output.slice(-4000)}`);

    const report = JSON.parse(readFileSync(join(out, "smoke.json"), "utf8")) as AutoscaleReport;
    assert.equal(report.profile, "smoke");
    assert.match(report.keda, /v2\.21\.0/);
    const burst = report.workloads.find((w) => w.name === "burst");
    assert.ok(burst, "the burst workload ran");
    assert.deepEqual(
      burst.runs.map((r) => r.arm),
      ["keda-tuned", "conveyor-backlog"],
    );
    for (const r of burst.runs) {
      assert.equal(r.jobs, 100, `${r.arm}: jobs`);
      assert.equal(r.started, 100, `${r.arm}: every job started`);
      assert.equal(r.ranTwice, 0, `${r.arm}: no job ran twice`);
      assert.ok(r.firstStartS !== null && r.firstStartS > 0, `${r.arm}: a first start after idle`);
      assert.ok(
        r.maxReplicas >= 1 && r.maxReplicas <= 4,
        `${r.arm}: scaled from zero within the cap (${r.maxReplicas})`,
      );
      assert.equal(r.replicas[0]?.[1], 0, `${r.arm}: started from zero replicas`);
      assert.ok(r.podSeconds > 0, `${r.arm}: pod-seconds counted`);
      assert.ok(r.waitP50S <= r.waitP95S && r.waitP95S <= r.waitMaxS, `${r.arm}: ordered percentiles`);
    }
    const svg = readFileSync(join(out, "smoke-burst.svg"), "utf8");
    assert.equal(svg.match(/<polyline /g)?.length, 2, "one line per arm in the chart");
    assert.ok(existsSync(join(out, "smoke.md")));
    assert.match(readFileSync(join(out, "smoke.md"), "utf8"), /\| keda-tuned \| 100 \| 100 \|/);
  },
);

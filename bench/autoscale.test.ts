import assert from "node:assert/strict";
import { test } from "node:test";
import {
  mergeReports,
  nodeDescription,
  parseAutoscaleFlags,
  renderAutoscaleMarkdown,
  type AutoscaleReport,
} from "./autoscale.ts";
import type { RunSummary } from "./autoscale/report.ts";

const run = (arm: string, workload: string): RunSummary => ({
  arm,
  workload,
  jobs: 10,
  started: 10,
  waitP50S: 1,
  waitP95S: 2,
  waitMaxS: 3,
  firstStartS: 1,
  lastStartS: 5,
  podSeconds: 20,
  maxReplicas: 2,
  handedBack: 0,
  stalled: 0,
  ranTwice: 0,
  unstartedAtWindowEnd: 0,
  durationS: 30,
  replicas: [[0, 0]],
});

const report = (
  arms: string[],
  workloads: string[],
  unavailable: Record<string, string> = {},
): AutoscaleReport =>
  ({
    date: "2026-11-26T07:00:00.000Z",
    profile: "short",
    node: "simulated",
    options: { profile: "short", workloads, arms, maxReplicas: 8, targetWaitSeconds: 10, seed: 33 },
    keda: arms.some((a) => a.startsWith("keda")) ? "v2.21.0" : "not run",
    unavailable,
    workloads: workloads.map((w) => ({
      name: w,
      description: w,
      windowS: 30,
      jobs: 10,
      runs: arms.map((a) => run(a, w)),
    })),
    machine: { cores: 2, commit: "abc" },
    load: { before: "1", after: "2" },
    seconds: 60,
  }) as unknown as AutoscaleReport;

test("mergeReports: arms of two invocations in one report, in the arms' order, each part listed", () => {
  const conveyor = report(["conveyor-backlog", "conveyor-latency"], ["burst", "ramp"]);
  const keda = report(["keda-default", "keda-tuned"], ["burst"]);
  const m = mergeReports(conveyor, keda);
  assert.deepEqual(
    m.workloads.map((w) => [w.name, w.runs.map((r) => r.arm)]),
    [
      ["burst", ["keda-default", "keda-tuned", "conveyor-backlog", "conveyor-latency"]],
      ["ramp", ["conveyor-backlog", "conveyor-latency"]],
    ],
  );
  assert.equal(m.keda, "v2.21.0");
  assert.equal(m.seconds, 120);
  assert.equal(m.parts?.length, 2);
  assert.match(renderAutoscaleMarkdown(m, {}), /Ran 07:00 UTC: keda-default, keda-tuned/);
  // an arm run again replaces its run; an arm that ran is no longer "unavailable"
  const again = mergeReports(report(["keda-tuned"], ["burst"], { "conveyor-latency": "not available" }), m);
  assert.equal(again.workloads[0]!.runs.filter((r) => r.arm === "keda-tuned").length, 1);
  assert.deepEqual(again.unavailable, {});
  assert.throws(() => mergeReports(conveyor, { ...keda, profile: "full" }), /profile short seed 33/);
});

test("parseAutoscaleFlags: bad input names the flag", () => {
  assert.throws(
    () => parseAutoscaleFlags(["--profile", "huge"]),
    /--profile must be one of full, short, smoke/,
  );
  assert.throws(() => parseAutoscaleFlags(["--arms", "keda,hpa"]), /--arms: unknown 'keda'/);
  assert.throws(() => parseAutoscaleFlags(["--max-replicas", "0"]), /--max-replicas/);
  assert.throws(() => parseAutoscaleFlags(["--pollingInterval", "5"]), /unknown flag --pollingInterval/);
  assert.throws(
    () => parseAutoscaleFlags(["--node", "kind"]),
    /--node must be one of simulated, real, got 'kind'/,
  );
  const o = parseAutoscaleFlags(["--profile", "smoke", "--workloads", "burst", "--append"]);
  assert.deepEqual(
    [o.profile, o.workloads, o.append, o.scaleDownWindowS, o.node],
    ["smoke", ["burst"], true, undefined, "simulated"],
  );
  assert.equal(parseAutoscaleFlags(["--node", "real"]).node, "real");
  assert.equal(parseAutoscaleFlags(["--node=simulated"]).node, "simulated");
});

test("the report says which node ran the pods; --append does not mix nodes", () => {
  const simulated = { ...report(["keda-tuned"], ["burst"]), node: nodeDescription("simulated") };
  assert.match(renderAutoscaleMarkdown(simulated, {}), /Node: simulated: kwok nodes/);
  const real: AutoscaleReport = {
    ...report(["conveyor-backlog"], ["burst"]),
    node: nodeDescription("real"),
  };
  real.options = { ...real.options, node: "real" };
  assert.match(renderAutoscaleMarkdown(real, {}), /Node: real: a kubelet \+ containerd/);
  // a report written before --node existed ran on the simulated node
  assert.equal(mergeReports(simulated, report(["conveyor-backlog"], ["burst"])).workloads[0]!.runs.length, 2);
  assert.throws(
    () => mergeReports(simulated, real),
    /--append: the existing report ran on the simulated node, this run --node real/,
  );
});

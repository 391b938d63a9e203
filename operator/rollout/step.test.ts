// Where a rollout stands before the Deployments are applied (RolloutStep.plan), the canary's
// share of the pods, and the canary Deployment beside the stable one.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import type { V1Container } from "@kubernetes/client-node";
import type { WorkerPoolStatus } from "../apis/v1alpha1/types.ts";
import type { ReconcileContext } from "../controllers/context.ts";
import { desiredDeployment, templateVersion } from "../controllers/deployment.ts";
import { pool } from "../controllers/fixtures.ts";
import type { PoolPass } from "../controllers/poolPass.ts";
import { canaryReplicas, RolloutStep, splitReplicas } from "./step.ts";

const opts = { defaultImage: "conveyor-worker:test" };
const ctx = opts as unknown as ReconcileContext;
const step = new RolloutStep(ctx, undefined as never, undefined as never);
const rollout = { canary: { steps: [{ weight: 10 }, { weight: 50 }] } };
const poolWith = (image: string, status?: WorkerPoolStatus["rollout"]) => {
  const p = pool({
    queue: "q",
    redis: { url: "redis://r:6379" },
    handler: { module: "/h.js" },
    template: { image },
    rollout,
  });
  if (status) p.status = { rollout: status };
  return p;
};
const passOf = (p: ReturnType<typeof poolWith>) =>
  ({ pool: p, spec: p.spec, now: Date.parse("2026-11-28T17:00:00Z") }) as PoolPass;

describe("rollout plan", () => {
  it("first sight: the template is the stable version, applied with it", () => {
    const p = poolWith("a:1");
    const plan = step.plan(passOf(p), undefined)!;
    assert.equal(plan.applyStable, true);
    assert.equal(plan.stableVersion, templateVersion(p, p.spec, opts));
    assert.equal(plan.status?.phase, "Promoted");
  });

  it("a template change starts at step 1 and leaves the stable Deployment alone", () => {
    const v1 = templateVersion(poolWith("a:1"), poolWith("a:1").spec, opts);
    const p = poolWith("a:2", { phase: "Promoted", stableHash: v1 });
    const plan = step.plan(passOf(p), undefined)!;
    assert.equal(plan.applyStable, false);
    assert.deepEqual(
      [plan.status?.phase, plan.status?.step, plan.status?.weight, plan.status?.stableHash],
      ["Progressing", 0, 10, v1],
    );
    assert.equal(plan.status?.canaryHash, templateVersion(p, p.spec, opts));
    assert.match(plan.started!, /canary at 10% \(step 1\/2\)/);
  });

  it("a new change during a rollout starts over from the stable version", () => {
    const v1 = templateVersion(poolWith("a:1"), poolWith("a:1").spec, opts);
    const v2 = templateVersion(poolWith("a:2"), poolWith("a:2").spec, opts);
    const p = poolWith("a:3", {
      phase: "Progressing",
      step: 1,
      weight: 50,
      stableHash: v1,
      canaryHash: v2,
      baseline: { stable: { f: 1 }, canary: { f: 0 } },
    });
    const plan = step.plan(passOf(p), undefined)!;
    assert.deepEqual([plan.status?.step, plan.status?.stableHash, plan.status?.baseline], [0, v1, undefined]);
    assert.notEqual(plan.status?.canaryHash, v2);
    assert.match(plan.started!, /starts over/);
  });

  it("a rolled-back version stays rolled back; going back to stable ends a rollout", () => {
    const v1 = templateVersion(poolWith("a:1"), poolWith("a:1").spec, opts);
    const v2 = templateVersion(poolWith("a:2"), poolWith("a:2").spec, opts);
    const back = step.plan(
      passOf(poolWith("a:2", { phase: "RolledBack", stableHash: v1, canaryHash: v2 })),
      undefined,
    )!;
    assert.deepEqual([back.applyStable, back.status?.phase, back.started], [false, "RolledBack", undefined]);
    const reverted = step.plan(
      passOf(poolWith("a:1", { phase: "Progressing", step: 0, stableHash: v1, canaryHash: v2 })),
      undefined,
    )!;
    assert.deepEqual([reverted.applyStable, reverted.status?.phase], [true, "Aborted"]);
  });
});

describe("the canary's pods", () => {
  it("split the pool's replicas by the weight; each version keeps at least one while the pool has any", () => {
    assert.deepEqual(splitReplicas(0, 10), { stable: 0, canary: 0 });
    assert.deepEqual(splitReplicas(1, 10), { stable: 1, canary: 1 });
    assert.deepEqual(splitReplicas(2, 30), { stable: 1, canary: 1 });
    assert.deepEqual(splitReplicas(10, 10), { stable: 9, canary: 1 });
    assert.deepEqual(splitReplicas(10, 50), { stable: 5, canary: 5 });
    assert.deepEqual(splitReplicas(20, 90), { stable: 2, canary: 18 });
  });

  it("in hpa mode are added beside the stable ones, the step's weight of all pods", () => {
    assert.equal(canaryReplicas(0, 50), 0);
    assert.equal(canaryReplicas(1, 10), 1);
    assert.equal(canaryReplicas(9, 10), 1);
    assert.equal(canaryReplicas(2, 60), 3);
    assert.equal(canaryReplicas(10, 50), 10);
  });

  it("run under their own Deployment and selector, with their version in the environment", () => {
    const p = poolWith("a:2");
    const d = desiredDeployment(p, p.spec, opts, { canary: true, version: "abc123" });
    assert.equal(d.metadata.name, "ocr-canary");
    assert.deepEqual(d.spec!.selector!.matchLabels, {
      "conveyor.dev/workerpool": "ocr",
      "conveyor.dev/track": "canary",
    });
    assert.equal(d.spec!.template!.metadata!.labels!["conveyor.dev/track"], "canary");
    const env = (d.spec!.template!.spec!.containers[0] as V1Container).env!;
    assert.equal(env.find((e) => e.name === "CONVEYOR_TEMPLATE_VERSION")?.value, "abc123");
    assert.equal(d.metadata.annotations!["conveyor.dev/template-version"], "abc123");
    // the version is not part of what it hashes
    assert.equal(templateVersion(p, p.spec, opts), templateVersion(p, p.spec, opts));
    const stable = desiredDeployment(p, p.spec, opts);
    assert.equal(stable.metadata.name, "ocr");
    assert.equal(
      (stable.spec!.template!.spec!.containers[0] as V1Container).env!.some(
        (e) => e.name === "CONVEYOR_TEMPLATE_VERSION",
      ),
      false,
    );
  });
});

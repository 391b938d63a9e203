// The WorkerPool status the operator writes, and spec validation beyond the CRD schema.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { withDefaults } from "../apis/v1alpha1/types.ts";
import { computeStatus } from "./status.ts";
import { validateSpec } from "./validate.ts";
import { pool, counts } from "./fixtures.ts";

describe("status and validation", () => {
  const base = { queue: "q", redis: { url: "redis://r" }, handler: { module: "/m.js" } };

  it("is a fixed point when nothing changes (an idle pool writes no status)", () => {
    const p = pool(base);
    const input = {
      pool: p,
      spec: p.spec,
      deployment: {
        metadata: { name: "ocr" },
        spec: { replicas: 2 },
        status: { replicas: 2, readyReplicas: 2 },
      },
      hpa: undefined,
      sample: { at: 1, failures: 0, counts: counts(7), lastGood: { at: 1, counts: counts(7) } },
      sampleUsable: true,
      problems: [],
      lastDecision: undefined,
    };
    const s1 = computeStatus({ ...input, now: new Date(1_000_000) });
    const s2 = computeStatus({ ...input, pool: { ...p, status: s1 }, now: new Date(2_000_000) });
    assert.deepEqual(s2, s1, "same inputs later: same status (no timestamps move)");
    assert.equal(s1.readyOfDesired, "2/2");
    assert.equal(s1.backlog, 7);
    const degraded = computeStatus({
      ...input,
      pool: { ...p, status: s1 },
      problems: [{ reason: "RedisUnreachable", message: "down" }],
      now: new Date(3_000_000),
    });
    const ready = degraded.conditions!.find((c) => c.type === "Ready")!;
    assert.equal(ready.status, "False");
    assert.equal(ready.reason, "RedisUnreachable");
    assert.equal(ready.lastTransitionTime, "1970-01-01T00:50:00Z");
    assert.equal(degraded.conditions!.find((c) => c.type === "Degraded")!.status, "True");
  });

  it("validates what the schema may not have caught", () => {
    assert.deepEqual(validateSpec(withDefaults(base)), []);
    const bad = withDefaults({
      ...base,
      queue: "a/b",
      nextQueue: "c/d",
      handler: { module: "/m.js", command: ["x"] },
      scaling: { minReplicas: 5, maxReplicas: 2 },
    });
    const problems = validateSpec(bad);
    assert.equal(problems.length, 3, problems.join("\n"));
    assert.match(problems.join("\n"), /same pipeline|share|prefix/i);
    assert.match(problems.join("\n"), /exactly one/);
    assert.match(problems.join("\n"), /minReplicas/);
    assert.match(
      validateSpec(withDefaults({ ...base, redis: { url: "redis://:s3cr3tpw@r" } })).join(),
      /password/,
    );
    assert.doesNotMatch(
      validateSpec(withDefaults({ ...base, redis: { url: "redis://:s3cr3tpw@r" } })).join(),
      /s3cr3tpw/,
      "never echo the password",
    );
  });

  it("scaling.targetWaitSeconds: a positive number of seconds, with mode direct; otherwise a problem naming the field", () => {
    const wait = (scaling: object) => validateSpec(withDefaults({ ...base, scaling })).join("\n");
    assert.equal(wait({ mode: "direct", targetWaitSeconds: 0.5 }), "");
    assert.match(
      wait({ mode: "direct", targetWaitSeconds: 0 }),
      /spec\.scaling\.targetWaitSeconds must be .*> 0.*got 0/,
    );
    assert.match(wait({ mode: "direct", targetWaitSeconds: -3 }), /targetWaitSeconds must be/);
    assert.match(
      wait({ mode: "direct", targetWaitSeconds: "10s" }),
      /targetWaitSeconds must be a number.*"10s"/,
    );
    assert.match(
      wait({ targetWaitSeconds: 10 }),
      /targetWaitSeconds needs spec\.scaling\.mode: direct \(mode is hpa/,
    );
  });
});

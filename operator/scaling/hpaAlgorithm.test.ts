// The HPA algorithm (direct mode) against the numbers kube-controller-manager produces.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { HpaAlgorithm, replicasForMetric } from "./hpaAlgorithm.ts";

describe("HPA algorithm", () => {
  it("desired = ceil(total / target) outside a 10% tolerance, current inside it", () => {
    assert.equal(replicasForMetric(500, 10, 1), 50);
    assert.equal(replicasForMetric(105, 10, 10), 10, "ratio 1.05 is within tolerance");
    assert.equal(replicasForMetric(95, 10, 10), 10, "ratio 0.95 is within tolerance");
    assert.equal(replicasForMetric(115, 10, 10), 12, "ratio 1.15: ceil(11.5)");
    assert.equal(replicasForMetric(0, 10, 4), 0);
    assert.equal(replicasForMetric(1, 10, 1), 1);
  });

  it("scale-up is limited to max(+4 pods, +100%) per 15 s by default", () => {
    const hpa = new HpaAlgorithm();
    const base = { targetPerReplica: 10, minReplicas: 0, maxReplicas: 100 };
    const t0 = 1_000_000;
    let d = hpa.decide({ ...base, now: t0, total: 500, currentReplicas: 1 });
    assert.equal(d.replicas, 5);
    assert.equal(d.reason, "ScaleUpLimit");
    hpa.record(t0, 1, 5);
    d = hpa.decide({ ...base, now: t0 + 5_000, total: 500, currentReplicas: 5 });
    assert.equal(
      d.replicas,
      5,
      "within the same period the limit counts from the period's start (1 → 5 already)",
    );
    d = hpa.decide({ ...base, now: t0 + 15_001, total: 500, currentReplicas: 5 });
    assert.equal(d.replicas, 10, "next period: +100% beats +4");
    hpa.record(t0 + 15_001, 5, 10);
    d = hpa.decide({ ...base, now: t0 + 30_002, total: 500, currentReplicas: 10 });
    assert.equal(d.replicas, 20);
    d = hpa.decide({ ...base, now: t0 + 30_002, total: 5000, currentReplicas: 100 });
    assert.equal(d.replicas, 100, "never above maxReplicas");
  });

  it("releaseTransient: a window mostly transient holds only its held parts; one mostly held keeps all", () => {
    const base = { targetPerReplica: 10, minReplicas: 1, maxReplicas: 100 };
    const t0 = 1_000_000;
    // A recommendation of `total` slots of which `held` stay, then 20 slots with nothing transient.
    const after = (total: number, held: number, releaseTransient?: boolean) => {
      const hpa = new HpaAlgorithm();
      const currentReplicas = total / 10;
      hpa.decide({ ...base, now: t0, total, heldTotal: held, currentReplicas });
      const d = hpa.decide({
        ...base,
        now: t0 + 5000,
        total: 20,
        heldTotal: 20,
        currentReplicas,
        releaseTransient,
      });
      return [d.replicas, d.reason];
    };
    assert.deepEqual(after(200, 20, true), [2, "BurstStarted"], "20 of 200 held");
    assert.deepEqual(after(200, 20), [20, "ScaleDownStabilized"], "without releaseTransient");
    assert.deepEqual(after(120, 100, true), [12, "ScaleDownStabilized"], "100 of 120 held: more than half");
  });

  it("scale-down waits for the 300 s stabilization window (highest recent recommendation)", () => {
    const hpa = new HpaAlgorithm();
    const base = { targetPerReplica: 10, minReplicas: 0, maxReplicas: 100 };
    const t0 = 5_000_000;
    assert.equal(hpa.decide({ ...base, now: t0, total: 100, currentReplicas: 10 }).replicas, 10);
    const d = hpa.decide({ ...base, now: t0 + 60_000, total: 20, currentReplicas: 10 });
    assert.equal(d.replicas, 10);
    assert.equal(d.reason, "ScaleDownStabilized");
    assert.equal(hpa.decide({ ...base, now: t0 + 299_000, total: 20, currentReplicas: 10 }).replicas, 10);
    assert.equal(
      hpa.decide({ ...base, now: t0 + 301_000, total: 20, currentReplicas: 10 }).replicas,
      2,
      "the 10 left the window",
    );
  });

  it("honours behavior: no window, Pods policies, Min select, Disabled", () => {
    const base = { targetPerReplica: 10, minReplicas: 1, maxReplicas: 100 };
    const now = 9_000_000;
    const fast = new HpaAlgorithm();
    assert.equal(
      fast.decide({
        ...base,
        now,
        total: 20,
        currentReplicas: 10,
        behavior: { scaleDown: { stabilizationWindowSeconds: 0 } },
      }).replicas,
      2,
    );
    const slow = new HpaAlgorithm();
    const d = slow.decide({
      ...base,
      now,
      total: 20,
      currentReplicas: 10,
      behavior: {
        scaleDown: {
          stabilizationWindowSeconds: 0,
          policies: [{ type: "Pods", value: 1, periodSeconds: 60 }],
        },
      },
    });
    assert.equal(d.replicas, 9);
    assert.equal(d.reason, "ScaleDownLimit");
    const minSelect = new HpaAlgorithm();
    assert.equal(
      minSelect.decide({
        ...base,
        now,
        total: 1000,
        currentReplicas: 10,
        behavior: {
          scaleUp: {
            selectPolicy: "Min",
            policies: [
              { type: "Pods", value: 2, periodSeconds: 15 },
              { type: "Percent", value: 50, periodSeconds: 15 },
            ],
          },
        },
      }).replicas,
      12,
    );
    const disabled = new HpaAlgorithm();
    assert.equal(
      disabled.decide({
        ...base,
        now,
        total: 1000,
        currentReplicas: 3,
        behavior: { scaleUp: { selectPolicy: "Disabled" } },
      }).replicas,
      3,
    );
    const floor = new HpaAlgorithm();
    assert.equal(
      floor.decide({
        ...base,
        minReplicas: 0,
        now,
        total: 0,
        currentReplicas: 3,
        behavior: { scaleDown: { stabilizationWindowSeconds: 0 } },
      }).replicas,
      1,
      "the HPA's floor is 1",
    );
  });
});

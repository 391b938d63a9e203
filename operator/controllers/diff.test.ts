// Desired vs observed: quantities, subsets and the config hash that decide whether to write.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { configHash, isSubset, parseQuantity } from "./diff.ts";

describe("desired vs observed", () => {
  it("parses quantities", () => {
    assert.equal(parseQuantity("500m"), 0.5);
    assert.equal(parseQuantity("1Gi"), 2 ** 30);
    assert.equal(parseQuantity("1e3"), 1000);
    assert.equal(parseQuantity("2"), 2);
    assert.equal(parseQuantity("abc"), undefined);
    assert.equal(parseQuantity("1.0.0"), undefined);
  });

  it("a live object with defaults, other managers' fields and canonical quantities contains what was applied", () => {
    const want = {
      metadata: { labels: { a: "1" } },
      spec: {
        paused: false,
        template: {
          spec: {
            containers: [
              {
                name: "worker",
                args: ["worker"],
                env: [{ name: "A", value: "" }],
                resources: { requests: { cpu: "0.5", memory: "1024Mi" } },
              },
            ],
            volumes: [{ name: "tmp", emptyDir: {} }],
          },
        },
      },
    };
    const live = {
      metadata: { labels: { a: "1", extra: "x" }, resourceVersion: "5" },
      spec: {
        replicas: 3,
        template: {
          spec: {
            containers: [
              { name: "istio-proxy", image: "proxy" },
              {
                name: "worker",
                args: ["worker"],
                env: [{ name: "A" }],
                resources: { requests: { cpu: "500m", memory: "1Gi" } },
                terminationMessagePath: "/dev/termination-log",
              },
            ],
            volumes: [{ name: "tmp", emptyDir: {} }],
            dnsPolicy: "ClusterFirst",
          },
        },
      },
    };
    assert.ok(isSubset(want, live));
    assert.ok(
      !isSubset(
        { spec: { template: { spec: { containers: [{ name: "worker", args: ["worker", "x"] }] } } } },
        live,
      ),
      "scalar lists must be equal",
    );
    assert.ok(
      !isSubset({ spec: { template: { spec: { containers: [{ name: "worker", image: "new" }] } } } }, live),
      "a changed field is drift",
    );
    assert.ok(!isSubset({ metadata: { labels: { b: "2" } } }, live), "a missing label is drift");
  });

  it("hashes ignore key order", () => {
    assert.equal(configHash({ a: 1, b: { c: 2, d: [1, 2] } }), configHash({ b: { d: [1, 2], c: 2 }, a: 1 }));
    assert.notEqual(configHash({ a: [1, 2] }), configHash({ a: [2, 1] }));
  });
});

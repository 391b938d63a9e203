import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { assertVersion, chartWithVersion } from "./version.ts";
import { ROOT, rootVersion } from "./packages.ts";

describe("the release version", () => {
  it("accepts x.y.z and prereleases, refuses anything else naming VERSION", () => {
    for (const v of ["0.1.0", "1.20.3", "2.0.0-rc.1"]) assert.equal(assertVersion(v), v);
    for (const v of ["", "v1.0.0", "1.0", "01.0.0", "1.0.0 ", "1.0.0-"])
      assert.throws(() => assertVersion(v), /^Error: VERSION .* is not a version/);
  });

  it("sets the chart's version and appVersion", () => {
    const chart = readFileSync(join(ROOT, "charts", "conveyor", "Chart.yaml"), "utf8");
    const out = chartWithVersion(chart, "9.8.7");
    assert.match(out, /^version: 9\.8\.7$/m);
    assert.match(out, /^appVersion: "9\.8\.7"$/m);
    assert.match(out, /^kubeVersion: /m);
  });

  it("Chart.yaml carries the root package.json's version (one version number)", () => {
    const chart = readFileSync(join(ROOT, "charts", "conveyor", "Chart.yaml"), "utf8");
    assert.equal(chartWithVersion(chart, rootVersion()), chart);
  });
});

import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { parseDuration } from "./duration.ts";

describe("parseDuration", () => {
  it("takes 250ms, 30s, 5m, 1h and decimals", () => {
    assert.deepEqual(
      ["250ms", "30s", "5m", "1h", "1.5s", " 2 m "].map((t) => parseDuration(t)),
      [250, 30_000, 300_000, 3_600_000, 1500, 120_000],
    );
  });

  it("reads a bare number as seconds, as the *_SECONDS variables document", () => {
    assert.equal(parseDuration("25"), 25_000);
    assert.equal(parseDuration("0.5"), 500);
    assert.equal(parseDuration("0"), 0);
  });

  it("refuses anything else, naming what it parsed", () => {
    for (const bad of ["", "soon", "-1s", "1d", "1e3", "5 minutes"])
      assert.throws(() => parseDuration(bad, "--drain"), /invalid --drain/, bad);
  });
});

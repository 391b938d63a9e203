import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { pollUntil } from "./poll.ts";

describe("pollUntil", () => {
  it("returns the first truthy value, probing through falsy values and errors", async () => {
    let n = 0;
    const v = await pollUntil(
      "the fourth probe",
      () => {
        n++;
        if (n === 1) throw new Error("not up yet");
        return n === 4 ? { n } : n === 2 ? null : false;
      },
      { intervalMs: 1 },
    );
    assert.deepEqual(v, { n: 4 });
  });

  it("times out naming what it waited for, the last error and the diagnostics", async () => {
    await assert.rejects(
      pollUntil(
        "godot",
        () => {
          throw new Error("still absent");
        },
        { timeoutMs: 20, intervalMs: 5, onTimeout: () => "stage is empty" },
      ),
      /timed out waiting for godot: still absent\nstage is empty/,
    );
  });
});

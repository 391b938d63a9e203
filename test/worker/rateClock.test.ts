// A rate limit holds where the downstream API counts calls: at the handlers' starts. Two real
// workers of 8 slots share one limit of 10/s; one runs with its wall clock 400 ms ahead (a pod on
// a node whose clock is off), and every claim is held 300 ms in Redis once (CLIENT PAUSE WRITE, as
// the shutdown race test holds a reply) just before the second window. The handlers record their
// own starts (test/support/rateWindow.ts): no window of 1 s may hold more than 10 of them.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { runRateScenario } from "../support/rateWindow.ts";
import { WorkerTestBed } from "../support/testbed.ts";

describe("rate limits at the handler, across skewed clocks and delayed claims", () => {
  const bed = new WorkerTestBed("rateclock");
  before(() => bed.start());
  after(async () => {
    await bed.redis.call("CLIENT", "UNPAUSE").catch(() => {});
    await bed.stop();
  });

  const scenario = { jobs: 60, workers: 2, concurrency: 8, limit: { max: 10, perMs: 1000 }, sleepMs: 5 };

  // Before: the windows ran on the claiming worker's clock, read before its call: the worker
  // ahead opened each window 400 ms early, and the held claims were stamped 300 ms before they
  // ran — 18 to 20 starts in one second.
  test("queue limit 10/s: one worker's clock 400 ms ahead, claims held 300 ms: no second holds more than 10 starts", async () => {
    const r = await runRateScenario(bed, "rc-queue", { ...scenario, offsetMs: 400, pauseMs: 300 });
    assert.equal(r.starts.length, scenario.jobs, "every job started once");
    assert.ok(
      r.maxInWindow <= 10,
      `${r.maxInWindow} starts in the second from ${r.maxWindowAt} ms: ${r.starts}`,
    );
  });

  test("group limit 10/s, the same clocks and held claims: no second holds more than 10 of the group's starts", async () => {
    const r = await runRateScenario(bed, "rc-group", {
      ...scenario,
      offsetMs: 400,
      pauseMs: 300,
      group: "tenant",
    });
    assert.equal(r.starts.length, scenario.jobs, "every job started once");
    assert.ok(
      r.maxInWindow <= 10,
      `${r.maxInWindow} starts in the second from ${r.maxWindowAt} ms: ${r.starts}`,
    );
  });
});

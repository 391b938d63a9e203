// Flows with real worker processes on a real Redis: a module handler sees its parents' results
// in ctx.parents (and job.parents), keyed by the parents' keys, across two stages.
import assert from "node:assert/strict";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { waitFor } from "../support/processes.ts";
import { WorkerTestBed } from "../support/testbed.ts";
import { REPO } from "../support/workers.ts";

const HANDLER = `module:${join(REPO, "test/fixtures/flowHandler.js")}`;

describe("flows in the worker", () => {
  const bed = new WorkerTestBed("flw");
  before(() => bed.start());
  after(() => bed.stop());

  test("a diamond across two stages: each handler gets its parents' results in ctx.parents", async () => {
    const { flowId, ids } = await bed.producer.enqueueFlow("wf", [
      { key: "a", queue: "wf/one", data: "a" },
      { key: "b", queue: "wf/two", data: "b", parents: ["a"] },
      { key: "c", queue: "wf/two", data: "c", parents: ["a"] },
      { key: "d", queue: "wf/one", data: "d", parents: ["b", "c"] },
    ]);
    await bed.worker("wf/one", { CONVEYOR_HANDLER: HANDLER });
    await bed.worker("wf/two", { CONVEYOR_HANDLER: HANDLER });
    const d = await waitFor("d completed", async () => {
      const j = await bed.admin.job(ids.d!, "wf");
      return j?.state === "completed" ? j : null;
    });
    const a = { id: ids.a, result: { me: "a", parents: null, jobParents: null } };
    const fromA = { a };
    const b = { id: ids.b, result: { me: "b", parents: fromA, jobParents: fromA } };
    const c = { id: ids.c, result: { me: "c", parents: fromA, jobParents: fromA } };
    assert.deepEqual(JSON.parse(String(d.result)), { me: "d", parents: { b, c }, jobParents: { b, c } });
    assert.deepEqual((await bed.admin.flow(flowId))!.counts, { completed: 4 });
  });

  test("a large parent result comes by reference and ctx.parentResult fetches it; a small one inline", async () => {
    const { flowId, ids } = await bed.producer.enqueueFlow("wr", [
      { key: "big", queue: "wr/one", data: "big" },
      { key: "small", queue: "wr/one", data: "small" },
      { key: "sink", queue: "wr/one", data: "sink", parents: ["big", "small"] },
    ]);
    await bed.worker("wr/one", {
      CONVEYOR_HANDLER: `module:${join(REPO, "test/fixtures/flowResultsHandler.js")}`,
    });
    const sink = await waitFor("sink completed", async () => {
      const j = await bed.admin.job(ids.sink!, "wr");
      return j?.state === "completed" ? j : null;
    });
    const big = "b".repeat(5000);
    assert.deepEqual(JSON.parse(String(sink.result)), {
      parents: {
        big: { id: ids.big, ref: `${flowId}:big`, bytes: big.length + 2 },
        small: { id: ids.small, result: { n: 1 } },
      },
      big,
      small: { n: 1 },
    });
  });
});

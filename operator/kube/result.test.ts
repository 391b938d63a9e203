import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { Result } from "./result.ts";

describe("reconcile result", () => {
  it("done asks for nothing, requeueAfter for a re-check (never negative)", () => {
    assert.equal(Result.done().requeueAfterMs, undefined);
    assert.ok(Result.isDone(Result.done()));
    assert.equal(Result.requeueAfter(15_000).requeueAfterMs, 15_000);
    assert.equal(Result.requeueAfter(-5).requeueAfterMs, 0);
    assert.ok(!Result.isDone(Result.requeueAfter(0)));
  });

  it("the earliest re-check wins when steps combine their results", () => {
    const done = Result.done();
    assert.deepEqual(Result.sooner(done, done), done);
    assert.equal(Result.sooner(done, Result.requeueAfter(60_000)).requeueAfterMs, 60_000);
    assert.equal(Result.sooner(Result.requeueAfter(60_000), done).requeueAfterMs, 60_000);
    assert.equal(
      Result.sooner(Result.requeueAfter(60_000), Result.requeueAfter(15_000)).requeueAfterMs,
      15_000,
    );
  });
});

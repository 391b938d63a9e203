// How the outbox entries of a debounced job fold into its record (docs/protocol.md, "Debounce and
// throttle"): the replacement is an `enqueued` entry `from` `debounce` — the record takes the
// latest data and due time and keeps the job's history (its first enqueue's time and key).
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { foldEvents, parseEntry, type OutboxEvent } from "./events.ts";

const entry = (streamId: string, fields: Record<string, string>): OutboxEvent =>
  parseEntry("docs", [streamId, Object.entries(fields).flat()])!;

describe("records of a debounced job", () => {
  test("a replacement sets the latest data and due time and keeps the first enqueue's history", () => {
    const { jobs, stages } = foldEvents([
      entry("1000-0", {
        type: "enqueued",
        id: "j1",
        queue: "docs/ocr",
        at: "1000",
        attempts: "3",
        due: "6000",
        key: "k",
        group: "acme",
        data: '{"n":1}',
      }),
      entry("3000-0", {
        type: "enqueued",
        id: "j1",
        queue: "docs/ocr",
        at: "3000",
        from: "debounce",
        due: "8000",
        data: '{"n":2}',
      }),
    ]);
    assert.equal(jobs.length, 1);
    const job = jobs[0]!;
    assert.equal(job.data?.value, '{"n":2}');
    assert.equal(job.state, "delayed");
    assert.equal(job.dueAt, 8000);
    // (the replacement carries no group: the job keeps its first enqueue's)
    assert.deepEqual(job.origin?.value, {
      createdAt: 1000,
      parentId: null,
      idempotencyKey: "k",
      group: "acme",
    });
    assert.equal(job.maxAttempts?.value, 3);
    assert.equal(stages[0]!.data?.value, '{"n":2}');
  });
});

describe("records of a flow job", () => {
  test("a waiting job starts its history as waiting-children with its flow, key, parents and policy; its release keeps them", () => {
    const { jobs } = foldEvents([
      entry("1000-0", {
        type: "enqueued",
        id: "d1",
        queue: "book/merge",
        at: "1000",
        from: "flow",
        state: "waiting-children",
        attempts: "3",
        flow: "f1",
        flowKey: "book",
        parents: "ch1 ch2",
        parentIds: "c1 c2",
        onParentFailure: "continue",
        data: "{}",
      }),
    ]);
    assert.equal(jobs[0]!.state, "waiting-children");
    assert.deepEqual(jobs[0]!.origin?.value, {
      createdAt: 1000,
      parentId: null,
      idempotencyKey: null,
      group: null,
      flow: {
        id: "f1",
        key: "book",
        parents: ["ch1", "ch2"],
        parentIds: ["c1", "c2"],
        onParentFailure: "continue",
      },
    });
    const released = foldEvents([
      entry("2000-0", { type: "promoted", id: "d1", queue: "book/merge", at: "2000", from: "flow" }),
    ]).jobs[0]!;
    assert.equal(released.state, "queued");
    assert.equal(released.origin, undefined, "the release leaves the flow fields as they are");
  });

  test("a job released with a delay is recorded delayed until its due time", () => {
    const released = foldEvents([
      entry("2000-0", {
        type: "promoted",
        id: "d1",
        queue: "book/merge",
        at: "2000",
        from: "flow",
        due: "5000",
      }),
    ]).jobs[0]!;
    assert.equal(released.state, "delayed");
    assert.equal(released.dueAt, 5000);
  });
});

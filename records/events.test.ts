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
    assert.deepEqual(job.origin?.value, { createdAt: 1000, parentId: null, idempotencyKey: "k" });
    assert.equal(job.maxAttempts?.value, 3);
    assert.equal(stages[0]!.data?.value, '{"n":2}');
  });
});

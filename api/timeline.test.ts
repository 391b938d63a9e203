// The timeline's fill from the records when the queue's event stream was trimmed past a job.
import assert from "node:assert/strict";
import { test } from "node:test";
import { jobTimeline } from "./timeline.ts";

const exec = (startedAt: number, finishedAt: number | null, outcome: string, queue = "p/a") => ({
  execution: `x${startedAt}`,
  queue,
  startedAt: new Date(startedAt).toISOString(),
  finishedAt: finishedAt === null ? null : new Date(finishedAt).toISOString(),
  outcome,
  reason: null,
});

test("a job younger than the oldest scanned entry keeps the stream's entries alone", () => {
  const stream = [{ eventId: "1000-0", type: "enqueued", at: "1000" }];
  const t = jobTimeline({ stream, scannedFrom: 900, createdAt: 1000, executions: [] });
  assert.deepEqual(t, { events: stream, trimmed: false });
});

test("entries trimmed from the stream come back from the records, oldest first, before the stream's", () => {
  const stream = [{ eventId: "5000-0", type: "completed", at: "5000" }];
  const t = jobTimeline({
    stream,
    scannedFrom: 4000,
    createdAt: 1000,
    executions: [exec(3000, 3500, "completed", "p/a"), exec(4500, 5000, "completed", "p/b")],
  });
  assert.equal(t.trimmed, true);
  assert.deepEqual(
    t.events.map((e) => [e.type, e.at, e.source]),
    [
      ["enqueued", "1000", "records"],
      ["started", "3000", "records"],
      ["completed", "3500", "records"],
      ["completed", "5000", undefined],
    ],
  );
});

test("without records (no executions, no creation time) nothing is invented", () => {
  const t = jobTimeline({ stream: [], scannedFrom: null, createdAt: null, executions: [] });
  assert.deepEqual(t, { events: [], trimmed: false });
  const running = jobTimeline({
    stream: [],
    scannedFrom: null,
    createdAt: 1,
    executions: [exec(2, null, "running")],
  });
  assert.deepEqual(
    running.events.map((e) => e.type),
    ["enqueued", "started"],
  );
});

// The shared lease table between the worker and its heartbeat thread (worker/leaseTable.ts).
import { test, describe } from "node:test";
import assert from "node:assert/strict";
import { LeaseTable, leaseTableSlots, MAX_ID_UNITS, MAX_TOKEN_UNITS, NO_SLOT } from "./leaseTable.ts";

/** A writer and a reader over one buffer, as the main thread and the heartbeat thread have. */
function pair(slots: number) {
  const writer = new LeaseTable(slots);
  const reader = new LeaseTable(slots, writer.buffer);
  const read = () => reader.read().sort((a, b) => a.id.localeCompare(b.id));
  return { writer, reader, read };
}

describe("lease table", () => {
  test("hold, drop and status round trip to a reader over the same buffer", () => {
    const { writer, reader, read } = pair(leaseTableSlots(2));
    assert.deepEqual(read(), []);
    const a = writer.hold("job-a", "17", 1000.5);
    const b = writer.hold("job:b.2_x", "18", 2000);
    assert.ok(a >= 0 && b >= 0 && a !== b, `slots ${a}, ${b}`);
    assert.deepEqual(read(), [
      { id: "job-a", token: "17", renewUntil: 1000.5 },
      { id: "job:b.2_x", token: "18", renewUntil: 2000 },
    ]);
    writer.drop(a);
    writer.drop(a); // a second drop of a free slot changes nothing
    assert.deepEqual(read(), [{ id: "job:b.2_x", token: "18", renewUntil: 2000 }]);
    assert.equal(writer.hold("job-c", "19", 3000), a, "the freed slot is reused");
    assert.deepEqual(read()[0], { id: "job-c", token: "19", renewUntil: 3000 });
    writer.setStatus(3, 8, true);
    assert.deepEqual(reader.readStatus(), { busy: 3, slots: 8, draining: true, jobP50Ms: 0 });
    writer.setStatus(0, 8, false);
    writer.setJobP50(250);
    assert.deepEqual(reader.readStatus(), { busy: 0, slots: 8, draining: false, jobP50Ms: 250 });
  });

  test("a freed slot taken by another job is read as that job, never a mix of the two", () => {
    const { writer, read } = pair(1);
    const long = "L".repeat(MAX_ID_UNITS);
    assert.equal(writer.hold(long, "1".repeat(MAX_TOKEN_UNITS), 10), 0);
    assert.equal(read()[0]!.id, long);
    writer.drop(0);
    assert.equal(writer.hold("s", "2", 20), 0); // same slot, shorter id over the longer one
    assert.deepEqual(read(), [{ id: "s", token: "2", renewUntil: 20 }]);
    for (let i = 0; i < 1000; i++) {
      writer.drop(0);
      assert.equal(writer.hold(`j${i + 1}`, String(i + 1), i + 1), 0);
      assert.deepEqual(read(), [{ id: `j${i + 1}`, token: String(i + 1), renewUntil: i + 1 }]);
    }
  });

  test("an entry caught mid-write is not read half-written: the reader keeps its last whole read", () => {
    const { writer, reader } = pair(1);
    writer.hold("a", "1", 100);
    assert.deepEqual(reader.read(), [{ id: "a", token: "1", renewUntil: 100 }]);
    // Simulate the writer paused inside a write: sequence word odd, fields half changed.
    const seq = new Int32Array(writer.buffer, 16, 1);
    Atomics.add(seq, 0, 1);
    const view = new Uint16Array(
      writer.buffer,
      writer.buffer.byteLength - (MAX_ID_UNITS + MAX_TOKEN_UNITS) * 2,
      1,
    );
    view[0] = "z".charCodeAt(0);
    assert.deepEqual(reader.read(), [{ id: "a", token: "1", renewUntil: 100 }]);
    Atomics.add(seq, 0, 1); // write finished
    assert.deepEqual(reader.read(), [{ id: "z", token: "1", renewUntil: 100 }]);
  });

  test("a full table and a too-long id or token refuse the lease (the caller sends it by message)", () => {
    const { writer, read } = pair(2);
    writer.hold("a", "1", 1);
    const b = writer.hold("b", "2", 1);
    assert.equal(writer.hold("c", "3", 1), NO_SLOT); // full
    writer.drop(b);
    assert.equal(writer.hold("c", "3", 1), b);
    writer.drop(b);
    assert.equal(writer.hold("x".repeat(MAX_ID_UNITS + 1), "5", 1), NO_SLOT);
    assert.equal(writer.hold("d", "9".repeat(MAX_TOKEN_UNITS + 1), 1), NO_SLOT);
    assert.deepEqual(
      read().map((l) => `${l.id}/${l.token}`),
      ["a/1"],
    );
  });

  test("leaseTableSlots leaves headroom over the concurrency", () => {
    assert.equal(leaseTableSlots(1), 10);
    assert.equal(leaseTableSlots(8), 24);
  });
});

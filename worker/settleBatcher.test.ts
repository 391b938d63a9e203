// How completions are grouped into settle_jobs calls. The consumer here only records the calls it
// is given and answers when the test says so; that the calls settle and claim correctly against
// a real Redis is test/worker's business.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { ClaimedJob, Consumer, Lease, Settlement, SettledBatch } from "../queue/index.ts";
import { SettleBatcher, SPLIT_MIN, type BatchSlots } from "./settleBatcher.ts";

interface Call {
  ids: string[];
  claim: number;
  answer: () => void;
}

function recordingConsumer(calls: Call[]): Consumer {
  const settleMany = (batch: readonly { job: Lease; settlement: Settlement }[], claim = 0) =>
    new Promise<SettledBatch>((resolve) => {
      const jobs = Array.from(
        { length: claim },
        (_, i) => ({ id: `new-${calls.length}-${i}` }) as ClaimedJob,
      );
      calls.push({
        ids: batch.map((p) => p.job.id),
        claim,
        answer: () => resolve({ outcomes: batch.map(() => "settled"), jobs, nextDueAt: null }),
      });
    });
  return { settleMany } as unknown as Consumer;
}

/** `running` jobs hold every slot: each completion may claim one job for its own slot. */
function fullSlots(running: number): BatchSlots {
  return { forCompletions: (n) => n, reserve: () => () => {}, running: () => running };
}

const turn = () => new Promise<void>((resolve) => setImmediate(resolve));
const settlement: Settlement = { result: null };

function finish(batcher: SettleBatcher, ids: string[]) {
  return ids.map((id) => batcher.settle({ id, token: "1" }, settlement));
}

describe("SettleBatcher", () => {
  it("sends the completions of one turn in one call when the batch is small", async () => {
    const calls: Call[] = [];
    const batcher = new SettleBatcher(recordingConsumer(calls), fullSlots(SPLIT_MIN));
    const ids = Array.from({ length: SPLIT_MIN - 1 }, (_, i) => `j${i}`);
    const done = finish(batcher, ids);
    await turn();
    await turn();
    assert.deepEqual(
      calls.map((c) => c.ids),
      [ids],
    );
    calls[0]!.answer();
    const results = await Promise.all(done);
    assert.deepEqual(
      results.map((r) => r.jobs.length),
      ids.map(() => 1),
    );
  });

  it("splits a large batch into two calls, the second a turn later, each claiming for its own slots", async () => {
    const calls: Call[] = [];
    const batcher = new SettleBatcher(recordingConsumer(calls), fullSlots(16));
    const ids = Array.from({ length: 16 }, (_, i) => `j${i}`);
    const done = finish(batcher, ids);
    // Every running job finished: the batch closes at once, and its first half goes out.
    await Promise.resolve();
    assert.equal(calls.length, 1);
    assert.deepEqual(calls[0]!.ids, ids.slice(0, 8));
    await turn();
    assert.equal(calls.length, 2);
    assert.deepEqual(calls[1]!.ids, ids.slice(8));
    assert.deepEqual(
      calls.map((c) => c.claim),
      [8, 8],
    );
    for (const c of calls) c.answer();
    const results = await Promise.all(done);
    assert.deepEqual(
      results.map((r) => r.outcome),
      ids.map(() => "settled"),
    );
    assert.equal(new Set(results.flatMap((r) => r.jobs.map((j) => j.id))).size, 16);
  });

  it("does not split while another call is in flight: two calls at most", async () => {
    const calls: Call[] = [];
    const batcher = new SettleBatcher(recordingConsumer(calls), fullSlots(16));
    const first = finish(
      batcher,
      Array.from({ length: 16 }, (_, i) => `a${i}`),
    );
    await turn();
    assert.equal(calls.length, 2);
    // The first half is answered; its jobs finish while the second half is still out.
    calls[0]!.answer();
    await Promise.all(first.slice(0, 8));
    const again = finish(
      batcher,
      Array.from({ length: 8 }, (_, i) => `b${i}`),
    );
    await turn();
    await turn();
    assert.equal(calls.length, 3);
    assert.equal(calls[2]!.ids.length, 8);
    calls[1]!.answer();
    calls[2]!.answer();
    await Promise.all([...first, ...again]);
  });
});

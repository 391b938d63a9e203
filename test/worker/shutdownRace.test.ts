// A claim in flight when SIGTERM arrives: its reply comes after the drain began. The jobs it
// claimed must be handed back at once (released with their token, no attempt counted) — not
// started by a worker that is stopping, and never left to lapse with their lease. Redis holds
// the reply with CLIENT PAUSE WRITE (scripts that write wait while it lasts), so the race is
// made, not hoped for.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import type { Producer, QueueAdmin, RedisClient } from "../../queue/index.ts";
import { waitFor } from "../support/processes.ts";
import { WorkerTestBed } from "../support/testbed.ts";
import { readExecutions } from "../support/workers.ts";

describe("SIGTERM while a claim is in flight", () => {
  const bed = new WorkerTestBed("race");
  let redis: RedisClient;
  let producer: Producer;
  let admin: QueueAdmin;
  before(async () => {
    await bed.start();
    ({ redis, producer, admin } = bed);
  });
  after(async () => {
    await redis.call("CLIENT", "UNPAUSE").catch(() => {});
    await bed.stop();
  });

  /** The worker's command connection is waiting for Redis to run a script (paused). */
  const claimHeld = (workerId: string) =>
    waitFor(`the claim of ${workerId} held by the pause`, async () => {
      const list = String(await redis.call("CLIENT", "LIST", "TYPE", "normal"));
      return list
        .split("\n")
        .some(
          (l) =>
            l.includes(` name=conveyor-worker:${workerId} `) &&
            / flags=\w*b/.test(l) &&
            /cmd=(fcall|evalsha)\b/.test(l),
        );
    });

  /** Pause script writes (renewals, claims, settles) until UNPAUSE. */
  const pauseWrites = () => redis.call("CLIENT", "PAUSE", 60_000, "WRITE");

  test("the loop's claim answers after the drain began: its job runs on the draining worker, not abandoned", async () => {
    const q = "race-claim";
    const workerId = "race-claim-1";
    const w = await bed.worker(q, { CONVEYOR_WORKER_ID: workerId, CONVEYOR_CONCURRENCY: "2" });
    // A job due in a moment: the idle worker claims it when it is due — while writes are paused.
    await producer.enqueue(q, { sleepMs: 10 }, { id: "late", delayMs: 1500 });
    await pauseWrites();
    await claimHeld(workerId);
    w.signal("SIGTERM");
    await waitFor("the worker draining", async () => /draining: no new jobs/.test(w.logs()));
    await redis.call("CLIENT", "UNPAUSE");
    assert.equal(await w.exited, 0, w.logs());
    const job = await admin.job("late", q);
    // Before: the drain ended at once (nothing was running) and the job stayed active, owned by a
    // worker that had exited, until its lease lapsed.
    assert.equal(job?.state, "completed", `run by the draining worker, not left in flight: ${w.logs()}`);
    assert.equal(job.handbacks ?? 0, 0, "nothing handed back");
    assert.deepEqual(
      readExecutions(bed.execLog(q)).map((e) => e.id),
      ["late"],
    );
  });

  test("a complete-and-claim answers after the drain began: both jobs finish on the draining worker", async () => {
    const q = "race-settle";
    const workerId = "race-settle-1";
    // One slot: the first job's completion claims the second for its slot.
    await producer.enqueue(q, { sleepMs: 1500 }, { id: "first", priority: 10 });
    await producer.enqueue(q, { sleepMs: 10 }, { id: "second" });
    const w = await bed.worker(q, { CONVEYOR_WORKER_ID: workerId, CONVEYOR_CONCURRENCY: "1" });
    await waitFor("the first job running", async () => (await admin.job("first", q))?.state === "active");
    await pauseWrites();
    await claimHeld(workerId);
    w.signal("SIGTERM");
    await waitFor("the worker draining", async () => /draining: no new jobs/.test(w.logs()));
    await redis.call("CLIENT", "UNPAUSE");
    assert.equal(await w.exited, 0, w.logs());
    assert.equal((await admin.job("first", q))?.state, "completed");
    const second = await admin.job("second", q);
    assert.equal(second?.state, "completed", `run by the draining worker, not left in flight: ${w.logs()}`);
    assert.equal(second.handbacks ?? 0, 0, "nothing handed back");
    const ran = readExecutions(bed.execLog(q)).map((e) => e.id);
    assert.deepEqual(ran, ["first", "second"]);
  });
});

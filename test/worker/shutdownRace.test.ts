// A claim in flight when SIGTERM arrives: its reply comes after the drain began. The jobs it
// claimed run on the draining worker like any others (the drain waits for claims in flight, then
// for the jobs) — never left to lapse with their lease. Redis holds the reply with CLIENT PAUSE
// WRITE (scripts that write wait while it lasts), so the race is made, not hoped for; each test
// first makes sure the script held is the one it means, since the pause also holds the worker's
// other writes (its busy report while the heartbeat thread starts).
import assert from "node:assert/strict";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
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

  /** Waits until the connection named `name` is blocked in Redis on a command matching `cmd`. */
  const blockedOn = (what: string, name: string, cmd: RegExp) =>
    waitFor(what, async () =>
      String(await redis.call("CLIENT", "LIST", "TYPE", "normal"))
        .split("\n")
        .some((l) => l.includes(` name=${name} `) && / flags=\w*b/.test(l) && cmd.test(l)),
    );

  /** The worker's command connection is waiting for Redis to run a script (paused). */
  const claimHeld = (workerId: string) =>
    blockedOn(
      `the claim of ${workerId} held by the pause`,
      `conveyor-worker:${workerId}`,
      /cmd=(fcall|evalsha)\b/,
    );

  /**
   * The worker waits for work: its wait connection is blocked in BLPOP. Its loop claims before it
   * waits, so no claim is in flight or about to be sent until that wait ends.
   */
  const waitingForWork = (workerId: string) =>
    blockedOn(`${workerId} waiting for work`, `conveyor-wait:${workerId}`, /cmd=blpop\b/);

  /** Pause script writes (renewals, claims, settles) until UNPAUSE. */
  const pauseWrites = () => redis.call("CLIENT", "PAUSE", 60_000, "WRITE");

  test("the loop's claim answers after the drain began: its job runs on the draining worker, not abandoned", async () => {
    const q = "race-claim";
    const workerId = "race-claim-1";
    const w = await bed.worker(q, { CONVEYOR_WORKER_ID: workerId, CONVEYOR_CONCURRENCY: "2" });
    // A job due in a moment: the idle worker claims it when it is due — while writes are paused.
    await producer.enqueue(q, { sleepMs: 10 }, { id: "late", delayMs: 1500 });
    // (any claim the enqueue woke has been answered: the claim held below is the one at its due time)
    await waitingForWork(workerId);
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
    // One slot: the first job's completion claims the second for its slot. The first runs until the
    // test says so, so its completion is sent while writes are paused.
    const release = join(bed.dir, "race-settle.release");
    const endLog = join(bed.dir, "race-settle.end");
    await producer.enqueue(q, { untilFile: release }, { id: "first", priority: 10 });
    await producer.enqueue(q, { sleepMs: 10 }, { id: "second" });
    const w = await bed.worker(q, {
      CONVEYOR_WORKER_ID: workerId,
      CONVEYOR_CONCURRENCY: "1",
      EXEC_END_LOG: endLog,
    });
    await waitFor("the first job running", async () => (await admin.job("first", q))?.state === "active");
    await pauseWrites();
    writeFileSync(release, "");
    // The handler returned: its settle goes out in the same turn of the worker's event loop, before
    // the worker can take a signal — so the SIGTERM below finds it in flight.
    await waitFor(
      "the first job's handler returned",
      async () => existsSync(endLog) && readFileSync(endLog, "utf8").includes('"id":"first"'),
    );
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

// Pipeline features on real Redis with real worker processes: progress and ordered events,
// result reuse by content hash, worker recycling, and the handler circuit breaker.
import assert from "node:assert/strict";
import { unlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import {
  connectRedis,
  Producer,
  QueueAdmin,
  QueueEvents,
  type QueueEvent,
  type RedisClient,
} from "../../queue/index.ts";
import { waitFor } from "../support/processes.ts";
import type { RedisServer } from "../support/redis.ts";
import { WorkerTestBed } from "../support/testbed.ts";
import { countBy, metricValue, readExecutions } from "../support/workers.ts";

describe("pipeline features", () => {
  const bed = new WorkerTestBed("f");
  let server: RedisServer;
  let redis: RedisClient;
  let producer: Producer;
  let admin: QueueAdmin;
  let dir: string;
  before(async () => {
    await bed.start();
    ({ server, redis, producer, admin, dir } = bed);
  });
  after(() => bed.stop());
  const execLog = (q: string) => bed.execLog(q);
  const worker = (q: string, extra: Record<string, string> = {}, waitReady = true) =>
    bed.worker(q, extra, { waitReady });

  test("progress is visible while a job runs and its events arrive in order", async () => {
    const q = "progress";
    const blocking = connectRedis(server.url, { blocking: true });
    const abort = new AbortController();
    const seen: QueueEvent[] = [];
    const following = (async () => {
      for await (const e of new QueueEvents(redis).follow(blocking, q, {
        from: "0",
        signal: abort.signal,
        blockMs: 200,
      })) {
        seen.push(e);
        if (e.type === "completed") break;
      }
    })();
    await worker(q);
    await producer.enqueue(q, { progressSteps: 4, stepMs: 150 }, { id: "p1" });
    const midway = await waitFor("progress midway", async () => {
      const info = await redis.hmget(`cvy:{${q}}:job:p1`, "state", "progress");
      return info[0] === "active" && Number(info[1]) > 0 && Number(info[1]) < 1 ? info : null;
    });
    assert.equal(midway[0], "active");
    await following;
    abort.abort();
    blocking.disconnect();
    const types = seen
      .filter((e) => e.id === "p1")
      .map((e) => (e.type === "progress" ? `progress ${e.fields.progress}` : e.type));
    assert.deepEqual(types, [
      "enqueued",
      "started",
      "progress 0.25",
      "progress 0.5",
      "progress 0.75",
      "progress 1",
      "completed",
    ]);
    const ids = seen.map((e) => e.eventId);
    assert.deepEqual(
      [...ids].sort((a, b) =>
        (BigInt(a.split("-")[0]!) - BigInt(b.split("-")[0]!) ||
          Number(a.split("-")[1]) - Number(b.split("-")[1])) > 0
          ? 1
          : -1,
      ),
      ids,
    );
    assert.equal((await new QueueEvents(redis).recent(q)).at(-1)?.type, "completed");
  });

  test("a second job with the same content hash reuses the result and does not call the handler", async () => {
    const q = "reuse/a";
    const w = await worker(q);
    await producer.enqueue(q, { result: { text: "expensive" } }, { id: "r1", contentHash: "sha256:doc-1" });
    await waitFor("first done", async () => (await admin.job("r1", q))?.state === "completed");
    await producer.enqueue(
      q,
      { result: { text: "should not run" } },
      { id: "r2", contentHash: "sha256:doc-1" },
    );
    await producer.enqueue(q, { result: { text: "other" } }, { id: "r3", contentHash: "sha256:doc-2" });
    await producer.enqueue(q, { result: { text: "no hash" } }, { id: "r4" });
    await waitFor("all done", async () => (await admin.counts(q)).completed === 4);
    const ran = readExecutions(execLog(q))
      .map((e) => e.id)
      .sort();
    assert.deepEqual(ran, ["r1", "r3", "r4"]);
    assert.deepEqual(JSON.parse((await admin.job("r2", q))!.result!), { text: "expensive" });
    assert.equal(metricValue(await w.metrics(), "conveyor_results_reused_total", { queue: q }), 1);
    assert.equal((await admin.counters(q)).reused, 1);
  });

  test("--max-jobs 50 recycles the worker without losing or re-running a job", async () => {
    const q = "recycle";
    await producer.enqueueMany(
      q,
      Array.from({ length: 200 }, (_, i) => ({ id: `m${i}`, data: { sleepMs: 2 } })),
    );
    const exits: (number | string)[] = [];
    // Restart like Kubernetes restarts a container that exited 0, until the queue is empty; the
    // last worker may get fewer than 50 jobs, so it is stopped once everything is done.
    for (;;) {
      const w = await worker(q, { CONVEYOR_MAX_JOBS: "50", CONVEYOR_CONCURRENCY: "4" }, false);
      let allDone = false;
      while (w.child.exitCode === null && !allDone) {
        allDone = (await admin.counts(q)).completed === 200;
        await new Promise((r) => setTimeout(r, 50));
      }
      if (w.child.exitCode === null) w.signal("SIGTERM");
      exits.push(await w.exited);
      if (!allDone) assert.match(w.logs(), /recycle: \d+ jobs done \(max 50\)/);
      if ((await admin.counts(q)).completed === 200) break;
    }
    assert.ok(exits.length >= 4 && exits.every((c) => c === 0), `exits ${exits}`);
    const runs = countBy(readExecutions(execLog(q)), (e) => e.id);
    assert.equal(runs.size, 200);
    assert.deepEqual(
      [...runs.values()].filter((v) => v !== 1),
      [],
    );
    const counters = await admin.counters(q);
    assert.equal(counters.handedBack ?? 0, 0);
    assert.equal(counters.stalled ?? 0, 0);
  });

  test("a stop signal while a recycled worker exits leaves its exit 0", async () => {
    const q = "recycle-signal";
    const w = await worker(q, { CONVEYOR_MAX_JOBS: "1" });
    await producer.enqueue(q, { sleepMs: 1 }, { id: "s1" });
    // (its log reaches the file late, written asynchronously: the job's completion says it is time)
    await waitFor("the job done", async () => (await admin.counts(q)).completed === 1);
    // Kubernetes may send its SIGTERM at any point of the exit: keep sending until the process is gone.
    while (w.child.exitCode === null && w.child.signalCode === null) {
      w.signal("SIGTERM");
      await new Promise((r) => setTimeout(r, 2));
    }
    assert.equal(await w.exited, 0);
    assert.match(w.logs(), /recycle: 1 jobs done \(max 1\)/);
  });

  test("an open circuit stops claims and closes again after the dependency recovers", async () => {
    const q = "circuit";
    const flag = join(dir, "dependency-down");
    writeFileSync(flag, "down");
    const w = await worker(q, { CONVEYOR_CIRCUIT_THRESHOLD: "3", CONVEYOR_CIRCUIT_BACKOFF: "1s" });
    await producer.enqueueMany(
      q,
      Array.from({ length: 10 }, (_, i) => ({ id: `c${i}`, data: { dependencyFlag: flag }, attempts: 2 })),
    );
    await waitFor(
      "circuit open",
      async () => metricValue(await w.metrics(), "conveyor_circuit_open", { queue: q }) === 1,
    );
    assert.equal((await fetch(`http://127.0.0.1:${w.port}/readyz`)).status, 503);
    const runsWhileOpen = readExecutions(execLog(q)).length;
    assert.equal(runsWhileOpen, 3, "claims stop once the circuit opens");
    const c = await admin.counts(q);
    assert.equal(c.ready, 10, "deferred jobs wait, attempts untouched");
    assert.equal(c.dead, 0);
    unlinkSync(flag);
    await waitFor("all complete", async () => (await admin.counts(q)).completed === 10, 120_000);
    assert.equal(metricValue(await w.metrics(), "conveyor_circuit_open", { queue: q }), 0);
    assert.equal((await fetch(`http://127.0.0.1:${w.port}/readyz`)).status, 200);
    // (the attempt that completed; a deferral is not an attempt)
    for (let i = 0; i < 10; i++) assert.equal((await admin.job(`c${i}`, q))!.attemptsMade, 1);
    assert.match(w.logs(), /circuit closed: dependency recovered/);
  });
});

describe("fan-out / fan-in with worker processes", () => {
  const bed = new WorkerTestBed("fan");
  before(() => bed.start());
  after(() => bed.stop());

  test("1 → 100 with a join: the join runs once with 100 results, also when a worker is SIGKILLed during the fan-in", async () => {
    const { redis } = bed;
    const execLog = join(bed.dir, "exec.ndjson");
    const start = (queue: string, extra: Record<string, string> = {}) =>
      bed.worker(queue, { EXEC_LOG: execLog, ...extra });
    await start("fan/split", { CONVEYOR_NEXT_QUEUE: "fan/work" });
    const lease = { CONVEYOR_LEASE: "1s", CONVEYOR_CONCURRENCY: "8" };
    const victim = await start("fan/work", lease);
    await start("fan/work", lease);
    await start("fan/join");
    const admin = new QueueAdmin(redis);
    await new Producer(redis).enqueue(
      "fan/split",
      { fanOut: 100, join: "fan/join", childSleepMs: 100 },
      { id: "doc" },
    );
    await waitFor("fan-in under way", async () => (await admin.counts("fan/work")).completed >= 20);
    victim.signal("SIGKILL");
    await victim.exited;
    await waitFor(
      "join completed",
      async () => (await admin.job("doc:join", "fan"))?.state === "completed",
      120_000,
    );
    const joins = readExecutions(execLog).filter((e) => e.q === "fan/join");
    assert.equal(joins.length, 1, "the join ran exactly once");
    assert.deepEqual(JSON.parse((await admin.job("doc:join", "fan"))!.result!), {
      joined: "doc",
      count: 100,
      sum: 4950,
    });
    const children = countBy(
      readExecutions(execLog).filter((e) => e.q === "fan/work"),
      (e) => e.id,
    );
    assert.equal(children.size, 100);
    assert.ok(
      (await admin.counters("fan/work")).stalled! >= 1,
      "the killed worker's children were redelivered",
    );
  });
});

// Batch handlers with real worker processes on a real Redis: one call carries several jobs and
// each job keeps its own outcome (result, failure, dead at once, a result its contract refuses),
// a thrown call fails every job of it (each retried alone), a wrong-length answer fails them all,
// --batch-min/--batch-wait decide when a call starts, SIGTERM lets a call finish and settle,
// SIGKILL runs each job once more at most, and a call longer than the lease keeps every lease.
import assert from "node:assert/strict";
import { once } from "node:events";
import { readFileSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import {
  parseLimits,
  QueueKeys,
  resourceState,
  setContract,
  setGroupLimit,
  setResource,
  type JobInfo,
  type QueueAdmin,
} from "../../queue/index.ts";
import { waitFor } from "../support/processes.ts";
import { WorkerTestBed } from "../support/testbed.ts";
import { metricValue, REPO } from "../support/workers.ts";

const HANDLER = `module:${join(REPO, "test/fixtures/batchHandler.js")}`;
const FAST_RETRIES = { CONVEYOR_BACKOFF_BASE: "20ms", CONVEYOR_BACKOFF_MAX: "100ms" };

interface CallLine {
  event: "start" | "end";
  pid: number;
  t: number;
  ids: string[];
  attempts?: number[];
  /** Per job: resource → the key it was granted. */
  keys?: Record<string, string>[];
  threw?: boolean;
}

function calls(file: string): CallLine[] {
  let text = "";
  try {
    text = readFileSync(file, "utf8");
  } catch {
    return [];
  }
  return text
    .split("\n")
    .filter(Boolean)
    .flatMap((l) => {
      try {
        return [JSON.parse(l) as CallLine];
      } catch {
        return []; // a line cut short by a SIGKILL
      }
    });
}

async function finished(admin: QueueAdmin, id: string, queue: string): Promise<JobInfo> {
  return waitFor(`job ${id} finished`, async () => {
    const info = await admin.job(id, queue);
    return info && ["completed", "dead"].includes(info.state) ? info : null;
  });
}

const kinds = (info: JobInfo) =>
  (JSON.parse(info.errors ?? "[]") as { kind: string; message: string }[]).map((e) => [e.kind, e.message]);

describe("batch handlers", () => {
  const bed = new WorkerTestBed("bat");
  before(() => bed.start());
  after(() => bed.stop());
  const log = (q: string) => join(bed.dir, `${q.replace("/", "_")}.calls`);
  const worker = (q: string, env: Record<string, string> = {}) =>
    bed.worker(q, {
      CONVEYOR_HANDLER: HANDLER,
      BATCH_LOG: log(q),
      CONVEYOR_BATCH_SIZE: "10",
      ...FAST_RETRIES,
      ...env,
    });

  test("one call, an outcome per job: a result, a failure retried alone, dead at once, a contract violation", async () => {
    const q = "mixed";
    await setContract(
      bed.redis,
      q,
      { result: { type: "object", required: ["name"], properties: { name: { type: "string" } } } },
      "test",
    );
    // (all five in the first call: it starts once five are claimed; the retries, fewer, after 1 s)
    await worker(q, { CONVEYOR_BATCH_MIN: "5", CONVEYOR_BATCH_WAIT: "1s" });
    await bed.producer.enqueueMany(q, [
      { id: "ok", data: { result: { name: "a" } } },
      { id: "again", data: { failFirst: "flaky", result: { name: "b" } }, attempts: 3 },
      { id: "bad", data: { dead: "bad input" }, attempts: 3 },
      { id: "invalid", data: { results: [{ name: 1 }, { name: "fixed" }] }, attempts: 3 },
      { id: "ok2", data: { result: { name: "c" } } },
    ]);
    const ok = await finished(bed.admin, "ok", q);
    assert.equal(ok.state, "completed");
    assert.deepEqual(JSON.parse(ok.result!), { name: "a" });
    assert.equal((await finished(bed.admin, "ok2", q)).state, "completed");
    const again = await finished(bed.admin, "again", q);
    assert.equal(again.state, "completed");
    assert.equal(again.attemptsMade, 2);
    assert.deepEqual(kinds(again), [["exception", "flaky"]]);
    const bad = await finished(bed.admin, "bad", q);
    assert.equal(bad.state, "dead");
    assert.equal(bad.attemptsMade, 1, "retryable: false is dead at once");
    assert.match(bad.deadReason ?? "", /bad input/);
    const invalid = await finished(bed.admin, "invalid", q);
    assert.equal(invalid.state, "completed");
    assert.equal(invalid.attemptsMade, 2);
    assert.equal(kinds(invalid)[0]![0], "invalid-result");
    assert.deepEqual(JSON.parse(invalid.result!), { name: "fixed" });
    const first = calls(log(q)).find((c) => c.event === "start")!;
    assert.deepEqual([...first.ids].sort(), ["again", "bad", "invalid", "ok", "ok2"]);
  });

  test("a thrown call fails every job of it, each retried on its own; a wrong-length answer fails them all", async () => {
    const q = "thrown";
    await worker(q, { CONVEYOR_BATCH_MIN: "3", CONVEYOR_BATCH_WAIT: "60s" });
    await bed.producer.enqueueMany(q, [
      { id: "t1", data: { throwFirst: "endpoint down", result: 1 }, attempts: 2 },
      { id: "t2", data: { result: 2 }, attempts: 2 },
      { id: "t3", data: { result: 3 }, attempts: 2 },
    ]);
    for (const [id, result] of [
      ["t1", 1],
      ["t2", 2],
      ["t3", 3],
    ] as const) {
      const info = await finished(bed.admin, id, q);
      assert.equal(info.state, "completed");
      assert.equal(info.attemptsMade, 2);
      assert.deepEqual(kinds(info), [["exception", "endpoint down"]]);
      assert.equal(JSON.parse(info.result!), result);
    }
    const q2 = "short";
    await worker(q2, { CONVEYOR_BATCH_MIN: "2", CONVEYOR_BATCH_WAIT: "60s" });
    await bed.producer.enqueueMany(q2, [
      { id: "s1", data: { short: true }, attempts: 1 },
      { id: "s2", data: { result: 2 }, attempts: 1 },
    ]);
    for (const id of ["s1", "s2"]) {
      const info = await finished(bed.admin, id, q2);
      assert.equal(info.state, "dead");
      assert.match(
        info.deadReason ?? "",
        /batch handler answered 1 outcome\(s\) for 2 job\(s\): it must return an array with one outcome per job, in order/,
      );
    }
  });

  test("--batch-min: no call until that many are claimed; --batch-wait: a smaller call once it passed", async () => {
    const q = "minsize";
    const w = await worker(q, { CONVEYOR_BATCH_MIN: "5", CONVEYOR_BATCH_WAIT: "60s" });
    await bed.producer.enqueueMany(
      q,
      Array.from({ length: 4 }, (_, i) => ({ id: `m${i}`, data: { result: i } })),
    );
    await waitFor("4 claimed", async () => (await bed.admin.counts(q)).inflight === 4);
    assert.equal(calls(log(q)).length, 0, "4 claimed, fewer than --batch-min: no call yet");
    await bed.producer.enqueue(q, { result: 4 }, { id: "m4" });
    for (let i = 0; i < 5; i++) assert.equal((await finished(bed.admin, `m${i}`, q)).state, "completed");
    assert.deepEqual(
      calls(log(q))
        .filter((c) => c.event === "start")
        .map((c) => c.ids.length),
      [5],
    );
    const metrics = await w.metrics();
    assert.equal(metricValue(metrics, "conveyor_batch_call_jobs_count", { queue: q }), 1);
    assert.equal(metricValue(metrics, "conveyor_batch_call_jobs_sum", { queue: q }), 5);
    assert.equal(metricValue(metrics, "conveyor_worker_slots", { queue: q }), 10);

    const q2 = "maxwait";
    await worker(q2, { CONVEYOR_BATCH_MIN: "5", CONVEYOR_BATCH_WAIT: "1500ms" });
    const enqueuedAt = Date.now();
    await bed.producer.enqueueMany(q2, [
      { id: "w1", data: { result: 1 } },
      { id: "w2", data: { result: 2 } },
    ]);
    for (const id of ["w1", "w2"]) assert.equal((await finished(bed.admin, id, q2)).state, "completed");
    const starts = calls(log(q2)).filter((c) => c.event === "start");
    assert.deepEqual(
      starts.map((c) => c.ids.length),
      [2],
    );
    assert.ok(starts[0]!.t - enqueuedAt >= 1500, `the call waited ${starts[0]!.t - enqueuedAt} ms`);
  });

  test("a call past its timeout fails each job as timed out; after the kill grace its slot serves the retries", async () => {
    const q = "timeout";
    // One call at a time: the retries can only run once the hung call's slot is given up.
    await worker(q, {
      CONVEYOR_JOB_TIMEOUT: "500ms",
      CONVEYOR_KILL_GRACE: "200ms",
      CONVEYOR_BATCH_MIN: "2",
      CONVEYOR_BATCH_WAIT: "1s",
    });
    await bed.producer.enqueueMany(q, [
      { id: "h1", data: { hangFirst: 120_000, result: 1 }, attempts: 2 },
      { id: "h2", data: { result: 2 }, attempts: 2 },
    ]);
    for (const id of ["h1", "h2"]) {
      const info = await finished(bed.admin, id, q);
      assert.equal(info.state, "completed", id);
      assert.equal(info.attemptsMade, 2, id);
      const [kind, message] = kinds(info)[0]!;
      assert.equal(kind, "timeout", id);
      assert.match(String(message), /batch call of 2 job\(s\) exceeded its timeout of 500ms/);
    }
  });

  test("a job cancelled while it waits for its batch is not sent to the handler; the others are", async () => {
    const q = "cancelwait";
    const w = await worker(q, {
      CONVEYOR_LEASE: "600ms",
      CONVEYOR_KILL_GRACE: "100ms",
      CONVEYOR_BATCH_MIN: "3",
      CONVEYOR_BATCH_WAIT: "60s",
    });
    await bed.producer.enqueueMany(q, [
      { id: "c1", data: { result: 1 } },
      { id: "c2", data: { result: 2 } },
    ]);
    await waitFor("2 claimed", async () => (await bed.admin.counts(q)).inflight === 2);
    assert.equal((await bed.admin.cancel("c1", q)).outcome, "cancelled");
    // (the worker sees the cancel at a lease renewal and drops the waiting job after its kill grace)
    await waitFor("c1 dropped by the worker", async () => /job was cancelled while it ran/.test(w.logs()));
    await bed.producer.enqueueMany(q, [
      { id: "c3", data: { result: 3 } },
      { id: "c4", data: { result: 4 } },
    ]);
    for (const id of ["c2", "c3", "c4"]) assert.equal((await finished(bed.admin, id, q)).state, "completed");
    const starts = calls(log(q)).filter((c) => c.event === "start");
    assert.deepEqual(
      starts.map((c) => [...c.ids].sort()),
      [["c2", "c3", "c4"]],
    );
  });

  test("SIGTERM mid call: the call finishes and its jobs settle, none handed back; exit 0", async () => {
    const q = "sigterm";
    const w = await worker(q, { CONVEYOR_BATCH_MIN: "4", CONVEYOR_BATCH_WAIT: "60s" });
    await bed.producer.enqueueMany(
      q,
      Array.from({ length: 4 }, (_, i) => ({ id: `g${i}`, data: { sleepMs: 1500, result: i } })),
    );
    await waitFor("call started", async () => calls(log(q)).some((c) => c.event === "start"));
    w.signal("SIGTERM");
    assert.equal(await w.exited, 0);
    for (let i = 0; i < 4; i++) {
      const info = await bed.admin.job(`g${i}`, q);
      assert.equal(info!.state, "completed");
      assert.equal(info!.handbacks, 0);
      assert.equal(info!.attemptsMade, 1);
    }
    assert.deepEqual(
      calls(log(q)).map((c) => c.event),
      ["start", "end"],
    );
    assert.doesNotMatch(w.logs(), /handed back/);
  });

  test("SIGKILL mid call: each job runs once more at most, elsewhere", async () => {
    const q = "sigkill";
    const env = { CONVEYOR_LEASE: "1s", CONVEYOR_BATCH_MIN: "4", CONVEYOR_BATCH_WAIT: "60s" };
    const doomed = await worker(q, env);
    await bed.producer.enqueueMany(
      q,
      Array.from({ length: 4 }, (_, i) => ({ id: `k${i}`, data: { sleepMs: 60_000, result: i } })),
    );
    await waitFor("call started", async () => calls(log(q)).some((c) => c.event === "start"));
    doomed.signal("SIGKILL");
    await doomed.exited;
    // Short calls now, for the rescuer: the data rewritten, the ids kept.
    const k = new QueueKeys(q);
    for (let i = 0; i < 4; i++) await bed.redis.hset(k.job(`k${i}`), "data", JSON.stringify({ result: i }));
    await worker(q, { ...env, CONVEYOR_BATCH_MIN: "1", CONVEYOR_BATCH_WAIT: "0ms" });
    for (let i = 0; i < 4; i++) {
      const info = await finished(bed.admin, `k${i}`, q);
      assert.equal(info.state, "completed");
      assert.equal(info.stalls, 1);
    }
    const runs = new Map<string, number>();
    for (const c of calls(log(q)).filter((c) => c.event === "start"))
      for (const id of c.ids) runs.set(id, (runs.get(id) ?? 0) + 1);
    assert.deepEqual([...runs.values()], [2, 2, 2, 2]);
  });

  test("a call longer than the lease keeps every job's lease: no stall, one call", async () => {
    const q = "longcall";
    await worker(q, { CONVEYOR_LEASE: "500ms", CONVEYOR_BATCH_MIN: "3", CONVEYOR_BATCH_WAIT: "60s" });
    await bed.producer.enqueueMany(
      q,
      Array.from({ length: 3 }, (_, i) => ({ id: `l${i}`, data: { sleepMs: 2500, result: i } })),
    );
    for (let i = 0; i < 3; i++) {
      const info = await finished(bed.admin, `l${i}`, q);
      assert.equal(info.state, "completed");
      assert.equal(info.stalls, 0);
      assert.equal(info.attemptsMade, 1);
    }
    assert.deepEqual(
      calls(log(q)).map((c) => c.event),
      ["start", "end"],
    );
  });

  test('command and http handlers: {"jobs"} in, {"outcomes"} out, an error outcome fails only its job', async () => {
    const cmd = join(REPO, "test/fixtures/batchCommand.mjs");
    const kinds: [string, string][] = [["cmdbatch", `command:${JSON.stringify([process.execPath, cmd])}`]];
    const sidecar = createServer((req, res) => {
      let body = "";
      req.on("data", (c: Buffer) => (body += c.toString()));
      req.on("end", () => {
        const { jobs } = JSON.parse(body) as {
          jobs: { data: { n: number; fail?: string }; attempt: number }[];
        };
        const outcomes = jobs.map((j) =>
          j.data.fail
            ? { error: { name: "BadRow", message: j.data.fail }, retryable: false }
            : { result: { n: j.data.n * 2, attempt: j.attempt, batch: jobs.length } },
        );
        res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ outcomes }));
      });
    });
    sidecar.listen(0, "127.0.0.1");
    await once(sidecar, "listening");
    kinds.push(["httpbatch", `http://127.0.0.1:${(sidecar.address() as AddressInfo).port}/batch`]);
    try {
      for (const [q, handler] of kinds) {
        await worker(q, { CONVEYOR_HANDLER: handler, CONVEYOR_BATCH_MIN: "3", CONVEYOR_BATCH_WAIT: "60s" });
        await bed.producer.enqueueMany(q, [
          { id: `${q}1`, data: { n: 1 } },
          { id: `${q}2`, data: { n: 2, fail: "row 2 is bad" }, attempts: 3 },
          { id: `${q}3`, data: { n: 3 } },
        ]);
        const one = await finished(bed.admin, `${q}1`, q);
        assert.deepEqual(JSON.parse(one.result!), { n: 2, attempt: 1, batch: 3 }, q);
        const three = await finished(bed.admin, `${q}3`, q);
        assert.deepEqual(JSON.parse(three.result!), { n: 6, attempt: 1, batch: 3 }, q);
        const two = await finished(bed.admin, `${q}2`, q);
        assert.equal(two.state, "dead", q);
        assert.equal(two.attemptsMade, 1, q);
        assert.deepEqual(
          [JSON.parse(two.error!).name, JSON.parse(two.error!).message],
          ["BadRow", "row 2 is bad"],
          q,
        );
      }
    } finally {
      sidecar.closeAllConnections();
      sidecar.close();
    }
  });

  test("groups admit per job: a call mixes groups, no group runs more jobs at once across calls than its limit, a rate-limited group gets no more starts than its rate", async () => {
    const q = "bgroups";
    const limits: Record<string, number> = { ga: 2, gb: 3 };
    for (const [g, concurrency] of Object.entries(limits))
      await setGroupLimit(bed.redis, q, g, { concurrency });
    await setGroupLimit(bed.redis, q, "gr", { rate: { max: 3, perMs: 3_600_000 } });
    // 2 calls of up to 10 at once: 20 slots, far more than the groups allow
    await worker(q, { CONVEYOR_CONCURRENCY: "2", CONVEYOR_BATCH_MIN: "10", CONVEYOR_BATCH_WAIT: "300ms" });
    const jobs = [
      ...["ga", "gb"].flatMap((g) =>
        Array.from({ length: 6 }, (_, i) => ({
          id: `${g}-${i}`,
          data: { sleepMs: 300, result: g },
          group: g,
        })),
      ),
      ...Array.from({ length: 3 }, (_, i) => ({ id: `free-${i}`, data: { sleepMs: 300, result: i } })),
    ];
    const rated = Array.from({ length: 5 }, (_, i) => ({ id: `gr-${i}`, data: { result: i }, group: "gr" }));
    await bed.producer.enqueueMany(q, [...jobs, ...rated]);
    for (const j of jobs) assert.equal((await finished(bed.admin, j.id, q)).state, "completed");
    // 3 starts an hour: 3 of gr's jobs ran, the other 2 wait for the window
    const grDone = async () =>
      (await Promise.all(rated.map((j) => bed.admin.job(j.id, q)))).filter((i) => i?.state === "completed");
    await waitFor("3 of gr completed", async () => (await grDone()).length === 3);
    const lines = calls(log(q));
    const starts = lines.filter((c) => c.event === "start");
    const ended = (c: CallLine) => lines.find((e) => e.event === "end" && e.ids.join() === c.ids.join())!.t;
    const groupOf = (id: string) => id.split("-")[0]!;
    assert.ok(
      starts.some((c) => new Set(c.ids.map(groupOf)).size >= 2),
      `no call mixed groups: ${JSON.stringify(starts.map((c) => c.ids))}`,
    );
    // Each group's jobs in calls that overlapped in time, at the busiest moment.
    for (const [g, limit] of Object.entries(limits)) {
      let most = 0;
      for (const c of starts) {
        const at = c.t;
        const running = starts
          .filter((o) => o.t <= at && ended(o) > at)
          .flatMap((o) => o.ids)
          .filter((id) => groupOf(id) === g).length;
        most = Math.max(most, running);
      }
      assert.ok(most <= limit, `group ${g}: ${most} jobs in calls at once, limit ${limit}`);
      assert.equal(most, limit, `group ${g} reached its limit (so the check above could fail)`);
    }
    const grCalled = starts.flatMap((c) => c.ids).filter((id) => groupOf(id) === "gr");
    assert.equal(grCalled.length, 3, `gr's jobs in calls: ${grCalled.join(", ")}`);
    assert.equal((await bed.admin.counts(q)).inflight, 0, "nothing claimed beyond the rate");
    assert.equal((await grDone()).length, 3);
  });

  test("budgets admit per job: a call mixes keys and free jobs, no key gets more than its budget, ctx.contexts[i].resources names each job's key", async () => {
    const q = "bbudget/embed";
    await setResource(
      bed.redis,
      q,
      "openai",
      [
        { id: "k1", limits: parseLimits("requests=3/1h") },
        { id: "k2", limits: parseLimits("requests=2/1h") },
      ],
      { ceiling: 1 },
    );
    await worker(q, { CONVEYOR_BATCH_MIN: "10", CONVEYOR_BATCH_WAIT: "500ms" });
    await bed.producer.enqueueMany(q, [
      ...Array.from({ length: 8 }, (_, i) => ({ id: `b${i}`, data: { result: i }, uses: { openai: {} } })),
      ...Array.from({ length: 2 }, (_, i) => ({ id: `f${i}`, data: { result: i } })),
    ]);
    // 5 admitted (3 on k1, 2 on k2) and the 2 free jobs; 3 wait for budget
    await waitFor("the budgets spent and 3 jobs waiting for budget", async () => {
      const [counts, state] = await Promise.all([bed.admin.counts(q), resourceState(bed.redis, q, "openai")]);
      return counts.completed === 7 && state!.waiting === 3;
    });
    const starts = calls(log(q)).filter((c) => c.event === "start");
    const granted = starts.flatMap((c) => c.ids.map((id, i) => ({ id, key: c.keys![i]!.openai ?? "" })));
    assert.equal(granted.length, 7, JSON.stringify(granted));
    assert.deepEqual(
      granted.filter((g) => g.id.startsWith("f")).map((g) => g.key),
      ["", ""],
      "a free job is granted nothing",
    );
    const perKey = (k: string) => granted.filter((g) => g.key === k).length;
    assert.equal(perKey("k1"), 3);
    assert.equal(perKey("k2"), 2);
    const state = await resourceState(bed.redis, q, "openai");
    assert.deepEqual(
      Object.fromEntries(state!.keys.map((k) => [k.id, k.admitted])),
      { k1: 3, k2: 2 },
      "the keys the handler was told are the keys the budgets counted",
    );
    assert.ok(
      starts.some((c) => new Set(c.keys!.map((k) => k.openai ?? "")).size >= 2),
      `no call mixed keys: ${JSON.stringify(starts.map((c) => c.keys))}`,
    );
  });

  test("--batch-size above 1 with a handler that takes no batches: the worker refuses to start, saying why", async () => {
    const w = await bed.worker(
      "nobatch",
      {
        CONVEYOR_HANDLER: `module:${join(REPO, "test/fixtures/contractHandler.js")}`,
        CONVEYOR_BATCH_SIZE: "5",
      },
      { waitReady: false },
    );
    assert.equal(await w.exited, 2);
    assert.match(w.logs(), /--batch-size above 1 needs a handler module that exports batch\(jobs, ctx\)/);
  });
});

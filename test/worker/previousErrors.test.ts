// Feedback to retries and named tasks, with real worker processes on a real Redis: each attempt
// after the first is told how the earlier ones ended (exception, timeout, handed-back, stalled),
// capped at 5 entries of 2 KiB; module tasks dispatch by the job's `task`; the http, command and
// python handler kinds receive the task and the previous errors too.
import assert from "node:assert/strict";
import { readFileSync, existsSync } from "node:fs";
import { createServer } from "node:http";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import {
  Consumer,
  parseAttemptErrors,
  QueueKeys,
  type AttemptError,
  type EnqueueOptions,
} from "../../queue/index.ts";
import { waitFor } from "../support/processes.ts";
import { WorkerTestBed } from "../support/testbed.ts";
import { metricValue, REPO } from "../support/workers.ts";

const HANDLER = `module:${join(REPO, "test/fixtures/feedbackHandler.js")}`;

interface Seen {
  id: string;
  attempt: number;
  task: string | null;
  previousErrors: AttemptError[];
  ctxPreviousErrors: AttemptError[];
}

describe("previous errors and named tasks", () => {
  const bed = new WorkerTestBed("fb");
  const feedbackLog = () => join(bed.dir, "feedback.log");
  before(() => bed.start());
  after(() => bed.stop());

  const worker = (queue: string, env: Record<string, string> = {}) =>
    bed.worker(queue, {
      CONVEYOR_HANDLER: HANDLER,
      FEEDBACK_LOG: feedbackLog(),
      CONVEYOR_BACKOFF_BASE: "10ms",
      CONVEYOR_BACKOFF_MAX: "20ms",
      ...env,
    });
  const seen = (id: string): Seen[] =>
    existsSync(feedbackLog())
      ? readFileSync(feedbackLog(), "utf8")
          .split("\n")
          .filter(Boolean)
          .map((l) => JSON.parse(l) as Seen)
          .filter((s) => s.id === id)
      : [];
  const info = async (id: string, queue: string) => (await bed.admin.job(id, queue))!;
  const finished = (id: string, queue: string) =>
    waitFor(`${id} finished`, async () => {
      const j = await bed.admin.job(id, queue);
      return j && (j.state === "completed" || j.state === "dead") ? j : null;
    });
  /** Enqueue, then name the task on the record (before any worker of `queue` runs). */
  const enqueueTask = async (
    queue: string,
    id: string,
    data: unknown,
    task?: string,
    opts: EnqueueOptions = {},
  ) => {
    await bed.producer.enqueue(queue, data, { id, ...opts });
    if (task !== undefined) await bed.redis.hset(new QueueKeys(queue).job(id), "task", task);
  };

  test("an attempt sees the errors of both earlier ones: an exception, then a timeout", async () => {
    const q = "fb-twice";
    await bed.producer.enqueue(q, { plan: ["throw", "timeout"] }, { id: "t1", attempts: 3, timeoutMs: 300 });
    await worker(q);
    const done = await finished("t1", q);
    assert.equal(done.state, "completed");
    const runs = seen("t1");
    assert.deepEqual(
      runs.map((r) => r.previousErrors.map((e) => [e.attempt, e.kind])),
      [
        [],
        [[1, "exception"]],
        [
          [1, "exception"],
          [2, "timeout"],
        ],
      ],
    );
    const last = runs[2]!;
    assert.deepEqual(last.ctxPreviousErrors, last.previousErrors, "ctx.previousErrors is the job's");
    assert.equal(last.previousErrors[0]!.message, "planned failure 1");
    assert.match(last.previousErrors[1]!.message, /job exceeded its timeout of 300ms/);
    for (const e of last.previousErrors) assert.ok(e.at > 0 && e.at <= Date.now());
    assert.deepEqual(JSON.parse(done.result!), { ok: "t1", previous: ["exception", "timeout"] });
  });

  test("a job handed back at the drain deadline: its next attempt sees handed-back", async () => {
    const q = "fb-handback";
    const a = await worker(q, { CONVEYOR_DRAIN_SECONDS: "1" });
    await bed.producer.enqueue(q, { plan: ["wait"] }, { id: "hb" });
    await waitFor("started", async () => seen("hb").length === 1);
    a.signal("SIGTERM");
    assert.equal(await a.exited, 0);
    await worker(q);
    assert.equal((await finished("hb", q)).state, "completed");
    const [entry, ...rest] = seen("hb")[1]!.previousErrors;
    assert.deepEqual(rest, []);
    assert.deepEqual([entry!.attempt, entry!.kind], [1, "handed-back"]);
    assert.match(entry!.message, /drain/);
  });

  test("a job whose worker was SIGKILLed: its next attempt sees stalled", async () => {
    const q = "fb-stalled";
    const lease = { CONVEYOR_LEASE: "1s" };
    const doomed = await worker(q, lease);
    await bed.producer.enqueue(q, { plan: ["wait"] }, { id: "st" });
    await waitFor("started", async () => seen("st").length === 1);
    doomed.signal("SIGKILL");
    await doomed.exited;
    await worker(q, lease);
    assert.equal((await finished("st", q)).state, "completed");
    const runs = seen("st");
    assert.equal(runs.length, 2);
    assert.deepEqual(
      runs[1]!.previousErrors.map((e) => [e.attempt, e.kind]),
      [[1, "stalled"]],
    );
    assert.match(runs[1]!.previousErrors[0]!.message, /lease expired/);
  });

  test("the last 5 attempts are kept, each at most 2 KiB, its message cut", async () => {
    const q = "fb-cap";
    const plan = Array.from({ length: 7 }, () => "throw");
    await bed.producer.enqueue(q, { plan, big: 3000, byAttempt: true }, { id: "cap", attempts: 8 });
    await worker(q);
    assert.equal((await finished("cap", q)).state, "completed");
    const last = seen("cap").at(-1)!;
    assert.equal(last.attempt, 8);
    assert.deepEqual(
      last.previousErrors.map((e) => e.attempt),
      [3, 4, 5, 6, 7],
    );
    for (const e of last.previousErrors) {
      const bytes = Buffer.byteLength(JSON.stringify(e));
      assert.ok(bytes <= 2048 && bytes > 1900, `an entry of ${bytes} bytes`);
      assert.match(e.message, /^(é)+…$/, "cut on a character boundary, marked");
    }
    // (the record itself holds the same 5)
    const stored = parseAttemptErrors((await info("cap", q)).errors);
    assert.deepEqual(stored, last.previousErrors);
  });

  test("an invalid result's details are kept as given (empty arrays too); details that leave no room for the message are dropped", async () => {
    const q = "fb-details";
    await bed.producer.enqueue(q, 1, { id: "d1", attempts: 5 });
    const c = new Consumer(bed.redis, q, { workerId: "t", leaseMs: 30_000 });
    const details = [
      { pointer: "/services", rule: "minItems", message: "must have at least 1 item", value: [] },
    ];
    const fail = async (d: unknown[], rejected?: string) => {
      const [job] = (await c.claim(1)).jobs;
      await c.fail(
        job!,
        { name: "ContractError", message: "result breaks the contract: /services minItems" },
        { retryable: true, retryDelayMs: 0, kind: "invalid-result", details: d, rejected },
      );
      return job!;
    };
    await fail(details, '{"services":[]}');
    await fail([{ pointer: "/x", rule: "type", message: "x".repeat(2000) }]);
    // (braces, quotes and backslashes inside strings do not split an entry)
    const tricky = [{ pointer: '/a{"}\\', rule: "type", message: '}{"]\\[' }];
    await fail(tricky);
    const [job] = (await c.claim(1)).jobs;
    assert.deepEqual(
      job!.previousErrors.map((e) => [e.attempt, e.kind, e.details]),
      [
        [1, "invalid-result", details],
        [2, "invalid-result", undefined],
        [3, "invalid-result", tricky],
      ],
    );
    assert.equal(job!.previousErrors[1]!.message, "result breaks the contract: /services minItems");
    assert.equal(await bed.redis.hget(new QueueKeys(q).job("d1"), "rejected"), '{"services":[]}');
  });

  test("module tasks: a job runs the task it names, an untasked one the default export; an unknown task is dead at once", async () => {
    const q = "fb-tasks";
    await enqueueTask(q, "s", { text: "a" }, "summarize");
    await enqueueTask(q, "c", { text: "b" }, "classify");
    await enqueueTask(q, "plain", {});
    await enqueueTask(q, "u", {}, "translate", { attempts: 3 });
    const w = await worker(q);
    assert.deepEqual(JSON.parse((await finished("s", q)).result!), {
      summarized: { text: "a" },
      previous: 0,
    });
    assert.deepEqual(JSON.parse((await finished("c", q)).result!), {
      classified: { text: "b" },
      by: "classifier",
    });
    assert.deepEqual(JSON.parse((await finished("plain", q)).result!), { ok: "plain", previous: [] });
    const u = await finished("u", q);
    assert.equal(u.state, "dead");
    assert.equal(u.attemptsMade, 1, "no retry: no attempt can find the task");
    assert.match(u.deadReason!, /unknown task 'translate' \(this worker's tasks: classify, summarize\)/);
    // Job metrics carry the task the module declares; a name it lacks (any text) makes no series.
    const metrics = await w.metrics();
    const runs = (labels: Record<string, string>) =>
      metricValue(metrics, "conveyor_job_duration_seconds_count", { queue: q, ...labels });
    assert.equal(runs({ outcome: "completed", task: "summarize" }), 1);
    assert.equal(runs({ outcome: "completed", task: "classify" }), 1);
    assert.equal(runs({ outcome: "completed" }), 3, "the untasked job too, without a task label");
    assert.equal(runs({ outcome: "failed" }), 1);
    assert.doesNotMatch(metrics, /task="translate"/);
    // (and the job's log lines)
    assert.match(w.logs(), /"jobId":"s",[^\n]*"task":"summarize"/);
  });

  test("http and command handlers receive the task and the previous errors", async () => {
    const headers: Record<string, unknown>[] = [];
    const sidecar = createServer((req, res) => {
      req.resume();
      req.on("end", () => {
        headers.push({ ...req.headers });
        if (req.headers["conveyor-attempt"] === "1") {
          res.writeHead(500, { "content-type": "application/json" });
          return res.end(JSON.stringify({ name: "Boom", message: "sidecar failed: ünïcode" }));
        }
        res.writeHead(200, { "content-type": "application/json" });
        res.end(
          JSON.stringify({
            task: req.headers["conveyor-task"],
            prev: req.headers["conveyor-previous-errors"],
          }),
        );
      });
    });
    await new Promise<void>((r) => sidecar.listen(0, "127.0.0.1", r));
    try {
      const port = (sidecar.address() as { port: number }).port;
      await enqueueTask("fb-http", "h", { x: 1 }, "summarize");
      await worker("fb-http", { CONVEYOR_HANDLER: `http://127.0.0.1:${port}/run` });
      const h = JSON.parse((await finished("h", "fb-http")).result!) as { task: string; prev: string };
      assert.equal(h.task, "summarize");
      const prev = JSON.parse(h.prev) as AttemptError[];
      assert.deepEqual(
        prev.map((e) => [e.attempt, e.kind, e.message]),
        [[1, "exception", "sidecar failed: ünïcode"]],
      );
      assert.equal(headers[0]!["conveyor-previous-errors"], undefined, "a first attempt sends none");
    } finally {
      sidecar.close();
    }

    const argv = [join(REPO, "node_modules/.bin/node"), join(REPO, "test/fixtures/echoCommand.mjs")];
    await enqueueTask(
      "fb-cmd",
      "k",
      { failFirst: true, env: ["CONVEYOR_TASK", "CONVEYOR_PREVIOUS_ERRORS"] },
      "classify",
    );
    await worker("fb-cmd", { CONVEYOR_HANDLER: `command:${JSON.stringify(argv)}` });
    const env = JSON.parse((await finished("k", "fb-cmd")).result!) as Record<string, string>;
    assert.equal(env.CONVEYOR_TASK, "classify");
    const cmdPrev = JSON.parse(env.CONVEYOR_PREVIOUS_ERRORS!) as AttemptError[];
    assert.deepEqual(
      cmdPrev.map((e) => [e.attempt, e.kind]),
      [[1, "exception"]],
    );
    assert.match(cmdPrev[0]!.message, /exited with 1/);
  });
});

// `python:` handlers on real Redis, a real worker process and a real python3: jobs run in one
// long-lived Python process the worker supervises (test/fixtures/py_handlers.py). Python
// exceptions keep their type, message and traceback; a killed process is restarted and its job
// stalls; a handler that ignores its cancel past the kill grace costs the process; SIGTERM drains,
// then stops the process; prints never reach the frame stream.
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import type { JobInfo } from "../../queue/index.ts";
import { waitFor } from "../support/processes.ts";
import { WorkerTestBed } from "../support/testbed.ts";
import { NODE, CONVEYOR, REPO } from "../support/workers.ts";
import { spawnSync } from "node:child_process";

const PY = {
  CONVEYOR_HANDLER: "python:py_handlers:work",
  PYTHONPATH: join(REPO, "test/fixtures"),
  CONVEYOR_LEASE: "2s",
  CONVEYOR_BACKOFF_BASE: "50ms",
  CONVEYOR_BACKOFF_MAX: "100ms",
};

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** The pids of the worker's Python processes, from its "python handler process started/restarted" lines. */
function pythonPids(logs: string): number[] {
  return [...logs.matchAll(/"pid":(\d+)[^\n]*python handler process (?:started|restarted)/g)].map((m) =>
    Number(m[1]),
  );
}

describe("python: handlers", () => {
  const bed = new WorkerTestBed("py");
  before(() => bed.start());
  after(() => bed.stop());

  const finished = (id: string, q: string) =>
    waitFor(`job ${id} finished`, async () => {
      const j = await bed.admin.job(id, q);
      return j && ["completed", "dead"].includes(j.state) ? j : null;
    });

  test("one Python process runs the jobs; its exceptions keep type, message and traceback; prints stay out of the frames", async () => {
    const q = "py/basic";
    const w = await bed.worker(q, { ...PY, CONVEYOR_CONCURRENCY: "4" });
    const ids: string[] = [];
    for (let n = 0; n < 8; n++) ids.push((await bed.producer.enqueue(q, { mode: "ok", n })).id);
    const raised = (await bed.producer.enqueue(q, { mode: "raise", n: 42 }, { attempts: 1 })).id;
    const bad = (await bed.producer.enqueue(q, { mode: "bad" }, { attempts: 5 })).id;
    const pids = new Set<number>();
    for (const [n, id] of ids.entries()) {
      const j = await finished(id, q);
      assert.equal(j.state, "completed");
      const result = JSON.parse(j.result!) as { double: number; pid: number };
      assert.equal(result.double, n * 2);
      pids.add(result.pid);
    }
    assert.deepEqual([...pids], pythonPids(w.logs()), "every job ran in the one process the worker started");

    const r = await finished(raised, q);
    assert.equal(r.state, "dead");
    const error = JSON.parse(r.error!) as { name: string; message: string; stack: string };
    assert.equal(error.name, "ValueError");
    assert.equal(error.message, "bad value 42");
    assert.match(error.stack, /^Traceback \(most recent call last\):/);
    assert.match(error.stack, /py_handlers\.py", line \d+, in explode/);
    assert.doesNotMatch(error.stack, /conveyor\/handler\.py/, "the kit's own frames are left out");

    const b = await finished(bad, q);
    assert.equal(b.state, "dead");
    assert.equal(b.attemptsMade, 1, "NonRetryableError: dead-lettered at once");
    assert.equal((JSON.parse(b.error!) as { name: string }).name, "NonRetryableError");
    // the handler's prints went to the worker's stderr, as lines of their own
    assert.match(w.logs(), /^\{"id": 1, "result": "forged"\}$/m);
  });

  test("a Python process killed mid-job is restarted; the job stalls and runs again; later jobs succeed", async () => {
    const q = "py/kill";
    const w = await bed.worker(q, { ...PY, CONVEYOR_CONCURRENCY: "2" });
    const marker = join(bed.dir, "kill.marker");
    const id = (await bed.producer.enqueue(q, { mode: "block-once", marker }, { attempts: 1 })).id;
    const pid = await waitFor("the job running in Python", async () =>
      existsSync(marker) && readFileSync(marker, "utf8") ? Number(readFileSync(marker, "utf8")) : null,
    );
    assert.deepEqual(pythonPids(w.logs()), [pid]);
    process.kill(pid, "SIGKILL");
    const j: JobInfo = await finished(id, q);
    assert.equal(j.state, "completed", "redelivered after the stall, it completes");
    assert.equal(j.stalls, 1, "counted as a stall");
    assert.equal(j.attemptsMade, 1, "not as a failed attempt: its one attempt is the one that completed");
    const newPid = (JSON.parse(j.result!) as { pid: number }).pid;
    assert.notEqual(newPid, pid);
    assert.deepEqual(pythonPids(w.logs()), [pid, newPid], "one restart");
    assert.match(w.logs(), /"outcome":"stalled"/);
    const later = (await bed.producer.enqueue(q, { mode: "ok", n: 5 })).id;
    assert.equal((await finished(later, q)).state, "completed");
  });

  test("a job that ignores its cancel past the kill grace fails on its timeout; the process is replaced", async () => {
    const q = "py/timeout";
    const w = await bed.worker(q, { ...PY, CONVEYOR_KILL_GRACE: "300ms" });
    const id = (await bed.producer.enqueue(q, { mode: "ignore-cancel" }, { attempts: 1, timeoutMs: 500 })).id;
    const j = await finished(id, q);
    assert.equal(j.state, "dead");
    assert.equal((JSON.parse(j.error!) as { name: string }).name, "JobTimeoutError");
    await waitFor("the process replaced", async () => pythonPids(w.logs()).length === 2);
    assert.match(w.logs(), /ignored its cancel for 300 ms/);
    const [first] = pythonPids(w.logs());
    assert.equal(alive(first!), false);
    const later = (await bed.producer.enqueue(q, { mode: "ok", n: 1 })).id;
    assert.equal((await finished(later, q)).state, "completed");
  });

  test("SIGTERM drains: the running job finishes in Python, then the process is stopped", async () => {
    const q = "py/drain";
    const w = await bed.worker(q, PY);
    const marker = join(bed.dir, "drain.marker");
    const id = (await bed.producer.enqueue(q, { mode: "sleep", seconds: 1.5, marker })).id;
    const pid = await waitFor("the job running in Python", async () =>
      existsSync(marker) && readFileSync(marker, "utf8") ? Number(readFileSync(marker, "utf8")) : null,
    );
    w.signal("SIGTERM");
    assert.equal(await w.exited, 0);
    const j = await bed.admin.job(id, q);
    assert.equal(j?.state, "completed");
    assert.deepEqual(JSON.parse(j.result!), { slept: 1.5 });
    assert.equal(alive(pid), false, "the Python process is stopped with the worker");
    assert.match(w.logs(), /python handler process stopped/);
  });

  test("a callable that cannot be loaded stops the worker at start with the Python error", () => {
    for (const [handler, expected] of [
      ["python:py_handlers:nope", /AttributeError: module 'py_handlers' has no attribute 'nope'/],
      ["python:no_such_module:f", /ModuleNotFoundError: No module named 'no_such_module'/],
      ["python:app.handlers", /python: takes module\.path:function/],
    ] as const) {
      const r = spawnSync(NODE, [CONVEYOR, "worker", "--queue", "py/x", "--handler", handler], {
        env: { ...process.env, ...PY, REDIS_URL: bed.server.url },
        encoding: "utf8",
        timeout: 60_000,
      });
      assert.equal(r.status, 2, `${handler}: ${r.stdout}${r.stderr}`);
      assert.match(r.stdout + r.stderr, expected);
    }
  });
});

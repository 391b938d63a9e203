// Sequences with real worker processes (docs/protocol.md, "Sequences"): 6 `conveyor worker`
// processes share a queue whose groups have concurrency 1; some jobs fail before they succeed,
// one worker is SIGTERMed and one SIGKILLed mid-run. An independent recorder (the handler appends
// start, end and fail times to a file of its own) shows every group ran its jobs strictly in
// order — a job's retries before the next job — and never two at once.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { setGroupLimit } from "../../queue/index.ts";
import { waitFor } from "../support/processes.ts";
import { WorkerTestBed } from "../support/testbed.ts";
import { REPO, type WorkerProcess } from "../support/workers.ts";

const INTERVAL_HANDLER = `module:${join(REPO, "test/fixtures/intervalHandler.js")}`;

interface Mark {
  g: string;
  id: string;
  exec: string;
  ev: "start" | "end" | "fail";
  pid: number;
  t: number;
}

function readMarks(file: string): Mark[] {
  let text = "";
  try {
    text = readFileSync(file, "utf8");
  } catch {
    return [];
  }
  return text
    .split("\n")
    .filter((l) => l !== "")
    .flatMap((l) => {
      try {
        return [JSON.parse(l) as Mark];
      } catch {
        return []; // a line cut short by a SIGKILL
      }
    });
}

interface Execution {
  id: string;
  index: number;
  start: number;
  end: number;
  outcome: "end" | "fail" | "killed";
}

/**
 * Every violation of strict order in one group's executions (by start time): the next execution
 * is the same job again (a retry or a re-run after a kill) or the next job, and only after this
 * one ended — a killed execution ends when its worker was killed.
 */
function orderViolations(executions: Execution[]): string[] {
  const problems: string[] = [];
  for (let k = 1; k < executions.length; k++) {
    const prev = executions[k - 1]!;
    const cur = executions[k]!;
    if (cur.start < prev.end)
      problems.push(`${cur.id} started ${prev.end - cur.start} ms before ${prev.id} ended`);
    if (cur.index === prev.index + 1) {
      if (prev.outcome !== "end")
        problems.push(`${cur.id} started after ${prev.id} ${prev.outcome}, before it succeeded`);
    } else if (cur.index !== prev.index) {
      problems.push(`${cur.id} followed ${prev.id}`);
    }
  }
  return problems;
}

describe("sequences across worker processes", () => {
  const bed = new WorkerTestBed("seq");
  before(() => bed.start());
  after(() => bed.stop());

  test("6 workers, one SIGTERMed and one SIGKILLed mid-run, failing jobs: every group of concurrency 1 runs strictly in order, never two at once", async () => {
    const q = "sequences";
    const log = join(bed.dir, "intervals.ndjson");
    await setGroupLimit(bed.redis, q, undefined, { concurrency: 1 });
    const env = {
      CONVEYOR_HANDLER: INTERVAL_HANDLER,
      INTERVAL_LOG: log,
      CONVEYOR_CONCURRENCY: "4",
      CONVEYOR_LEASE: "1s",
      CONVEYOR_BACKOFF_BASE: "100ms",
      CONVEYOR_BACKOFF_MAX: "300ms",
      LOG_LEVEL: "warn",
    };
    const workers: WorkerProcess[] = [];
    for (let i = 0; i < 6; i++) workers.push(await bed.worker(q, env));
    const groups = ["s0", "s1", "s2", "s3", "s4"];
    const perGroup = 16;
    await bed.producer.enqueueMany(
      q,
      groups.flatMap((g) =>
        Array.from({ length: perGroup }, (_, i) => ({
          id: `${g}-${String(i).padStart(2, "0")}`,
          data: { g, sleepMs: i % 4 === 0 ? 250 : 40, failAttempts: i % 5 === 2 ? 2 : i % 7 === 3 ? 1 : 0 },
          group: g,
          attempts: 5,
        })),
      ),
    );
    const total = perGroup * groups.length;
    await waitFor("a quarter done", async () => (await bed.admin.counts(q)).completed >= total / 4, 120_000);
    // SIGKILL a worker while it runs a job (its lease holds the group until swept), SIGTERM another
    const doomedIndex = await waitFor(
      "a worker running a job",
      async () => {
        const marks = readMarks(log);
        const ended = new Set(marks.filter((m) => m.ev !== "start").map((m) => m.exec));
        // (the latest start: the job furthest from its end, so it still runs at the kill)
        const running = marks.filter((m) => m.ev === "start" && !ended.has(m.exec)).at(-1);
        const i = running ? workers.findIndex((w) => w.child.pid === running.pid) : -1;
        return i >= 0 ? i + 1 : null;
      },
      60_000,
      5,
    );
    const doomedWorker = workers[doomedIndex - 1]!;
    const doomed = doomedWorker.child.pid;
    const drained = workers.find((w) => w !== doomedWorker)!;
    doomedWorker.signal("SIGKILL");
    const killedAt = Date.now();
    drained.signal("SIGTERM");
    await Promise.all([doomedWorker.exited, drained.exited]);
    const done = await waitFor(
      "every job completed",
      async () => {
        const c = await bed.admin.counts(q);
        return c.completed >= total && c.backlog === 0 ? c : null;
      },
      180_000,
      100,
    );
    assert.equal(done.completed, total);

    const marks = readMarks(log);
    const ends = new Map(marks.filter((m) => m.ev !== "start").map((m) => [m.exec, m]));
    for (const g of groups) {
      const executions: Execution[] = marks
        .filter((m) => m.ev === "start" && m.g === g)
        .sort((a, b) => a.t - b.t)
        .map((s) => {
          const end = ends.get(s.exec);
          assert.ok(
            end || s.pid === doomed,
            `${s.exec} of ${s.id} has no end, and its worker was not killed`,
          );
          return {
            id: s.id,
            index: Number(s.id.split("-")[1]),
            start: s.t,
            end: end?.t ?? killedAt,
            outcome: end ? (end.ev as "end" | "fail") : "killed",
          };
        });
      assert.deepEqual(orderViolations(executions), [], `group ${g}`);
      assert.equal(new Set(executions.map((e) => e.id)).size, perGroup, `group ${g} ran every job`);
      assert.equal(executions[0]!.index, 0);
    }
    // the check could fail: jobs failed and were retried, and a lease was swept
    assert.ok(marks.filter((m) => m.ev === "fail").length >= 10);
    const counters = await bed.admin.counters(q);
    assert.ok(counters.retried! >= 10, `retried ${counters.retried}`);
    assert.ok(counters.stalled! >= 1, `stalled ${counters.stalled}`);
    assert.equal(counters.dead ?? 0, 0);
  });
});

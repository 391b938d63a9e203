// Chaos, bounded: the runner of `make chaos` (chaos/run.ts) for about a minute — real worker
// processes of a three-stage pipeline with job records, while workers are SIGTERMed, SIGKILLed
// and SIGSTOPped past their lease and Redis and PostgreSQL are restarted — and its audit: nothing
// lost, no re-run after a SIGTERM, every record in PostgreSQL, every re-run explained by a
// SIGKILL or SIGSTOP of the worker that ran it. Plus the runner's own logic: the same seed gives
// the same schedule, and the attribution of re-runs (chaos/analyze.ts) on made-up histories.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { before, describe, test } from "node:test";
import { attribute, executionEnds, type Execution, type FaultRecord } from "../chaos/analyze.ts";
import { faultSchedule, FAULT_KINDS, jobPlans } from "../chaos/plan.ts";
import type { ChaosReport } from "../chaos/run.ts";
import { NODE, REPO } from "./support/workers.ts";

describe("chaos runner logic", () => {
  test("the same seed gives the same fault schedule and the same jobs; another seed does not", () => {
    const o = { windowMs: 600_000, meanGapMs: 3000, leaseMs: 2000 };
    assert.deepEqual(faultSchedule(1234, o), faultSchedule(1234, o));
    assert.notDeepEqual(faultSchedule(1234, o), faultSchedule(1235, o));
    assert.deepEqual(jobPlans(99, 50, 3), jobPlans(99, 50, 3));
    const s = faultSchedule(1234, { windowMs: 30_000, meanGapMs: 2000, leaseMs: 2000 });
    // even a short window injects every kind: the first round is one of each
    assert.deepEqual(new Set(s.slice(0, FAULT_KINDS.length).map((f) => f.kind)), new Set(FAULT_KINDS));
    for (const f of s.filter((x) => x.kind === "sigstop"))
      assert.ok(f.durationMs > 2000, "a SIGSTOP lasts past the lease");
    // a job carries one level per stage; the recording handler returns `result` as the next stage's data
    const [j] = jobPlans(5, 1, 3);
    const d = j!.data as {
      sleepMs: number;
      result: { sleepMs: number; result: { sleepMs: number; result: unknown } };
    };
    assert.equal(typeof d.result.result.sleepMs, "number");
    assert.deepEqual(d.result.result.result, { done: 0 });
  });

  test("re-runs are attributed to the fault that hit the worker running the earlier execution", () => {
    const ex = (q: string, id: string, exec: number, pid: number, t: number, attempt = 1): Execution => ({
      q,
      id,
      exec: String(exec),
      attempt,
      pid,
      t,
    });
    const executions = [
      ex("p/a", "killed", 1, 100, 1000),
      ex("p/a", "killed", 9, 200, 5000),
      ex("p/a", "frozen", 2, 300, 1000),
      ex("p/a", "frozen", 10, 200, 6000),
      // frozen between its claim (t=1500) and logging the execution (after SIGCONT, t=9000)
      ex("p/a", "late-log", 3, 300, 9000),
      ex("p/a", "late-log", 11, 200, 7000),
      ex("p/a", "outage", 4, 400, 1000),
      ex("p/a", "outage", 12, 200, 8000),
      ex("p/a", "drained", 5, 500, 1000),
      ex("p/a", "drained", 13, 200, 8000),
      ex("p/a", "mystery", 6, 600, 1000),
      ex("p/a", "mystery", 14, 200, 8000),
      ex("p/b", "retried", 7, 600, 1000, 1),
      ex("p/b", "retried", 15, 200, 3000, 2),
      ex("p/b", "once", 8, 600, 1000),
      // an execution that started after its worker's kill is not the kill's doing
      ex("p/b", "after-kill", 16, 100, 2500),
      ex("p/b", "after-kill", 17, 200, 8000),
    ];
    const faults: FaultRecord[] = [
      { n: 0, kind: "sigkill", at: 2000, pid: 100 },
      { n: 1, kind: "sigstop", at: 2000, end: 8500, pid: 300 },
      { n: 2, kind: "redis_restart", at: 3000, end: 4000 },
      { n: 3, kind: "sigterm", at: 2000, pid: 500 },
    ];
    const a = attribute(executions.slice(0, 15), faults, {
      plannedFailure: (q, id) => id === "retried",
      claimedAt: new Map([["3", 1500]]),
    });
    const causes = Object.fromEntries(a.duplicates.map((d) => [d.id, d.cause]));
    assert.deepEqual(causes, {
      killed: "sigkill",
      frozen: "sigstop",
      "late-log": "sigstop",
      outage: "redis_restart",
      drained: "redis_restart",
      mystery: "redis_restart",
    });
    assert.equal(a.retries, 1);
    assert.equal(a.unplannedRetries, 0);
    // without the outage, the drained job's re-run is the SIGTERM's, the other unexplained
    const b = attribute(
      executions,
      faults.filter((f) => f.kind !== "redis_restart"),
      { plannedFailure: () => false },
    );
    const bc = Object.fromEntries(b.duplicates.map((d) => [d.id, d.cause]));
    assert.equal(bc.drained, "sigterm");
    assert.equal(bc.mystery, "other");
    assert.equal(bc["after-kill"], "other", "a kill before the execution started explains nothing");
    assert.equal(b.unplannedRetries, 1);
  });

  test("execution outcomes are read from the workers' JSON logs", () => {
    const log = [
      '{"level":"info","time":"2026-01-01T00:00:00.000Z","executionId":"7","outcome":"advanced","msg":"job completed"}',
      '{"level":"warn","time":"2026-01-01T00:00:01.000Z","executionId":"8","outcome":"fenced","msg":"lease was lost"}',
      "not json",
    ].join("\n");
    const ends = executionEnds(log);
    assert.equal(ends.get("7")?.outcome, "advanced");
    assert.equal(ends.get("8")?.outcome, "fenced");
    assert.equal(ends.get("8")?.t, Date.parse("2026-01-01T00:00:01.000Z"));
  });
});

describe("chaos, bounded run", { timeout: 10 * 60_000 }, () => {
  let code: number | null;
  let stdout = "";
  let stderr = "";
  let r: ChaosReport;
  let why = "";

  before(async () => {
    const args = ["chaos/run.ts", "--jobs", "1000", "--seconds", "40", "--fault-every", "2s", "--json"];
    if (process.env.CHAOS_SEED) args.push("--seed", process.env.CHAOS_SEED);
    ({ code, stdout, stderr } = await run(NODE, args));
    try {
      r = JSON.parse(stdout.trim().split("\n").at(-1)!) as ChaosReport;
    } catch {
      throw new Error(`no JSON report (exit ${code}):\n${stderr.slice(-4000)}`);
    }
    process.stderr.write(
      `${stderr
        .split("\n")
        .filter((l) => !l.startsWith("chaos: "))
        .join("\n")}\n`,
    );
    why = `seed ${r.seed} (CHAOS_SEED=${r.seed} repeats the schedule): ${r.failures.join("; ")}${r.dir ? ` (run directory ${r.dir})` : ""}`;
  });

  test("faults of every kind while 1,000 jobs cross three stages: nothing lost, no re-run after SIGTERM, every record in PostgreSQL, no re-run unexplained", () => {
    assert.equal(r.enqueued, 1000);
    assert.equal(r.lost, 0, why);
    assert.equal(r.completed + r.dead_lettered, 1000, why);
    assert.equal(r.duplicates_after_sigterm, 0, why);
    assert.equal(r.sigterm_exits_nonzero, 0, why);
    assert.equal(r.records_missing_in_postgres, 0, why);
    assert.equal(r.records_inconsistent, 0, why);
    assert.equal(r.duplicates_other, 0, why);
    assert.equal(r.unplanned_retries, 0, why);
    assert.equal(
      r.duplicates,
      r.duplicates_after_sigkill + r.duplicates_after_sigstop + r.duplicates_after_redis_restart,
      why,
    );
    assert.ok(r.executions >= 3000, "every job ran at every stage");
    assert.deepEqual(
      r.failures.filter((f) => !/caused by a Redis restart/.test(f)),
      [],
      why,
    );
  });

  test("the seed is printed first, every kind of fault was injected, and the exit code is the verdict", () => {
    assert.match(stdout.split("\n")[0]!, /^chaos: seed \d+$/);
    for (const k of FAULT_KINDS)
      assert.ok((r.faults[k] ?? 0) >= 1, `no ${k} was injected: ${JSON.stringify(r.faults)}`);
    assert.equal(code, r.pass ? 0 : 1);
  });

  // While Redis is down no lease can be renewed; the sweeper's outage grace (sweep_leases.lua,
  // docs/protocol.md "Leases and the sweeper") keeps the first sweeps after the restart from
  // requeueing jobs whose workers are alive.
  test("a Redis restart re-runs nothing: every re-run is explained by a SIGKILL or SIGSTOP of the worker that ran it", () => {
    assert.equal(r.duplicates_after_redis_restart, 0, why);
    assert.equal(r.pass, true, why);
  });
});

function run(cmd: string, args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { cwd: REPO, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (c: Buffer) => (stdout += c));
    child.stderr.on("data", (c: Buffer) => (stderr += c));
    child.on("close", (code) => resolve({ code, stdout, stderr }));
  });
}

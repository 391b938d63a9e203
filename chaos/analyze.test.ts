// The chaos audit (chaos/analyze.ts) on made-up histories: which fault explains each re-run.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { attribute, executionEnds, type Execution, type FaultRecord } from "./analyze.ts";

describe("chaos audit", () => {
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
    // a failover in the same window: the same re-runs, attributed to it
    const f = attribute(
      executions.slice(0, 15),
      faults.map((x) => (x.kind === "redis_restart" ? { ...x, kind: "failover" } : x)),
      { plannedFailure: (q, id) => id === "retried", claimedAt: new Map([["3", 1500]]) },
    );
    assert.equal(f.byCause.failover, 3);
    assert.equal(f.byCause.redis_restart, 0);
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

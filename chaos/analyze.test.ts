// The chaos audit (chaos/analyze.ts) on made-up histories: which fault explains each re-run.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import {
  attribute,
  auditGroupLimits,
  auditRestartReruns,
  executionEnds,
  firstStarts,
  flowOrderViolations,
  readExecutionEnds,
  sequenceInversions,
  type Execution,
  type FaultRecord,
  type FlowEdge,
  leaseKey,
} from "./analyze.ts";

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
    // a worker replaced by one of the other release drains as a SIGTERMed one does: a re-run is its doing
    const u = attribute(
      executions,
      faults
        .filter((f) => f.kind !== "redis_restart")
        .map((x) => (x.kind === "sigterm" ? { ...x, kind: "upgrade" } : x)),
      { plannedFailure: () => false },
    );
    assert.equal(Object.fromEntries(u.duplicates.map((d) => [d.id, d.cause])).drained, "upgrade");
    assert.equal(u.byCause.upgrade, 1);
    assert.equal(u.byCause.sigterm, 0);
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

  describe("group limits", () => {
    const ex = (id: string, exec: number, pid: number, t: number, q = "p/a"): Execution => ({
      q,
      id,
      exec: String(exec),
      attempt: 1,
      pid,
      t,
    });
    const groupOf = (_q: string, id: string) => id.split("-")[0];
    const limitOf = (_q: string, g: string) => (g === "seq" ? 1 : g === "two" ? 2 : undefined);

    test("the most that ran at once per group, from start and end records; over the limit is a breach", () => {
      const executions = [
        ex("two-1", 1, 10, 1000),
        ex("two-2", 2, 11, 1100),
        ex("two-3", 3, 12, 1500), // starts when two-1 ended (same ms): not a third
        ex("seq-1", 4, 10, 1000),
        ex("seq-2", 5, 11, 1900), // starts before seq-1 ended: a breach
        ex("free-1", 6, 12, 1000), // no limit: not looked at
      ];
      const ends = readExecutionEnds(
        ["1:1500", "2:2000", "3:2500", "4:2000", "5:2500", "6:9000"]
          .map((p) => JSON.stringify({ exec: p.split(":")[0], t: Number(p.split(":")[1]) }))
          .join("\n"),
      );
      const a = auditGroupLimits(executions, ends, [], { groupOf, limitOf });
      assert.equal(a.checked, 5);
      assert.deepEqual(
        a.peaks.map((p) => [p.group, p.peak, p.limit]),
        [
          ["seq", 2, 1],
          ["two", 2, 2],
        ],
      );
      assert.deepEqual(
        a.breaches.map((b) => [b.group, b.peak, b.at]),
        [["seq", 2, 1900]],
      );
    });

    test("an execution whose worker was SIGKILLed or frozen counts until that fault (its lease lapsed)", () => {
      const executions = [
        ex("seq-1", 1, 10, 1000), // worker 10 SIGKILLed at 1200: no end record
        ex("seq-2", 2, 11, 4000), // the sweep freed the slot: no overlap with seq-1
        ex("seq-3", 3, 12, 5000), // worker 12 frozen at 5100, resumes and ends at 9000
        ex("seq-4", 4, 13, 8000), // ran while seq-3's worker was frozen past its lease
        ex("seq-5", 5, 14, 12_000), // frozen after its claim (11_000), logged after SIGCONT
        ex("seq-6", 6, 15, 11_500),
      ];
      const ends = new Map([
        ["2", 4500],
        ["3", 9000],
        ["4", 8500],
        ["5", 12_500],
        ["6", 11_900],
      ]);
      const faults: FaultRecord[] = [
        { n: 0, kind: "sigkill", at: 1200, pid: 10 },
        { n: 1, kind: "sigstop", at: 5100, end: 9000, pid: 12 },
        { n: 2, kind: "sigstop", at: 11_200, end: 11_950, pid: 14 },
      ];
      const a = auditGroupLimits(executions, ends, faults, {
        groupOf,
        limitOf,
        claimedAt: new Map([["5", 11_000]]),
      });
      assert.deepEqual(a.breaches, []);
      assert.equal(a.cut, 3);
      assert.equal(a.peaks[0]!.peak, 1);
      // Without the faults the frozen worker's zombie run would read as a breach.
      assert.equal(auditGroupLimits(executions, ends, [], { groupOf, limitOf }).breaches.length, 1);
      // A run whose lease lapsed in a Redis outage is cut when Redis answered again (its re-run
      // may start then), not counted on to its late end.
      const outage = [ex("seq-7", 7, 16, 20_000), ex("seq-7", 8, 17, 23_100)];
      const outageEnds = new Map([
        ["7", 24_000],
        ["8", 23_500],
      ]);
      assert.equal(auditGroupLimits(outage, outageEnds, [], { groupOf, limitOf }).breaches.length, 1);
      const cut = auditGroupLimits(outage, outageEnds, [], {
        groupOf,
        limitOf,
        lapsedAt: new Map([["7", 23_000]]),
      });
      assert.deepEqual(cut.breaches, []);
      assert.equal(cut.cut, 1);
    });

    test("a sequence starts its jobs in enqueue order (first executions; a re-run does not count)", () => {
      const executions = [
        ex("seq-1", 1, 10, 1000),
        ex("seq-2", 2, 10, 2000),
        ex("seq-1", 3, 11, 2500), // a re-run
        ex("seq-3", 4, 10, 3000),
        ex("seq-5", 5, 10, 3500),
        ex("seq-4", 6, 10, 4000),
      ];
      // seq-5 started before seq-4, which was enqueued ahead of it
      assert.deepEqual(sequenceInversions(executions, "p/a", ["seq-1", "seq-2", "seq-3", "seq-4", "seq-5"]), [
        "seq-5",
      ]);
      assert.deepEqual(sequenceInversions(executions, "p/b", ["seq-1"]), []);
    });
  });

  test("a Redis restart may re-run a job only when the outage outlasted its lease, and the late result must be fenced", () => {
    const leaseMs = 2000;
    const ex = (id: string, exec: number, pid: number, t: number): Execution => ({
      q: "p/a",
      id,
      exec: String(exec),
      attempt: 1,
      pid,
      t,
    });
    const lease = (id: string, token: number, deadline: number) => [
      leaseKey("p/a", id),
      { token: String(token), deadline },
    ];
    const executions = [
      // its lease was due 800 ms into an outage of 1500 ms: lapsed, and its result fenced
      ex("lapsed", 1, 100, 1000),
      ex("lapsed", 11, 200, 9000),
      // the same lapse, but its worker's late result was not refused
      ex("unfenced", 2, 100, 1000),
      ex("unfenced", 12, 200, 9000),
      // its lease was due after Redis answered again: the outage does not explain the re-run
      ex("renewable", 3, 100, 1000),
      ex("renewable", 13, 200, 9000),
      // in a later outage with no lease reading, of less than a lease: not explained either
      ex("unread", 4, 100, 10_000),
      ex("unread", 14, 200, 20_000),
      // ... and of more than a whole lease: explained
      ex("long", 5, 100, 21_000),
      ex("long", 15, 200, 30_000),
      // claimed after the first outage's lease reading, before the kill: not in the reading; a
      // lease is 2 s and that outage 1.5 s, so not explained; in the 2.5 s outage it is
      ex("after-reading", 6, 100, 2990),
      ex("after-reading", 16, 200, 9000),
      ex("after-reading-long", 7, 100, 24_990),
      ex("after-reading-long", 17, 200, 30_000),
    ];
    const faults: FaultRecord[] = [
      {
        n: 0,
        kind: "redis_restart",
        at: 3000,
        end: 4500,
        leases: Object.fromEntries([
          lease("lapsed", 1, 3800),
          lease("unfenced", 2, 3800),
          lease("renewable", 3, 4700),
        ]),
      },
      { n: 1, kind: "redis_restart", at: 12_000, end: 13_500 },
      {
        n: 2,
        kind: "redis_restart",
        at: 25_000,
        end: 27_500,
        leases: Object.fromEntries([lease("long", 5, 26_000)]),
      },
    ];
    const outcomes = new Map([
      ["1", "fenced"],
      ["2", "completed"],
      ["3", "fenced"],
      ["4", "leaseLost"],
      ["5", "leaseLost"],
      ["6", "fenced"],
      ["7", "fenced"],
    ]);
    const a = attribute(executions, faults, {
      plannedFailure: () => false,
      ends: new Map([...outcomes].map(([exec, outcome]) => [exec, { outcome, t: 0 }])),
    });
    assert.equal(a.byCause.redis_restart, 7);
    const r = auditRestartReruns(a.duplicates, faults, leaseMs);
    assert.deepEqual(r.outagesMs, [1500, 1500, 2500]);
    assert.equal(r.justified, 3, "lapsed, long, after-reading-long");
    assert.deepEqual(r.lapsed, [
      { exec: "1", at: 4500 },
      { exec: "5", at: 27_500 },
      { exec: "7", at: 27_500 },
    ]);
    assert.deepEqual(
      r.unjustified.map((u) => u.id),
      ["unfenced", "renewable", "unread", "after-reading"],
    );
    assert.match(r.unjustified[0]!.why, /not refused \(outcome completed\)/);
    assert.match(r.unjustified[1]!.why, /outage 0 of 1500 ms \(lease due 1700 ms after it began\)/);
    assert.match(r.unjustified[2]!.why, /outage 1 of 1500 ms \(no lease reading\)/);
  });
  test("a flow dependent started before one of its parents completed is caught, at any stage; on time it passes", () => {
    const ex = (q: string, id: string, exec: number, t: number): Execution => ({
      q,
      id,
      exec: String(exec),
      attempt: 1,
      pid: 1,
      t,
    });
    // a diamond root → m0, m1 → sink over stages p/a → p/b; a second diamond whose sink started early
    const edges: FlowEdge[] = [
      { parent: "root", child: "m0" },
      { parent: "root", child: "m1" },
      { parent: "m0", child: "sink" },
      { parent: "m1", child: "sink" },
      { parent: "r2", child: "s2" },
      { parent: "dead", child: "ran-anyway" },
      { parent: "dead", child: "cancelled" },
    ];
    const executions = [
      ex("p/a", "root", 1, 1000),
      ex("p/b", "root", 2, 1100),
      ex("p/a", "m0", 3, 1300),
      ex("p/a", "m1", 4, 1300),
      ex("p/b", "m0", 5, 1400),
      ex("p/b", "m1", 6, 1500),
      ex("p/a", "sink", 7, 1550),
      ex("p/b", "sink", 8, 1800),
      ex("p/a", "r2", 9, 1000),
      ex("p/b", "r2", 10, 1100),
      // a redelivery of s2 after its parent completed does not hide its first, early start
      ex("p/a", "s2", 12, 1300),
      ex("p/a", "s2", 11, 1150),
      ex("p/a", "ran-anyway", 13, 2000),
    ];
    const completedAt = new Map([
      ["root", 1200],
      ["m0", 1450],
      ["m1", 1550],
      ["r2", 1200],
    ]);
    const claims = firstStarts(executions);
    assert.equal(claims.get("sink"), 1550);
    assert.equal(claims.get("s2"), 1150);
    const audit = flowOrderViolations(edges, claims, completedAt);
    assert.equal(audit.checked, 6, "every edge whose dependent ran");
    assert.deepEqual(audit.early, [
      { child: "s2", parent: "r2", startedAt: 1150, parentCompletedAt: 1200 },
      { child: "ran-anyway", parent: "dead", startedAt: 2000 },
    ]);
    // the sink one millisecond earlier than its last parent's completion is early
    claims.set("sink", 1549);
    assert.deepEqual(
      flowOrderViolations(edges, claims, completedAt).early.filter((e) => e.child === "sink"),
      [{ child: "sink", parent: "m1", startedAt: 1549, parentCompletedAt: 1550 }],
    );
  });
});

// Chaos, bounded: the runner of `make chaos` (chaos/run.ts) for about a minute — real worker
// processes of a three-stage pipeline with job records, while workers are SIGTERMed, SIGKILLed
// and SIGSTOPped past their lease and Redis and PostgreSQL are restarted — and its audit: nothing
// lost, no re-run after a SIGTERM, every record in PostgreSQL, every re-run explained by a
// SIGKILL or SIGSTOP of the worker that ran it, or by a Redis outage that outlasted its lease (and
// then fenced). The runner's own logic has unit tests beside it
// (chaos/plan.test.ts, chaos/analyze.test.ts). The runner is a program: this test runs it and
// reads its JSON report (the report's type is the only thing imported from chaos/). Half the jobs
// carry a group (--groups 4): three groups of concurrency 2 and a sequence of concurrency 1, whose
// limits the audit checks from the handler's own start and end records. 40 flows (--flows 40) run
// beside the plain jobs: no dependent may start before all its parents completed. Workers of two
// releases run side by side (--upgrade: the first of stages a and b starts on the previous release,
// `make previous-release`), and upgrade faults replace a worker by one of the other release with
// warm shutdown: no re-run may follow one.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { before, describe, test } from "node:test";
import type { ChaosReport } from "../../chaos/run.ts";
import { NODE, REPO } from "../support/workers.ts";

/** The fault kinds a run must inject (chaos/plan.ts's FAULT_KINDS). */
const FAULT_KINDS = ["sigterm", "sigkill", "sigstop", "redis_restart", "postgres_restart", "upgrade"];

describe("chaos, bounded run", { timeout: 10 * 60_000 }, () => {
  let code: number | null;
  let stdout = "";
  let stderr = "";
  let r: ChaosReport;
  let why = "";

  before(async () => {
    const args = [
      "chaos/run.ts",
      ...["--jobs", "1000", "--seconds", "40", "--fault-every", "2s", "--groups", "4", "--flows", "40"],
      "--upgrade",
      "--json",
    ];
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
    assert.equal(r.completed + r.dead_lettered + r.flow_jobs_cancelled, 1000 + r.flow_jobs, why);
    assert.equal(r.duplicates_after_sigterm, 0, why);
    assert.equal(r.duplicates_after_upgrade, 0, why);
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
      r.failures.filter((f) => !/after a Redis restart that the outage does not explain/.test(f)),
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

  test("two releases: workers of the previous release ran jobs, and one was replaced by the other release without a re-run", () => {
    assert.ok(r.executions_by_release.previous > 0, JSON.stringify(r.executions_by_release));
    assert.ok(r.executions_by_release.this > 0, JSON.stringify(r.executions_by_release));
    assert.ok(r.upgrades_to_this + r.upgrades_to_previous >= 1, `${r.faults_skipped} faults skipped`);
    assert.equal(r.upgrades_to_this + r.upgrades_to_previous, r.faults.upgrade);
  });

  test("grouped jobs: no group ran more at once than its limit at any stage, the sequence started in order", () => {
    assert.equal(r.groups, 4);
    assert.equal(r.group_limit_breaches, 0, why);
    assert.equal(r.sequence_inversions, 0, why);
    // every stage saw the sequence and the three limited groups (4 × 3 stages)
    assert.equal(r.group_peaks.length, 12, JSON.stringify(r.group_peaks));
    for (const p of r.group_peaks) assert.ok(p.peak >= 1 && p.peak <= p.limit, JSON.stringify(p));
    assert.ok(
      r.group_peaks.some((p) => p.limit === 2 && p.peak === 2),
      `the limit of 2 was reached somewhere (the audit can see overlap): ${JSON.stringify(r.group_peaks)}`,
    );
  });

  test("40 flows (a root, 2–4 middles, a sink) beside them: every flow job ended once, none started before all its parents completed", () => {
    assert.equal(r.flows_enqueued, 40, why);
    // flow i has 2 + i % 3 middles: 40 roots, 40 sinks, 14 × 2 + 13 × 3 + 13 × 4 middles
    assert.equal(r.flow_jobs, 40 * 2 + 14 * 2 + 13 * 3 + 13 * 4);
    assert.equal(r.flow_dependents_early, 0, why);
    // every middle and every sink ran unless a dead parent cancelled it: an edge per middle, 2–4 per sink
    const edges = 2 * (14 * 2 + 13 * 3 + 13 * 4);
    assert.ok(
      r.flow_edges_checked > 0 && r.flow_edges_checked <= edges,
      `${r.flow_edges_checked} of ${edges}`,
    );
    if (r.flow_jobs_cancelled === 0) assert.equal(r.flow_edges_checked, edges, why);
  });

  // While Redis is down no lease can be renewed: an outage that outlasts a lease's remaining time
  // lapses it (how long an outage lasts is the machine's doing: a busy one restarts Redis slower),
  // and the fencing token then refuses the late result. The sweeper's outage grace
  // (sweep_leases.lua, docs/protocol.md "Leases and the sweeper") keeps the sweeps after the
  // restart from requeueing any other job whose worker is alive.
  test("a Redis restart re-runs a job only when the outage, as measured, outlasted its lease, and then the late result is fenced", () => {
    assert.equal(r.redis_outages_ms.length, r.faults.redis_restart, "every outage measured");
    assert.equal(r.duplicates_after_redis_restart, r.restart_reruns_lapsed_and_fenced, why);
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

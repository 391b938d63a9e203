// Chaos on Redis that fails over, bounded: the runner of `make chaos` (chaos/run.ts) with
// `--redis cluster` (3 primaries + 3 replicas) and `--redis sentinel` (1 primary, 1 replica,
// 3 sentinels), durability "replicated", while primaries are SIGKILLed (replicas promoted) among
// the worker and PostgreSQL faults: no acknowledged job lost, every record in PostgreSQL but those
// of claims a failover lost, and every re-run attributed.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { before, describe, test } from "node:test";
import type { ChaosReport } from "../../chaos/run.ts";
import { NODE, REPO } from "../support/workers.ts";

for (const redis of ["cluster", "sentinel"] as const) {
  describe(
    `chaos with failovers (${redis}, durability replicated), bounded run`,
    { timeout: 10 * 60_000 },
    () => {
      let r: ChaosReport;
      let why = "";
      before(async () => {
        const args = [
          "chaos/run.ts",
          "--redis",
          redis,
          "--durability",
          "replicated",
          "--jobs",
          "500",
          "--seconds",
          "30",
          "--fault-every",
          "3s",
          "--json",
        ];
        if (process.env.CHAOS_SEED) args.push("--seed", process.env.CHAOS_SEED);
        const { code, stdout, stderr } = await run(NODE, args);
        try {
          r = JSON.parse(stdout.trim().split("\n").at(-1)!) as ChaosReport;
        } catch {
          throw new Error(`no JSON report (exit ${code}):\n${stderr.slice(-4000)}`);
        }
        why = `seed ${r.seed} (CHAOS_SEED=${r.seed} repeats the schedule): ${r.failures.join("; ")}${r.dir ? ` (run directory ${r.dir})` : ""}`;
      });

      test("primaries killed while 500 jobs cross three stages: no acknowledged job lost, every record kept", () => {
        assert.equal(r.redis, redis);
        assert.ok((r.faults["failover"] ?? 0) >= 1, `no failover was injected: ${JSON.stringify(r.faults)}`);
        assert.equal(r.enqueued, 500, why);
        assert.equal(r.lost, 0, why);
        assert.equal(r.completed + r.dead_lettered, 500, why);
        assert.equal(r.duplicates_after_sigterm, 0, why);
        assert.equal(r.records_missing_in_postgres, 0, why);
        assert.equal(r.records_inconsistent, 0, why);
      });

      test("every re-run is attributed: a failover, a SIGKILL or a SIGSTOP — none after a SIGTERM, none unexplained", () => {
        assert.equal(r.duplicates_other, 0, why);
        assert.equal(
          r.duplicates,
          r.duplicates_after_sigkill + r.duplicates_after_sigstop + r.duplicates_after_failover,
          why,
        );
        assert.equal(r.pass, true, why);
      });
    },
  );
}

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

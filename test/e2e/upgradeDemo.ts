// `make upgrade-demo`: `helm upgrade` on a real node under load. The previous release's chart and
// images (scripts/previous-release-images.sh) are installed as `make demo` installs this one, the
// demo's two-stage pipeline runs, and mid-run — jobs still coming — the new CRD is applied and
// `helm upgrade` takes the release to this one in two steps: the operator and job API alone (every
// worker pod keeps running: same UIDs, no new pod template), then the workers' image (each pool's
// pods roll with warm shutdown, exit 0). The audit is the demo's: every job once per stage, exit
// codes, records, the host unchanged. Exit 0 when all of it holds.
//   DEMO_JOBS, DEMO_JOB_MS   the first burst (default 1,000) and each job's duration (default 100 ms)
import { nodeUnavailable } from "../support/node.ts";
import { previousReleaseImages } from "../support/releases.ts";
import { runNodeScenario, type NodeScenarioReport } from "./nodeScenario.ts";
import { upgradeProblems } from "./upgradeAudit.ts";
import { positiveEnv } from "./demoEnv.ts";

const say = (line: string) => process.stdout.write(`${line}\n`);
const positive = (name: string, fallback: number) => positiveEnv(name, fallback, say);
const jobs = positive("DEMO_JOBS", 1000);
const jobMs = positive("DEMO_JOB_MS", 100);
const why = nodeUnavailable();
if (why) {
  say(`upgrade-demo: ${why}`);
  process.exit(2);
}
const t0 = Date.now();
say(
  "building the previous release's images (scripts/previous-release-images.sh; cached after the first run)…",
);
const previous = await previousReleaseImages();
say(
  `Conveyor upgrade demo on a real node: the previous release installed, ${jobs} jobs and more while \`helm upgrade\` runs`,
);
const report: NodeScenarioReport = await runNodeScenario({ jobs, jobMs, say, upgrade: previous });
const u = report.upgrade!;
say("");
say("summary");
for (const s of report.stages)
  say(
    `  ${s.pool.padEnd(15)} ${s.queue.padEnd(15)} completed ${s.completed}, executions ${s.executions}, ran twice ${s.ranTwice}, peak replicas ${s.maxReplicas}, handed back ${s.handedBack}, stalls ${s.stalled}`,
  );
say(`  jobs ${report.jobs} (${u.jobsDuringUpgrade} enqueued while the upgrade ran)`);
say(`  operator + job API pods: ${u.systemPodsBefore.join(", ")} → ${u.systemPodsAfter.join(", ")}`);
say(
  `  step 1 (operator and job API only, ${u.operatorStepSeconds.toFixed(0)}s): worker pods kept ${u.workerPodsKept}/${u.workerPodsBefore} with the same UIDs (${u.workerPodsScaledDown} removed by scale-down), new pod templates ${u.newTemplatesAfterOperatorUpgrade.length}`,
);
say(
  `  step 2 (worker image, ${u.workerStepSeconds.toFixed(0)}s): ${u.workerPodsRolled} worker pods of the previous image rolled, exit codes ${[...new Set(u.rolledExitCodes)].join(", ")}`,
);
const workers = report.pods.filter((p) => p.pool);
say(
  `  worker pods: ${workers.length}; exit codes as the kubelet reported: ${[...new Set(workers.map((p) => p.exitCode ?? "-"))].join(", ")}`,
);
say(
  `  job records in PostgreSQL (each job to its end; 0.1.0 records a new pipeline from its first worker on): ${report.records}`,
);
say(
  report.footprint.length === 0
    ? "  host unchanged: sysctls, iptables, mounts, links, cgroups as before the run"
    : `  host changed: ${report.footprint.join("; ")}`,
);
say(`  pipeline ${report.seconds.toFixed(0)}s; demo total ${((Date.now() - t0) / 1000).toFixed(0)}s`);
const problems = upgradeProblems(report);
say(
  problems.length === 0
    ? "OK: every job ran exactly once per stage across the upgrade; the operator-only step kept every worker pod; the worker step rolled them with warm shutdown (exit 0)"
    : `PROBLEM:\n  - ${problems.join("\n  - ")}`,
);
process.exit(problems.length === 0 ? 0 : 1);

// `make demo`: the main job on an embedded default. By default on a real node (nodeScenario.ts):
// a control plane, a kubelet with containerd, the chart installed with `helm install`, a two-stage
// pipeline applied with `kubectl apply`, a burst of jobs scaling both pools 0 → N → 0 with real
// worker pods. RUNTIME=process: the quick mode (scenario.ts, worker processes for kwok's pods);
// RUNTIME=containers: the operator and worker pods from the images under podman, no kubelet.
//   --keep          keep everything running after the summary (the dashboard, kubectl) until Enter
//   SCREENSHOTS=1   write docs/screenshots/{queues,pools,queue,job}.png mid-run (real node only)
//   DEMO_JOBS, DEMO_JOB_MS   the burst's size (default 1,000 on the node, 2,000 otherwise) and each
//                            job's duration (default 100 ms; the second stage's is 3×)
import { createInterface } from "node:readline";
import { nodeUnavailable } from "../support/node.ts";
import { runNodeScenario, RELEASE_NS, type NodeScenarioReport } from "./nodeScenario.ts";
import { runScenario, type ScenarioReport } from "./scenario.ts";
import { openScreenshots } from "./screenshots.ts";
import { positiveEnv } from "./demoEnv.ts";

const say = (line: string) => process.stdout.write(`${line}\n`);
const RUNTIMES = ["node", "process", "containers"] as const;
const runtime = (process.env.RUNTIME || "node") as (typeof RUNTIMES)[number];
if (!RUNTIMES.includes(runtime)) {
  say(`RUNTIME=${process.env.RUNTIME}: expected one of ${RUNTIMES.join(", ")} (default node)`);
  process.exit(2);
}
const args = process.argv.slice(2);
const unknown = args.filter((a) => a !== "--keep");
if (unknown.length > 0) {
  say(`demo: unknown argument ${unknown.join(" ")} (known: --keep)`);
  process.exit(2);
}
const keep = args.includes("--keep") || /^(1|true|yes)$/i.test(process.env.KEEP ?? "");
const screenshots = /^(1|true|yes)$/i.test(process.env.SCREENSHOTS ?? "");
const positive = (name: string, fallback: number) => positiveEnv(name, fallback, say);
// (on the real node 1,000 by default: enough to take both pools to their 6 replicas, and the warm
// run stays within about two minutes)
const jobs = positive("DEMO_JOBS", runtime === "node" ? 1000 : 2000);
const jobMs = positive("DEMO_JOB_MS", 100);
const t0 = Date.now();

/** The summary's first lines, alike for every runtime; whether every job ran once per stage. */
function sayStages(report: Pick<ScenarioReport, "stages" | "events">): boolean {
  say("");
  say("summary");
  for (const s of report.stages) {
    say(
      `  ${s.pool.padEnd(15)} ${s.queue.padEnd(15)} completed ${s.completed}, executions ${s.executions}, ran twice ${s.ranTwice}, peak replicas ${s.maxReplicas}, redelivered by scale-down ${s.handedBack}, stalls ${s.stalled}`,
    );
  }
  for (const [pool, reasons] of Object.entries(report.events))
    say(`  events on ${pool}: ${[...new Set(reasons)].join(", ")}`);
  return report.stages.every(
    (s) => s.completed === jobs && s.ranTwice === 0 && s.handedBack === 0 && s.maxReplicas > 1,
  );
}

if (runtime !== "node") {
  if (screenshots || keep)
    say(`(SCREENSHOTS and --keep apply to the real-node demo only: RUNTIME=${runtime})`);
  say(
    `Conveyor demo: ${jobs} jobs through a two-stage pipeline (demo/extract → demo/summarize) on a local control plane`,
  );
  if (runtime === "containers")
    say("runtime: containers — the operator and every worker pod run from the built images");
  const report = await runScenario({ jobs, jobMs, say, runtime });
  const ok = sayStages(report) && report.records === jobs;
  say(`  worker pods run: ${report.podsRun}; exit codes: ${[...new Set(report.workerExitCodes)].join(", ")}`);
  say(`  job records in PostgreSQL, from their enqueue on: ${report.records}`);
  say(`  pipeline time ${report.seconds.toFixed(0)}s; demo total ${((Date.now() - t0) / 1000).toFixed(0)}s`);
  say(
    ok
      ? "OK: every job ran exactly once per stage and was recorded from its enqueue on; no work was lost or re-run by scale-down"
      : "PROBLEM: see the numbers above",
  );
  process.exit(ok ? 0 : 1);
}

const why = nodeUnavailable();
if (why) {
  say(`demo: ${why}. RUNTIME=process runs the quick mode (worker processes, no kubelet).`);
  process.exit(2);
}
say(
  `Conveyor demo on a real node: ${jobs} jobs through a two-stage pipeline (demo/extract → demo/summarize)`,
);
const report: NodeScenarioReport = await runNodeScenario({
  jobs,
  jobMs,
  say,
  midRun: screenshots ? (d) => openScreenshots(d, say) : undefined,
  beforeStop: keep
    ? async (d) => {
        say("");
        say("--keep: everything still runs. In another terminal:");
        say(`  export KUBECONFIG=${d.kubeconfig}`);
        say("  kubectl get wp,pods -A");
        say(`  dashboard ${d.url}  token ${d.token}`);
        say(`  (kubectl port-forward -n ${RELEASE_NS} svc/conveyor-job-api <port>:8080 for another one)`);
        say("Press Enter (or close stdin) to stop everything.");
        const rl = createInterface({ input: process.stdin });
        await new Promise<void>((resolve) => {
          rl.once("line", () => resolve());
          rl.once("close", () => resolve());
        });
        rl.close();
      }
    : undefined,
});

const workers = report.pods.filter((p) => p.pool);
const system = report.pods.filter((p) => p.namespace === RELEASE_NS);
const stats = (ms: (number | undefined)[]) => {
  const v = ms.filter((x): x is number => x !== undefined).sort((a, b) => a - b);
  if (v.length === 0) return "n/a";
  const s = (x: number) => `${(x / 1000).toFixed(1)}s`;
  return `min ${s(v[0]!)} median ${s(v[Math.floor(v.length / 2)]!)} max ${s(v[v.length - 1]!)} (${v.length} pods)`;
};
const stagesOk = sayStages(report);
say("  kubectl get wp:");
for (const l of report.getWp.trimEnd().split("\n")) say(`    ${l}`);
say(`  kubectl logs ${report.logLines.pod} --tail=3:`);
for (const l of report.logLines.lines) say(`    ${l}`);
say("  worker pods, exit code as the kubelet reported it:");
for (const p of workers) {
  const note =
    p.toRunningMs === undefined
      ? " (deleted before its container ran)"
      : p.toReadyMs === undefined && p.exitCode === 143
        ? " (SIGTERM from a scale-down before node had loaded the worker and installed its handler: it took no job)"
        : "";
  say(`    ${p.name.padEnd(40)} ${p.exitCode ?? "-"}${note}`);
}
say(`  worker pod create → Running: ${stats(workers.map((p) => p.toRunningMs))}`);
say(`  worker pod create → Ready:   ${stats(workers.map((p) => p.toReadyMs))}`);
say(`  operator + job API pods create → Ready: ${stats(system.map((p) => p.toReadyMs))}`);
say(`  job records in PostgreSQL, from their enqueue on: ${report.records}`);
say(
  report.footprint.length === 0
    ? "  host unchanged: sysctls, iptables, mounts, links, cgroups as before the run"
    : `  host changed: ${report.footprint.join("; ")}`,
);
say(
  `  setup ${report.setupSeconds.toFixed(0)}s (images, control plane, node, helm install); pipeline ${report.seconds.toFixed(0)}s; demo total ${((Date.now() - t0) / 1000).toFixed(0)}s`,
);
const ok =
  stagesOk &&
  report.records === jobs &&
  workers.length > 0 &&
  workers.every(
    (p) =>
      p.exitCode === 0 || p.toRunningMs === undefined || (p.toReadyMs === undefined && p.exitCode === 143),
  ) &&
  report.footprint.length === 0;
say(
  ok
    ? "OK: every job ran exactly once per stage and was recorded from its enqueue on; every worker pod that became Ready exited 0; no work was lost or re-run by scale-down"
    : "PROBLEM: see the numbers above",
);
process.exit(ok ? 0 : 1);

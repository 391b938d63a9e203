// `make demo`: the main job on an embedded default — see scenario.ts. `make demo RUNTIME=containers`
// runs the operator (helm install) and the worker pods from the built images instead. Prints progress live and a
// summary at the end; stops everything it started.
import { runScenario } from "./scenario.ts";

const jobs = Number(process.env.DEMO_JOBS ?? 2000);
const t0 = Date.now();
const say = (line: string) => process.stdout.write(`${line}\n`);
say(
  `Conveyor demo: ${jobs} jobs through a two-stage pipeline (demo/extract → demo/summarize) on a local control plane`,
);
const runtime = process.env.RUNTIME === "containers" ? "containers" : "process";
if (process.env.RUNTIME && process.env.RUNTIME !== runtime && process.env.RUNTIME !== "process") {
  say(`RUNTIME=${process.env.RUNTIME}: expected 'process' (default) or 'containers'`);
  process.exit(2);
}
if (runtime === "containers")
  say("runtime: containers — the operator and every worker pod run from the built images");
const report = await runScenario({ jobs, jobMs: Number(process.env.DEMO_JOB_MS ?? 100), say, runtime });
say("");
say("summary");
for (const s of report.stages) {
  say(
    `  ${s.pool.padEnd(15)} ${s.queue.padEnd(15)} completed ${s.completed}, executions ${s.executions}, ran twice ${s.ranTwice}, peak replicas ${s.maxReplicas}, redelivered by scale-down ${s.handedBack}, stalls ${s.stalled}`,
  );
}
for (const [pool, reasons] of Object.entries(report.events))
  say(`  events on ${pool}: ${[...new Set(reasons)].join(", ")}`);
say(`  worker pods run: ${report.podsRun}; exit codes: ${[...new Set(report.workerExitCodes)].join(", ")}`);
say(`  job records in PostgreSQL: ${report.records}`);
say(`  pipeline time ${report.seconds.toFixed(0)}s; demo total ${((Date.now() - t0) / 1000).toFixed(0)}s`);
const ok = report.stages.every(
  (s) => s.completed === jobs && s.ranTwice === 0 && s.handedBack === 0 && s.maxReplicas > 1,
);
say(
  ok
    ? "OK: every job ran exactly once per stage; no work was lost or re-run by scale-down"
    : "PROBLEM: see the numbers above",
);
process.exit(ok ? 0 : 1);

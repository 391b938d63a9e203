// The audit of a `helm upgrade` run on the real node (nodeScenario.ts with `upgrade`): what must
// hold, as sentences; empty when everything does (`make upgrade-demo`, test/e2e/upgradeDemo.ts).
import type { NodeScenarioReport } from "./nodeScenario.ts";

export function upgradeProblems(r: NodeScenarioReport): string[] {
  const out: string[] = [];
  const u = r.upgrade;
  if (!u) return ["no upgrade ran (the pipeline ended before both pools served?)"];
  for (const s of r.stages) {
    if (s.completed !== r.jobs) out.push(`${s.pool}: ${s.completed} of ${r.jobs} jobs completed`);
    if (s.executions !== r.jobs || s.ranTwice !== 0)
      out.push(`${s.pool}: ${s.executions} executions of ${r.jobs} jobs, ${s.ranTwice} ran twice`);
  }
  const stayed = u.systemPodsAfter.filter((p) => u.systemPodsBefore.includes(p));
  if (stayed.length) out.push(`operator / job API pods not replaced: ${stayed.join(", ")}`);
  if (u.newTemplatesAfterOperatorUpgrade.length)
    out.push(
      `the operator-only upgrade changed the worker pod template (${u.newTemplatesAfterOperatorUpgrade.join(", ")})`,
    );
  if (u.workerPodsBefore === 0 || u.workerPodsKept === 0)
    out.push(
      `no worker pod ran through the operator-only upgrade (${u.workerPodsKept}/${u.workerPodsBefore})`,
    );
  if (u.workerPodsRolled === 0) out.push("no worker pod of the previous image rolled in the worker step");
  if (u.rolledExitCodes.some((c) => c !== 0))
    out.push(`rolled worker pods that did not exit 0: ${u.rolledExitCodes.join(", ")}`);
  const bad = r.pods
    .filter((p) => p.pool && p.toRunningMs !== undefined && p.exitCode !== 0)
    .filter((p) => !(p.toReadyMs === undefined && p.exitCode === 143));
  if (bad.length)
    out.push(`worker pods that did not exit 0: ${bad.map((p) => `${p.name} ${p.exitCode}`).join(", ")}`);
  if (r.records !== r.jobs) out.push(`${r.records} of ${r.jobs} job records in PostgreSQL`);
  if (r.footprint.length) out.push(`host changed: ${r.footprint.join("; ")}`);
  return out;
}

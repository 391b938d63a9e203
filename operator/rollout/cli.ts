// `conveyor rollout status|promote|abort <pool>`: reads a WorkerPool's status.rollout, or asks the
// operator to finish or stop the rollout in progress (an annotation naming the canary's version,
// so a request cannot outlive the rollout it was made for).
import { RESOURCES, resourcePath } from "../apis/coordinates.ts";
import type { WorkerPool } from "../apis/v1alpha1/types.ts";
import { KubeClient } from "../kube/client.ts";
import { loadKubeConfig } from "../kube/kubeConfig.ts";
import { ROLLOUT_ACTION_ANNOTATION } from "./step.ts";

export type RolloutAction = "status" | "promote" | "abort";

export class RolloutCommandError extends Error {
  override name = "RolloutCommandError";
}

export async function rolloutCommand(
  action: RolloutAction,
  name: string,
  opts: { kubeconfig?: string; namespace: string; json: boolean },
): Promise<string> {
  const client = new KubeClient(await loadKubeConfig({ file: opts.kubeconfig }));
  const path = resourcePath(RESOURCES.workerPools, { namespace: opts.namespace, name });
  const pool = await client.get<WorkerPool>(path);
  if (!pool) throw new RolloutCommandError(`WorkerPool ${opts.namespace}/${name} not found`);
  if (!pool.spec.rollout)
    throw new RolloutCommandError(`WorkerPool ${opts.namespace}/${name} has no spec.rollout`);
  const ro = pool.status?.rollout;
  if (action === "status") {
    if (opts.json) return JSON.stringify(ro ?? null);
    if (!ro) return `${name}: no rollout yet (the operator has not seen the pool)`;
    const steps = pool.spec.rollout.canary.steps.map((s) => `${s.weight}%`).join(" → ");
    return [
      `${name}: ${ro.summary ?? ro.phase}`,
      `  phase ${ro.phase}, steps ${steps} → 100%`,
      `  stable ${ro.stableHash ?? "-"}${ro.canaryHash && ro.canaryHash !== ro.stableHash ? `, canary ${ro.canaryHash}` : ""}`,
      ...(ro.stepStartedAt && ro.phase === "Progressing" ? [`  step started ${ro.stepStartedAt}`] : []),
      ...(ro.message ? [`  ${ro.verdict ?? ""}: ${ro.message}`] : []),
    ].join("\n");
  }
  if (ro?.phase !== "Progressing" || !ro.canaryHash)
    throw new RolloutCommandError(
      `WorkerPool ${opts.namespace}/${name} has no rollout in progress (${ro?.phase ?? "none"})`,
    );
  await client.mergePatch(path, {
    metadata: { annotations: { [ROLLOUT_ACTION_ANNOTATION]: `${action}:${ro.canaryHash}` } },
  });
  const what = action === "promote" ? "promotion" : "abort";
  return opts.json
    ? JSON.stringify({ pool: name, action, canary: ro.canaryHash })
    : `${name}: ${what} of ${ro.canaryHash} requested (conveyor rollout status ${name} shows when the operator has acted)`;
}

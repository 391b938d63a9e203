// The reconcile's layout step: the operator finalizes its pipeline's layout on its own once every
// pod of every pool of the pipeline runs a version that reads the newer layout
// (spec.upgrade.autoFinalize, default on; docs/protocol.md, "Layout versions"). The decision is
// decideAutoFinalize, a pure function; the step reads Redis at most every LAYOUT_CHECK_MS and
// scans for readers only while the layout in force is older than this operator's newest.
import { hostname } from "node:os";
import {
  FinalizeRefusedError,
  pipelineOf,
  rangeText,
  readableLayouts,
  type LayoutReader,
} from "../../queue/index.ts";
import { withDefaults, type WorkerPool } from "../apis/v1alpha1/types.ts";
import type { ObjectCache } from "../kube/controller.ts";
import type { PoolPass, StepDeps } from "./poolPass.ts";
import { Reason } from "./reasons.ts";

/** How often a pool's reconcile looks at its pipeline's layout (and reports this operator as a reader). */
export const LAYOUT_CHECK_MS = 15_000;

export interface AutoFinalizeInput {
  /** spec.upgrade.autoFinalize of every pool of the pipeline. */
  autoFinalize: { pool: string; on: boolean }[];
  inForce: number;
  /** The newest layout this operator writes. */
  target: number;
  /** Every pod of every pool of the pipeline (not terminating). */
  pods: { pool: string; name: string }[];
  /** The pipeline's live readers (workers, operators, job APIs). */
  readers: LayoutReader[];
}

export type AutoFinalizeDecision = { finalize: true; to: number } | { finalize: false; why: string };

/** Whether to move the layout in force to `target` now, and if not, why not. */
export function decideAutoFinalize(input: AutoFinalizeInput): AutoFinalizeDecision {
  const { inForce, target } = input;
  if (inForce >= target) return { finalize: false, why: `layout ${inForce} is in force` };
  const off = input.autoFinalize.filter((p) => !p.on).map((p) => p.pool);
  if (off.length) return { finalize: false, why: `spec.upgrade.autoFinalize is off for ${off.join(", ")}` };
  const behind = input.readers.filter((r) => r.layouts.max < target);
  if (behind.length)
    return {
      finalize: false,
      why: `waiting for ${behind.map((r) => `${r.kind} ${r.id} (reads ${rangeText(r.layouts)})`).join(", ")}`,
    };
  // (a pool at zero says nothing of the version its next pods run: a person finalizes then)
  const empty = input.autoFinalize
    .filter((p) => !input.pods.some((pod) => pod.pool === p.pool))
    .map((p) => p.pool);
  if (empty.length)
    return { finalize: false, why: `no pods of ${empty.join(", ")} to tell which version they run` };
  const reporting = new Set(input.readers.filter((r) => r.kind === "worker" && r.pod).map((r) => r.pod!));
  const silent = input.pods.filter((p) => !reporting.has(p.name));
  if (silent.length)
    return {
      finalize: false,
      why: `waiting for pod(s) ${silent.map((p) => `${p.pool}/${p.name}`).join(", ")} to report the layouts they read`,
    };
  return { finalize: true, to: target };
}

export async function finalizeLayoutStep(
  deps: StepDeps & { pools: ObjectCache<WorkerPool> },
  pass: PoolPass,
): Promise<void> {
  const { spec, pool, key, state } = pass;
  if (!spec || pass.sample?.error) return;
  if (state.layoutCheckedAt !== undefined && pass.now - state.layoutCheckedAt < LAYOUT_CHECK_MS) return;
  state.layoutCheckedAt = pass.now;
  const { log, events } = deps.ctx;
  const operatorId = `operator:${hostname()}:${process.pid}`;
  try {
    await deps.poller.reportReader(key, operatorId);
    const target = readableLayouts().max;
    const layout = await deps.poller.layoutInForce(key);
    if (!layout || layout.inForce >= target) return;
    const pipeline = pipelineOf(spec.queue);
    const status = await deps.poller.pipelineLayout(key);
    if (!status) return;
    const pools = deps.pools.list().filter((p) => !p.metadata.deletionTimestamp && samePipeline(p, pipeline));
    const decision = decideAutoFinalize({
      autoFinalize: pools.map((p) => ({ pool: poolName(p), on: autoFinalizeOf(p) })),
      inForce: status.inForce,
      target,
      pods: pools.flatMap((p) =>
        deps.ctx.podsOf(p).map((pod) => ({ pool: poolName(p), name: pod.metadata.name ?? "" })),
      ),
      readers: status.readers,
    });
    if (!decision.finalize) {
      if (state.layoutWaiting !== decision.why)
        log.info(
          { pool: key, pipeline, layout: status.inForce, target },
          `layout not finalized: ${decision.why}`,
        );
      state.layoutWaiting = decision.why;
      return;
    }
    const r = await deps.poller.finalizeLayout(key, operatorId);
    if (!r?.moved) return;
    state.layoutWaiting = undefined;
    const message = `layout ${r.to} in force for pipeline ${pipeline} (was ${r.from}): every pod of its pools reads it`;
    log.info({ pool: key, pipeline, from: r.from, to: r.to }, message);
    // (best effort, like the Event: the layout is finalized whatever the trail says)
    await deps.poller
      .audit(
        key,
        {
          verb: "admin",
          operation: "layoutFinalize",
          target: `pipeline:${pipeline}`,
          params: { from: r.from, to: r.to },
        },
        { status: 200, jobs: null, result: { message } },
      )
      .catch((err: unknown) =>
        log.warn({ pool: key, err: String(err) }, "audit: the finalize was not written"),
      );
    await events.record(pool, "Normal", Reason.LayoutFinalized, message);
  } catch (err) {
    // (a reader that appeared between the decision and the finalize: the next check sees it)
    if (err instanceof FinalizeRefusedError) log.info({ pool: key }, err.message);
    else log.warn({ pool: key, err: String(err) }, "cannot read or finalize the layout yet");
  }
}

const poolName = (p: WorkerPool) => `${p.metadata.namespace}/${p.metadata.name}`;

function specOf(p: WorkerPool) {
  try {
    return withDefaults(p.spec);
  } catch {
    return undefined;
  }
}

function samePipeline(p: WorkerPool, pipeline: string): boolean {
  try {
    const s = specOf(p);
    return s !== undefined && pipelineOf(s.queue) === pipeline;
  } catch {
    return false;
  }
}

function autoFinalizeOf(p: WorkerPool): boolean {
  return specOf(p)?.upgrade.autoFinalize ?? true;
}

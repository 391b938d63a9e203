// The reconcile's queue-control step: spec.paused / spec.rateLimit / spec.resources into Redis
// (the spec wins while set); then what is in force shapes scaling: a paused queue drains the
// pool (no HPA meanwhile), a rate limit, the resources or the groups cap maxReplicas at the
// replicas they can feed, the lowest binding (HPA and direct mode alike). Events on changes.
// The computations are queueControl.ts's.
import { formatRateLimit, type QueueControlState } from "../../queue/index.ts";
import type { WorkerPoolSpec, WorkerPoolStatus } from "../apis/v1alpha1/types.ts";
import { jobTimeOf } from "../scaling/decide.ts";
import type { PoolPass, StepDeps } from "./poolPass.ts";
import {
  bindingCap,
  controlChanges,
  controlSummary,
  groupAdmissionCap,
  rateLimitCap,
  resourceCap,
  resourceChanges,
  specControl,
  specResources,
  type ReplicaCap,
} from "./queueControl.ts";
import { Reason } from "./reasons.ts";

export async function applyQueueControl(deps: StepDeps, pass: PoolPass): Promise<void> {
  const { spec, sample } = pass;
  if (!spec || !pass.backlogFresh || !sample?.control) return;
  const want = specControl(spec);
  const change = controlChanges(want, sample.control);
  if (change.paused !== undefined || change.rateLimit) await deps.poller.applyControl(pass.key, change);
  const have: QueueControlState = { ...sample.control, ...change };
  // spec.resources into the pipeline's Redis, only what differs (ids and limits, no secret).
  const budgets = specResources(spec);
  const budgetChanges = sample.resources ? resourceChanges(budgets, sample.resources) : [];
  if (budgetChanges.length > 0) await deps.poller.applyResources(pass.key, budgetChanges);
  const managed = want.paused !== undefined || want.rateLimit !== undefined;
  pass.queuePaused = have.paused;
  pass.pauseSeenByPoll = sample.pausedWhenCounted === true;
  // The lowest cap binds: the rate limit's, the resources', the groups'.
  // (the job time as of the last poll's decision: this poll's is observed in decideReplicas)
  const job = jobTimeOf(pass.state.scaler, pass.jobMs);
  const cap: ReplicaCap | undefined = bindingCap([
    have.rateLimit ? rateLimitCap(have.rateLimit, job, spec) : undefined,
    budgets.length > 0 ? resourceCap(budgets, job, spec) : undefined,
    groupAdmissionCap(pass.counts!, sample.groups, spec),
  ]);
  if (cap && cap.cap < spec.scaling.maxReplicas) pass.replicaCap = cap.cap;
  pass.control = {
    paused: have.paused,
    ...(have.rateLimit ? { rateLimit: formatRateLimit(have.rateLimit) } : {}),
    source: managed ? "spec" : "redis",
    ...(cap ? { replicaCap: cap.cap, capReason: cap.reason, capBy: cap.by } : {}),
    summary: controlSummary(
      have.paused,
      have.rateLimit,
      cap?.cap,
      cap?.by,
      budgets.map((b) => b.name),
    ),
  };
  deps.gauges.cap(pass.key, cap);
  await announceControl(deps, pass, spec, have, cap);
}

const capReason = {
  rateLimit: Reason.RateLimited,
  resources: Reason.BudgetLimited,
  groups: Reason.GroupLimited,
};

/** An Event when what is in force changes (not on every pass). */
async function announceControl(
  deps: StepDeps,
  pass: PoolPass,
  spec: WorkerPoolSpec,
  have: QueueControlState,
  cap: ReplicaCap | undefined,
): Promise<void> {
  const { pool } = pass;
  const before: WorkerPoolStatus["control"] = pool.status?.control;
  if (before && before.paused !== have.paused)
    await deps.ctx.events.record(
      pool,
      "Normal",
      have.paused ? Reason.QueuePaused : Reason.QueueRunning,
      have.paused
        ? `queue ${spec.queue} paused: scaling down to the running jobs, then minReplicas ${spec.scaling.minReplicas}`
        : `queue ${spec.queue} resumed: scaling on the backlog again`,
    );
  // (the groups' cap follows the running jobs from poll to poll: an Event when it starts to
  // bind, not at every move; status.control has the current one)
  if (
    cap &&
    (cap.by === "groups"
      ? before?.capBy !== "groups"
      : before?.replicaCap !== cap.cap || (before?.capBy ?? "rateLimit") !== cap.by)
  )
    await deps.ctx.events.record(
      pool,
      "Normal",
      capReason[cap.by],
      `replicas capped at ${cap.cap}: ${cap.reason}`,
    );
}

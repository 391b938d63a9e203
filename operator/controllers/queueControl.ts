// Queue control seen from the operator: spec.paused and spec.rateLimit are written
// into Redis (the spec wins while set), a paused pool scales to what its running jobs need and
// then to its minimum, a rate-limited pool is capped at the replicas the rate can feed, a pool
// with spec.resources at what its keys can pay for, and a pool whose waiting jobs
// belong to groups at their limit at the replicas its groups can use; the lowest cap
// binds.
// Pure functions; the reconcile step that uses them is queueControlStep.ts.
import {
  assertResourceName,
  DEFAULT_CEILING,
  InvalidResourceError,
  formatRateLimit,
  parseLimits,
  parseRateLimit,
  type GroupAdmission,
  type QueueControlState,
  type QueueCounts,
  type RateLimit,
  type ResourceLimit,
  type ResourceState,
  type WorkerReport,
} from "../../queue/index.ts";
import type { WorkerPoolSpec } from "../apis/v1alpha1/types.ts";
import type { ResourceBudgetSpec } from "../scaling/poolWrites.ts";
import { lowerMedian } from "../scaling/latency.ts";

/** A worker report older than this says nothing about job durations any more. */
const REPORT_STALE_MS = 60_000;

/** What the spec manages: undefined fields are left as the CLI or API set them. */
export interface SpecControl {
  paused?: boolean;
  rateLimit?: RateLimit;
}

export function specControl(spec: WorkerPoolSpec): SpecControl {
  return {
    ...(spec.paused !== undefined ? { paused: spec.paused } : {}),
    ...(spec.rateLimit !== undefined ? { rateLimit: parseRateLimit(spec.rateLimit) } : {}),
  };
}

/** The writes that make Redis say what the spec says (empty: nothing to write). */
export function controlChanges(
  want: SpecControl,
  have: QueueControlState,
): { paused?: boolean; rateLimit?: RateLimit } {
  const out: { paused?: boolean; rateLimit?: RateLimit } = {};
  if (want.paused !== undefined && want.paused !== have.paused) out.paused = want.paused;
  if (
    want.rateLimit &&
    (have.rateLimit?.max !== want.rateLimit.max || have.rateLimit?.perMs !== want.rateLimit.perMs)
  )
    out.rateLimit = want.rateLimit;
  return out;
}

/**
 * The jobs one replica holds at once: concurrency, times batch.size for a pool of batch calls
 * (concurrency calls of up to batch.size jobs each). The pool is sized in these slots.
 */
export function replicaSlots(spec: Pick<WorkerPoolSpec, "concurrency" | "batch">): number {
  return Math.max(1, spec.concurrency) * (spec.batch?.size ?? 1);
}

/** How messages name a replica's slots: "concurrency 8", or "concurrency 2 × batch 50". */
export function slotsLabel(spec: Pick<WorkerPoolSpec, "concurrency" | "batch">): string {
  return spec.batch
    ? `concurrency ${spec.concurrency} × batch ${spec.batch.size}`
    : `concurrency ${spec.concurrency}`;
}

/** A paused pool's replicas: enough warm pods for the jobs still running, never below the minimum. */
export function pausedReplicas(inflight: number, concurrency: number, minReplicas: number): number {
  return Math.max(minReplicas, Math.ceil(inflight / Math.max(1, concurrency)));
}

/** How long a job holds a slot (ms) and where that comes from ("mean of 40", "workers' median"): see jobTimeOf. */
export interface JobTime {
  jobMs?: number;
  jobMsFrom?: string;
}

/** The median of the workers' reported median job durations (fresh reports only); undefined when none. */
export function medianJobMs(reports: WorkerReport[], now: number): number | undefined {
  return lowerMedian(
    reports.filter((r) => now - r.seen <= REPORT_STALE_MS && (r.jobP50Ms ?? 0) > 0).map((r) => r.jobP50Ms!),
  );
}

export interface ReplicaCap {
  cap: number;
  reason: string;
  /** What binds it (status.control.capBy, the metrics' `cap`/`by` label). */
  by: "rateLimit" | "resources" | "groups";
}

/** spec.resources as the operator writes and caps them: limits parsed, the ceiling a fraction. */
export type ResourceBudget = ResourceBudgetSpec;

/** spec.resources parsed (limits checked by queue/resources.ts; errors name the field). */
export function specResources(spec: Pick<WorkerPoolSpec, "resources">): ResourceBudget[] {
  return (spec.resources ?? []).map((r, i) => {
    assertResourceName(r.name, `spec.resources[${i}].name`);
    const ceiling = r.ceiling !== undefined ? r.ceiling / 100 : DEFAULT_CEILING;
    return {
      name: r.name,
      ceiling,
      keys: r.keys.map((k, j) => {
        const field = `spec.resources[${i}].keys[${j}]`;
        assertResourceName(k.id, `${field}.id`);
        const limits = parseLimits(k.limits.join(","), `${field}.limits`);
        // The claim admits up to floor(ceiling × max): below 1 the key could never admit a job.
        for (const l of limits)
          if (Math.floor(ceiling * l.max) < 1)
            throw new InvalidResourceError(
              `${field}.limits: ${l.unit}=${l.max} at ceiling ${Math.round(ceiling * 100)}% admits nothing (floor(${ceiling} × ${l.max}) = 0)`,
            );
        return { id: k.id, limits };
      }),
    };
  });
}

/** The resources whose keys, limits or ceiling in Redis differ from the spec's (to setResource). */
export function resourceChanges(want: ResourceBudget[], have: ResourceState[]): ResourceBudget[] {
  const limitsText = (limits: ResourceLimit[]) =>
    limits
      .map((l) => `${l.unit}=${l.max}/${l.windowMs}`)
      .sort()
      .join(",");
  const text = (r: { ceiling: number; keys: { id: string; limits: ResourceLimit[] }[] }) =>
    `${r.ceiling.toFixed(4)} ${r.keys.map((k) => `${k.id}:${limitsText(k.limits)}`).join(" ")}`;
  return want.filter((w) => {
    const h = have.find((x) => x.name === w.name);
    return !h || text(h) !== text(w);
  });
}

/**
 * The replicas a pool's resources can feed, as rateLimitCap does for a queue rate: per resource,
 * the keys' admissible requests per second (floor(ceiling × max) per window, summed over keys) ×
 * job seconds / concurrency, + 1; the tightest resource binds. A resource with a key
 * without a `requests` limit admits at any rate, so it caps nothing; undefined when none caps.
 */
export function resourceCap(
  resources: ResourceBudget[],
  job: JobTime,
  spec: Pick<WorkerPoolSpec, "concurrency" | "batch"> & {
    scaling: { minReplicas: number; maxReplicas: number };
  },
): ReplicaCap | undefined {
  const rated = resources.flatMap((r) => {
    const perKey = r.keys.map((k) => k.limits.find((l) => l.unit === "requests"));
    if (perKey.length === 0 || perKey.some((l) => l === undefined)) return [];
    const perSecond = perKey.reduce(
      (sum, l) => sum + (Math.floor(r.ceiling * l!.max) * 1000) / l!.windowMs,
      0,
    );
    return [{ r, perSecond }];
  });
  if (rated.length === 0) return undefined;
  const tightest = rated.reduce((a, b) => (b.perSecond < a.perSecond ? b : a));
  const what = `resource ${tightest.r.name} (${tightest.r.keys.length} key(s), ${round(tightest.perSecond)} requests/s at ceiling ${Math.round(tightest.r.ceiling * 100)}%)`;
  return startRateCap(what, tightest.perSecond, job, spec, "resources");
}

const round = (n: number) => (n >= 10 ? String(Math.round(n)) : String(Math.round(n * 100) / 100));

/**
 * The replicas a rate limit can feed: ceil(starts per second × job seconds /
 * concurrency) + 1 (a spare for uneven jobs), within [max(1, minReplicas), maxReplicas].
 * Without measured durations the pool is not capped (maxReplicas), and the reason says so.
 */
export function rateLimitCap(
  limit: RateLimit,
  job: JobTime,
  spec: Pick<WorkerPoolSpec, "concurrency" | "batch"> & {
    scaling: { minReplicas: number; maxReplicas: number };
  },
): ReplicaCap {
  return startRateCap(
    `rate limit ${formatRateLimit(limit)}`,
    (limit.max * 1000) / limit.perMs,
    job,
    spec,
    "rateLimit",
  );
}

// The replicas `perSecond` job starts can feed: ceil(perSecond × job s / concurrency) + 1 (Little's
// law: the slots the starts keep busy), within [max(1, minReplicas), maxReplicas]; without
// durations not capped (maxReplicas). `what` begins the reason. (rateLimitCap and resourceCap: a
// start rate either way.)
function startRateCap(
  what: string,
  perSecond: number,
  { jobMs, jobMsFrom }: JobTime,
  spec: Pick<WorkerPoolSpec, "concurrency" | "batch"> & {
    scaling: { minReplicas: number; maxReplicas: number };
  },
  by: ReplicaCap["by"],
): ReplicaCap {
  const { minReplicas, maxReplicas } = spec.scaling;
  if (jobMs === undefined)
    return { cap: maxReplicas, reason: `${what}: no job durations measured yet, not capped`, by };
  const needed = Math.ceil((perSecond * jobMs) / 1000 / replicaSlots(spec)) + 1;
  const cap = Math.min(maxReplicas, Math.max(1, minReplicas, needed));
  return {
    cap,
    reason: `${what} × job ${Math.round(jobMs)}ms${jobMsFrom ? ` (${jobMsFrom})` : ""} / ${slotsLabel(spec)} → ${needed} replica(s)${cap < needed ? `, maxReplicas ${maxReplicas}` : ""}`,
    by,
  };
}

/**
 * The replicas a queue's groups can use: the jobs that could run at once — running + ungrouped
 * ready + due-delayed + the grouped waiting jobs their groups admit now (Σ min(waiting, room);
 * groups at their limit or paused add none: GroupAdmission) — over concurrency, within
 * [max(1, minReplicas), maxReplicas]. Undefined when no job waits in a group or the cap would
 * not bind (≥ maxReplicas). Due-delayed jobs count whole (some may join a blocked group).
 */
export function groupAdmissionCap(
  counts: Pick<QueueCounts, "ready" | "dueDelayed" | "inflight">,
  groups: GroupAdmission | undefined,
  spec: Pick<WorkerPoolSpec, "concurrency" | "batch"> & {
    scaling: { minReplicas: number; maxReplicas: number };
  },
): ReplicaCap | undefined {
  if (!groups || groups.waiting <= 0) return undefined;
  const { minReplicas, maxReplicas } = spec.scaling;
  const ungrouped = Math.max(0, counts.ready - groups.waiting);
  const admissible = Math.min(groups.waiting, groups.admissible);
  const slots = counts.inflight + counts.dueDelayed + ungrouped + admissible;
  const needed = Math.ceil(slots / replicaSlots(spec));
  if (needed >= maxReplicas) return undefined;
  const cap = Math.min(maxReplicas, Math.max(1, minReplicas, needed));
  const blocked = groups.waiting - admissible;
  const estimate = groups.complete ? "" : ` (estimated from ${groups.scanned} of ${groups.ring} groups)`;
  return {
    cap,
    reason:
      `groups: ${admissible} of ${groups.waiting} grouped waiting job(s) can start${estimate}, ${blocked} wait for groups at their limit or paused; ` +
      `${counts.inflight} running + ${ungrouped + counts.dueDelayed} other ready + ${admissible} = ${slots} slot(s) / ${slotsLabel(spec)} → ${needed} replica(s)${cap > needed ? `, minimum ${cap}` : ""}`,
    by: "groups",
  };
}

/** The cap that binds: the lowest (the first of equals); undefined when there is none. */
export function bindingCap(caps: (ReplicaCap | undefined)[]): ReplicaCap | undefined {
  let low: ReplicaCap | undefined;
  for (const c of caps) if (c && (!low || c.cap < low.cap)) low = c;
  return low;
}

/** `kubectl get wp` column text. */
export function controlSummary(
  paused: boolean,
  rateLimit: RateLimit | null,
  cap: number | undefined,
  capBy: ReplicaCap["by"] = "rateLimit",
  budgets: string[] = [],
): string {
  if (paused) return "paused";
  const parts = [
    ...(rateLimit ? [`limited ${formatRateLimit(rateLimit)}`] : []),
    ...(budgets.length > 0 ? [`budget ${budgets.join(",")}`] : []),
    ...(cap !== undefined && capBy === "groups" ? ["groups"] : []),
  ];
  if (parts.length === 0) return "";
  return `${parts.join(", ")}${cap !== undefined ? ` (cap ${cap})` : ""}`;
}

// The HorizontalPodAutoscaler's algorithm for one External AverageValue metric, as
// kube-controller-manager runs it (pkg/controller/podautoscaler/horizontal.go and
// replica_calculator.go), for `direct` mode: same replica counts without an HPA object.
//
//   usageRatio = total / (target · currentReplicas); within tolerance (0.1) keep current,
//   else desired = ceil(total / target); then stabilization windows (scale-up: lowest
//   recommendation of the window, scale-down: highest), then rate policies relative to the
//   replica count at the start of each policy period, then [min, max].
//
// State (recommendations, scale events) lives in memory per pool, as in the HPA controller.
// One addition, for latency mode: a recommendation may say which part of it is transient (jobs
// waiting now); once they have started, a window whose highest recommendation was mostly
// transient holds only the rest (releaseTransient).

export interface ScalingPolicy {
  type: "Pods" | "Percent";
  value: number;
  periodSeconds: number;
}

export interface ScalingRules {
  stabilizationWindowSeconds?: number;
  selectPolicy?: "Max" | "Min" | "Disabled";
  policies?: ScalingPolicy[];
}

export interface Behavior {
  scaleUp?: ScalingRules;
  scaleDown?: ScalingRules;
}

export const DEFAULT_TOLERANCE = 0.1;

/** autoscaling/v2 defaults (pkg/apis/autoscaling/v2/defaults.go). */
export const DEFAULT_SCALE_UP: Required<ScalingRules> = {
  stabilizationWindowSeconds: 0,
  selectPolicy: "Max",
  policies: [
    { type: "Pods", value: 4, periodSeconds: 15 },
    { type: "Percent", value: 100, periodSeconds: 15 },
  ],
};
export const DEFAULT_SCALE_DOWN: Required<ScalingRules> = {
  stabilizationWindowSeconds: 300,
  selectPolicy: "Max",
  policies: [{ type: "Percent", value: 100, periodSeconds: 15 }],
};

/** Fills unset fields of a behavior with the defaults, as the API server does for an HPA. */
export function withBehaviorDefaults(b: Behavior | undefined): {
  scaleUp: Required<ScalingRules>;
  scaleDown: Required<ScalingRules>;
} {
  const fill = (r: ScalingRules | undefined, d: Required<ScalingRules>): Required<ScalingRules> => ({
    stabilizationWindowSeconds: r?.stabilizationWindowSeconds ?? d.stabilizationWindowSeconds,
    selectPolicy: r?.selectPolicy ?? d.selectPolicy,
    policies: r?.policies && r.policies.length > 0 ? r.policies : d.policies,
  });
  return { scaleUp: fill(b?.scaleUp, DEFAULT_SCALE_UP), scaleDown: fill(b?.scaleDown, DEFAULT_SCALE_DOWN) };
}

/**
 * Replicas for a total metric value against a per-replica target (GetExternalPerPodMetricReplicas).
 * `statusReplicas` is the number of pods the metric is spread over.
 */
export function replicasForMetric(
  total: number,
  targetPerReplica: number,
  statusReplicas: number,
  tolerance = DEFAULT_TOLERANCE,
): number {
  if (statusReplicas <= 0) return Math.ceil(total / targetPerReplica);
  const usageRatio = total / (targetPerReplica * statusReplicas);
  if (Math.abs(1 - usageRatio) <= tolerance) return statusReplicas;
  return Math.ceil(total / targetPerReplica);
}

interface Timestamped {
  value: number;
  at: number;
}

/** A recommendation, and what of it the scale-down window holds (less when part is transient). */
interface Recommendation extends Timestamped {
  held: number;
}

export interface Decision {
  replicas: number;
  /** The HPA's condition reasons: DesiredWithinRange, ScaleUpLimit, ScaleDownLimit, TooManyReplicas, TooFewReplicas, ScaleUpStabilized, ScaleDownStabilized; and BurstStarted (releaseTransient). */
  reason: string;
  message: string;
  /** Before stabilization and rate limits. */
  metricReplicas: number;
}

export interface DecideOptions {
  now: number;
  total: number;
  targetPerReplica: number;
  currentReplicas: number;
  statusReplicas?: number;
  minReplicas: number;
  maxReplicas: number;
  behavior?: Behavior;
  tolerance?: number;
  /**
   * The part of `total` that is not transient (default all of it): latency mode leaves out the
   * jobs waiting, which need slots only until they have started.
   */
  heldTotal?: number;
  /** The transient parts are over: the scale-down window holds only the held parts it saw. */
  releaseTransient?: boolean;
}

export class HpaAlgorithm {
  private recommendations: Recommendation[] = [];
  private scaleUpEvents: Timestamped[] = [];
  private scaleDownEvents: Timestamped[] = [];

  /**
   * One HPA sync: the replica count to set. Call record() when the result was applied.
   * `currentReplicas` is the target's spec.replicas (must be ≥ 1: the HPA is off at zero).
   */
  decide(o: DecideOptions): Decision {
    const b = withBehaviorDefaults(o.behavior);
    const minReplicas = Math.max(1, o.minReplicas);
    const pods = o.statusReplicas ?? o.currentReplicas;
    const metricReplicas = replicasForMetric(o.total, o.targetPerReplica, pods, o.tolerance);
    const heldReplicas =
      o.heldTotal === undefined
        ? metricReplicas
        : Math.min(metricReplicas, replicasForMetric(o.heldTotal, o.targetPerReplica, pods, o.tolerance));
    const { stabilized, released, downHeld } = this.stabilize(o, b, metricReplicas, heldReplicas);
    let reason = metricReplicas >= o.currentReplicas ? "ScaleUpStabilized" : "ScaleDownStabilized";
    let message =
      metricReplicas >= o.currentReplicas
        ? "recent recommendations were lower than current one, applying the lowest recent recommendation"
        : "recent recommendations were higher than current one, applying the highest recent recommendation";
    if (stabilized === metricReplicas) {
      reason = "DesiredWithinRange";
      message = "the desired count is within the acceptable range";
    }
    const limited = this.limitRate(o, b, minReplicas, stabilized);
    let desired = limited.desired;
    if (limited.reason) ({ reason, message } = limited as Required<typeof limited>);
    // The HPA also never leaves [min, max] (e.g. after the bounds changed).
    if (desired > o.maxReplicas) {
      desired = o.maxReplicas;
      reason = "TooManyReplicas";
      message = "the desired replica count is more than the maximum replica count";
    }
    if (desired < minReplicas) {
      desired = minReplicas;
      reason = "TooFewReplicas";
      message = "the desired replica count is less than the minimum replica count";
    }
    if (released && desired < o.currentReplicas) {
      reason = "BurstStarted";
      message = `the waiting jobs the window's highest recommendation was sized for have started: holding what the rest of it needed (${downHeld}, at least minReplicas)`;
    }
    return { replicas: desired, reason, message, metricReplicas };
  }

  /**
   * stabilizeRecommendationWithBehaviors: the current count kept within the lowest recommendation
   * of the scale-up window and the highest of the scale-down window; this one is remembered.
   */
  private stabilize(
    o: DecideOptions,
    b: ReturnType<typeof withBehaviorDefaults>,
    metricReplicas: number,
    heldReplicas: number,
  ): { stabilized: number; released: boolean; downHeld: number } {
    const upCutoff = o.now - b.scaleUp.stabilizationWindowSeconds * 1000;
    const downCutoff = o.now - b.scaleDown.stabilizationWindowSeconds * 1000;
    let up = metricReplicas;
    let down = metricReplicas;
    let downHeld = metricReplicas;
    let oldIndex = -1;
    this.recommendations.forEach((r, i) => {
      if (r.at > upCutoff) up = Math.min(r.value, up);
      if (r.at > downCutoff) {
        down = Math.max(r.value, down);
        downHeld = Math.max(r.held, downHeld);
      }
      if (r.at < upCutoff && r.at < downCutoff) oldIndex = i;
    });
    // A window whose highest recommendation was mostly transient (a burst now started) holds
    // only what was not; one sized mostly by what stays keeps all of it, so a rising load whose
    // backlog comes and goes does not step down and back up.
    const released = o.releaseTransient === true && downHeld * 2 <= down && downHeld < down;
    if (released) down = downHeld;
    let stabilized = o.currentReplicas;
    if (stabilized < up) stabilized = up;
    if (stabilized > down) stabilized = down;
    const rec = { value: metricReplicas, held: heldReplicas, at: o.now };
    if (oldIndex >= 0) this.recommendations[oldIndex] = rec;
    else this.recommendations.push(rec);
    return { stabilized, released, downHeld };
  }

  /** convertDesiredReplicasWithBehaviorRate: the change held to the policies' rate, and why when it was. */
  private limitRate(
    o: DecideOptions,
    b: ReturnType<typeof withBehaviorDefaults>,
    minReplicas: number,
    desired: number,
  ): { desired: number; reason?: string; message?: string } {
    if (desired > o.currentReplicas) {
      const limit = Math.max(this.scaleUpLimit(o.now, o.currentReplicas, b.scaleUp), o.currentReplicas);
      if (o.maxReplicas > limit) {
        if (desired > limit)
          return {
            desired: limit,
            reason: "ScaleUpLimit",
            message: "the desired replica count is increasing faster than the maximum scale rate",
          };
      } else if (desired > o.maxReplicas)
        return {
          desired: o.maxReplicas,
          reason: "TooManyReplicas",
          message: "the desired replica count is more than the maximum replica count",
        };
    } else if (desired < o.currentReplicas) {
      const limit = Math.min(this.scaleDownLimit(o.now, o.currentReplicas, b.scaleDown), o.currentReplicas);
      if (minReplicas < limit) {
        if (desired < limit)
          return {
            desired: limit,
            reason: "ScaleDownLimit",
            message: "the desired replica count is decreasing faster than the maximum scale rate",
          };
      } else if (desired < minReplicas)
        return {
          desired: minReplicas,
          reason: "TooFewReplicas",
          message: "the desired replica count is less than the minimum replica count",
        };
    }
    return { desired };
  }

  /** Remember an applied change (storeScaleEvent); needed for the rate policies. */
  record(now: number, from: number, to: number, behavior?: Behavior): void {
    if (to === from) return;
    const b = withBehaviorDefaults(behavior);
    if (to > from) this.scaleUpEvents = store(this.scaleUpEvents, now, to - from, longestPeriod(b.scaleUp));
    else this.scaleDownEvents = store(this.scaleDownEvents, now, from - to, longestPeriod(b.scaleDown));
  }

  /** Forget history (e.g. after the pool went to zero). */
  reset(): void {
    this.recommendations = [];
    this.scaleUpEvents = [];
    this.scaleDownEvents = [];
  }

  private changeInPeriod(now: number, events: Timestamped[], periodSeconds: number): number {
    const cutoff = now - periodSeconds * 1000;
    return events.reduce((sum, e) => (e.at > cutoff ? sum + e.value : sum), 0);
  }

  private scaleUpLimit(now: number, current: number, rules: Required<ScalingRules>): number {
    if (rules.selectPolicy === "Disabled") return current;
    const pickMin = rules.selectPolicy === "Min";
    let result = pickMin ? Number.MAX_SAFE_INTEGER : Number.MIN_SAFE_INTEGER;
    for (const p of rules.policies) {
      const added = this.changeInPeriod(now, this.scaleUpEvents, p.periodSeconds);
      const deleted = this.changeInPeriod(now, this.scaleDownEvents, p.periodSeconds);
      const start = current - added + deleted;
      const proposed = p.type === "Pods" ? start + p.value : Math.ceil(start * (1 + p.value / 100));
      result = pickMin ? Math.min(result, proposed) : Math.max(result, proposed);
    }
    return result;
  }

  private scaleDownLimit(now: number, current: number, rules: Required<ScalingRules>): number {
    if (rules.selectPolicy === "Disabled") return current;
    const pickMin = rules.selectPolicy === "Min";
    let result = pickMin ? Number.MIN_SAFE_INTEGER : Number.MAX_SAFE_INTEGER;
    for (const p of rules.policies) {
      const added = this.changeInPeriod(now, this.scaleUpEvents, p.periodSeconds);
      const deleted = this.changeInPeriod(now, this.scaleDownEvents, p.periodSeconds);
      const start = current - added + deleted;
      const proposed = p.type === "Pods" ? start - p.value : Math.trunc(start * (1 - p.value / 100));
      result = pickMin ? Math.max(result, proposed) : Math.min(result, proposed);
    }
    return result;
  }
}

function longestPeriod(rules: Required<ScalingRules>): number {
  return rules.policies.reduce((m, p) => Math.max(m, p.periodSeconds), 0);
}

/** storeScaleEvent: reuse an outdated slot, else append. */
function store(
  events: Timestamped[],
  now: number,
  change: number,
  longestPeriodSeconds: number,
): Timestamped[] {
  const cutoff = now - longestPeriodSeconds * 1000;
  const out = events.slice();
  const i = out.findIndex((e) => e.at <= cutoff);
  const ev = { value: change, at: now };
  if (i >= 0) out[i] = ev;
  else out.push(ev);
  return out.filter((e, j) => e.at > cutoff || j === i);
}

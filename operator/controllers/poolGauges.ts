// The per-pool metric series the reconciler and the backlog poll keep: the binding replica cap,
// the queue's age and dead letters, the pipeline's resources. Each remembers its label sets so a
// series that went (a cap no longer binding, a renamed queue, a removed key) is removed.
import type { QueueCounts, ResourceState } from "../../queue/index.ts";
import { splitKey } from "../kube/keys.ts";
import type { OperatorMetrics } from "../metrics.ts";
import type { ReplicaCap } from "./queueControl.ts";

export class PoolGauges {
  private readonly metrics: OperatorMetrics;

  constructor(metrics: OperatorMetrics) {
    this.metrics = metrics;
  }

  /** conveyor_operator_pool_replica_cap{cap} of a pool: the binding cap's series, the other gone. */
  cap(key: string, cap: ReplicaCap | undefined): void {
    const { namespace, name } = splitKey(key);
    const labels = { namespace, workerpool: name };
    const prev = this.capBy.get(key);
    if (prev !== undefined && prev !== cap?.by) this.metrics.replicaCap.remove({ ...labels, cap: prev });
    if (cap?.by) {
      this.metrics.replicaCap.set({ ...labels, cap: cap.by }, cap.cap);
      this.capBy.set(key, cap.by);
    } else this.capBy.delete(key);
  }
  private readonly capBy = new Map<string, string>();

  /** The pool is gone: every series of it goes. */
  forget(key: string): void {
    const { namespace, name } = splitKey(key);
    const m = this.metrics;
    for (const g of [
      m.backlog,
      m.inflight,
      m.desiredReplicas,
      m.readyReplicas,
      m.currentReplicas,
      m.maxReplicas,
      m.degraded,
      m.pollErrors,
      m.polls,
      m.arrivalRate,
      m.neededSlots,
      m.scaleInHeld,
      m.cordonedPods,
      m.rolloutWeight,
    ])
      g.remove({ namespace, workerpool: name });
    for (const version of ["stable", "canary"])
      m.rolloutFailureRate.remove({ namespace, workerpool: name, version });
    this.cap(key, undefined);
    this.resources(key, []);
    const queue = this.gaugeQueues.get(key);
    this.gaugeQueues.delete(key);
    if (queue !== undefined)
      for (const g of [m.oldestReadyAge, m.deadLetters]) g.remove({ namespace, workerpool: name, queue });
  }

  /** Per-queue gauges of a pool at a poll (the queue can change with the spec: the old series goes). */
  queue(key: string, queue: string, counts: QueueCounts, at: number): void {
    const { namespace, name } = splitKey(key);
    const labels = { namespace, workerpool: name };
    const m = this.metrics;
    const prev = this.gaugeQueues.get(key);
    if (prev !== undefined && prev !== queue) {
      m.oldestReadyAge.remove({ ...labels, queue: prev });
      m.deadLetters.remove({ ...labels, queue: prev });
    }
    this.gaugeQueues.set(key, queue);
    const age = counts.oldestReadyAt !== undefined ? Math.max(0, at - counts.oldestReadyAt) / 1000 : 0;
    m.oldestReadyAge.set({ ...labels, queue }, age);
    m.deadLetters.set({ ...labels, queue }, counts.dead);
  }
  private readonly gaugeQueues = new Map<string, string>();

  /**
   * The pipeline's resources at a poll: utilization per key and limit, ceiling, bench left,
   * admitted (Redis's lifetime count as a counter) and jobs waiting; series of keys, limits or
   * resources that went are removed.
   */
  resources(key: string, resources: ResourceState[], now = Date.now()): void {
    const { namespace, name } = splitKey(key);
    const m = this.metrics;
    const seen = new Map<string, { metric: string; labels: Record<string, string> }>();
    const admitted = this.resourceAdmitted.get(key) ?? new Map<string, number>();
    for (const r of resources) {
      const base = { namespace, workerpool: name, pipeline: r.pipeline, resource: r.name };
      m.resourceCeiling.set(base, r.ceiling);
      m.resourceWaiting.set(base, r.waiting);
      seen.set(JSON.stringify(["ceiling", base]), { metric: "ceiling", labels: base });
      seen.set(JSON.stringify(["waiting", base]), { metric: "waiting", labels: base });
      for (const k of r.keys) {
        const keyLabels = { ...base, key: k.id };
        m.resourceBenched.set(keyLabels, k.benchedUntil ? Math.max(0, (k.benchedUntil - now) / 1000) : 0);
        seen.set(JSON.stringify(["benched", keyLabels]), { metric: "benched", labels: keyLabels });
        const id = JSON.stringify(keyLabels);
        const last = admitted.get(id);
        if (last === undefined || k.admitted < last) {
          // First sight, or the count restarted (the resource was re-created): a counter reset.
          m.resourceAdmitted.remove(keyLabels);
          m.resourceAdmitted.inc(keyLabels, k.admitted);
        } else if (k.admitted > last) m.resourceAdmitted.inc(keyLabels, k.admitted - last);
        admitted.set(id, k.admitted);
        seen.set(JSON.stringify(["admitted", keyLabels]), { metric: "admitted", labels: keyLabels });
        for (const l of k.limits) {
          const limitLabels = { ...keyLabels, limit: l.unit };
          m.resourceUtilization.set(limitLabels, l.utilization);
          seen.set(JSON.stringify(["utilization", limitLabels]), {
            metric: "utilization",
            labels: limitLabels,
          });
        }
      }
    }
    const gauges = {
      ceiling: m.resourceCeiling,
      waiting: m.resourceWaiting,
      benched: m.resourceBenched,
      admitted: m.resourceAdmitted,
      utilization: m.resourceUtilization,
    } as const;
    for (const [id, s] of this.resourceSeries.get(key) ?? new Map())
      if (!seen.has(id)) {
        gauges[s.metric as keyof typeof gauges].remove(s.labels);
        if (s.metric === "admitted") admitted.delete(JSON.stringify(s.labels));
      }
    if (seen.size > 0) {
      this.resourceSeries.set(key, seen);
      this.resourceAdmitted.set(key, admitted);
    } else {
      this.resourceSeries.delete(key);
      this.resourceAdmitted.delete(key);
    }
  }
  private readonly resourceSeries = new Map<
    string,
    Map<string, { metric: string; labels: Record<string, string> }>
  >();
  private readonly resourceAdmitted = new Map<string, Map<string, number>>();
}

// A deterministic pool simulation for the scaling decisions' unit tests: a recorded arrival trace
// (enqueue time and duration of every job) is replayed against a pool whose replica count the
// operator's own decision function (decideScale) sets at every poll — pods become ready
// `podStartSeconds` after a scale-up, a scale-in deletes idle pods first and lets a busy one
// finish its jobs (no job is interrupted) — and the waits (enqueue → start) are measured.
// Everything runs on a simulated clock: the same trace gives the same result on any machine.
import type { QueueCounts } from "../../queue/index.ts";
import type { WorkerPoolSpec } from "../../operator/apis/v1alpha1/types.ts";
import {
  decideScale,
  newPoolScaler,
  recordScale,
  surgeBellOf,
  type ScaleDecision,
} from "../../operator/scaling/decide.ts";
import { lowerMedian } from "../../operator/scaling/latency.ts";
import { rng } from "./random.ts";

/** A recorded arrival trace: [enqueue time ms from the start, job duration ms] in time order. */
export interface ArrivalTrace {
  name: string;
  description: string;
  arrivals: [number, number][];
}

export interface SimulationOptions {
  spec: WorkerPoolSpec;
  trace: ArrivalTrace;
  /** Scale-up → the new pod claims jobs. */
  podStartSeconds: number;
  /** Replicas at the start (default spec.scaling.minReplicas). */
  initialReplicas?: number;
  /** Run this long after the last arrival (default: until the queue is empty and 60 s more). */
  tailSeconds?: number;
  /**
   * The queue's counts carry no run-time counter (a Redis written by workers older than it): the
   * decision sizes by the workers' median job duration alone, as it did before the counter.
   */
  withoutRunTime?: boolean;
  /** No surge bell: a running pool hears a spike only at its next poll (as before the bell). */
  withoutSurgeBell?: boolean;
  stepMs?: number;
}

export interface SimulationResult {
  /** Every job's wait (ms), in start order. */
  waitsMs: number[];
  /** The replica count after each change: [seconds from the start, replicas]. */
  replicas: [number, number][];
  decisions: (ScaleDecision & { at: number })[];
  podSeconds: number;
  /** Scale-ups that followed a scale-down, or the reverse. */
  reversals: number;
  /** When the first decision above the starting count was made (s), if any. */
  firstScaleUpAt?: number;
}

interface Pod {
  readyAt: number;
  /** The jobs it runs: when each ends and how long it runs (ms). */
  running: { end: number; ms: number }[];
  deleting: boolean;
  createdAt: number;
  goneAt?: number;
}

/** The p-th percentile (0..100) of values, nearest rank. */
export function percentile(values: number[], p: number): number {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

export function simulatePool(o: SimulationOptions): SimulationResult {
  const { spec, trace } = o;
  const step = o.stepMs ?? 100;
  const pollMs = spec.scaling.pollSeconds * 1000;
  const startMs = o.podStartSeconds * 1000;
  const scaler = newPoolScaler(0);
  const pods: Pod[] = [];
  const addPod = (now: number, ready = false) =>
    pods.push({ readyAt: ready ? now : now + startMs, running: [], deleting: false, createdAt: now });
  let desired = o.initialReplicas ?? spec.scaling.minReplicas;
  for (let k = 0; k < desired; k++) addPod(0, true);
  const waiting: [number, number][] = [];
  const waitsMs: number[] = [];
  const recent: number[] = [];
  let lastCompletionAt = -Infinity;
  let next = 0;
  let enqueued = 0;
  let completed = 0;
  let runMs = 0;
  const replicas: [number, number][] = [[0, desired]];
  const decisions: SimulationResult["decisions"] = [];
  let lastDirection = 0;
  let reversals = 0;
  let firstScaleUpAt: number | undefined;
  const lastArrival = trace.arrivals.at(-1)?.[0] ?? 0;
  const tail = (o.tailSeconds ?? 60) * 1000;
  let emptySince: number | undefined;
  /** The surge bell the last poll left: a step that finds this many waiting polls at once. */
  let bell: number | undefined;

  for (let now = 0; ; now += step) {
    // Jobs end; drained pods go.
    for (const pod of pods) {
      if (pod.goneAt !== undefined) continue;
      const done = pod.running.filter((job) => job.end <= now);
      if (done.length > 0) {
        pod.running = pod.running.filter((job) => job.end > now);
        completed += done.length;
        for (const job of done) runMs += job.ms;
        lastCompletionAt = now;
      }
      if (pod.deleting && pod.running.length === 0) pod.goneAt = now;
    }
    // Arrivals.
    while (next < trace.arrivals.length && trace.arrivals[next]![0] <= now) {
      waiting.push(trace.arrivals[next]!);
      next++;
      enqueued++;
    }
    // Claims: free slots of ready pods take the oldest waiting jobs.
    for (const pod of pods) {
      if (pod.deleting || pod.goneAt !== undefined || pod.readyAt > now) continue;
      while (pod.running.length < spec.concurrency && waiting.length > 0) {
        const [at, duration] = waiting.shift()!;
        waitsMs.push(now - at);
        pod.running.push({ end: now + duration, ms: duration });
        recent.push(duration);
        if (recent.length > 64) recent.shift();
      }
    }
    // The operator's poll and decision: at its interval, or when the surge bell rings.
    if (now % pollMs === 0 || (bell !== undefined && waiting.length >= bell)) {
      const inflight = pods.reduce((n, p) => n + p.running.length, 0);
      const counts: QueueCounts = {
        ready: waiting.length,
        delayed: 0,
        dueDelayed: 0,
        inflight,
        dead: 0,
        completed,
        backlog: waiting.length + inflight,
        enqueued,
        ...(o.withoutRunTime ? {} : { attemptsEnded: { count: completed, runMs } }),
        ...(waiting.length > 0 ? { oldestReadyAt: waiting[0]![0] } : {}),
      };
      // Workers report the median of their recent jobs; a report goes stale a minute after the last job.
      const jobMs =
        recent.length > 0 && now - lastCompletionAt <= 60_000 && lastCompletionAt >= 0
          ? lowerMedian(recent)
          : undefined;
      const live = pods.filter((p) => !p.deleting && p.goneAt === undefined);
      const d = decideScale(scaler, {
        now,
        spec,
        current: desired,
        statusReplicas: live.length,
        counts,
        countsAt: now,
        jobMs,
        podStartMs: startMs,
      });
      if (d) {
        recordScale(scaler, spec, d, now);
        decisions.push({ ...d, at: now });
        const direction = Math.sign(d.replicas - d.from);
        if (lastDirection !== 0 && direction !== lastDirection) reversals++;
        lastDirection = direction;
        if (direction > 0 && firstScaleUpAt === undefined) firstScaleUpAt = now / 1000;
        if (d.replicas > live.length) for (let k = live.length; k < d.replicas; k++) addPod(now);
        else {
          // The ReplicaSet deletes not-yet-ready pods first, then (pod-deletion-cost) idle ones, then busy ones.
          const order = [...live].sort(
            (a, b) =>
              Number(a.readyAt <= now) - Number(b.readyAt <= now) || a.running.length - b.running.length,
          );
          for (const pod of order.slice(0, live.length - d.replicas)) {
            pod.deleting = true;
            if (pod.running.length === 0) pod.goneAt = now;
          }
        }
        desired = d.replicas;
        replicas.push([now / 1000, desired]);
      }
      bell = o.withoutSurgeBell ? undefined : surgeBellOf(scaler, spec, counts, now, desired, false);
    }
    if (next >= trace.arrivals.length && waiting.length === 0) {
      emptySince ??= now;
      if (now >= lastArrival && now - emptySince >= tail) {
        const podSeconds = pods.reduce((s, p) => s + ((p.goneAt ?? now) - p.createdAt) / 1000, 0);
        return { waitsMs, replicas, decisions, podSeconds, reversals, firstScaleUpAt };
      }
    } else emptySince = undefined;
  }
}

/** A seeded pseudo-random generator, for generating traces reproducibly (random.ts's). */
export const seededRandom = rng;

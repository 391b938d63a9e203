// The autoscaling comparison's workloads as seeded arrival traces: every arm (KEDA, Conveyor's
// backlog mode, its latency mode) replays the same list of (time, job duration) pairs, so a
// difference in wait or pod-seconds is the autoscaler's, not the load's. Pure: no I/O, no clock.
import { rng } from "../../test/support/random.ts";

export const WORKLOADS = ["burst", "ramp", "spikes", "long", "paused"] as const;
export type WorkloadName = (typeof WORKLOADS)[number];

export const PROFILES = ["full", "short", "smoke"] as const;
export type ProfileName = (typeof PROFILES)[number];

export interface Arrival {
  /** ms after the trace starts. */
  at: number;
  /** How long the job's handler works. */
  sleepMs: number;
}

export interface Workload {
  name: WorkloadName;
  /** One line for tables and chart titles. */
  description: string;
  arrivals: Arrival[];
  /** The measurement window (ms from the first enqueue); a run goes on past it until every job started. */
  windowMs: number;
  /** paused: the queue is paused before the first enqueue and resumed at this time. */
  resumeAtMs?: number;
}

/** What a workload is made of in each profile (full is the definition). */
interface Shape {
  burst: { jobs: number; jobMs: number; windowS: number };
  ramp: { peakPerS: number; rampS: number; jobMs: number; tailS: number };
  spikes: { spikes: number; everyS: number; jobs: number; jobMs: number; tailS: number };
  long: {
    shortJobs: number;
    longJobs: number;
    longEveryS: number;
    longMinS: number;
    longMaxS: number;
    windowS: number;
  };
  paused: { jobs: number; jobMs: number; resumeS: number; windowS: number };
}

const SHAPES: Record<ProfileName, Shape> = {
  full: {
    burst: { jobs: 10_000, jobMs: 1000, windowS: 600 },
    ramp: { peakPerS: 20, rampS: 300, jobMs: 2000, tailS: 120 },
    spikes: { spikes: 5, everyS: 120, jobs: 500, jobMs: 1000, tailS: 120 },
    long: { shortJobs: 1000, longJobs: 40, longEveryS: 6, longMinS: 30, longMaxS: 60, windowS: 600 },
    paused: { jobs: 2000, jobMs: 1000, resumeS: 120, windowS: 420 },
  },
  short: {
    burst: { jobs: 2000, jobMs: 1000, windowS: 90 },
    ramp: { peakPerS: 10, rampS: 45, jobMs: 2000, tailS: 30 },
    spikes: { spikes: 3, everyS: 45, jobs: 300, jobMs: 1000, tailS: 30 },
    long: { shortJobs: 400, longJobs: 15, longEveryS: 6, longMinS: 30, longMaxS: 60, windowS: 150 },
    paused: { jobs: 600, jobMs: 1000, resumeS: 45, windowS: 90 },
  },
  smoke: {
    burst: { jobs: 100, jobMs: 500, windowS: 30 },
    ramp: { peakPerS: 4, rampS: 15, jobMs: 500, tailS: 15 },
    spikes: { spikes: 2, everyS: 20, jobs: 40, jobMs: 500, tailS: 15 },
    long: { shortJobs: 40, longJobs: 4, longEveryS: 3, longMinS: 5, longMaxS: 10, windowS: 45 },
    paused: { jobs: 40, jobMs: 500, resumeS: 10, windowS: 30 },
  },
};

/** The workload `name` of `profile`, its arrivals drawn from `seed` (same seed, same trace). */
export function buildWorkload(name: WorkloadName, profile: ProfileName, seed = 33): Workload {
  const s = SHAPES[profile];
  const random = rng(seed + WORKLOADS.indexOf(name));
  switch (name) {
    case "burst": {
      const b = s.burst;
      return {
        name,
        description: `${b.jobs} jobs of ${b.jobMs / 1000} s at once after idle`,
        arrivals: Array.from({ length: b.jobs }, () => ({ at: 0, sleepMs: b.jobMs })),
        windowMs: b.windowS * 1000,
      };
    }
    case "ramp": {
      // Poisson arrivals whose rate rises linearly to the peak and falls back (thinning).
      const r = s.ramp;
      const total = 2 * r.rampS;
      const rate = (t: number) => r.peakPerS * (t < r.rampS ? t / r.rampS : (total - t) / r.rampS);
      const arrivals: Arrival[] = [];
      for (let t = 0; ;) {
        t += -Math.log(1 - random()) / r.peakPerS;
        if (t >= total) break;
        if (random() * r.peakPerS < rate(t)) arrivals.push({ at: Math.round(t * 1000), sleepMs: r.jobMs });
      }
      return {
        name,
        description: `0 → ${r.peakPerS} → 0 jobs/s over ${total} s (Poisson), jobs of ${r.jobMs / 1000} s`,
        arrivals,
        windowMs: (total + r.tailS) * 1000,
      };
    }
    case "spikes": {
      const p = s.spikes;
      const arrivals: Arrival[] = [];
      for (let i = 0; i < p.spikes; i++)
        for (let j = 0; j < p.jobs; j++) arrivals.push({ at: i * p.everyS * 1000, sleepMs: p.jobMs });
      return {
        name,
        description: `${p.spikes} spikes of ${p.jobs} jobs (${p.jobMs / 1000} s), one every ${p.everyS} s`,
        arrivals,
        windowMs: ((p.spikes - 1) * p.everyS + p.tailS) * 1000,
      };
    }
    case "long": {
      // A burst of short jobs scales the pool out; long jobs keep arriving while the burst's
      // replicas are scaled back in, so every scale-in has long jobs running somewhere.
      const l = s.long;
      const arrivals: Arrival[] = Array.from({ length: l.shortJobs }, () => ({ at: 0, sleepMs: 1000 }));
      for (let i = 0; i < l.longJobs; i++) {
        const seconds = l.longMinS + random() * (l.longMaxS - l.longMinS);
        arrivals.push({ at: i * l.longEveryS * 1000, sleepMs: Math.round(seconds * 1000) });
      }
      arrivals.sort((a, b) => a.at - b.at);
      return {
        name,
        description: `${l.shortJobs} jobs of 1 s at once, then ${l.longJobs} jobs of ${l.longMinS}–${l.longMaxS} s, one every ${l.longEveryS} s`,
        arrivals,
        windowMs: l.windowS * 1000,
      };
    }
    case "paused": {
      const p = s.paused;
      return {
        name,
        description: `${p.jobs} jobs of ${p.jobMs / 1000} s into a paused queue, resumed after ${p.resumeS} s`,
        arrivals: Array.from({ length: p.jobs }, () => ({ at: 0, sleepMs: p.jobMs })),
        windowMs: p.windowS * 1000,
        resumeAtMs: p.resumeS * 1000,
      };
    }
  }
}

/** The arrivals grouped by time (one enqueue call per group, in order). */
export function arrivalBatches(arrivals: readonly Arrival[], maxBatch = 500): Arrival[][] {
  const out: Arrival[][] = [];
  for (const a of arrivals) {
    const last = out.at(-1);
    if (last && last[0]!.at === a.at && last.length < maxBatch) last.push(a);
    else out.push([a]);
  }
  return out;
}

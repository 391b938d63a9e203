// Latency mode (spec.scaling.targetWaitSeconds): how many job slots a pool needs so that a new
// job starts within the target, from what one poll can read in O(1) per queue — the arrival
// rate (growth of the queue's enqueue counter), the jobs waiting, the oldest waiting job's age,
// and the mean time a job holds a slot (growth of the run-time counter over the attempts that
// ended; the workers' median job duration until the pool has one). Pure functions: the HPA
// algorithm (hpaAlgorithm.ts) then applies tolerance, stabilization windows and rate limits to
// ceil(slots / concurrency), so scale-down does not flap.
//
//   slots = λ·d                      keep up with arrivals (Little's law: busy slots = rate × duration)
//         + √(λ·d)                   headroom for random arrivals (square-root staffing)
//         + W · min(1, d / r)        start the W waiting jobs within r, the oldest one's budget left:
//                                    r = target − oldest age − pod start-up (floored at one poll
//                                    interval), so headroom grows as the oldest job's age
//                                    approaches the target, and past it every waiting job gets a
//                                    slot of its own; the start-up is left out of the budget
//                                    because a slot asked for now takes jobs only once its pod runs
//
// The scale-down window holds λ·d + √(λ·d) — what the arrivals need — and the waiting jobs' share
// only until they have started: a pool scaled out for a burst comes back at the next poll with
// nothing waiting, not a window later, when most of what the window holds was the burst's (at
// least half: a rising load whose backlog comes and goes is held as the HPA would hold it).
//
// λ is read from the enqueue counter, not from the backlog, so the pool grows with a rising
// arrival rate before a backlog builds (the backlog mode scales only after it has). It is the
// time-weighted median of the poll-to-poll rates over the last ARRIVAL_WINDOW_MS, not an average:
// a burst arrives within a few seconds of the window, which the median leaves out — the burst's
// jobs are waiting, and W counts them; an average counted them twice and kept them in λ for its
// whole decay. Weighting by time keeps a burst a burst however the polls fall (a doorbell's poll,
// a retried write and the next regular poll each saw part of it). The window before the counter
// was first read counts as no arrivals: a new pool (or leader) sizes by what it has seen, and does
// not scale down until it has seen the whole window (settled).
//
// d is a mean, not a median: λ·d is the slots the arrivals hold (Little's law), and a job of 45 s
// holds a slot 45 times as long as one of 1 s — on a mix of many short and a few long jobs the
// median is the short jobs' and under-sizes the pool for what the long ones hold. It is measured
// over SERVICE_WINDOW_MS from the queue's own counters (every attempt that ended, whichever worker
// ran it), so the jobs that arrive now are sized by the jobs that ended lately, not by a burst's.

/** The arrival rate is the median of the poll-to-poll rates over this long. */
export const ARRIVAL_WINDOW_MS = 30_000;

/** The arrival rate as the operator tracks it from one poll to the next (in memory, per pool). */
export interface ArrivalEstimate {
  /** The enqueue counter at the last poll, and when that poll was. */
  enqueued: number;
  at: number;
  /** When the counter was first read (or read again after it went backwards). */
  since: number;
  /** Poll-to-poll rates [from ms, to ms, jobs per second] that overlap the last ARRIVAL_WINDOW_MS. */
  samples: [number, number, number][];
  /** The time-weighted lower median of the window's rates (jobs per second); before `since`, none. */
  perSecond: number;
  /** The counter has been read for a whole window: the rate is measured, not partly assumed. */
  settled: boolean;
  /** The rate seen at the last poll alone (jobs per second), for the decision's message. */
  lastPerSecond?: number;
}

/** The mean job time is read over this long: long enough to see a few of minute-long jobs end. */
export const SERVICE_WINDOW_MS = 60_000;

/** How long a job holds a slot, as the operator tracks it from one poll to the next (in memory, per pool). */
export interface ServiceEstimate {
  /** The attempts-ended counter and their run time (ms) at the last poll, and when that poll was. */
  ended: number;
  runMs: number;
  at: number;
  /** Poll-to-poll growth [from ms, to ms, attempts ended, their run time ms] ending in the last SERVICE_WINDOW_MS. */
  samples: [number, number, number, number][];
  /** The mean run time of the attempts that ended in the window (ms); the last mean while none did. */
  meanMs?: number;
  /** How many attempts the mean is over (0: kept from an earlier window, or none yet). */
  over: number;
}

/**
 * Folds one poll's attempts-ended counter and run time into the estimate. Counters that went
 * backwards (the queue's keys were deleted) start over, keeping the last mean. Attempts that
 * ended with no run time counted (jobs of under 1 ms, or settled by a worker older than the
 * run-time counter) are no measurement: the mean stays what it was.
 */
export function observeService(
  prev: ServiceEstimate | undefined,
  ended: number,
  runMs: number,
  at: number,
  windowMs = SERVICE_WINDOW_MS,
): ServiceEstimate {
  if (!prev || ended < prev.ended || runMs < prev.runMs || at < prev.at)
    return { ended, runMs, at, samples: [], meanMs: prev?.meanMs, over: 0 };
  if (at === prev.at) return prev;
  const samples = slide(prev.samples, [prev.at, at, ended - prev.ended, runMs - prev.runMs], at - windowMs);
  let count = 0;
  let ms = 0;
  for (const [, , n, t] of samples) {
    count += n;
    ms += t;
  }
  const measured = count > 0 && ms > 0;
  return {
    ended,
    runMs,
    at,
    samples,
    meanMs: measured ? ms / count : prev.meanMs,
    over: measured ? count : 0,
  };
}

/** Poll-to-poll samples [from ms, to ms, …]: those that end after `start`, then `next`. */
function slide<S extends [number, number, ...number[]]>(samples: S[], next: S, start: number): S[] {
  return [...samples.filter(([, to]) => to > start), next];
}

/** The lower median (of two values the smaller, so a single burst never sets a rate); undefined when empty. */
export function lowerMedian(values: number[]): number | undefined {
  return weightedLowerMedian(values.map((v): [number, number] => [v, 1]));
}

/** The smallest value whose weight, with the smaller values', reaches half of the total; undefined when empty. */
export function weightedLowerMedian(values: [value: number, weight: number][]): number | undefined {
  const sorted = [...values].sort((a, b) => a[0] - b[0]);
  const half = sorted.reduce((sum, [, w]) => sum + w, 0) / 2;
  let seen = 0;
  for (const [value, weight] of sorted) if ((seen += weight) >= half) return value;
  return sorted.at(-1)?.[0];
}

/**
 * Folds one poll's enqueue counter into the estimate. A counter that went backwards (the queue's
 * keys were deleted) starts over; a poll at the same time as the last changes nothing.
 */
export function observeArrivals(
  prev: ArrivalEstimate | undefined,
  enqueued: number,
  at: number,
  windowMs = ARRIVAL_WINDOW_MS,
): ArrivalEstimate {
  if (!prev || enqueued < prev.enqueued || at < prev.at)
    return { enqueued, at, since: at, samples: [], perSecond: 0, settled: false };
  const dt = at - prev.at;
  if (dt <= 0) return prev;
  const instant = ((enqueued - prev.enqueued) * 1000) / dt;
  const start = at - windowMs;
  const samples = slide(prev.samples, [prev.at, at, instant], start);
  const weighted = samples.map(([from, to, rate]): [number, number] => [rate, to - Math.max(from, start)]);
  if (prev.since > start) weighted.push([0, prev.since - start]);
  return {
    enqueued,
    at,
    since: prev.since,
    samples,
    perSecond: weightedLowerMedian(weighted) ?? 0,
    settled: prev.since <= start,
    lastPerSecond: instant,
  };
}

export interface LatencyInput {
  targetWaitSeconds: number;
  /** Jobs a replica runs at once. */
  concurrency: number;
  /** Jobs per second arriving (undefined: not known yet, taken as 0). */
  arrivalPerSecond?: number;
  /** How long a job holds a slot (ms): the mean over the attempts that ended lately, else the
   * workers' median; undefined when none was ever measured. */
  jobMs?: number;
  /** Where jobMs comes from, for the message: e.g. "mean of 40" or "workers' median". */
  jobMsFrom?: string;
  /** Jobs ready to start now (ready + due-delayed). */
  waiting: number;
  /** Seconds the oldest waiting job has waited (0 when none waits). */
  oldestWaitSeconds: number;
  /** The poll interval: the least time budget a decision can plan with. */
  pollSeconds: number;
  /** How long the pool's pods take from creation to ready (measured; 0 when not known). */
  startSeconds?: number;
}

export interface LatencyNeed {
  /** Job slots needed; undefined without a measured job duration (nothing to size by). */
  slots?: number;
  /** ceil(slots / concurrency), before [min, max], tolerance and stabilization. */
  replicas?: number;
  /** λ·d + √(λ·d): the slots the arrivals need, without the waiting jobs' share (what the window holds). */
  heldSlots?: number;
  /** The reasoning with its numbers, for status, the Event and the "why it scaled" view. */
  message: string;
}

/** Whole numbers as they are, others to 2–3 significant digits. */
const fmt = (n: number) =>
  Number.isInteger(n) ? String(n) : n >= 100 ? n.toFixed(0) : n >= 10 ? n.toFixed(1) : n.toFixed(2);

/** What every latency sizing shares: d (s), the arrivals' slots λ·d + √(λ·d), and the pods' start-up (s). */
function arrivalsNeed(i: LatencyInput, d: number) {
  const rate = Math.max(0, i.arrivalPerSecond ?? 0);
  const steady = rate * d;
  const headroom = steady > 0 ? Math.sqrt(steady) : 0;
  return { rate, steady, headroom, start: Math.max(0, i.startSeconds ?? 0) };
}

/** The time left to start a job that has waited `age` s: the target less the age and the start-up, at least a poll. */
const budgetOf = (i: LatencyInput, age: number, start: number) =>
  Math.max(i.pollSeconds, i.targetWaitSeconds - age - start);

/** The slots (and replicas) a pool needs to start every job within the target. */
export function latencyNeed(i: LatencyInput): LatencyNeed {
  const target = i.targetWaitSeconds;
  const age = Math.max(0, i.oldestWaitSeconds);
  const ageText = i.waiting > 0 ? `, oldest waited ${fmt(age)}s` : "";
  if (i.jobMs === undefined || !(i.jobMs > 0))
    return {
      message: `wait target ${fmt(target)}s: no job durations measured yet (${i.waiting} waiting${ageText})`,
    };
  const d = i.jobMs / 1000;
  const { rate, steady, headroom, start } = arrivalsNeed(i, d);
  const budget = budgetOf(i, age, start);
  const drain = i.waiting * Math.min(1, d / budget);
  const slots = steady + headroom + drain;
  const replicas = Math.ceil(slots / Math.max(1, i.concurrency) - 1e-9);
  const parts = [
    `arrivals ${fmt(rate)}/s × job ${fmt(d)}s${i.jobMsFrom ? ` (${i.jobMsFrom})` : ""} = ${fmt(steady)} slots`,
    `+ √ headroom ${fmt(headroom)}`,
    `+ ${i.waiting} waiting${ageText} to start within ${fmt(budget)}s${start > 0 ? ` (pods start in ${fmt(start)}s)` : ""} = ${fmt(drain)}`,
  ];
  return {
    slots,
    replicas,
    heldSlots: steady + headroom,
    message: `wait target ${fmt(target)}s: ${parts.join(" ")} → ${fmt(slots)} slots / concurrency ${i.concurrency} = ${replicas} replica(s)`,
  };
}

/** A backlog a poll has seen rings the surge bell again only once it has grown by this factor. */
export const SURGE_GROWTH = 1.5;

/**
 * The surge bell's count: how many waiting jobs alone ask more than the pool's slots — each a
 * min(1, d / r) share of a slot to start within its whole budget r (a job that just arrived has
 * waited nothing), against replicas × concurrency within the HPA's tolerance. A surge, not a
 * fluctuation: the arrivals' own randomness is the √ headroom's, and the regular poll's. Never
 * fewer than SURGE_GROWTH × what waits now (the poll has acted on those; a pool that cannot grow
 * is not rung by every enqueue). Undefined without a job duration.
 */
export function surgeWaiting(i: LatencyInput, replicas: number, tolerance: number): number | undefined {
  if (i.jobMs === undefined || !(i.jobMs > 0)) return undefined;
  const d = i.jobMs / 1000;
  const perJob = Math.min(1, d / budgetOf(i, 0, arrivalsNeed(i, d).start));
  const slots = replicas * Math.max(1, i.concurrency) * (1 + tolerance);
  return Math.max(Math.floor(slots / perJob) + 1, Math.ceil(i.waiting * SURGE_GROWTH) + 1);
}

/**
 * Scale-up rules when the spec gives none: the count latency mode computes is what the target
 * needs, so it is applied at once (the HPA's default, 4 pods or 100 % per 15 s, would take a
 * minute to go from 1 to 30).
 */
export const LATENCY_SCALE_UP = {
  stabilizationWindowSeconds: 0,
  selectPolicy: "Max" as const,
  policies: [{ type: "Pods" as const, value: 10_000, periodSeconds: 15 }],
};

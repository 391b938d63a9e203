// The judgement of a canary step: a pure function of both versions' counters over the step (what
// each ended since the step began) and spec.rollout.canary.analysis → promote, roll back or wait,
// with the figures that decided it. Only the handler's failures count (versions.lua): a dependency
// down, a rate limit or a drain hand-back says nothing about a version.
import { runTimeQuantile, type VersionCounters } from "../../queue/versions.ts";

export interface Analysis {
  minJobs: number;
  maxFailureRatio: number;
  maxFailureRate: number;
  maxP95Ratio: number;
}

export type Verdict = "promote" | "rollback" | "wait";

/** What the judgement says of one version over the step. */
export interface VersionFigures {
  /** Attempts the version ended: completed + failed by the handler. */
  attempts: number;
  failed: number;
  dead: number;
  /** failed ÷ attempts (0 without attempts). */
  failureRate: number;
  /** The completed attempts' p95 run time (ms), when any completed. */
  p95Ms?: number;
}

export interface Judgement {
  verdict: Verdict;
  /** RolloutFailureRate | RolloutFailureRatio | RolloutP95Ratio | RolloutNotEnoughJobs | RolloutHolding | RolloutStepPassed */
  reason: string;
  /** The figures and the rule, in a sentence (the Event's and the status's message). */
  message: string;
  stable: VersionFigures;
  canary: VersionFigures;
}

export interface JudgeInput {
  stable: VersionCounters;
  canary: VersionCounters;
  analysis: Analysis;
  /** ms the step has lasted, and the hold it must last before it may be promoted. */
  elapsedMs: number;
  holdMs: number;
  /**
   * The stable version runs no pod in this step (a pool of one replica): the canary is judged on
   * the absolute ceiling alone once it has minJobs.
   */
  stableIdle?: boolean;
}

/**
 * p95 durations below this are compared as this: a no-op handler's 1 ms against 3 ms is noise
 * (and the histogram's buckets double), not a slower version.
 */
export const P95_FLOOR_MS = 16;

export function figures(c: VersionCounters): VersionFigures {
  const attempts = c.completed + c.failed;
  const p95Ms = runTimeQuantile(c, 0.95);
  return {
    attempts,
    failed: c.failed,
    dead: c.dead,
    failureRate: attempts > 0 ? c.failed / attempts : 0,
    ...(p95Ms !== undefined ? { p95Ms: Math.round(p95Ms * 10) / 10 } : {}),
  };
}

const pct = (r: number) => `${(r * 100).toFixed(1)}%`;
const describe = (name: string, f: VersionFigures) =>
  `${name} ${f.failed}/${f.attempts} failed (${pct(f.failureRate)})${f.p95Ms !== undefined ? `, p95 ${f.p95Ms} ms` : ""}`;

/**
 * Roll back as soon as both versions have minJobs and a rule is broken (the hold is a least time
 * for a promotion, not a grace period for a bad version); promote once they have minJobs, the
 * hold has passed and no rule is broken; otherwise wait.
 */
export function judge(input: JudgeInput): Judgement {
  const { analysis: a } = input;
  const stable = figures(input.stable);
  const canary = figures(input.canary);
  const figs = `${describe("canary", canary)}; ${describe("stable", stable)}`;
  const out = (verdict: Verdict, reason: string, why: string): Judgement => ({
    verdict,
    reason,
    message: `${why}: ${figs}`,
    stable,
    canary,
  });
  const stableCounts = !input.stableIdle;
  if (canary.attempts < a.minJobs || (stableCounts && stable.attempts < a.minJobs))
    return out("wait", "RolloutNotEnoughJobs", `waiting for ${a.minJobs} jobs on each version`);
  if (canary.failureRate > a.maxFailureRate)
    return out(
      "rollback",
      "RolloutFailureRate",
      `canary failure rate ${pct(canary.failureRate)} above maxFailureRate ${pct(a.maxFailureRate)}`,
    );
  if (stableCounts) {
    // One failure's grace: a canary's single failure against a stable version without any is
    // not an infinite ratio.
    const allowed = a.maxFailureRatio * stable.failureRate * canary.attempts + 1;
    if (canary.failed > allowed) {
      const ratio =
        stable.failureRate > 0 ? `${(canary.failureRate / stable.failureRate).toFixed(2)}×` : "∞×";
      return out(
        "rollback",
        "RolloutFailureRatio",
        `canary failure rate ${ratio} stable's, above maxFailureRatio ${a.maxFailureRatio}`,
      );
    }
    if (canary.p95Ms !== undefined && stable.p95Ms !== undefined) {
      const p95Ratio = canary.p95Ms / Math.max(stable.p95Ms, P95_FLOOR_MS);
      if (p95Ratio > a.maxP95Ratio)
        return out(
          "rollback",
          "RolloutP95Ratio",
          `canary p95 ${p95Ratio.toFixed(2)}× stable's, above maxP95Ratio ${a.maxP95Ratio}`,
        );
    }
  }
  if (input.elapsedMs < input.holdMs)
    return out(
      "wait",
      "RolloutHolding",
      `holding the step ${Math.ceil((input.holdMs - input.elapsedMs) / 1000)} s more`,
    );
  return out("promote", "RolloutStepPassed", "step passed");
}

// Checks the operator makes itself, for what the CRD schema cannot say or may not have said
// (an object stored under an older schema, a cluster where CEL was off). A failure is reported
// as Degraded/InvalidSpec with this message; the pool's objects are left as they are.
import { PYTHON_CALLABLE_PATTERN } from "../../lib/pythonCallable.ts";
import { handlerFromFields } from "../../lib/workerContract.ts";
import { assertQueueName, assertSamePipeline, parseRedisUrl } from "../../queue/index.ts";
import type { WorkerPoolSpec } from "../apis/v1alpha1/types.ts";
import { specResources } from "./queueControl.ts";

export function validateSpec(spec: WorkerPoolSpec): string[] {
  const problems: string[] = [];
  const check = (fn: () => void, prefix: string) => {
    try {
      fn();
    } catch (err) {
      problems.push(`${prefix}: ${(err as Error).message}`);
    }
  };
  check(() => assertQueueName(spec.queue), "spec.queue");
  if (spec.nextQueue !== undefined) {
    check(() => assertQueueName(spec.nextQueue!), "spec.nextQueue");
    check(() => assertSamePipeline(spec.queue, spec.nextQueue!), "spec.nextQueue");
  }
  check(() => {
    const t = parseRedisUrl(spec.redis.url, "");
    if (t.password) throw new Error("must not contain a password: use spec.redis.secretRef");
  }, "spec.redis.url");
  const h = spec.handler;
  check(() => handlerFromFields(h), "spec.handler");
  if (h.python !== undefined && !new RegExp(PYTHON_CALLABLE_PATTERN).test(String(h.python.callable)))
    problems.push(
      `spec.handler.python.callable: expected module.path:function (e.g. app.handlers:extract), got ${JSON.stringify(h.python.callable)}`,
    );
  try {
    specResources(spec); // its errors name the field (spec.resources[i].keys[j].limits)
  } catch (err) {
    problems.push((err as Error).message);
  }
  const b = spec.batch;
  if (b !== undefined) {
    if (b.minSize !== undefined && b.minSize > b.size)
      problems.push(`spec.batch: minSize (${b.minSize}) must be <= size (${b.size})`);
    if (spec.concurrency * b.size > 100_000)
      problems.push(
        `spec.batch: concurrency ${spec.concurrency} × size ${b.size} = ${spec.concurrency * b.size} jobs per pod, at most 100000`,
      );
    if ((b.minSize ?? 1) > 1 && !b.waitMs)
      problems.push(
        "spec.batch: minSize above 1 needs waitMs (how long a claimed job may wait for the others)",
      );
    if (b.size === 1 && ((b.minSize ?? 1) > 1 || (b.waitMs ?? 0) > 0))
      problems.push("spec.batch: minSize and waitMs need a size above 1");
  }
  const s = spec.scaling;
  if (s.minReplicas > s.maxReplicas)
    problems.push(`spec.scaling: minReplicas (${s.minReplicas}) must be <= maxReplicas (${s.maxReplicas})`);
  if (s.targetBacklogPerReplica < 1) problems.push("spec.scaling.targetBacklogPerReplica must be >= 1");
  if (s.pollSeconds < 1) problems.push("spec.scaling.pollSeconds must be >= 1");
  if (s.targetWaitSeconds !== undefined) {
    if (typeof s.targetWaitSeconds !== "number" || !(s.targetWaitSeconds > 0) || s.targetWaitSeconds > 86400)
      problems.push(
        `spec.scaling.targetWaitSeconds must be a number of seconds > 0 and <= 86400 (got ${JSON.stringify(s.targetWaitSeconds)})`,
      );
    else if (s.mode !== "direct")
      problems.push(
        `spec.scaling.targetWaitSeconds needs spec.scaling.mode: direct (mode is ${s.mode}; the operator sizes a pool for a wait target itself)`,
      );
  }
  problems.push(...rolloutProblems(spec.rollout));
  return problems;
}

const isInt = (v: unknown, min: number, max: number) =>
  Number.isInteger(v) && (v as number) >= min && (v as number) <= max;
const isNum = (v: unknown, min: number, max: number) =>
  typeof v === "number" && Number.isFinite(v) && v >= min && v <= max;

/** spec.rollout: every field in range, the steps' weights rising (the schema bounds each field; not the order). */
export function rolloutProblems(rollout: WorkerPoolSpec["rollout"]): string[] {
  if (rollout === undefined) return [];
  const problems: string[] = [];
  const steps = rollout.canary?.steps;
  if (!Array.isArray(steps) || steps.length === 0)
    return ["spec.rollout.canary.steps: expected at least one step {weight, holdSeconds}"];
  let before = 0;
  steps.forEach((step, i) => {
    const at = `spec.rollout.canary.steps[${i}]`;
    if (!isInt(step?.weight, 1, 99))
      problems.push(
        `${at}.weight: expected a whole percent from 1 to 99, got ${JSON.stringify(step?.weight)}`,
      );
    else if (step.weight <= before)
      problems.push(`${at}.weight: weights must rise step by step (${step.weight} after ${before})`);
    else before = step.weight;
    if (step?.holdSeconds !== undefined && !isInt(step.holdSeconds, 0, 86400))
      problems.push(
        `${at}.holdSeconds: expected whole seconds from 0 to 86400, got ${JSON.stringify(step.holdSeconds)}`,
      );
  });
  const a = rollout.canary.analysis ?? {};
  const at = "spec.rollout.canary.analysis";
  if (a.minJobs !== undefined && !isInt(a.minJobs, 1, 1_000_000))
    problems.push(
      `${at}.minJobs: expected a whole number from 1 to 1000000, got ${JSON.stringify(a.minJobs)}`,
    );
  if (a.maxFailureRatio !== undefined && !isNum(a.maxFailureRatio, 1, 1000))
    problems.push(
      `${at}.maxFailureRatio: expected a number from 1 to 1000, got ${JSON.stringify(a.maxFailureRatio)}`,
    );
  if (a.maxFailureRate !== undefined && !isNum(a.maxFailureRate, 0, 1))
    problems.push(
      `${at}.maxFailureRate: expected a number from 0 to 1, got ${JSON.stringify(a.maxFailureRate)}`,
    );
  if (a.maxP95Ratio !== undefined && !isNum(a.maxP95Ratio, 1, 1000))
    problems.push(
      `${at}.maxP95Ratio: expected a number from 1 to 1000, got ${JSON.stringify(a.maxP95Ratio)}`,
    );
  return problems;
}

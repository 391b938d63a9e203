// Resources: API keys with budgets (requests and cost units per sliding window), shared by every
// worker of a pipeline (docs/protocol.md, "Resources"). Admission is decided inside the claim
// script (queue/scripts/includes/admission.lua); these calls set and read the resources, and
// correct or sideline a key. Key ids only: a credential never enters Redis.
import { PIPELINES_KEY, PipelineKeys, QUEUES_KEY, QueueKeys, pipelineOf, InvalidNameError } from "./keys.ts";
import * as gateway from "./gateway.ts";
import type { RedisClient } from "./scripts.ts";

export class InvalidResourceError extends Error {
  override name = "InvalidResourceError";
}

/** At most `max` of `unit` (`requests`, `tokens`, …) in any window of `windowMs`. */
export interface ResourceLimit {
  unit: string;
  max: number;
  windowMs: number;
}
export interface ResourceKeySpec {
  id: string;
  limits: ResourceLimit[];
}
/** What a job uses: resource → unit → amount (an estimate; every use also costs 1 request). */
export type ResourceUses = Record<string, Record<string, number>>;

export interface ResourceLimitState extends ResourceLimit {
  /** Used in the window ending now (reservations plus corrections). */
  used: number;
  /** used / max (0..1, may pass 1 only when a correction reported more than was reserved). */
  utilization: number;
}
export interface ResourceKeyState {
  id: string;
  limits: ResourceLimitState[];
  /** Benched (rate-limited by the provider) until this time (ms), or null. */
  benchedUntil: number | null;
  /** Jobs admitted on this key, lifetime. */
  admitted: number;
}
export interface ResourceState {
  pipeline: string;
  name: string;
  /** The admission cap as a fraction of each limit (default 0.9). */
  ceiling: number;
  keys: ResourceKeyState[];
  /** Jobs waiting for this resource's budget, all queues of the pipeline together. */
  waiting: number;
  /** The same per queue (only queues with some). */
  waitingByQueue: Record<string, number>;
}

export const DEFAULT_CEILING = 0.9;
const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
const UNIT = /^[a-z][a-z0-9_]{0,31}$/;
const MAX_AMOUNT = 1e12;
const MAX_WINDOW_MS = 24 * 3_600_000;
/** The most resources one job may use. */
export const MAX_USES = 8;
/** The implicit group of a job with `uses` and no group of its own. */
export const RESOURCE_GROUP_PREFIX = "~res:";

export function assertResourceName(name: unknown, what = "resource name"): asserts name is string {
  if (typeof name !== "string" || !NAME.test(name))
    throw new InvalidResourceError(
      `${what} ${JSON.stringify(name)} is invalid: use letters, digits, '.', '_', '-' (at most 64, starting with a letter or digit)`,
    );
}

function assertUnit(unit: unknown, what: string): asserts unit is string {
  if (typeof unit !== "string" || !UNIT.test(unit))
    throw new InvalidResourceError(
      `${what}: unit ${JSON.stringify(unit)} is invalid: use lower-case letters, digits, '_' (at most 32, starting with a letter)`,
    );
}

function checkLimit(l: ResourceLimit, what: string): void {
  assertUnit(l.unit, what);
  if (!Number.isInteger(l.max) || l.max < 1 || l.max > MAX_AMOUNT)
    throw new InvalidResourceError(
      `${what}: ${l.unit} max must be an integer 1..${MAX_AMOUNT}, got ${l.max}`,
    );
  if (!Number.isInteger(l.windowMs) || l.windowMs < 1 || l.windowMs > MAX_WINDOW_MS)
    throw new InvalidResourceError(
      `${what}: ${l.unit} window must be 1 ms..24 h in whole ms, got ${l.windowMs}`,
    );
}

const WINDOW_UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/**
 * "requests=60/m,tokens=200000/m" → limits. A window is `/s`, `/m`, `/h`, optionally with a
 * count (`/2s`, `/500ms`). `what` names the flag or field in errors.
 */
export function parseLimits(text: string, what = "--limit"): ResourceLimit[] {
  const limits: ResourceLimit[] = [];
  for (const part of text.split(",")) {
    const m = /^\s*([^=\s]+)\s*=\s*(\d+)\s*\/\s*(\d*)\s*(ms|s|m|h)\s*$/.exec(part);
    if (!m)
      throw new InvalidResourceError(
        `${what}: ${JSON.stringify(part.trim())} is not <unit>=<max>/<window>, e.g. requests=60/m, tokens=200000/m, requests=10/2s`,
      );
    const count = m[3] === "" ? 1 : Number(m[3]);
    const limit = { unit: m[1]!, max: Number(m[2]), windowMs: count * WINDOW_UNITS[m[4]!]! };
    if (count < 1) throw new InvalidResourceError(`${what}: ${part.trim()}: the window must be positive`);
    checkLimit(limit, what);
    if (limits.some((l) => l.unit === limit.unit))
      throw new InvalidResourceError(`${what}: ${limit.unit} is limited twice`);
    limits.push(limit);
  }
  return limits;
}

/** A limit as the CLI writes it: "60/m", "60/2s", "5/250ms". */
export function formatWindow(windowMs: number): string {
  for (const [unit, ms] of [
    ["h", 3_600_000],
    ["m", 60_000],
    ["s", 1000],
  ] as const) {
    if (windowMs % ms === 0) return windowMs === ms ? unit : `${windowMs / ms}${unit}`;
  }
  return `${windowMs}ms`;
}

export function formatLimits(limits: ResourceLimit[]): string {
  return limits.map((l) => `${l.unit}=${l.max}/${formatWindow(l.windowMs)}`).join(",");
}

/**
 * Checks a job's `uses` (what = the field's name in errors) and returns it normalised (amounts as
 * integers, resources sorted), or undefined for none.
 */
export function checkUses(uses: unknown, what = "uses"): ResourceUses | undefined {
  if (uses === undefined || uses === null) return undefined;
  if (typeof uses !== "object" || Array.isArray(uses))
    throw new InvalidResourceError(
      `${what} must be an object {resource: {unit: amount}}, got ${JSON.stringify(uses)}`,
    );
  const names = Object.keys(uses).sort();
  if (names.length === 0) return undefined;
  if (names.length > MAX_USES)
    throw new InvalidResourceError(`${what} names ${names.length} resources, limit ${MAX_USES}`);
  const out: ResourceUses = {};
  for (const name of names) {
    assertResourceName(name, `${what}: resource`);
    const units = (uses as Record<string, unknown>)[name] ?? {};
    if (typeof units !== "object" || Array.isArray(units))
      throw new InvalidResourceError(
        `${what}.${name} must be an object {unit: amount}, got ${JSON.stringify(units)}`,
      );
    const amounts: Record<string, number> = {};
    for (const [unit, amount] of Object.entries(units as Record<string, unknown>)) {
      assertUnit(unit, `${what}.${name}`);
      if (typeof amount !== "number" || !Number.isInteger(amount) || amount < 0 || amount > MAX_AMOUNT)
        throw new InvalidResourceError(
          `${what}.${name}.${unit} must be an integer 0..${MAX_AMOUNT}, got ${JSON.stringify(amount)}`,
        );
      if (unit === "requests" && amount !== 1)
        throw new InvalidResourceError(`${what}.${name}.requests: a job uses 1 request; leave it out`);
      if (unit !== "requests") amounts[unit] = amount;
    }
    out[name] = amounts;
  }
  return out;
}

/** "openai:tokens=1200" or "openai" (a request only) → uses; repeated flags merge. */
export function parseUses(texts: string[], what = "--uses"): ResourceUses | undefined {
  const uses: Record<string, Record<string, number>> = {};
  for (const text of texts) {
    const m = /^\s*([^:\s]+)\s*(?::(.*))?$/.exec(text);
    if (!m)
      throw new InvalidResourceError(
        `${what}: ${JSON.stringify(text)} is not <resource>[:<unit>=<amount>,…]`,
      );
    const name = m[1]!;
    assertResourceName(name, `${what}: resource`);
    const units = (uses[name] ??= {});
    for (const part of (m[2] ?? "").split(",").filter((p) => p.trim() !== "")) {
      const u = /^\s*([^=\s]+)\s*=\s*(-?\d+)\s*$/.exec(part);
      if (!u)
        throw new InvalidResourceError(
          `${what}: ${JSON.stringify(part.trim())} is not <unit>=<amount>, e.g. openai:tokens=1200`,
        );
      units[u[1]!] = Number(u[2]);
    }
  }
  return checkUses(uses, what);
}

/** The pipeline a resource of `pipelineOrQueue` lives in: a queue's pipeline, or the name itself. */
export function resourcePipeline(pipelineOrQueue: string): string {
  try {
    return pipelineOf(pipelineOrQueue);
  } catch (err) {
    if (err instanceof InvalidNameError)
      throw new InvalidResourceError(
        `pipeline ${JSON.stringify(pipelineOrQueue)} is invalid: give a pipeline or queue name`,
      );
    throw err;
  }
}

export function resourceKey(pipeline: string, name: string): string {
  return new PipelineKeys(pipeline).resource(name);
}
export function resourcesKey(pipeline: string): string {
  return new PipelineKeys(pipeline).resources;
}
/** `<Q>gbudget`: group → the resource it waits for. */
export function budgetWaitKey(queue: string): string {
  return new QueueKeys(queue).groupBudget;
}

/**
 * Create or replace a resource of a pipeline (or of a queue's pipeline: every stage shares it).
 * Keys it keeps keep their windows and benches; keys left out lose theirs.
 */
export async function setResource(
  redis: RedisClient,
  pipelineOrQueue: string,
  name: string,
  keys: ResourceKeySpec[],
  options: { ceiling?: number } = {},
): Promise<void> {
  const pipeline = resourcePipeline(pipelineOrQueue);
  assertResourceName(name);
  const ceiling = options.ceiling ?? DEFAULT_CEILING;
  if (typeof ceiling !== "number" || !(ceiling > 0 && ceiling <= 1))
    throw new InvalidResourceError(`ceiling must be a number in (0, 1], got ${JSON.stringify(ceiling)}`);
  if (!Array.isArray(keys) || keys.length === 0)
    throw new InvalidResourceError(`resource ${name}: give at least one key (--key <id> --limit …)`);
  if (keys.length > 1000) throw new InvalidResourceError(`resource ${name}: ${keys.length} keys, limit 1000`);
  const specs: { id: string; limits: string }[] = [];
  const seen = new Set<string>();
  for (const key of keys) {
    assertResourceName(key?.id, `resource ${name}: key id`);
    if (seen.has(key.id)) throw new InvalidResourceError(`resource ${name}: key ${key.id} is given twice`);
    seen.add(key.id);
    if (!Array.isArray(key.limits) || key.limits.length === 0)
      throw new InvalidResourceError(
        `resource ${name}: key ${key.id} has no limit (--limit requests=60/m,…)`,
      );
    const units = new Set<string>();
    for (const l of key.limits) {
      checkLimit(l, `resource ${name} key ${key.id}`);
      if (units.has(l.unit))
        throw new InvalidResourceError(`resource ${name} key ${key.id}: ${l.unit} is limited twice`);
      units.add(l.unit);
    }
    specs.push({ id: key.id, limits: key.limits.map((l) => `${l.unit}=${l.max}/${l.windowMs}`).join(",") });
  }
  await gateway.resourceSet(redis, {
    pipeline: new PipelineKeys(pipeline),
    name,
    ceiling: String(ceiling),
    keys: specs,
  });
  await redis.sadd(PIPELINES_KEY, pipeline);
}

/** Delete a resource (its windows and benches too). Returns whether it existed. */
export async function removeResource(
  redis: RedisClient,
  pipelineOrQueue: string,
  name: string,
): Promise<boolean> {
  const pipeline = resourcePipeline(pipelineOrQueue);
  assertResourceName(name);
  return gateway.resourceRemove(redis, { pipeline: new PipelineKeys(pipeline), name });
}

/** One window log's total for the window ending `now` ("time:amount,…"). */
export function windowUsed(log: string | undefined, windowMs: number, now: number): number {
  let used = 0;
  for (const entry of (log ?? "").split(",")) {
    const m = /^(\d+):(-?\d+)$/.exec(entry);
    if (m && Number(m[1]) > now - windowMs) used += Number(m[2]);
  }
  return Math.max(0, used);
}

function parseKeyLimits(text: string | undefined): ResourceLimit[] {
  const limits: ResourceLimit[] = [];
  for (const part of (text ?? "").split(",")) {
    const m = /^([^=]+)=(\d+)\/(\d+)$/.exec(part);
    if (m) limits.push({ unit: m[1]!, max: Number(m[2]), windowMs: Number(m[3]) });
  }
  return limits;
}

/** A resource's state from its hash (pure: `now` is the clock to measure the windows at). */
export function resourceStateFromHash(
  pipeline: string,
  name: string,
  hash: Record<string, string>,
  now: number,
): Omit<ResourceState, "waiting" | "waitingByQueue"> {
  const ceiling = Number(hash.ceiling ?? DEFAULT_CEILING);
  const ids = (hash.keys ?? "").split(",").filter((id) => id !== "");
  return {
    pipeline,
    name,
    ceiling: Number.isFinite(ceiling) ? ceiling : DEFAULT_CEILING,
    keys: ids.map((id) => {
      const bench = Number(hash[`bench:${id}`] ?? 0);
      return {
        id,
        limits: parseKeyLimits(hash[`limits:${id}`]).map((l) => {
          const used = windowUsed(hash[`log:${id}:${l.unit}`], l.windowMs, now);
          return { ...l, used, utilization: used / l.max };
        }),
        benchedUntil: bench > now ? bench : null,
        admitted: Number(hash[`admitted:${id}`] ?? 0),
      };
    }),
  };
}

async function pipelineQueues(redis: RedisClient, pipeline: string): Promise<string[]> {
  const queues = await redis.smembers(QUEUES_KEY);
  return queues.filter((q) => {
    try {
      return pipelineOf(q) === pipeline;
    } catch {
      return false;
    }
  });
}

/** Jobs waiting for each resource's budget, per queue of the pipeline. */
async function budgetWaiting(
  redis: RedisClient,
  pipeline: string,
): Promise<Map<string, Record<string, number>>> {
  const out = new Map<string, Record<string, number>>();
  for (const queue of await pipelineQueues(redis, pipeline)) {
    const waits = await redis.hgetall(budgetWaitKey(queue));
    const groups = Object.keys(waits);
    if (groups.length === 0) continue;
    const counts = await redis.hmget(new QueueKeys(queue).groupWaiting, ...groups);
    groups.forEach((g, i) => {
      const n = Number(counts[i] ?? 0);
      if (n <= 0) return;
      const byQueue = out.get(waits[g]!) ?? {};
      byQueue[queue] = (byQueue[queue] ?? 0) + n;
      out.set(waits[g]!, byQueue);
    });
  }
  return out;
}

/** One resource's state (null when it does not exist). */
export async function resourceState(
  redis: RedisClient,
  pipelineOrQueue: string,
  name: string,
): Promise<ResourceState | null> {
  const pipeline = resourcePipeline(pipelineOrQueue);
  assertResourceName(name);
  const hash = await redis.hgetall(resourceKey(pipeline, name));
  if (!hash.keys) return null;
  const waiting = (await budgetWaiting(redis, pipeline)).get(name) ?? {};
  return {
    ...resourceStateFromHash(pipeline, name, hash, Date.now()),
    waiting: Object.values(waiting).reduce((a, b) => a + b, 0),
    waitingByQueue: waiting,
  };
}

/**
 * Every resource of one pipeline (or of a queue's pipeline), or with none given, of every known
 * pipeline (`cvy:pipelines`), sorted by pipeline and name.
 */
export async function listResources(redis: RedisClient, pipelineOrQueue?: string): Promise<ResourceState[]> {
  const pipelines =
    pipelineOrQueue === undefined
      ? (await redis.smembers(PIPELINES_KEY)).sort()
      : [resourcePipeline(pipelineOrQueue)];
  const out: ResourceState[] = [];
  for (const pipeline of pipelines) {
    const names = (await redis.smembers(resourcesKey(pipeline))).sort();
    if (names.length === 0) continue;
    const waiting = await budgetWaiting(redis, pipeline);
    const now = Date.now();
    for (const name of names) {
      const hash = await redis.hgetall(resourceKey(pipeline, name));
      if (!hash.keys) continue;
      const w = waiting.get(name) ?? {};
      out.push({
        ...resourceStateFromHash(pipeline, name, hash, now),
        waiting: Object.values(w).reduce((a, b) => a + b, 0),
        waitingByQueue: w,
      });
    }
  }
  return out;
}

/**
 * Correct a key's window by what a job of `queue` actually used (`delta` per unit = actual −
 * reserved so far). `at`: the reservation's time from the claim. Room freed re-admits the
 * queue's groups waiting for the resource at once. The worker calls this for `ctx.usage`.
 */
export async function correctResourceUsage(
  redis: RedisClient,
  queue: string,
  name: string,
  key: string,
  at: number,
  deltas: Record<string, number>,
): Promise<void> {
  const pipeline = resourcePipeline(queue);
  const changed: [string, number][] = [];
  for (const [unit, delta] of Object.entries(deltas))
    if (delta !== 0) changed.push([unit, Math.round(delta)]);
  if (changed.length === 0) return;
  await gateway.resourceUsage(redis, {
    pipeline: new PipelineKeys(pipeline),
    name,
    key,
    at,
    now: Date.now(),
    queue: new QueueKeys(queue),
    deltas: changed,
  });
}

/** Sideline a key until `untilMs` (ms since the epoch) for every worker, as a provider's 429 asks. */
export async function sidelineResourceKey(
  redis: RedisClient,
  pipelineOrQueue: string,
  name: string,
  key: string,
  untilMs: number,
): Promise<void> {
  const pipeline = resourcePipeline(pipelineOrQueue);
  assertResourceName(name);
  assertResourceName(key, "key id");
  await gateway.resourceUsage(redis, {
    pipeline: new PipelineKeys(pipeline),
    name,
    key,
    at: 0,
    now: Date.now(),
    benchUntilMs: Math.round(untilMs),
  });
}

// Schedules: a queue's repeating jobs, `every` an interval or by a `cron` expression in a time
// zone. No process of its own: each schedule's next tick waits in the queue as a delayed job
// (`sched:<name>:<tickMs>`, counted in the backlog once due, so a pool scaled to zero wakes for
// it), and the worker that starts a tick puts the following one in line (schedule_tick.lua).
// Ticks missed while nothing ran collapse into one. See docs/queue-control.md.
import { randomBytes } from "node:crypto";
import type { Cron } from "croner";
import { requireOptional } from "../lib/optionalPackage.ts";
import { PIPELINES_KEY, QueueKeys } from "./keys.ts";
import * as gateway from "./gateway.ts";
import type { RedisClient } from "./scripts.ts";

export class ScheduleError extends Error {
  override name = "ScheduleError";
}

const SCHEDULE_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/;
/** A tick job's id: the schedule's name and the tick's time, so a tick is one job whoever enqueues it. */
const TICK_ID = /^sched:([A-Za-z0-9][A-Za-z0-9._-]{0,99}):(\d{1,16})$/;
const MIN_EVERY_MS = 1000;

export interface ScheduleSpec {
  /** Repeat every this many ms (≥ 1 s), counted from when the schedule was added. */
  everyMs?: number;
  /** A cron expression (5 fields, or 6 with seconds first), in `tz` (an IANA zone; default UTC). */
  cron?: string;
  tz?: string;
  /** The data of every tick's job (JSON-encodable). */
  data?: unknown;
  /** Attempts per tick job (default 3). */
  attempts?: number;
}

/** A stored schedule. */
export interface Schedule {
  name: string;
  everyMs?: number;
  cron?: string;
  tz?: string;
  /** The tick jobs' data as JSON text. */
  data: string;
  attempts: number;
  /** Ticks of `everyMs` fall on `anchor + k·everyMs`. */
  anchor: number;
  version: string;
  createdAt: number;
}

export interface ScheduleView extends Schedule {
  /** The tick waiting in the queue (ms since epoch), or null. */
  nextRun: number | null;
}

/** A schedule as the API and `conveyor schedule … --json` show it (data parsed, times as ISO text). */
export function scheduleJson(s: ScheduleView) {
  return {
    name: s.name,
    every: s.everyMs !== undefined ? `${s.everyMs}ms` : undefined,
    cron: s.cron,
    tz: s.tz,
    data: JSON.parse(s.data) as unknown,
    attempts: s.attempts,
    nextRun: s.nextRun === null ? null : new Date(s.nextRun).toISOString(),
  };
}

export function assertScheduleName(name: string): void {
  if (!SCHEDULE_NAME.test(name))
    throw new ScheduleError(
      `invalid schedule name ${JSON.stringify(name)}: use letters, digits, '.', '_', '-' (at most 100)`,
    );
}

function assertTimeZone(tz: string): void {
  try {
    new Intl.DateTimeFormat("en-US", { timeZone: tz });
  } catch {
    throw new ScheduleError(
      `invalid time zone ${JSON.stringify(tz)}: use an IANA name such as Europe/Berlin`,
    );
  }
}

// croner is an optional peer dependency of @conveyor-dev/queue: only cron schedules need it (the
// CLI package depends on it, so the worker and `conveyor schedule` always have it).
type Croner = typeof import("croner");

function cronOf(expr: string, tz: string | undefined): Cron {
  const { Cron } = requireOptional<Croner>("croner", "A cron schedule");
  try {
    return new Cron(expr, { timezone: tz, paused: true, mode: "auto" });
  } catch (err) {
    throw new ScheduleError(`invalid cron expression ${JSON.stringify(expr)}: ${(err as Error).message}`);
  }
}

/** A spec checked and made into a stored schedule (not yet written). */
export function makeSchedule(name: string, spec: ScheduleSpec, now = Date.now()): Schedule {
  assertScheduleName(name);
  const hasEvery = spec.everyMs !== undefined;
  if (hasEvery === (spec.cron !== undefined))
    throw new ScheduleError("a schedule needs exactly one of every (an interval) or cron (an expression)");
  if (hasEvery && (!Number.isInteger(spec.everyMs) || spec.everyMs! < MIN_EVERY_MS))
    throw new ScheduleError(`every must be a whole number of ms, at least ${MIN_EVERY_MS} (1s)`);
  if (spec.tz !== undefined) {
    if (hasEvery) throw new ScheduleError("tz applies to cron schedules only");
    assertTimeZone(spec.tz);
  }
  if (spec.cron !== undefined && cronOf(spec.cron, spec.tz).nextRun(new Date(now)) === null)
    throw new ScheduleError(`cron expression ${JSON.stringify(spec.cron)} never fires`);
  const attempts = spec.attempts ?? 3;
  if (!Number.isInteger(attempts) || attempts < 1 || attempts > 1000)
    throw new ScheduleError("attempts must be an integer 1..1000");
  let data: string | undefined;
  try {
    data = JSON.stringify(spec.data ?? null);
  } catch (err) {
    throw new ScheduleError(`schedule data is not JSON: ${(err as Error).message}`);
  }
  return {
    name,
    ...(hasEvery ? { everyMs: spec.everyMs } : { cron: spec.cron, tz: spec.tz }),
    data: data ?? "null",
    attempts,
    anchor: now,
    version: `${now}-${randomBytes(4).toString("hex")}`,
    createdAt: now,
  };
}

/** The first tick strictly after `after` (ms), or null when a cron expression has no more. */
export function nextTick(
  s: Pick<Schedule, "everyMs" | "cron" | "tz" | "anchor">,
  after: number,
): number | null {
  if (s.everyMs !== undefined) {
    const k = Math.floor((after - s.anchor) / s.everyMs) + 1;
    return s.anchor + Math.max(1, k) * s.everyMs;
  }
  return cronOf(s.cron!, s.tz).nextRun(new Date(after))?.getTime() ?? null;
}

/**
 * Ticks this late are still run one by one (a busy worker, a restart); older ones were missed
 * while nothing ran and collapse into the tick running now.
 */
export const CATCH_UP_MS = 5000;

/**
 * The tick to put in line once tick `tick` has started at `now`: the one after it, unless that
 * is more than CATCH_UP_MS in the past — then nothing ran for a while, the running tick stands
 * for every missed one, and the next is the first after `now`.
 */
export function tickAfter(s: Schedule, tick: number, now: number): number | null {
  const next = nextTick(s, tick);
  if (next === null || next > now - CATCH_UP_MS) return next;
  return nextTick(s, now);
}

/** The schedule name and tick time of a tick job's id; null for any other job. */
export function parseTickId(id: string): { name: string; tick: number } | null {
  if (!id.startsWith("sched:")) return null;
  const m = TICK_ID.exec(id);
  return m ? { name: m[1]!, tick: Number(m[2]) } : null;
}

export class Schedules {
  private readonly redis: RedisClient;
  constructor(redis: RedisClient) {
    this.redis = redis;
  }

  /** Add (or replace) a schedule and put its first tick in line; returns it with its next run. */
  async add(queue: string, name: string, spec: ScheduleSpec): Promise<ScheduleView> {
    const k = new QueueKeys(queue);
    const now = Date.now();
    const schedule = makeSchedule(name, spec, now);
    const first = nextTick(schedule, now);
    await this.remove(queue, name);
    await this.redis.sadd(PIPELINES_KEY, k.pipeline);
    await this.redis.hset(k.schedules, name, JSON.stringify(schedule));
    if (first !== null) await this.enqueueTick(queue, schedule, first, now);
    return { ...schedule, nextRun: first };
  }

  /** Remove a schedule and its pending tick; false when there was none. */
  async remove(queue: string, name: string): Promise<boolean> {
    assertScheduleName(name);
    const existed = await gateway.scheduleRemove(this.redis, { keys: new QueueKeys(queue), name });
    return existed === 1;
  }

  async list(queue: string): Promise<ScheduleView[]> {
    const raw = await this.redis.hgetall(new QueueKeys(queue).schedules);
    const out: ScheduleView[] = [];
    for (const [field, json] of Object.entries(raw)) {
      if (field.startsWith("next:")) continue;
      try {
        const s = JSON.parse(json) as Schedule;
        const next = raw[`next:${field}`];
        out.push({ ...s, nextRun: next ? Number(next) : null });
      } catch {
        // not ours: skipped
      }
    }
    return out.sort((a, b) => (a.name < b.name ? -1 : 1));
  }

  async get(queue: string, name: string): Promise<Schedule | null> {
    const json = await this.redis.hget(new QueueKeys(queue).schedules, name);
    try {
      return json ? (JSON.parse(json) as Schedule) : null;
    } catch {
      return null;
    }
  }

  /**
   * A worker started job `id` of `queue`: if it is a schedule's tick, put the following tick in
   * line (idempotent: a redelivered tick enqueues nothing twice). Returns that tick, or null.
   */
  async onTickStarted(queue: string, id: string, now = Date.now()): Promise<number | null> {
    const tick = parseTickId(id);
    if (!tick) return null;
    const schedule = await this.get(queue, tick.name);
    if (!schedule) return null;
    const next = tickAfter(schedule, tick.tick, now);
    if (next === null) return null;
    return (await this.enqueueTick(queue, schedule, next, now)) ? next : null;
  }

  private async enqueueTick(queue: string, s: Schedule, tick: number, now: number): Promise<boolean> {
    const done = await gateway.scheduleTick(this.redis, {
      keys: new QueueKeys(queue),
      now,
      name: s.name,
      version: s.version,
      tick,
    });
    return done === 1;
  }
}

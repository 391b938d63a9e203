// The layout in force per pipeline (docs/protocol.md, "Layout versions"): which layout of the key
// table and job record producers write, moved forward on purpose (finalize) once every live
// reader — worker, operator, job API — reads the newer one. Readers report the layouts they read:
// workers in their heartbeat report (`<Q>workers`), operators and job APIs in `cvy:readers`.
import type { Cluster } from "ioredis";
import { packageVersion } from "../lib/packageVersion.ts";
import { GLOBAL_KEYS } from "./keys.generated.ts";
import * as gateway from "./gateway.ts";
import { InvalidNameError, KEY_ROOT, PipelineKeys, QueueKeys, QUEUES_KEY } from "./keys.ts";
import { QUEUE_NAME_PATTERN } from "./keyTable.ts";
import type { RedisClient } from "./scripts.ts";

/** The first numbered layout: the one the release before layouts (0.1.0, `acb913e`) writes. */
export const FIRST_LAYOUT = 1;

/**
 * The newest layout this release reads and finalize moves to: layout 2 fences every queue
 * against the release before layouts (`paused:<queue>` = '1'; this release's pause is
 * `hold:<queue>`: queue/control.ts, includes/control.lua).
 */
export const NEWEST_LAYOUT = 2;

/**
 * Layout → the first release that reads it (a newer layout's entry is written into Redis at
 * finalize). This release still says 0.1.0 in package.json, so layout 2 names it by its place.
 */
export const LAYOUT_FIRST_VERSION: Readonly<Record<number, string>> = {
  1: "0.1.0",
  2: "the release after 0.1.0 (acb913e)",
};

/** Operators' and job APIs' reports as readers of the layouts (id → JSON). */
export const READERS_KEY = GLOBAL_KEYS.readers;

/** A reader's report in `cvy:readers` older than this is deleted (by the next reader that starts). */
const PRUNE_AFTER_MS = 24 * 3600_000;

/** A report older than this is a reader that has gone (the operator's own staleness for scale-in). */
export const READER_STALE_MS = 60_000;

export interface LayoutRange {
  min: number;
  max: number;
}

/**
 * The layouts this process reads: this release's, or `CONVEYOR_LAYOUTS` (`<min>..<max>`) — for
 * upgrade tests, which make a process of this release stand for an older or newer one.
 */
export function readableLayouts(env: NodeJS.ProcessEnv = process.env): LayoutRange {
  const raw = env.CONVEYOR_LAYOUTS;
  if (raw === undefined || raw === "") return { min: FIRST_LAYOUT, max: NEWEST_LAYOUT };
  const m = /^(\d+)\.\.(\d+)$/.exec(raw.trim());
  if (!m || Number(m[1]) < 1 || Number(m[2]) < Number(m[1]))
    throw new LayoutError(
      `CONVEYOR_LAYOUTS must be <min>..<max> with 1 ≤ min ≤ max, got ${JSON.stringify(raw)}`,
    );
  return { min: Number(m[1]), max: Number(m[2]) };
}

export class LayoutError extends Error {
  override name = "LayoutError";
}

/** A client met a layout newer than it reads: it must not start work (exit 1, not ready). */
export class LayoutRefusedError extends LayoutError {
  override name = "LayoutRefusedError";
  readonly pipeline: string;
  readonly inForce: number;
  readonly reads: LayoutRange;
  readonly firstVersion: string | undefined;
  constructor(pipeline: string, inForce: number, reads: LayoutRange, firstVersion: string | undefined) {
    super(
      `pipeline ${pipeline} is on layout ${inForce}; this Conveyor ${packageVersion()} reads layouts ${rangeText(reads)}: ` +
        `upgrade to ${firstVersion ?? "a newer release"} or later, which reads layout ${inForce}`,
    );
    this.pipeline = pipeline;
    this.inForce = inForce;
    this.reads = reads;
    this.firstVersion = firstVersion;
  }
}

export function rangeText(r: LayoutRange): string {
  return r.min === r.max ? `${r.min}` : `${r.min}..${r.max}`;
}

export interface LayoutInForce {
  inForce: number;
  firstVersion?: string;
  finalizedAt?: number;
  finalizedBy?: string;
}

const PIPELINE_NAME = new RegExp(QUEUE_NAME_PATTERN.replace("(/[A-Za-z0-9][A-Za-z0-9._-]{0,99})?", ""));

const QUEUE_NAME = new RegExp(QUEUE_NAME_PATTERN);

export function assertPipelineName(pipeline: string): void {
  if (!PIPELINE_NAME.test(pipeline))
    throw new InvalidNameError(
      `invalid pipeline name ${JSON.stringify(pipeline)}: use letters, digits, '.', '_', '-' (at most 100)`,
    );
}

export async function readLayout(redis: RedisClient, pipeline: string): Promise<LayoutInForce> {
  assertPipelineName(pipeline);
  const raw = await redis.hgetall(new PipelineKeys(pipeline).layout);
  return parseLayout(raw);
}

function parseLayout(raw: Record<string, string>): LayoutInForce {
  const n = Number(raw.inForce);
  return {
    inForce: Number.isInteger(n) && n >= 1 ? n : FIRST_LAYOUT,
    ...(raw.firstVersion ? { firstVersion: raw.firstVersion } : {}),
    ...(raw.finalizedAt ? { finalizedAt: Number(raw.finalizedAt) } : {}),
    ...(raw.finalizedBy ? { finalizedBy: raw.finalizedBy } : {}),
  };
}

/** Refuses (LayoutRefusedError) when the pipeline's layout in force is one `reads` does not cover. */
export async function assertLayoutReadable(
  redis: RedisClient,
  pipeline: string,
  reads: LayoutRange = readableLayouts(),
): Promise<LayoutInForce> {
  const layout = await readLayout(redis, pipeline);
  if (layout.inForce > reads.max)
    throw new LayoutRefusedError(pipeline, layout.inForce, reads, layout.firstVersion);
  return layout;
}

export type ReaderKind = "worker" | "operator" | "api";

/** One live reader of a pipeline, as `conveyor layout status` lists it. */
export interface LayoutReader {
  kind: ReaderKind;
  id: string;
  /** Absent: a release before layouts (it reports none and counts as a reader of layout 1 only). */
  version?: string;
  layouts: LayoutRange;
  /** The worker's queue and pod. */
  queue?: string;
  pod?: string;
  seen: number;
}

export interface LayoutStatus {
  pipeline: string;
  inForce: number;
  firstVersion?: string;
  finalizedAt?: number;
  /** The newest layout every live reader can read (no reader: the layout in force). */
  newestReadable: number;
  readers: LayoutReader[];
}

/** What a worker adds to its heartbeat report, an operator or job API to `cvy:readers`. */
export function readerFields(reads: LayoutRange = readableLayouts()): {
  version: string;
  layouts: [number, number];
} {
  return { version: packageVersion(), layouts: [reads.min, reads.max] };
}

function parseReads(v: unknown): LayoutRange {
  if (Array.isArray(v) && v.length === 2 && v.every((n) => Number.isInteger(n) && n >= 1))
    return { min: v[0] as number, max: v[1] as number };
  // A report without layouts comes from a release before them: layout 1 only.
  return { min: FIRST_LAYOUT, max: FIRST_LAYOUT };
}

function parseReport(json: string): Record<string, unknown> | undefined {
  try {
    const r = JSON.parse(json) as unknown;
    return r && typeof r === "object" ? (r as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** Keys matching `pattern`, found by SCAN (on every master). */
async function scanKeys(redis: RedisClient, pattern: string): Promise<string[]> {
  const nodes = redis.isCluster ? (redis as Cluster).nodes("master") : [redis];
  const found = new Set<string>();
  await Promise.all(
    nodes.map(async (node) => {
      let cursor = "0";
      do {
        const [next, keys] = await node.scan(cursor, "MATCH", pattern, "COUNT", 1000);
        cursor = next;
        for (const k of keys) found.add(k);
      } while (cursor !== "0");
    }),
  );
  return [...found].sort();
}

/** The pipeline's queues with worker reports: their `<Q>workers` keys. */
function workerKeys(redis: RedisClient, pipeline: string): Promise<string[]> {
  return scanKeys(redis, `${KEY_ROOT}:{${pipeline}}:q:*:workers`);
}

/** Every live reader of the pipeline: its workers, and every operator and job API. */
export async function layoutReaders(
  redis: RedisClient,
  pipeline: string,
  now = Date.now(),
): Promise<LayoutReader[]> {
  assertPipelineName(pipeline);
  const out: LayoutReader[] = [];
  const prefix = `${KEY_ROOT}:{${pipeline}}:q:`;
  for (const key of await workerKeys(redis, pipeline)) {
    const queue = key.slice(prefix.length, -":workers".length);
    for (const [id, json] of Object.entries(await redis.hgetall(key))) {
      const r = parseReport(json);
      const seen = Number(r?.seen);
      if (!r || !(now - seen <= READER_STALE_MS)) continue;
      out.push({
        kind: "worker",
        id,
        ...(typeof r.version === "string" ? { version: r.version } : {}),
        layouts: parseReads(r.layouts),
        queue,
        ...(typeof r.pod === "string" && r.pod ? { pod: r.pod } : {}),
        seen,
      });
    }
  }
  for (const [id, json] of Object.entries(await redis.hgetall(READERS_KEY))) {
    const r = parseReport(json);
    const seen = Number(r?.seen);
    if (!r || !(now - seen <= READER_STALE_MS)) continue;
    out.push({
      kind: r.kind === "operator" ? "operator" : "api",
      id,
      ...(typeof r.version === "string" ? { version: r.version } : {}),
      layouts: parseReads(r.layouts),
      seen,
    });
  }
  return out;
}

export async function layoutStatus(redis: RedisClient, pipeline: string): Promise<LayoutStatus> {
  const [layout, readers] = await Promise.all([readLayout(redis, pipeline), layoutReaders(redis, pipeline)]);
  return {
    pipeline,
    ...layout,
    newestReadable: readers.length ? Math.min(...readers.map((r) => r.layouts.max)) : layout.inForce,
    readers,
  };
}

export interface FinalizeResult {
  pipeline: string;
  from: number;
  to: number;
  /** False: the layout in force already was `to`. */
  moved: boolean;
}

/** Finalize was refused: these live readers do not read the layout it would move to. */
export class FinalizeRefusedError extends LayoutError {
  override name = "FinalizeRefusedError";
  readonly pipeline: string;
  readonly to: number;
  readonly behind: LayoutReader[];
  constructor(pipeline: string, to: number, behind: LayoutReader[]) {
    super(
      `cannot finalize layout ${to} for pipeline ${pipeline}: ${behind.length} live reader(s) do not read it: ` +
        behind
          .map(
            (r) =>
              `${r.kind} ${r.id}${r.queue ? ` (${r.queue})` : ""} ${r.version ?? "(a release before layouts)"} reads ${rangeText(r.layouts)}`,
          )
          .join("; ") +
        " — upgrade or stop them first",
    );
    this.pipeline = pipeline;
    this.to = to;
    this.behind = behind;
  }
}

/**
 * Moves the pipeline's layout in force forward to the newest this release writes (`reads.max`),
 * refused while a live reader does not read it. Never moves it back.
 */
export async function finalizeLayout(
  redis: RedisClient,
  pipeline: string,
  opts: { by: string; reads?: LayoutRange },
): Promise<FinalizeResult> {
  const to = (opts.reads ?? readableLayouts()).max;
  const status = await layoutStatus(redis, pipeline);
  if (status.inForce >= to) return { pipeline, from: status.inForce, to: status.inForce, moved: false };
  const behind = status.readers.filter((r) => r.layouts.max < to);
  if (behind.length) throw new FinalizeRefusedError(pipeline, to, behind);
  const from = await writeLayoutInForce(redis, pipeline, to, {
    firstVersion: LAYOUT_FIRST_VERSION[to] ?? packageVersion(),
    by: opts.by,
    queues: await pipelineQueues(redis, pipeline),
  });
  return { pipeline, from, to, moved: from < to };
}

/** Sets the queue's fence (`paused:<queue>` = '1', layout 2 on): its workers do at each layout check. */
export async function keepLayoutFence(redis: RedisClient, queue: string): Promise<void> {
  await redis.hset(new QueueKeys(queue).meta, `paused:${queue}`, "1");
}

/**
 * The pipeline's queues this process can find: those registered in `cvy:queues` and those with
 * jobs counted or workers reporting (layout_finalize adds those with a control field in `<P>meta`).
 * A queue none of these names yet gets its fence at its first enqueue or worker heartbeat.
 */
export async function pipelineQueues(redis: RedisClient, pipeline: string): Promise<string[]> {
  const found = new Set<string>();
  const [registered, keys] = await Promise.all([
    redis.smembers(QUEUES_KEY),
    scanKeys(redis, `${KEY_ROOT}:{${pipeline}}:q:*:counts`),
  ]);
  for (const q of registered) if (q === pipeline || q.startsWith(`${pipeline}/`)) found.add(q);
  const prefix = `${KEY_ROOT}:{${pipeline}}:q:`;
  for (const k of [...keys, ...(await workerKeys(redis, pipeline))]) {
    const q = k.slice(prefix.length, k.lastIndexOf(":"));
    if (QUEUE_NAME.test(q)) found.add(q);
  }
  return [...found].sort();
}

/**
 * Writes the layout in force and mirrors it into `<P>meta` field `layout`, which every claim
 * reads in the HMGET it makes anyway: a worker that missed the finalize (its heartbeat check not
 * yet due, or its report too late for finalize to count it) claims nothing from then on
 * (includes/control.lua, layoutRefused). Moving to layout 2 fences `queues` (and every queue with
 * a control field) against the release before layouts, in the same script. Never moves back;
 * returns the layout in force before.
 */
export async function writeLayoutInForce(
  redis: RedisClient,
  pipeline: string,
  to: number,
  opts: { firstVersion: string; by: string; queues?: string[] },
): Promise<number> {
  assertPipelineName(pipeline);
  return gateway.layoutFinalize(redis, {
    keys: new PipelineKeys(pipeline),
    to,
    firstVersion: opts.firstVersion,
    at: Date.now(),
    by: opts.by,
    queues: opts.queues ?? [],
  });
}

/**
 * An operator's or job API's report in `cvy:readers`, written every `intervalMs` until stopped
 * (then removed), so `conveyor layout status` and finalize count it.
 */
export class ReaderReport {
  private timer: NodeJS.Timeout | undefined;
  private readonly redis: RedisClient;
  private readonly id: string;
  private readonly kind: "operator" | "api";
  private readonly intervalMs: number;
  private readonly onError: (err: unknown) => void;
  constructor(
    redis: RedisClient,
    id: string,
    kind: "operator" | "api",
    intervalMs = 15_000,
    onError: (err: unknown) => void = () => {},
  ) {
    this.redis = redis;
    this.id = id;
    this.kind = kind;
    this.intervalMs = intervalMs;
    this.onError = onError;
  }

  start(): void {
    const write = () =>
      this.redis
        .hset(READERS_KEY, this.id, JSON.stringify({ kind: this.kind, ...readerFields(), seen: Date.now() }))
        .catch(this.onError);
    // (pruned first: once this reader is listed, the stale reports are gone)
    void this.prune().catch(this.onError).then(write);
    this.timer = setInterval(write, this.intervalMs);
    this.timer.unref();
  }

  /** Reports of readers that stopped without removing theirs (killed) go after a day. */
  private async prune(): Promise<void> {
    const now = Date.now();
    const gone = Object.entries(await this.redis.hgetall(READERS_KEY))
      .filter(([, json]) => !(now - Number(parseReport(json)?.seen) < PRUNE_AFTER_MS))
      .map(([id]) => id);
    if (gone.length) await this.redis.hdel(READERS_KEY, ...gone);
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.redis.hdel(READERS_KEY, this.id).catch(() => {});
  }
}

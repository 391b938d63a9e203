// The `conveyor` command: one binary for producers, operators of the system, the worker image
// and the operator image.
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import {
  connectRedis,
  waitUntilReady,
  parseDuration,
  Producer,
  QueueAdmin,
  QueueEvents,
  assertQueueName,
  formatRateLimit,
  makeSchedule,
  parseRateLimit,
  type RateLimit,
  type ScheduleSpec,
  scheduleJson,
  dumpScripts,
  scriptSource,
  SCRIPT_NAMES,
  type ScriptName,
  type JobToEnqueue,
  type QueueEvent,
  type RedisClient,
  parseEnvelope,
  EnvelopeError,
} from "../queue/index.ts";
import { JOB_SAMPLER, startTracing } from "../lib/telemetry.ts";
import { DURATION_HELP } from "../lib/duration.ts";
import { packageVersion } from "../lib/packageVersion.ts";

/** Each command's synopsis; `conveyor <command> --help` prints its own, `conveyor --help` all. */
const COMMANDS: Record<string, string> = {
  enqueue: `  enqueue <queue> '<json>' [--id ID] [--key KEY] [--priority N] [--delay 10s] [--attempts N] [--timeout 30s]
  enqueue <queue> --file jobs.ndjson      one job per line (JSON data, or {"data":…,"id":…,"priority":…})`,
  stats:
    "  stats <queue> [--json]                  ready, delayed, inflight, completed, dead; paused, rate limit, cancelled, schedules",
  job: "  job <id> [--queue Q] [--json]           state, attempts, result or last error, progress, log lines (exit 1: not found)",
  dlq: "  dlq list|retry|purge <queue> [--limit N] [--json]   dead letters",
  cancel:
    "  cancel <id> [--queue Q] [--json]        cancel a waiting, delayed or running job (a fan-out parent: its children too)",
  promote:
    "  promote <id> [--queue Q] [--json]       run a delayed job now (exit 1: not found or not delayed)",
  delete:
    "  delete <queue> <id>… [--json]           delete waiting, delayed, dead or finished jobs (running ones are refused: cancel first)",
  pause: "  pause <queue>                           stop claiming from a queue (running jobs finish)",
  resume: "  resume <queue>                          claim from a paused queue again",
  limit: "  limit <queue> <N>/<s|m|h> | off         a global rate limit: at most N job starts in any window",
  schedule: `  schedule add <queue> <name> (--every 5m | --cron '0 * * * *' [--tz Area/City]) ['<json>'] [--attempts N]
  schedule list <queue> [--json] | remove <queue> <name>    repeating jobs (next run shown by list)`,
  events:
    "  events <queue> [--follow] [--limit N] [--json]  job transitions in order (enqueued, started, progress, completed…)",
  api:
    "  api [--port 8080] [--host 0.0.0.0] [--max-body N]  the job API and the dashboard over HTTP (bearer token from CONVEYOR_API_TOKEN)\n" +
    "      [--read-only] [--queues a,b] [--database URL] [--kubernetes auto|off] [--dashboard on|off] [--insecure-no-auth]",
  scripts:
    "  scripts dump <dir> | show <name>        the published Lua scripts, includes resolved, and library.lua (for other languages)",
  worker: "  worker [options]                        run the generic worker (conveyor worker --help)",
  operator:
    "  operator [options]                      run the WorkerPool operator (conveyor operator --help)",
};

const FOOTER = `conveyor --version prints the version. Redis: --redis URL or REDIS_URL (default redis://127.0.0.1:6379); password via REDIS_PASSWORD.
${DURATION_HELP} Exit status: 0 success, 1 absent or refused, 2 usage error.`;

const USAGE = `usage: conveyor <command> [options]\n\n${Object.values(COMMANDS).join("\n")}\n\n${FOOTER}`;

const commandUsage = (command: string) =>
  `usage: conveyor ${command} [options]\n\n${COMMANDS[command]}\n\n${FOOTER}`;

export class UsageError extends Error {
  override name = "UsageError";
}

const COMMON = {
  redis: { type: "string" },
  json: { type: "boolean" },
  help: { type: "boolean", short: "h" },
} as const;

function parse<T extends Record<string, { type: "string" | "boolean"; short?: string }>>(
  argv: string[],
  options: T,
) {
  const all = { ...COMMON, ...options };
  // Boolean flags also take an explicit value: --json=true, --follow=false.
  const args = argv.flatMap((a) => {
    const m = /^--([\w-]+)=(true|false)$/.exec(a);
    if (!m || (all as Record<string, { type: string }>)[m[1]!]?.type !== "boolean") return [a];
    return m[2] === "true" ? [`--${m[1]}`] : [];
  });
  try {
    return parseArgs({
      args,
      options: all,
      allowPositionals: true,
      strict: true,
    });
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
}

async function withRedis<T>(url: string | undefined, fn: (redis: RedisClient) => Promise<T>): Promise<T> {
  const target = redisUrl(url);
  const redis = connectRedis(target, { failFast: true, name: "conveyor-cli" });
  try {
    await waitUntilReady(redis, target);
    return await fn(redis);
  } finally {
    redis.disconnect();
  }
}

const print = (line: string) => process.stdout.write(`${line}\n`);

function parseJson(text: string, where: string): unknown {
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new UsageError(`${where} is not valid JSON: ${(err as Error).message}`);
  }
}

function positiveInt(v: string | undefined, flag: string): number | undefined {
  if (v === undefined) return undefined;
  if (!/^\d+$/.test(v)) throw new UsageError(`--${flag} expects a whole number, got ${JSON.stringify(v)}`);
  return Number(v);
}

function durationFlag(v: string | undefined, flag: string): number | undefined {
  if (v === undefined) return undefined;
  try {
    return parseDuration(v, `--${flag}`);
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
}

async function enqueue(argv: string[]): Promise<void> {
  const { values, positionals } = parse(argv, {
    id: { type: "string" },
    key: { type: "string" },
    priority: { type: "string" },
    delay: { type: "string" },
    attempts: { type: "string" },
    timeout: { type: "string" },
    file: { type: "string" },
  });
  const [queue, json] = positionals;
  if (!queue) throw new UsageError("enqueue needs a queue");
  const opts = {
    priority: positiveInt(values.priority, "priority"),
    delayMs: durationFlag(values.delay, "delay"),
    attempts: positiveInt(values.attempts, "attempts"),
    timeoutMs: durationFlag(values.timeout, "timeout"),
  };
  // `send {queue}` spans when the OTEL_* variables ask for export (flushed before exit).
  const tracing = await startTracing({ serviceName: "conveyor-cli" });
  try {
    await enqueueWith(values, queue, json, opts);
  } finally {
    await tracing?.shutdown();
  }
}

async function enqueueWith(
  values: { redis?: string; file?: string; json?: boolean; id?: string; key?: string },
  queue: string,
  json: string | undefined,
  opts: Omit<JobToEnqueue, "data">,
): Promise<void> {
  await withRedis(values.redis, async (redis) => {
    const producer = new Producer(redis);
    if (values.file) {
      const jobs: JobToEnqueue[] = readFileSync(values.file, "utf8")
        .split("\n")
        .map((line, i) => [line.trim(), i + 1] as const)
        .filter(([line]) => line !== "")
        .map(([line, n]): JobToEnqueue => {
          const v = parseJson(line, `${values.file}:${n}`);
          const isEnvelope = typeof v === "object" && v !== null && !Array.isArray(v) && "data" in v;
          if (!isEnvelope) return { ...opts, data: v };
          try {
            return { ...opts, ...definedFields(parseEnvelope(v)) };
          } catch (err) {
            if (err instanceof EnvelopeError) throw new UsageError(`${values.file}:${n}: ${err.message}`);
            throw err;
          }
        });
      const results = await producer.enqueueMany(queue, jobs);
      print(
        values.json
          ? JSON.stringify({
              enqueued: results.filter((r) => r.created).length,
              duplicates: results.filter((r) => !r.created).length,
            })
          : String(results.filter((r) => r.created).length),
      );
      return;
    }
    if (json === undefined) throw new UsageError("enqueue needs job data as JSON, or --file");
    const result = await producer.enqueue(queue, parseJson(json, "job data"), {
      ...opts,
      id: values.id,
      idempotencyKey: values.key,
    });
    print(values.json ? JSON.stringify(result) : result.id);
  });
}

async function stats(argv: string[]): Promise<void> {
  const { values, positionals } = parse(argv, {});
  const [queue] = positionals;
  if (!queue) throw new UsageError("stats needs a queue");
  await withRedis(values.redis, async (redis) => {
    const view = await new QueueAdmin(redis).stats(queue);
    if (values.json) return print(JSON.stringify(view));
    for (const [k, v] of Object.entries(view)) print(`${k.padEnd(10)} ${v ?? "none"}`);
  });
}

async function job(argv: string[]): Promise<void> {
  const { values, positionals } = parse(argv, { queue: { type: "string" } });
  const [id] = positionals;
  if (!id) throw new UsageError("job needs an id");
  await withRedis(values.redis, async (redis) => {
    const admin = new QueueAdmin(redis);
    const info = await admin.job(id, values.queue);
    if (!info) {
      process.exitCode = 1;
      return print(
        values.json
          ? JSON.stringify({ id, state: "unknown" })
          : `job ${id}: not found (never enqueued, or its record expired)`,
      );
    }
    const decode = (s?: string) => (s === undefined ? undefined : safeJson(s));
    const view = {
      id: info.id,
      queue: info.queue,
      state: info.state,
      attempts: info.attemptsMade,
      maxAttempts: info.attempts,
      stalls: info.stalls,
      handbacks: info.handbacks,
      result: decode(info.result),
      error: decode(info.error),
      deadReason: info.deadReason,
      progress: info.progress,
      progressMessage: info.progressMessage,
      logs: await admin.jobLogs(id, info.queue || values.queue),
    };
    if (values.json) return print(JSON.stringify(view));
    print(`job ${view.id} on ${view.queue}: ${view.state}`);
    print(
      `attempts ${view.attempts}/${view.maxAttempts}, stalls ${view.stalls}, handbacks ${view.handbacks}`,
    );
    if (view.result !== undefined) print(`result ${JSON.stringify(view.result)}`);
    if (view.error !== undefined) print(`last error ${JSON.stringify(view.error)}`);
    if (view.deadReason) print(`dead: ${view.deadReason}`);
    if (view.progress !== undefined)
      print(`progress ${view.progress}${view.progressMessage ? ` ${view.progressMessage}` : ""}`);
    if (view.logs.length > 0) print(`log (last ${view.logs.length} lines):`);
    for (const line of view.logs) print(`  ${new Date(line.at).toISOString()} ${line.message}`);
  });
}

/** The fields an envelope set, so the flags' defaults fill only the others. */
function definedFields<T extends object>(o: T): T {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as T;
}

function safeJson(s: string): unknown {
  try {
    return JSON.parse(s);
  } catch {
    return s;
  }
}

async function dlq(argv: string[]): Promise<void> {
  const { values, positionals } = parse(argv, { limit: { type: "string" } });
  const [action, queue] = positionals;
  if (!action || !["list", "retry", "purge"].includes(action) || !queue)
    throw new UsageError("dlq list|retry|purge <queue>");
  await withRedis(values.redis, async (redis) => {
    const admin = new QueueAdmin(redis);
    if (action === "list") {
      const dead = await admin.deadJobs(queue, positiveInt(values.limit, "limit") ?? 100);
      if (values.json) return print(JSON.stringify(dead));
      if (dead.length === 0) return print("no dead letters");
      for (const d of dead) print(`${d.id}  ${new Date(d.deadAt).toISOString()}  ${d.reason}`);
      return;
    }
    const n = action === "retry" ? await admin.retryDead(queue) : await admin.purgeDead(queue);
    print(
      values.json
        ? JSON.stringify({ [action === "retry" ? "retried" : "purged"]: n })
        : `${action === "retry" ? "retried" : "purged"} ${n}`,
    );
  });
}

async function cancel(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, { queue: { type: "string" } });
  const [id] = positionals;
  if (!id || positionals.length !== 1) throw new UsageError("cancel <id> [--queue Q]");
  return withRedis(values.redis, async (redis) => {
    const r = await new QueueAdmin(redis).cancel(id, values.queue);
    if (values.json) print(JSON.stringify(r));
    else if (r.outcome === "cancelled")
      print(
        r.state === "active"
          ? `cancelled ${id} (running: its worker aborts it at the next heartbeat)`
          : r.jobsCancelled > 1 || r.state === "fannedOut" || r.state === "joined"
            ? `cancelled ${id} and ${r.jobsCancelled} unfinished job(s) of its fan-out; the join will not run`
            : `cancelled ${id} (was ${r.state})`,
      );
    else if (r.outcome === "finished") print(`${id} is already ${r.state}: nothing to cancel`);
    else print(`job ${id} not found (never enqueued, or its record expired)`);
    return r.outcome === "cancelled" ? 0 : 1;
  });
}

async function promote(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, { queue: { type: "string" } });
  const [id] = positionals;
  if (!id || positionals.length !== 1) throw new UsageError("promote <id> [--queue Q]");
  return withRedis(values.redis, async (redis) => {
    const admin = new QueueAdmin(redis);
    const queue = values.queue ?? (await admin.job(id))?.queue;
    const r = queue
      ? await admin.promote(id, queue)
      : { id, queue: "", outcome: "notFound" as const, state: "" };
    if (values.json) print(JSON.stringify(r));
    else if (r.outcome === "promoted") print(`promoted ${id}: ready in ${r.queue}, it runs next by priority`);
    else if (r.outcome === "notDelayed") print(`${id} is ${r.state}, not delayed: nothing to run now`);
    else print(`job ${id} not found (never enqueued, or its record expired)`);
    return r.outcome === "promoted" ? 0 : 1;
  });
}

async function deleteJobs(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, {});
  const [queue, ...ids] = positionals;
  if (!queue || ids.length === 0) throw new UsageError("delete <queue> <id>…");
  return withRedis(values.redis, async (redis) => {
    const results = await new QueueAdmin(redis).deleteJobs(queue, [...new Set(ids)]);
    if (values.json) print(JSON.stringify(results));
    else
      for (const r of results)
        print(
          r.outcome === "deleted"
            ? `deleted ${r.id}${r.state ? ` (was ${r.state})` : ""}`
            : r.outcome === "refused"
              ? `${r.id} is ${r.state === "active" ? "running" : `${r.state} (children unfinished)`}: cancel it first, then delete it`
              : `job ${r.id} not found in ${queue}`,
        );
    return results.every((r) => r.outcome === "deleted") ? 0 : 1;
  });
}

async function pauseOrResume(argv: string[], pause: boolean): Promise<void> {
  const { values, positionals } = parse(argv, {});
  const [queue] = positionals;
  if (!queue || positionals.length !== 1) throw new UsageError(`${pause ? "pause" : "resume"} <queue>`);
  assertQueueNameForUsage(queue);
  await withRedis(values.redis, async (redis) => {
    const admin = new QueueAdmin(redis);
    await (pause ? admin.pause(queue) : admin.resume(queue));
    print(
      values.json ? JSON.stringify({ queue, paused: pause }) : `${queue} ${pause ? "paused" : "resumed"}`,
    );
  });
}

async function limit(argv: string[]): Promise<void> {
  const { values, positionals } = parse(argv, {});
  const [queue, rate] = positionals;
  if (!queue || !rate || positionals.length !== 2) throw new UsageError("limit <queue> <N>/<s|m|h> | off");
  assertQueueNameForUsage(queue);
  let parsed: RateLimit | null = null;
  if (rate !== "off") {
    try {
      parsed = parseRateLimit(rate);
    } catch (err) {
      throw new UsageError((err as Error).message);
    }
  }
  await withRedis(values.redis, async (redis) => {
    await new QueueAdmin(redis).setRateLimit(queue, parsed);
    const text = parsed ? formatRateLimit(parsed) : null;
    print(values.json ? JSON.stringify({ queue, rateLimit: text }) : `${queue} rate limit ${text ?? "off"}`);
  });
}

async function schedule(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, {
    every: { type: "string" },
    cron: { type: "string" },
    tz: { type: "string" },
    attempts: { type: "string" },
  });
  const [action, queue, name, json] = positionals;
  const usage =
    "schedule add <queue> <name> (--every 5m | --cron '0 * * * *' [--tz Area/City]) ['<json>'] | list <queue> | remove <queue> <name>";
  if (!action || !queue) throw new UsageError(usage);
  assertQueueNameForUsage(queue);
  if (action === "add") {
    if (!name || positionals.length > 4) throw new UsageError(usage);
    let spec: ScheduleSpec;
    try {
      spec = {
        everyMs: durationFlag(values.every, "every"),
        cron: values.cron,
        tz: values.tz,
        attempts: positiveInt(values.attempts, "attempts"),
        data: json === undefined ? null : parseJson(json, "schedule data"),
      };
      makeSchedule(name, spec); // every problem named before connecting
    } catch (err) {
      throw new UsageError((err as Error).message);
    }
    return withRedis(values.redis, async (redis) => {
      const s = await new QueueAdmin(redis).schedules.add(queue, name, spec);
      print(
        values.json
          ? JSON.stringify(scheduleJson(s))
          : `schedule ${name} on ${queue}: next run ${when(s.nextRun)}`,
      );
      return 0;
    });
  }
  if (action === "list") {
    if (positionals.length !== 2) throw new UsageError(usage);
    return withRedis(values.redis, async (redis) => {
      const list = await new QueueAdmin(redis).schedules.list(queue);
      if (values.json) print(JSON.stringify(list.map(scheduleJson)));
      else if (list.length === 0) print(`no schedules on ${queue}`);
      else
        for (const s of list)
          print(
            `${s.name.padEnd(20)} ${(s.everyMs !== undefined ? `every ${s.everyMs / 1000}s` : `cron '${s.cron}' ${s.tz ?? "UTC"}`).padEnd(32)} next ${when(s.nextRun)}`,
          );
      return 0;
    });
  }
  if (action === "remove") {
    if (!name || positionals.length !== 3) throw new UsageError(usage);
    return withRedis(values.redis, async (redis) => {
      const removed = await new QueueAdmin(redis).schedules.remove(queue, name);
      print(
        values.json
          ? JSON.stringify({ queue, name, removed })
          : removed
            ? `removed schedule ${name}`
            : `no schedule ${name} on ${queue}`,
      );
      return removed ? 0 : 1;
    });
  }
  throw new UsageError(usage);
}

const when = (ms: number | null) => (ms === null ? "none" : new Date(ms).toISOString());

function assertQueueNameForUsage(queue: string): void {
  try {
    assertQueueName(queue);
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
}

const redisUrl = (flag?: string) => flag ?? process.env.REDIS_URL ?? "redis://127.0.0.1:6379";

async function events(argv: string[]): Promise<void> {
  const { values, positionals } = parse(argv, {
    follow: { type: "boolean", short: "f" },
    limit: { type: "string" },
  });
  const [queue] = positionals;
  if (!queue) throw new UsageError("events needs a queue");
  const show = (e: QueueEvent) => {
    if (values.json) return print(JSON.stringify({ eventId: e.eventId, ...e.fields }));
    const { type, id, queue: _q, at: _at, ...rest } = e.fields;
    const detail = Object.entries(rest)
      .map(([k, v]) => `${k}=${v.length > 80 ? `${v.slice(0, 77)}...` : v}`)
      .join(" ");
    print(`${new Date(e.at).toISOString()} ${type?.padEnd(10)} ${id} ${detail}`);
  };
  await withRedis(values.redis, async (redis) => {
    const recent = await new QueueEvents(redis).recent(queue, positiveInt(values.limit, "limit") ?? 20);
    recent.forEach(show);
    if (!values.follow) return;
    const blocking = connectRedis(redisUrl(values.redis), { blocking: true, name: "conveyor-events" });
    const stop = new AbortController();
    process.once("SIGINT", () => stop.abort());
    process.once("SIGTERM", () => stop.abort());
    try {
      for await (const e of new QueueEvents(redis).follow(blocking, queue, {
        from: recent.at(-1)?.eventId ?? "$",
        signal: stop.signal,
      }))
        show(e);
    } finally {
      blocking.disconnect();
    }
  });
}

async function api(argv: string[]): Promise<number> {
  const { values } = parse(argv, {
    port: { type: "string" },
    host: { type: "string" },
    "max-body": { type: "string" },
    "read-only": { type: "boolean" },
    queues: { type: "string" },
    database: { type: "string" },
    kubernetes: { type: "string" },
    dashboard: { type: "string" },
    "insecure-no-auth": { type: "boolean" },
  });
  const port = positiveInt(values.port ?? process.env.CONVEYOR_API_PORT ?? "8080", "port")!;
  const flag = (v: boolean | undefined, env: string) => v ?? /^(1|true|yes)$/i.test(process.env[env] ?? "");
  const readOnly = flag(values["read-only"], "CONVEYOR_API_READ_ONLY");
  const queues = (values.queues ?? process.env.CONVEYOR_API_QUEUES ?? "")
    .split(",")
    .map((q) => q.trim())
    .filter(Boolean);
  const kubernetes = values.kubernetes ?? process.env.CONVEYOR_API_KUBERNETES ?? "auto";
  if (kubernetes !== "auto" && kubernetes !== "off") throw new UsageError("--kubernetes: auto or off");
  const dashboard = values.dashboard ?? process.env.CONVEYOR_API_DASHBOARD ?? "on";
  if (dashboard !== "on" && dashboard !== "off") throw new UsageError("--dashboard: on or off");
  const { startJobApi, InsecureConfigurationError } = await import("../api/server.ts");
  const { createLogger } = await import("../lib/logger.ts");
  const log = createLogger(process.env.LOG_LEVEL ?? "info", { component: "job-api" });
  const tracing = await startTracing({
    serviceName: "conveyor-api",
    defaultSampler: JOB_SAMPLER,
    warn: (m) => log.warn(m),
  });
  const url = redisUrl(values.redis);
  const redis = connectRedis(url, {
    name: "conveyor-api",
    onError: (err) => log.warn({ err: err.message }, "Redis connection problem"),
  });
  const databaseUrl = values.database ?? process.env.DATABASE_URL;
  let database;
  if (databaseUrl) {
    const { createPool, migrate } = await import("../records/index.ts");
    database = createPool(databaseUrl, { applicationName: "conveyor-api", queryTimeoutMs: 10_000 });
    // The read indexes are a migration: applied here too, so history works before any worker ran.
    await migrate(database).catch((err: Error) =>
      log.warn({ err: err.message }, "job records: migrations not applied (read-only database user?)"),
    );
  }
  let pools = null;
  const kubeEnvironment = await importOperatorPart<typeof import("../operator/kubeEnvironment.ts")>(
    "../operator/kubeEnvironment.ts",
  ).catch(() => null);
  if (kubernetes === "auto" && kubeEnvironment?.kubernetesConfigured()) {
    const { PoolReader } = await import("../operator/poolReader.ts");
    pools = PoolReader.fromEnvironment(new QueueAdmin(redis));
  }
  let server;
  try {
    server = await startJobApi({
      redis,
      port,
      host: values.host,
      token: process.env.CONVEYOR_API_TOKEN || undefined,
      maxBodyBytes: positiveInt(values["max-body"], "max-body"),
      readOnly,
      queues,
      database,
      pools,
      dashboardDir: dashboard === "off" ? null : undefined,
      insecureNoAuth: flag(values["insecure-no-auth"], "CONVEYOR_API_INSECURE_NO_AUTH"),
      log,
    });
  } catch (err) {
    redis.disconnect();
    await database?.end();
    if (err instanceof InsecureConfigurationError) throw new UsageError(err.message);
    throw err;
  }
  log.info(
    {
      port,
      auth: process.env.CONVEYOR_API_TOKEN ? "bearer" : "none",
      readOnly,
      queues: queues.length > 0 ? queues : "all",
      history: Boolean(database),
      pools: server.context.pools !== null,
    },
    "job API listening",
  );
  await new Promise<void>((resolve) => {
    const stop = () => {
      server.close(() => resolve());
      server.closeAllConnections(); // SSE streams never end by themselves
    };
    process.once("SIGTERM", stop);
    process.once("SIGINT", stop);
  });
  redis.disconnect();
  await tracing?.shutdown();
  return 0;
}

/** `conveyor scripts dump <dir>` / `show <name>`: the resolved script text clients in other languages load. */
function scripts(argv: string[]): void {
  const { positionals } = parse(argv, {});
  const [action, target] = positionals;
  if (action === "dump" && target && positionals.length === 2) {
    for (const path of dumpScripts(target)) print(path);
    return;
  }
  if (action === "show" && target && positionals.length === 2) {
    if (!(SCRIPT_NAMES as readonly string[]).includes(target))
      throw new UsageError(`unknown script ${JSON.stringify(target)}; one of: ${SCRIPT_NAMES.join(", ")}`);
    process.stdout.write(scriptSource(target as ScriptName));
    return;
  }
  throw new UsageError("scripts: expected `dump <dir>` or `show <name>`");
}

/** The worker image leaves the operator out (Dockerfile): a clear message there, not a stack trace. */
async function importOperatorPart<T>(specifier: string): Promise<T> {
  try {
    return (await import(specifier)) as T;
  } catch (err) {
    if ((err as { code?: string }).code === "ERR_MODULE_NOT_FOUND")
      throw new UsageError("the operator is not part of this build");
    throw err;
  }
}

export async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  try {
    if (command && (rest.includes("--help") || rest.includes("-h"))) {
      if (command === "worker") print((await import("../worker/config.ts")).WORKER_USAGE);
      else if (command === "operator")
        print(
          (await importOperatorPart<typeof import("../operator/config.ts")>("../operator/config.ts"))
            .OPERATOR_USAGE,
        );
      else if (COMMANDS[command]) print(commandUsage(command));
      else {
        process.stderr.write(`conveyor: unknown command ${JSON.stringify(command)}\n\n${USAGE}\n`);
        return 2;
      }
      return 0;
    }
    switch (command) {
      case "enqueue":
        await enqueue(rest);
        return 0;
      case "stats":
        await stats(rest);
        return 0;
      case "job":
        await job(rest);
        return Number(process.exitCode ?? 0);
      case "dlq":
        await dlq(rest);
        return 0;
      case "cancel":
        return await cancel(rest);
      case "promote":
        return await promote(rest);
      case "delete":
        return await deleteJobs(rest);
      case "pause":
      case "resume":
        await pauseOrResume(rest, command === "pause");
        return 0;
      case "limit":
        await limit(rest);
        return 0;
      case "schedule":
        return await schedule(rest);
      case "events":
        await events(rest);
        return 0;
      case "api":
        return await api(rest);
      case "scripts":
        scripts(rest);
        return 0;
      case "worker":
        return await (await import("../worker/main.ts")).runWorker(rest);
      case "operator": {
        const mod = await importOperatorPart<typeof import("../operator/main.ts")>("../operator/main.ts");
        return await mod.runOperator(rest);
      }
      case "--version":
      case "-V":
        print(packageVersion());
        return 0;
      case undefined:
      case "help":
      case "--help":
      case "-h":
        print(USAGE);
        return command === undefined ? 2 : 0;
      default:
        throw new UsageError(`unknown command ${JSON.stringify(command)}`);
    }
  } catch (err) {
    if (err instanceof UsageError) {
      process.stderr.write(`conveyor: ${err.message}\n\n${USAGE}\n`);
      return 2;
    }
    process.stderr.write(`conveyor: ${(err as Error).message}\n`);
    return 1;
  }
}

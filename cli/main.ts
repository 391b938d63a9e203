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
  dumpScripts,
  scriptSource,
  SCRIPT_NAMES,
  type ScriptName,
  type JobToEnqueue,
  type QueueEvent,
  type RedisClient,
} from "../queue/index.ts";

const USAGE = `usage: conveyor <command> [options]

  enqueue <queue> '<json>' [--id ID] [--key KEY] [--priority N] [--delay 10s] [--attempts N] [--timeout 30s]
  enqueue <queue> --file jobs.ndjson      one job per line (JSON data, or {"data":…,"id":…,"priority":…})
  stats <queue> [--json]                  ready, delayed, inflight, completed, dead
  job <id> [--queue Q] [--json]           state, attempts, result or last error, progress, log lines
  dlq list|retry|purge <queue> [--json]   dead letters
  events <queue> [--follow] [--json]      job transitions in order (enqueued, started, progress, completed…)
  scripts dump <dir> | show <name>        the published Lua scripts, includes resolved (for other languages)
  api [--port 8080] [--host 0.0.0.0]      the job API over HTTP (bearer token from CONVEYOR_API_TOKEN)
  worker [options]                        run the generic worker (conveyor worker --help)
  operator [options]                      run the WorkerPool operator

Redis: --redis URL or REDIS_URL (default redis://127.0.0.1:6379); password via REDIS_PASSWORD.`;

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
  try {
    return parseArgs({
      args: argv,
      options: { ...COMMON, ...options },
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
  await withRedis(values.redis, async (redis) => {
    const producer = new Producer(redis);
    if (values.file) {
      const jobs: JobToEnqueue[] = readFileSync(values.file, "utf8")
        .split("\n")
        .map((line, i) => [line.trim(), i + 1] as const)
        .filter(([line]) => line !== "")
        .map(([line, n]) => {
          const v = parseJson(line, `${values.file}:${n}`);
          const isEnvelope = typeof v === "object" && v !== null && !Array.isArray(v) && "data" in v;
          return isEnvelope ? { ...opts, ...(v as JobToEnqueue) } : { ...opts, data: v };
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
    const c = await new QueueAdmin(redis).counts(queue);
    const view = {
      ready: c.ready,
      delayed: c.delayed,
      inflight: c.inflight,
      completed: c.completed,
      dead: c.dead,
    };
    if (values.json) return print(JSON.stringify(view));
    for (const [k, v] of Object.entries(view)) print(`${k.padEnd(10)} ${v}`);
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
  });
  const port = positiveInt(values.port ?? process.env.CONVEYOR_API_PORT ?? "8080", "port")!;
  const { startJobApi } = await import("../api/server.ts");
  const { createLogger } = await import("../lib/logger.ts");
  const log = createLogger(process.env.LOG_LEVEL ?? "info", { component: "job-api" });
  const url = redisUrl(values.redis);
  const redis = connectRedis(url, {
    name: "conveyor-api",
    onError: (err) => log.warn({ err: err.message }, "Redis connection problem"),
  });
  const server = await startJobApi({
    redis,
    port,
    host: values.host,
    token: process.env.CONVEYOR_API_TOKEN || undefined,
    maxBodyBytes: positiveInt(values["max-body"], "max-body"),
    log,
  });
  log.info({ port, auth: process.env.CONVEYOR_API_TOKEN ? "bearer" : "none" }, "job API listening");
  await new Promise<void>((resolve) => {
    const stop = () => server.close(() => resolve());
    process.once("SIGTERM", stop);
    process.once("SIGINT", stop);
  });
  redis.disconnect();
  return 0;
}

/** `conveyor scripts dump <dir>` / `show <name>`: the resolved script text clients in other languages load. */
function scripts(argv: string[]): void {
  const { positionals, values } = parse(argv, {});
  const [action, target] = positionals;
  if (values.help) {
    print("usage: conveyor scripts dump <dir> | show <name>");
    return;
  }
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

export async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  try {
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
      case "events":
        await events(rest);
        return 0;
      case "api":
        return await api(rest);
      case "scripts":
        scripts(rest);
        return 0;
      case "worker": {
        if (rest.includes("--help") || rest.includes("-h")) {
          print((await import("../worker/config.ts")).WORKER_USAGE);
          return 0;
        }
        return await (await import("../worker/main.ts")).runWorker(rest);
      }
      case "operator": {
        const mod = (await import("../operator/main.ts" as string).catch(() => null)) as {
          runOperator?: (argv: string[]) => Promise<number>;
        } | null;
        if (!mod?.runOperator) throw new UsageError("the operator is not part of this build");
        return await mod.runOperator(rest);
      }
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

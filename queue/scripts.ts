// Loads each Lua script (one file per script) with the helpers it names resolved in. On Redis 7
// the scripts run as one Function library, loaded once per server (FUNCTION LOAD) and called
// with FCALL, so the helpers are defined once per server instead of once per call; on Redis 6,
// on a Cluster, or where FUNCTION/FCALL is refused (ACL, managed Redis) they run by SHA with
// ioredis' defineCommand, which falls back to EVAL after a Redis restart or on a new node.
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Cluster, Redis } from "ioredis";
import { scriptError } from "./scriptReplies.ts";

export type RedisClient = Redis | Cluster;

export const SCRIPT_NAMES = [
  "enqueue_jobs",
  "enqueue_flow",
  "claim_jobs",
  "renew_leases",
  "complete_job",
  "advance_job",
  "settle_jobs",
  "fail_job",
  "release_job",
  "sweep_leases",
  "reclaim_finished",
  "retry_dead",
  "purge_dead",
  "report_progress",
  "append_log",
  "fan_out",
  "cancel_job",
  "cancel_flow",
  "flow_repair",
  "promote_job",
  "delete_jobs",
  "schedule_tick",
  "schedule_remove",
  "backlog_counts",
  "poll_queues",
  "group_control",
  "group_admission",
  "resource_set",
  "resource_remove",
  "resource_usage",
  "records_enable",
  "job_states",
  "token_rate",
  "layout_finalize",
] as const;
export type ScriptName = (typeof SCRIPT_NAMES)[number];

const SCRIPTS_DIR = new URL("./scripts/", import.meta.url);

/** `--- @include "path"` (BullMQ's form): a helper file, relative to the including file, `.lua` implied. */
const INCLUDE = /^--- @include "([^"]+)"[ \t]*$/;

/**
 * A script's text with its includes resolved: each include is replaced, depth first, by the
 * helper's own resolved text the first time any file of the script names it, and dropped after
 * that — so every helper appears once, before its first use, in an order that depends only on
 * the files (other-language clients ship this text; a test keeps it stable).
 */
export function resolveIncludes(source: string, base: URL = SCRIPTS_DIR): string {
  const seen = new Set<string>();
  const resolve = (text: string, from: URL, chain: string[]): string =>
    text
      .split("\n")
      .flatMap((line) => {
        const m = INCLUDE.exec(line);
        if (!m) return [line];
        const target = new URL(`${m[1]}.lua`, from);
        if (chain.includes(target.href))
          throw new Error(`Lua include cycle: ${[...chain, target.href].join(" → ")}`);
        if (seen.has(target.href)) return [];
        seen.add(target.href);
        const helper = readFileSync(target, "utf8").replace(/\n+$/, "");
        return [resolve(helper, target, [...chain, target.href])];
      })
      .join("\n");
  return resolve(source, base, []);
}

const resolved = new Map<ScriptName, string>();

/** The published source of a script, includes resolved — what other-language clients run. */
export function scriptSource(name: ScriptName): string {
  let text = resolved.get(name);
  if (text === undefined) {
    const file = new URL(`${name}.lua`, SCRIPTS_DIR);
    text = resolveIncludes(readFileSync(file, "utf8"), file);
    resolved.set(name, text);
  }
  return text;
}

/** Write every script's resolved text to `dir` as `<name>.lua` (npm run build, `conveyor scripts dump`). */
export function dumpScripts(dir: string): string[] {
  mkdirSync(dir, { recursive: true });
  const paths = SCRIPT_NAMES.map((name) => {
    const path = join(dir, `${name}.lua`);
    writeFileSync(path, scriptSource(name));
    return path;
  });
  const libraryPath = join(dir, LIBRARY_FILE);
  writeFileSync(libraryPath, functionLibrary().code);
  return [...paths, libraryPath];
}

const commandName = (name: ScriptName) => `cvy_${name}`;
const installed = new WeakSet<object>();

function install(redis: RedisClient): void {
  if (installed.has(redis)) return;
  for (const name of SCRIPT_NAMES) redis.defineCommand(commandName(name), { lua: scriptSource(name) });
  installed.add(redis);
}

export type ScriptArg = string | number;

/** Run a Conveyor script; all `keys` must share one hash tag. */
export async function runScript<T>(
  redis: RedisClient,
  name: ScriptName,
  keys: string[],
  args: ScriptArg[],
): Promise<T> {
  if (scriptMode(redis) !== "scripts") {
    const reply = await functionCall<T>(redis, name, keys, args);
    if (reply !== FELL_BACK) return reply;
  }
  install(redis);
  const command = (redis as unknown as Record<string, (...a: ScriptArg[]) => Promise<T>>)[commandName(name)]!;
  return command.call(redis, keys.length, ...keys, ...args).catch((err: unknown) => {
    throw scriptError(err);
  });
}

/**
 * Ready `redis` for script calls whose timing matters (a worker's first claim): the scripts
 * resolved in this process — the library's build reads and hashes every script, tens of ms on a
 * busy machine — and the library loaded on the server. A refusal or an outage is left to the first
 * call, which decides how this client runs the scripts as it always does.
 */
export async function prepareScripts(redis: RedisClient): Promise<void> {
  if (scriptMode(redis) === "scripts") return install(redis);
  let lib: FunctionLibrary;
  try {
    lib = functionLibrary();
  } catch {
    return;
  }
  const listed: unknown = await (redis as Redis).function("LIST", "LIBRARYNAME", lib.name).catch(() => null);
  if (Array.isArray(listed) && listed.length === 0) await loadLibrary(redis);
}

// ---- Redis Functions ----

/** Bumped when the library's wrapping of the scripts changes (part of its version). */
const LIBRARY_FORMAT = 1;

export interface FunctionLibrary {
  /** `conveyor_<version>`: the version is a hash of every resolved script, so a changed script is a new library. */
  name: string;
  /** The FUNCTION LOAD text. */
  code: string;
  /** The function that runs `script`. */
  functionName(script: ScriptName): string;
}

let library: FunctionLibrary | undefined;

/** The built library's file: `npm run build` and `conveyor scripts dump` write it beside the resolved scripts. */
export const LIBRARY_FILE = "library.lua";

/**
 * Every script as one Function library: the helpers all scripts include, each defined once, then
 * each script's body as a function `cvy_<version>_<script>(KEYS, ARGV)` — the same code, called
 * with the same keys and arguments as its EVALSHA form. Each version has its own names, so
 * during a rolling upgrade both versions' libraries are loaded side by side (nothing is replaced
 * under a running worker); an old library stays until `FUNCTION DELETE` (a few tens of KB).
 */
export function functionLibrary(): FunctionLibrary {
  library ??= functionLibraryIn(SCRIPTS_DIR);
  return library;
}

/**
 * The library of the scripts in `dir`: built from the helpers in a checkout (`includes/` present);
 * in a build, whose scripts are published resolved, read from the `library.lua` the build wrote.
 */
export function functionLibraryIn(dir: URL): FunctionLibrary {
  if (!existsSync(new URL("includes/", dir))) {
    const code = readFileSync(new URL(LIBRARY_FILE, dir), "utf8");
    const name = /^#!lua name=(conveyor_([0-9a-f]+))\n/.exec(code);
    if (!name) throw new Error(`${fileURLToPath(new URL(LIBRARY_FILE, dir))} is not a Conveyor library`);
    return libraryOf(name[2]!, code);
  }
  const version = createHash("sha1")
    .update(`${LIBRARY_FORMAT}\0${SCRIPT_NAMES.map(scriptSource).join("\0")}`)
    .digest("hex")
    .slice(0, 12);
  const named = libraryOf(version, "");
  const includes: string[] = [];
  const bodies: string[] = [];
  for (const script of SCRIPT_NAMES) {
    const lines = readFileSync(new URL(`${script}.lua`, dir), "utf8")
      .replace(/\n+$/, "")
      .split("\n");
    includes.push(...lines.filter((l) => INCLUDE.test(l)));
    const body = lines.filter((l) => !INCLUDE.test(l)).join("\n");
    // (the per-call state record.lua keeps is reset first: a library's locals live between calls)
    bodies.push(
      `redis.register_function('${named.functionName(script)}', function(KEYS, ARGV)\nresetCallState()\n${body}\nend)`,
    );
  }
  const helpers = resolveIncludes(includes.join("\n"), dir);
  if (!/^local function resetCallState\(/m.test(helpers))
    throw new Error("the library has no resetCallState helper");
  return { ...named, code: `#!lua name=${named.name}\n${helpers}\n${bodies.join("\n")}\n` };
}

/** The names of library `version` (functionLibraryIn parses `name` back out of a built library.lua). */
function libraryOf(version: string, code: string): FunctionLibrary {
  return { name: `conveyor_${version}`, code, functionName: (script) => `cvy_${version}_${script}` };
}

export type ScriptMode = "functions" | "scripts";

/** Per client: functions once FCALL worked on it, scripts once FCALL or FUNCTION LOAD was refused. */
const modes = new WeakMap<object, ScriptMode>();
const loading = new WeakMap<object, Promise<boolean>>();
let fallbackLogged = false;

/** How `redis` runs the scripts: undefined until its first call decides (or forceScriptMode). */
export function scriptMode(redis: RedisClient): ScriptMode | undefined {
  if (redis.isCluster) return "scripts";
  return modes.get(redis);
}

/** Run `redis`'s scripts by EVALSHA from now on (tests; a deployment that wants the Redis 6 path). */
export function forceScriptMode(redis: RedisClient, mode: ScriptMode): void {
  modes.set(redis, mode);
}

const FELL_BACK = Symbol("fell back to EVALSHA");

function fallBack(redis: RedisClient, why: string): typeof FELL_BACK {
  modes.set(redis, "scripts");
  if (!fallbackLogged) {
    fallbackLogged = true;
    process.emitWarning(`Redis Functions unavailable (${why}); running the Lua scripts with EVALSHA`, {
      code: "CONVEYOR_SCRIPTS_FALLBACK",
    });
  }
  return FELL_BACK;
}

/** FCALL refused as a command: Redis 6 (unknown command), an ACL, a managed Redis that renames or blocks it. */
const REFUSED = /unknown command .?fcall|NOPERM.*\bfcall\b/i;

async function functionCall<T>(
  redis: RedisClient,
  name: ScriptName,
  keys: string[],
  args: ScriptArg[],
): Promise<T | typeof FELL_BACK> {
  let lib: FunctionLibrary;
  try {
    lib = functionLibrary();
  } catch (err) {
    return fallBack(redis, err instanceof Error ? err.message : String(err));
  }
  for (let attempt = 0; ; attempt++) {
    try {
      const reply = (await redis.fcall(lib.functionName(name), keys.length, ...keys, ...args)) as T;
      if (!modes.has(redis)) modes.set(redis, "functions");
      return reply;
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      // (after a restart without persistence, or FUNCTION FLUSH: load again, as EVALSHA's NOSCRIPT)
      if (/Function not found/i.test(message) && attempt === 0) {
        if (!(await loadLibrary(redis))) return FELL_BACK;
        continue;
      }
      if (REFUSED.test(message)) return fallBack(redis, message);
      throw scriptError(err);
    }
  }
}

/** FUNCTION LOAD the library on `redis`'s server (once per client at a time); false when refused. */
function loadLibrary(redis: RedisClient): Promise<boolean> {
  let pending = loading.get(redis);
  if (!pending) {
    pending = (redis as Redis)
      .function("LOAD", functionLibrary().code)
      .then(
        () => true,
        (err: unknown) => {
          const message = err instanceof Error ? err.message : String(err);
          // (another client of this version loaded it first)
          if (/already exists/i.test(message)) return true;
          fallBack(redis, `FUNCTION LOAD: ${message}`);
          return false;
        },
      )
      .finally(() => loading.delete(redis));
    loading.set(redis, pending);
  }
  return pending;
}

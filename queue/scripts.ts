// Loads each Lua script (one file per script) with the helpers it names resolved in, and runs
// it by SHA with ioredis' defineCommand, which falls back to EVAL after a Redis restart or on a
// new cluster node.
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { ChainableCommander, Cluster, Redis } from "ioredis";
import { scriptError } from "./scriptReplies.ts";

export type RedisClient = Redis | Cluster;

export const SCRIPT_NAMES = [
  "enqueue_jobs",
  "claim_jobs",
  "renew_leases",
  "complete_job",
  "advance_job",
  "settle_jobs",
  "fail_job",
  "release_job",
  "sweep_leases",
  "retry_dead",
  "purge_dead",
  "report_progress",
  "append_log",
  "fan_out",
  "cancel_job",
  "promote_job",
  "delete_jobs",
  "schedule_tick",
  "schedule_remove",
  "backlog_counts",
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
  return SCRIPT_NAMES.map((name) => {
    const path = join(dir, `${name}.lua`);
    writeFileSync(path, scriptSource(name));
    return path;
  });
}

const commandName = (name: ScriptName) => `cvy_${name}`;
const installed = new WeakSet<object>();

function install(redis: RedisClient): void {
  if (installed.has(redis)) return;
  for (const name of SCRIPT_NAMES) redis.defineCommand(commandName(name), { lua: scriptSource(name) });
  installed.add(redis);
}

export type ScriptArg = string | number;

/** Queue a Conveyor script call on `pipeline` (created from `redis`); all `keys` must share one hash tag. */
export function pipelineScript(
  redis: RedisClient,
  pipeline: ChainableCommander,
  name: ScriptName,
  keys: string[],
  args: ScriptArg[],
): void {
  install(redis);
  const command = (pipeline as unknown as Record<string, (...a: ScriptArg[]) => unknown>)[commandName(name)];
  if (!command) throw new Error(`script ${name} is not defined on this pipeline (create it after install)`);
  command.call(pipeline, keys.length, ...keys, ...args);
}

/** Defines every script on `redis` (a pipeline created afterwards can call them). */
export function installScripts(redis: RedisClient): void {
  install(redis);
}

/** Run a Conveyor script; all `keys` must share one hash tag. */
export async function runScript<T>(
  redis: RedisClient,
  name: ScriptName,
  keys: string[],
  args: ScriptArg[],
): Promise<T> {
  install(redis);
  const command = (redis as unknown as Record<string, (...a: ScriptArg[]) => Promise<T>>)[commandName(name)]!;
  return command.call(redis, keys.length, ...keys, ...args).catch((err: unknown) => {
    throw scriptError(err);
  });
}

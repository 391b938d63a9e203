// Loads each Lua script (one file per script, the shared prelude prepended) and runs it by
// SHA with ioredis' defineCommand, which falls back to EVAL after a Redis restart or on a
// new cluster node.
import { readFileSync } from "node:fs";
import type { Cluster, Redis } from "ioredis";

export type RedisClient = Redis | Cluster;

/** Every published script, by file name (without .lua). */
export const SCRIPTS = [
  "enqueue_jobs",
  "claim_jobs",
  "renew_leases",
  "complete_job",
  "advance_job",
  "fail_job",
  "release_job",
  "sweep_leases",
  "retry_dead",
  "purge_dead",
  "report_progress",
  "append_log",
  "fan_out",
] as const;
export type ScriptName = (typeof SCRIPTS)[number];

const dir = new URL("./scripts/", import.meta.url);
const prelude = readFileSync(new URL("_prelude.lua", dir), "utf8");

/** The published source of a script, prelude included — what other-language producers run. */
export function scriptSource(name: ScriptName): string {
  return `${prelude}\n${readFileSync(new URL(`${name}.lua`, dir), "utf8")}`;
}

const commandName = (name: ScriptName) => `cvy_${name}`;
const installed = new WeakSet<object>();

function install(redis: RedisClient): void {
  if (installed.has(redis)) return;
  for (const name of SCRIPTS) redis.defineCommand(commandName(name), { lua: scriptSource(name) });
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
  install(redis);
  const command = (redis as unknown as Record<string, (...a: ScriptArg[]) => Promise<T>>)[commandName(name)]!;
  return command.call(redis, keys.length, ...keys, ...args);
}

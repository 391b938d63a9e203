// The throwaway Redis both systems share, and what it tells about itself: per-command call
// counts and time (INFO commandstats), CPU, memory and the command total.
import { Redis } from "ioredis";
import { RedisServer } from "../../test/support/redis.ts";

export { RedisServer };

/** One Redis for a whole benchmark run: no persistence, so disk never shows up in the numbers. */
export function startBenchRedis(): Promise<RedisServer> {
  return RedisServer.start({ args: ["--appendonly", "no", "--save", ""] });
}

export function client(url: string, name = "bench-driver"): Redis {
  const r = new Redis(url, { connectionName: name, maxRetriesPerRequest: null });
  r.on("error", () => {});
  return r;
}

export interface CommandStat {
  calls: number;
  usec: number;
}

export interface RedisSnapshot {
  /** Per command (lower case, e.g. `evalsha`, `zadd`), counting calls made from inside scripts too. */
  commands: Map<string, CommandStat>;
  /** Commands processed (Redis' own total). */
  totalCommands: number;
  /** Redis process CPU, user + system, in ms. */
  cpuMs: number;
  usedMemory: number;
  /** Redis' resident set (INFO memory used_memory_rss). */
  rssBytes: number;
  at: number;
}

function parseInfo(text: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const line of text.split("\r\n")) {
    const i = line.indexOf(":");
    if (i > 0 && !line.startsWith("#")) out.set(line.slice(0, i), line.slice(i + 1));
  }
  return out;
}

export async function snapshot(r: Redis): Promise<RedisSnapshot> {
  const [stats, cpu, memory, commandstats] = await Promise.all([
    r.info("stats"),
    r.info("cpu"),
    r.info("memory"),
    r.info("commandstats"),
  ]);
  const s = parseInfo(stats);
  const c = parseInfo(cpu);
  const m = parseInfo(memory);
  const commands = new Map<string, CommandStat>();
  for (const [key, value] of parseInfo(commandstats)) {
    const name = key.replace(/^cmdstat_/, "");
    const calls = Number(/calls=(\d+)/.exec(value)?.[1] ?? 0);
    const usec = Number(/usec=(\d+)/.exec(value)?.[1] ?? 0);
    commands.set(name, { calls, usec });
  }
  return {
    commands,
    totalCommands: Number(s.get("total_commands_processed") ?? 0),
    cpuMs: (Number(c.get("used_cpu_user") ?? 0) + Number(c.get("used_cpu_sys") ?? 0)) * 1000,
    usedMemory: Number(m.get("used_memory") ?? 0),
    rssBytes: Number(m.get("used_memory_rss") ?? 0),
    at: Date.now(),
  };
}

export interface SnapshotDelta {
  commands: Map<string, CommandStat>;
  totalCommands: number;
  cpuMs: number;
  usedMemory: number;
}

/**
 * What happened between two snapshots. `own` lists commands the measuring side issued itself
 * (pollers, the INFO calls of the snapshots) so they can be taken out of the counts.
 */
export function delta(
  before: RedisSnapshot,
  after: RedisSnapshot,
  own: Record<string, number> = {},
): SnapshotDelta {
  const commands = new Map<string, CommandStat>();
  for (const [name, a] of after.commands) {
    const b = before.commands.get(name) ?? { calls: 0, usec: 0 };
    const calls = a.calls - b.calls - (own[name] ?? 0);
    if (calls > 0) commands.set(name, { calls, usec: a.usec - b.usec });
  }
  const ownTotal = Object.values(own).reduce((x, y) => x + y, 0);
  return {
    commands,
    totalCommands: after.totalCommands - before.totalCommands - ownTotal,
    cpuMs: after.cpuMs - before.cpuMs,
    usedMemory: after.usedMemory - before.usedMemory,
  };
}

/** The INFO calls one snapshot makes (taken out of deltas). */
export const SNAPSHOT_COMMANDS = { info: 4 };

// The calls that run scripts, and the loop's own calls: not commands run inside a script.
const SCRIPT_CALLS = new Set([
  "fcall",
  "fcall_ro",
  "evalsha",
  "eval",
  "info",
  "function|load",
  "script|load",
]);

/**
 * Per job over a loop of `jobs`: Redis µs inside the script calls (FCALL/EVALSHA), the commands
 * those scripts ran, and those commands by name (INFO commandstats between two snapshots).
 */
export function scriptCostPerJob(
  d: SnapshotDelta,
  jobs: number,
): { usecPerJob: number; commandsPerJob: number; byCommand: Record<string, number> } {
  let usec = 0;
  let inner = 0;
  const byCommand: Record<string, number> = {};
  for (const [cmd, s] of d.commands) {
    if (cmd === "fcall" || cmd === "evalsha") usec += s.usec;
    else if (!SCRIPT_CALLS.has(cmd)) {
      inner += s.calls;
      byCommand[cmd] = Math.round((s.calls / jobs) * 100) / 100;
    }
  }
  return {
    usecPerJob: Math.round((usec / jobs) * 10) / 10,
    commandsPerJob: Math.round((inner / jobs) * 100) / 100,
    byCommand,
  };
}

export function perJob(d: SnapshotDelta, jobs: number): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [name, s] of [...d.commands].sort((a, b) => b[1].calls - a[1].calls)) out[name] = s.calls / jobs;
  return out;
}

export async function flush(r: Redis): Promise<void> {
  // Loaded scripts stay: each worker process starts with EVALSHA either way.
  await r.flushall();
}

// Small helpers shared by the benchmarks: statistics, progress on stderr, /proc readings and
// the machine description that goes next to every result.
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { cpus, loadavg, totalmem } from "node:os";
import { relative } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";

export { sleep };

export const REPO = new URL("../../", import.meta.url).pathname;

/** Wall-clock milliseconds with sub-millisecond resolution, comparable across processes on one machine. */
export function nowMs(): number {
  return performance.timeOrigin + performance.now();
}

/** Progress goes to stderr, so stdout stays machine-readable. */
export function progress(message: string): void {
  process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${message}\n`);
}

export interface Summary {
  median: number;
  min: number;
  max: number;
  n: number;
  values: number[];
}

export function summarize(values: number[]): Summary {
  const v = values.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (v.length === 0) return { median: NaN, min: NaN, max: NaN, n: 0, values: [] };
  const mid = Math.floor(v.length / 2);
  const median = v.length % 2 === 1 ? v[mid]! : (v[mid - 1]! + v[mid]!) / 2;
  return { median, min: v[0]!, max: v[v.length - 1]!, n: v.length, values };
}

/** Nearest-rank percentile of an unsorted sample. */
export function percentile(values: ArrayLike<number>, p: number): number {
  const v = Array.from(values).sort((a, b) => a - b);
  if (v.length === 0) return NaN;
  const rank = Math.min(v.length - 1, Math.max(0, Math.ceil((p / 100) * v.length) - 1));
  return v[rank]!;
}

export function round(x: number, digits = 0): number {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}

/** CPU time (user + system, ms) and memory of a process, from /proc. */
export interface ProcSample {
  cpuMs: number;
  rssKb: number;
  peakRssKb: number;
  /** CPU time of the main thread alone (the JavaScript event loop), ms. */
  mainThreadCpuMs: number;
}

const CLK_TCK = 100;

/** user + system CPU ms from a /proc/.../stat file. */
function statCpuMs(path: string): number {
  const stat = readFileSync(path, "utf8");
  // Fields after the command name (which may contain spaces) start after the last ')'.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLK_TCK;
}

export function procSample(pid: number): ProcSample {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const kb = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+)`, "m").exec(status)?.[1] ?? NaN);
  return {
    cpuMs: statCpuMs(`/proc/${pid}/stat`),
    rssKb: kb("VmRSS"),
    peakRssKb: kb("VmHWM"),
    mainThreadCpuMs: statCpuMs(`/proc/${pid}/task/${pid}/stat`),
  };
}

export function loadAverage(): string {
  return loadavg()
    .map((x) => x.toFixed(2))
    .join(" ");
}

export interface MachineInfo {
  cpu: string;
  cores: number;
  memoryGiB: number;
  kernel: string;
  node: string;
  redis: string;
  bullmq: string;
  ioredis: string;
  commit: string;
}

export function machineInfo(): MachineInfo {
  const run = (cmd: string, args: string[]) => {
    try {
      return execFileSync(cmd, args, {
        encoding: "utf8",
        cwd: REPO,
        stdio: ["ignore", "pipe", "ignore"],
      }).trim();
    } catch {
      return "unknown";
    }
  };
  const pkg = (name: string) => {
    try {
      return (
        JSON.parse(readFileSync(`${REPO}node_modules/${name}/package.json`, "utf8")) as { version: string }
      ).version;
    } catch {
      return "missing";
    }
  };
  return {
    cpu: cpus()[0]?.model ?? "unknown",
    cores: cpus().length,
    memoryGiB: round(totalmem() / 2 ** 30, 1),
    kernel: run("uname", ["-r"]),
    node: process.version,
    redis: /v=(\S+)/.exec(run("redis-server", ["--version"]))?.[1] ?? "unknown",
    bullmq: pkg("bullmq"),
    ioredis: pkg("ioredis"),
    // BENCH_COMMIT: set when running from an exported tree (git archive) that has no .git.
    commit: process.env.BENCH_COMMIT ?? run("git", ["rev-parse", "--short", "HEAD"]),
  };
}

/** `--name value` and `--flag` arguments. */
/** A flag the script does not take, or a stray argument: the message names it. */
export class FlagError extends Error {
  override name = "FlagError";
}

/**
 * `--name value`, `--name=value` and bare `--name` flags. A flag not in `known` is refused by name
 * (FlagError), never ignored; `--help` prints the script's opening comment (its usage) and exits 0.
 */
export function parseFlags(argv: string[], known: readonly string[]): Map<string, string> {
  const out = new Map<string, string>();
  const refuse = (problem: string) =>
    new FlagError(`${problem} (known: ${known.map((k) => `--${k}`).join(", ") || "none"}; --help for usage)`);
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === "--help" || a === "-h") {
      process.stdout.write(`${usageOf(process.argv[1])}\n`);
      process.exit(0);
    }
    if (!a.startsWith("--")) throw refuse(`unexpected argument ${JSON.stringify(a)}`);
    const [name, inline] = a.slice(2).split("=", 2) as [string, string | undefined];
    if (!known.includes(name)) throw refuse(`unknown flag --${name}`);
    if (inline !== undefined) out.set(name, inline);
    else if (argv[i + 1] !== undefined && !argv[i + 1]!.startsWith("--")) out.set(name, argv[++i]!);
    else out.set(name, "true");
  }
  return out;
}

/** parseFlags of this process' arguments; a FlagError is said on stderr, exit 2. */
export function cliFlags(known: readonly string[], argv = process.argv.slice(2)): Map<string, string> {
  try {
    return parseFlags(argv, known);
  } catch (err) {
    if (!(err instanceof FlagError)) throw err;
    const script = process.argv[1] ? relative(REPO, process.argv[1]) : "bench";
    process.stderr.write(`${script}: ${err.message}\n`);
    process.exit(2);
  }
}

/** A script's opening `//` comment, without the slashes: what it measures and its flags. */
function usageOf(file: string | undefined): string {
  if (!file) return "";
  const lines: string[] = [];
  for (const line of readFileSync(file, "utf8").split("\n")) {
    if (!line.startsWith("//")) break;
    lines.push(line.replace(/^\/\/ ?/, ""));
  }
  return lines.join("\n");
}

export function intFlag(flags: Map<string, string>, name: string, def: number): number {
  const v = flags.get(name);
  if (v === undefined) return def;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1)
    throw new Error(`--${name}: expected a positive whole number, got ${JSON.stringify(v)}`);
  return n;
}

export function listFlag(flags: Map<string, string>, name: string, def: number[]): number[] {
  const v = flags.get(name);
  if (v === undefined) return def;
  return v.split(",").map((x) => {
    const n = Number(x);
    if (!Number.isInteger(n) || n < 1)
      throw new Error(`--${name}: expected whole numbers separated by commas, got ${JSON.stringify(v)}`);
    return n;
  });
}

/** Runs a bench's main as a script: exit 0 when it resolves, else 1 with the error's stack. */
export function runMain(name: string, main: () => Promise<unknown>): void {
  main().then(
    () => process.exit(0),
    (err: Error) => {
      process.stderr.write(`${name} failed: ${err.stack ?? err.message}\n`);
      process.exit(1);
    },
  );
}

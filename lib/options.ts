// Flags with environment fallbacks, shared by `conveyor worker` and `conveyor operator`: every
// option is a `--flag` that also reads an environment variable, and every bad value stops the
// process at start with a message naming both. Boolean options work bare (`--leader-elect`) or
// with a value (`--leader-elect=false`, `--leader-elect false`); durations take 250ms/30s/5m/1h.
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { parseDuration } from "./duration.ts";

export const LOG_LEVELS = ["trace", "debug", "info", "warn", "error", "fatal", "silent"] as const;

export type OptionSources<K extends string> = Record<K, string>;

export class OptionError extends Error {
  override name = "OptionError";
}

export interface Options<K extends string> {
  /** The flag's value, else its variable's; empty counts as unset. */
  raw(opt: K): string | undefined;
  /** `--flag / VARIABLE`, for messages. */
  name(opt: K): string;
  required(opt: K): string;
  /** Parse with `parse`; its error becomes an OptionError naming the option. */
  guard<T>(opt: K, parse: (v: string) => T): T | undefined;
  int(opt: K, def: number, min: number, max: number): number;
  bool(opt: K, def: boolean): boolean;
  /** Milliseconds, within [minMs, maxMs] when given. */
  duration(opt: K, defMs: number, minMs?: number, maxMs?: number): number;
  /** A duration in whole seconds (rounded up), for values Redis or the API keep in seconds. */
  seconds(opt: K, defSeconds: number, minSeconds?: number, maxSeconds?: number): number;
  list(opt: K): string[];
  /** A path that must be readable. */
  file(opt: K): string | undefined;
  logLevel(opt: K, def?: string): string;
}

export function readOptions<K extends string>(
  argv: string[],
  env: NodeJS.ProcessEnv,
  sources: OptionSources<K>,
  usage: string,
  booleans: readonly NoInfer<K>[] = [],
): Options<K> {
  let values: Partial<Record<K, string>>;
  try {
    const options = Object.fromEntries(Object.keys(sources).map((k) => [k, { type: "string" as const }]));
    values = parseArgs({ args: bareBooleans(argv, booleans), options, strict: true, allowPositionals: false })
      .values as Partial<Record<K, string>>;
  } catch (err) {
    throw new OptionError(`${(err as Error).message}\n${usage}`);
  }
  const raw = (opt: K): string | undefined => {
    const v = values[opt] ?? env[sources[opt]];
    return v === undefined || v === "" ? undefined : v;
  };
  const name = (opt: K) => `--${opt} / ${sources[opt]}`;
  const guard = <T>(opt: K, parse: (v: string) => T): T | undefined => {
    const v = raw(opt);
    if (v === undefined) return undefined;
    try {
      return parse(v);
    } catch (err) {
      throw new OptionError(`${name(opt)}: ${(err as Error).message}`);
    }
  };
  return {
    raw,
    name,
    guard,
    required(opt) {
      const v = raw(opt);
      if (v === undefined) throw new OptionError(`${name(opt)} is required\n${usage}`);
      return v;
    },
    int: (opt, def, min, max) =>
      guard(opt, (v) => {
        const n = Number(v);
        if (!/^\d+$/.test(v.trim()) || n < min || n > max)
          throw new Error(`expected a whole number ${min}..${max}, got ${JSON.stringify(v)}`);
        return n;
      }) ?? def,
    bool: (opt, def) =>
      guard(opt, (v) => {
        if (/^(true|1|yes|on)$/i.test(v)) return true;
        if (/^(false|0|no|off)$/i.test(v)) return false;
        throw new Error(`expected true or false, got ${JSON.stringify(v)}`);
      }) ?? def,
    duration: (opt, defMs, minMs = 0, maxMs = Number.MAX_SAFE_INTEGER) =>
      guard(opt, (v) => inRange(parseDuration(v, "duration"), minMs, maxMs, formatMs)) ?? defMs,
    seconds: (opt, defSeconds, minSeconds = 0, maxSeconds = Number.MAX_SAFE_INTEGER) =>
      guard(opt, (v) =>
        inRange(Math.ceil(parseDuration(v, "duration") / 1000), minSeconds, maxSeconds, (n) => `${n}s`),
      ) ?? defSeconds,
    list: (opt) =>
      (raw(opt) ?? "")
        .split(",")
        .map((s) => s.trim())
        .filter(Boolean),
    file: (opt) =>
      guard(opt, (v) => {
        try {
          readFileSync(v);
        } catch (err) {
          throw new Error(`cannot read ${v}: ${(err as Error).message}`);
        }
        return v;
      }),
    logLevel: (opt, def = "info") =>
      guard(opt, (v) => {
        if (!(LOG_LEVELS as readonly string[]).includes(v))
          throw new Error(`unknown level ${JSON.stringify(v)}`);
        return v;
      }) ?? def,
  };
}

const BOOL_WORD = /^(true|false|1|0|yes|no|on|off)$/i;

/** `--flag` of a boolean option with no value after it means `--flag=true`. */
function bareBooleans(argv: string[], booleans: readonly string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    const isBool = a.startsWith("--") && booleans.includes(a.slice(2));
    if (isBool && !BOOL_WORD.test(argv[i + 1] ?? "")) out.push(`${a}=true`);
    else out.push(a);
  }
  return out;
}

function inRange(n: number, min: number, max: number, show: (n: number) => string): number {
  if (n >= min && n <= max) return n;
  if (max === Number.MAX_SAFE_INTEGER) throw new Error(`expected at least ${show(min)}, got ${show(n)}`);
  throw new Error(`expected ${show(min)}..${show(max)}, got ${show(n)}`);
}

const formatMs = (ms: number) => (ms % 1000 === 0 ? `${ms / 1000}s` : `${ms}ms`);

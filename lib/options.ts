// The one parser for every flag and environment variable of every command. A command declares
// its settings in a table (flag, variable, kind, default, help); the same table gives its
// --help and docs/configuration.md. Every bad value stops the command at start with a message
// naming the flag and its variable. Booleans take true/false, 1/0, yes/no, on/off and nothing
// else (parseBoolean); durations take 250ms/30s/5m/1h.
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { DurationError, parseDuration } from "./duration.ts";

export const LOG_LEVELS = ["trace", "debug", "info", "warn", "error", "fatal", "silent"] as const;

export type SettingKind = "string" | "int" | "bool" | "duration" | "list" | "file" | "choice";

/**
 * One flag and its environment variable: everything the parser, --help and the docs know of
 * it. Its key in the table is the flag's name (without `--`).
 */
export interface Setting {
  /** A variable only, no flag (POD_NAME, a token that must not show in `ps`). */
  envOnly?: boolean;
  /** A one-letter alias without `-`. */
  short?: string;
  env?: string;
  /** The variable's former name: still read for one release, with a warning naming both. */
  deprecatedEnv?: string;
  /** The flag's former name, likewise. */
  deprecatedFlag?: string;
  kind: SettingKind;
  /** How the value is written in help (default by kind: N, D, a,b, FILE, VALUE; booleans none). */
  arg?: string;
  /**
   * The value when neither flag nor variable is given: a number (int), a boolean (bool), text
   * (string, choice; a duration as "30s"). Absent: no value, or one computed where it is used
   * (then `defaultHelp` says what it is).
   */
  default?: number | boolean | string;
  defaultHelp?: string;
  /** Bounds: numbers for int, durations as text ("100ms") for duration. */
  min?: number | string;
  max?: number | string;
  choices?: readonly string[];
  help: string;
}

export type Settings<K extends string = string> = Record<K, Setting>;

/** A variable's name is capitals, so a help text passed in its place does not compile. */
type VariableName = Uppercase<string>;
/** A setting's fields besides its variable, kind and help; each constructor adds its kind's own. */
type Fields = Omit<Setting, "env" | "kind" | "help" | "default" | "min" | "max" | "choices">;
const constructor =
  <Own extends object>(kind: SettingKind) =>
  (env: VariableName, fields: Fields & Own, help: string): Setting => ({ env, kind, ...fields, help });
// One constructor per kind, so a table entry takes 1–3 lines: int("CONVEYOR_PORT", { default: 9464 }, "…").
// Each checks its kind's default and bounds: numbers for int, duration text ("30s") for duration.
export const str = constructor<{ default?: string }>("string");
export const int = constructor<{ default?: number; min?: number; max?: number }>("int");
export const bool = constructor<{ default?: boolean }>("bool");
export const duration = constructor<{ default?: string; min?: string; max?: string }>("duration");
export const list = constructor<object>("list");
export const file = constructor<object>("file");
export const choice = constructor<{ choices: readonly string[]; default?: string }>("choice");

export class OptionError extends Error {
  override name = "OptionError";
}

const TRUE_WORDS = ["true", "1", "yes", "on"];
const FALSE_WORDS = ["false", "0", "no", "off"];

/** The one boolean parser: true/false, 1/0, yes/no, on/off (any case); anything else is an error naming `what`. */
export function parseBoolean(text: string, what: string): boolean {
  const v = text.trim().toLowerCase();
  if (TRUE_WORDS.includes(v)) return true;
  if (FALSE_WORDS.includes(v)) return false;
  throw new OptionError(
    `${what}: expected true or false (or 1/0, yes/no, on/off), got ${JSON.stringify(text)}`,
  );
}

export interface Options<K extends string> {
  /** Arguments that are not flags (only for commands that take them). */
  positionals: string[];
  /** The flag's value, else its variable's (else the former variable's); empty counts as unset. */
  raw(opt: K): string | undefined;
  /** `--flag / VARIABLE` (the variable the value came from), for messages. */
  name(opt: K): string;
  required(opt: K): string;
  /** Parse with `parse`; its error becomes an OptionError naming the option. */
  guard<T>(opt: K, parse: (v: string) => T): T | undefined;
  /** The text value, else the declared default. */
  str(opt: K): string | undefined;
  int(opt: K): number;
  /** An int with no declared default: undefined when unset. */
  maybeInt(opt: K): number | undefined;
  bool(opt: K): boolean;
  /** Milliseconds, within the declared bounds. */
  duration(opt: K): number;
  maybeDuration(opt: K): number | undefined;
  /** A duration in whole seconds (rounded up), for values Redis or the API keep in seconds. */
  seconds(opt: K): number;
  list(opt: K): string[];
  /** A path that must be readable. */
  file(opt: K): string | undefined;
  /** One of the declared choices. */
  choice(opt: K): string;
}

export interface ReadOptions {
  /** Appended to a parse error (an unknown flag, a missing value). */
  usage?: string;
  /** Whether the command takes arguments besides flags. */
  positionals?: boolean;
  /** Where deprecation warnings go (default: stderr). */
  warn?: (message: string) => void;
}

export function readOptions<K extends string>(
  argv: string[],
  env: NodeJS.ProcessEnv,
  settings: Settings<K>,
  opts: ReadOptions = {},
): Options<K> {
  const usage = opts.usage ? `\n${opts.usage}` : "";
  const warn = opts.warn ?? ((m: string) => process.stderr.write(`conveyor: warning: ${m}\n`));
  const flags = (Object.keys(settings) as K[]).filter((k) => !settings[k].envOnly);
  let values: Partial<Record<K, string>>;
  let positionals: string[];
  try {
    const options = Object.fromEntries(flags.map((k) => [k, { type: "string" as const }]));
    const parsed = parseArgs({
      args: normalize(argv, settings, opts.positionals ?? false, warn),
      options,
      strict: true,
      allowPositionals: opts.positionals ?? false,
    });
    values = parsed.values as Partial<Record<K, string>>;
    positionals = parsed.positionals;
  } catch (err) {
    if (err instanceof OptionError) throw err;
    throw new OptionError(`${(err as Error).message}${usage}`);
  }
  const warned = new Set<string>();
  const source = (opt: K): { value?: string; variable?: string } => {
    const s = settings[opt];
    const given = (v: string | undefined) => v !== undefined && v !== "";
    if (given(values[opt])) return { value: values[opt] };
    if (s.env && given(env[s.env])) return { value: env[s.env], variable: s.env };
    if (s.deprecatedEnv && given(env[s.deprecatedEnv])) {
      if (!warned.has(s.deprecatedEnv)) {
        warned.add(s.deprecatedEnv);
        warn(`${s.deprecatedEnv} is deprecated: use ${s.env} (the old name is read until the next release)`);
      }
      return { value: env[s.deprecatedEnv], variable: s.deprecatedEnv };
    }
    return { variable: s.env };
  };
  const raw = (opt: K) => source(opt).value;
  const name = (opt: K) => {
    const s = settings[opt];
    const variable = source(opt).variable ?? s.env;
    return [!s.envOnly && `--${opt}`, variable].filter(Boolean).join(" / ");
  };
  const guard = <T>(opt: K, parse: (v: string) => T): T | undefined => {
    const v = raw(opt);
    if (v === undefined) return undefined;
    try {
      return parse(v);
    } catch (err) {
      if (err instanceof OptionError) throw err;
      // parseDuration already names what it parsed ("invalid --delay …").
      if (err instanceof DurationError) throw new OptionError(err.message);
      throw new OptionError(`${name(opt)}: ${(err as Error).message}`);
    }
  };
  const declared = (opt: K, kind: SettingKind): Setting => {
    const s = settings[opt];
    if (s.kind !== kind) throw new Error(`setting ${opt} is a ${s.kind}, read as a ${kind}`);
    return s;
  };
  const ms = (text: Setting["default"], fallback: number) =>
    typeof text === "string" ? parseDuration(text) : typeof text === "number" ? text : fallback;
  const maybeInt = (opt: K) => {
    const s = declared(opt, "int");
    const min = Number(s.min ?? 0);
    const max = Number(s.max ?? Number.MAX_SAFE_INTEGER);
    const v = raw(opt);
    if (v === undefined) return undefined;
    const n = Number(v);
    if (/^\d+$/.test(v.trim()) && n >= min && n <= max) return n;
    // "--port expects a whole number 0..65535, got "x" (--port / CONVEYOR_API_PORT)"
    const range = max === Number.MAX_SAFE_INTEGER && min === 0 ? "" : ` ${min}..${max}`;
    const where = name(opt);
    const what = where.split(" / ")[0];
    throw new OptionError(
      `${what} expects a whole number${range}, got ${JSON.stringify(v)}${where === what ? "" : ` (${where})`}`,
    );
  };
  const maybeDuration = (opt: K) => {
    const s = declared(opt, "duration");
    return guard(opt, (v) =>
      inRange(parseDuration(v, name(opt)), ms(s.min, 0), ms(s.max, Number.MAX_SAFE_INTEGER), formatMs),
    );
  };
  return {
    positionals,
    raw,
    name,
    guard,
    required(opt) {
      const v = raw(opt);
      if (v === undefined) throw new OptionError(`${name(opt)} is required${usage}`);
      return v;
    },
    str: (opt) => raw(opt) ?? (settings[opt].default as string | undefined),
    int: (opt) => maybeInt(opt) ?? (declared(opt, "int").default as number),
    maybeInt,
    bool: (opt) => {
      const s = declared(opt, "bool");
      return guard(opt, (v) => parseBoolean(v, name(opt))) ?? (s.default as boolean | undefined) ?? false;
    },
    duration: (opt) => maybeDuration(opt) ?? ms(declared(opt, "duration").default, 0),
    maybeDuration,
    seconds: (opt) => Math.ceil((maybeDuration(opt) ?? ms(declared(opt, "duration").default, 0)) / 1000),
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
    choice: (opt) => {
      const s = declared(opt, "choice");
      return (
        guard(opt, (v) => {
          if (!s.choices!.includes(v))
            throw new Error(
              `expected ${s.choices!.length === 2 ? s.choices!.join(" or ") : `one of ${s.choices!.join(", ")}`}, got ${JSON.stringify(v)}`,
            );
          return v;
        }) ?? (s.default as string)
      );
    },
  };
}

/**
 * Before node's parseArgs (every option a string there): short aliases become long flags,
 * former flag names their new ones, and a boolean flag gets its value — `--flag` alone is
 * `--flag=true`, and a command without positionals also takes `--flag false`.
 */
function normalize<K extends string>(
  argv: string[],
  settings: Settings<K>,
  positionals: boolean,
  warn: (m: string) => void,
): string[] {
  const shorts = new Map<string, string>();
  const renamed = new Map<string, string>();
  for (const [flag, s] of Object.entries(settings) as [string, Setting][]) {
    if (s.short) shorts.set(`-${s.short}`, flag);
    if (s.deprecatedFlag) renamed.set(s.deprecatedFlag, flag);
  }
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    let a = argv[i]!;
    if (a === "--") {
      out.push(...argv.slice(i));
      break;
    }
    if (shorts.has(a)) a = `--${shorts.get(a)}`;
    const m = /^--([^=]+)(=.*)?$/s.exec(a);
    if (!m) {
      out.push(a);
      continue;
    }
    let flag = m[1]!;
    if (renamed.has(flag)) {
      warn(
        `--${flag} is deprecated: use --${renamed.get(flag)} (the old name is read until the next release)`,
      );
      flag = renamed.get(flag)!;
      a = `--${flag}${m[2] ?? ""}`;
    }
    const s = (settings as Record<string, Setting | undefined>)[flag];
    if (s?.kind !== "bool" || s.envOnly || m[2] !== undefined) {
      out.push(a);
      continue;
    }
    const next = argv[i + 1];
    if (!positionals && next !== undefined && isBooleanWord(next)) {
      out.push(`${a}=${next}`);
      i++;
    } else out.push(`${a}=true`);
  }
  return out;
}

const isBooleanWord = (v: string) => [...TRUE_WORDS, ...FALSE_WORDS].includes(v.toLowerCase());

function inRange(n: number, min: number, max: number, show: (n: number) => string): number {
  if (n >= min && n <= max) return n;
  if (max >= Number.MAX_SAFE_INTEGER) throw new Error(`expected at least ${show(min)}, got ${show(n)}`);
  throw new Error(`expected ${show(min)}..${show(max)}, got ${show(n)}`);
}

const formatMs = (ms: number) => (ms % 1000 === 0 ? `${ms / 1000}s` : `${ms}ms`);

const ARG: Record<SettingKind, string> = {
  string: "VALUE",
  int: "N",
  bool: "",
  duration: "D",
  list: "a,b",
  file: "FILE",
  choice: "VALUE",
};

/** How a setting is written on the command line: `--drain D`, `--json`; "" for a variable only. */
export function flagText(flag: string, s: Setting): string {
  if (s.envOnly) return "";
  const arg = s.arg ?? ARG[s.kind];
  return `--${flag}${s.short ? `, -${s.short}` : ""}${arg ? ` ${arg}` : ""}`;
}

/** `--flag ARG   VARIABLE   help (default …)`: one line per setting, for --help. */
export function settingsHelp(settings: Settings): string {
  const rows = Object.entries(settings).map(([flag, s]) => [flagText(flag, s), s.env ?? "", describe(s)]);
  const w0 = Math.max(...rows.map((r) => r[0]!.length));
  const w1 = Math.max(...rows.map((r) => r[1]!.length));
  return rows.map(([a, b, c]) => `  ${a!.padEnd(w0)}  ${b!.padEnd(w1)}  ${c}`.trimEnd()).join("\n");
}

/** The help text with its default: "job slots (default 1)". */
export function describe(s: Setting): string {
  const def = defaultText(s);
  const former = [s.deprecatedFlag && `--${s.deprecatedFlag}`, s.deprecatedEnv].filter(Boolean).join(", ");
  return `${s.help}${def === undefined ? "" : ` (default ${def})`}${former ? ` (formerly ${former})` : ""}`;
}

export function defaultText(s: Setting): string | undefined {
  if (s.defaultHelp !== undefined) return s.defaultHelp;
  if (s.default === undefined) return undefined;
  return String(s.default);
}

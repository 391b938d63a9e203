// What every `conveyor` command is made of: the positional arguments it takes, a settings table
// (lib/options.ts) and a run function. The table is the command's flags, their variables and
// help; `conveyor <cmd> --help` and docs/configuration.md are generated from it. Its name and
// synopsis are in commands/index.ts. Exit status: 0 success, 1 absent or refused, 2 usage error
// (UsageError, or an OptionError from the parser). Only cheap modules are imported here: Redis
// and the queue are loaded when a command uses them.
import { DURATION_HELP } from "../lib/duration.ts";
import { readOptions, settingsHelp, type Options, type Settings } from "../lib/options.ts";
import { JSON_SETTING, REDIS_URL_SETTING } from "../lib/settings.ts";
import { assertQueueName } from "../queue/keys.ts";
import type { QueueAdmin } from "../queue/admin.ts";
import type { RedisClient } from "../queue/scripts.ts";

const connection = () => import("../queue/connection.ts");
const admin = () => import("../queue/admin.ts");

export class UsageError extends Error {
  override name = "UsageError";
}

export interface Command {
  /**
   * The positional arguments of each form of the command, e.g. `["list|purge <queue>", "retry
   * <queue> [<id>…]"]`: a first word without <> is the action (`a|b`: either), `[…]` is optional,
   * `…` any number; [] none.
   * Arguments beyond them are refused (exit 2, naming them).
   */
  args: readonly string[];
  /** Its settings, for docs/configuration.md (worker and operator: their config module's). */
  settings(): Promise<Settings>;
  /** Its `--help`, given its synopsis (commands/index.ts). */
  help(synopsis: string): Promise<string>;
  run(argv: string[]): Promise<number>;
}

export const FOOTER = `conveyor --version prints the version. Redis: --redis URL or REDIS_URL (default redis://127.0.0.1:6379); password via REDIS_PASSWORD.
${DURATION_HELP} Exit status: 0 success, 1 absent or refused, 2 usage error; with --wait, 3 dead, 4 cancelled, 5 still open.`;

/** The flags every queue command takes. */
export const COMMON = { redis: REDIS_URL_SETTING, json: JSON_SETTING } as const satisfies Settings;

/** A command parsed by lib/options.ts from its table; `run` gets the parsed options. */
export function defineCommand<K extends string>(def: {
  name: string;
  /** See Command.args. */
  args: readonly string[];
  settings: Settings<K>;
  run(o: Options<K>): Promise<number | void>;
}): Command {
  return {
    args: def.args,
    settings: async () => def.settings,
    help: async (synopsis) =>
      `usage: conveyor ${def.name} [options]\n\n${synopsis}\n\n${settingsHelp(def.settings)}\n\n${FOOTER}`,
    async run(argv) {
      const o = readOptions(argv, process.env, def.settings, { positionals: def.args.length > 0 });
      checkPositionals(def.name, def.args, o.positionals);
      return (await def.run(o)) ?? 0;
    },
  };
}

/**
 * Refuses the positional arguments no form of the command takes: an unknown action, or any
 * beyond the last its form allows. Missing ones are left to the command, which says what it needs.
 */
function checkPositionals(name: string, forms: readonly string[], given: string[]): void {
  if (forms.length === 0) return; // the parser refused them already
  const shapes = forms.map((f) => f.split(" "));
  const actionsOf = (words: string[]) => (/^[a-z]/.test(words[0]!) ? words[0]!.split("|") : undefined);
  const matching = shapes.filter((words) => actionsOf(words)?.includes(given[0] ?? "") ?? true);
  const usage = `usage: conveyor ${name} ${forms.join(" | ")}`;
  if (matching.length === 0) {
    if (given[0] === undefined) return;
    throw new UsageError(`${name}: unknown action ${JSON.stringify(given[0])} (${usage})`);
  }
  const most = Math.max(
    ...matching.map((words) => (words.some((w) => w.includes("…")) ? Infinity : words.length)),
  );
  if (given.length > most) {
    const extra = given.slice(most);
    throw new UsageError(
      `${name}: unexpected argument${extra.length > 1 ? "s" : ""} ${extra.map((a) => JSON.stringify(a)).join(", ")} (${usage})`,
    );
  }
}

/** A command on one job, `<name> <id> [--queue Q] [--json]`: `run` gets the id, --queue and an admin. */
export function defineJobCommand(def: {
  name: string;
  run(job: {
    id: string;
    queue: string | undefined;
    admin: QueueAdmin;
    json: boolean;
    redis: RedisClient;
  }): Promise<number>;
}): Command {
  return defineCommand({
    name: def.name,
    args: ["<id>"],
    settings: {
      ...COMMON,
      queue: { kind: "string", arg: "Q", help: "the job's queue (default: looked up from the job)" },
    },
    async run(o) {
      const [id] = o.positionals;
      if (!id) throw new UsageError(`${def.name} <id> [--queue Q]`);
      const [queue, json] = [o.raw("queue"), o.bool("json")];
      const { QueueAdmin } = await admin();
      return withRedis(o.str("redis")!, (redis) =>
        def.run({ id, queue, admin: new QueueAdmin(redis), json, redis }),
      );
    },
  });
}

export const print = (line: string) => process.stdout.write(`${line}\n`);

export async function withRedis<T>(url: string, fn: (redis: RedisClient) => Promise<T>): Promise<T> {
  const { connectRedis, waitUntilReady } = await connection();
  const redis = connectRedis(url, { failFast: true, name: "conveyor-cli" });
  try {
    await waitUntilReady(redis, url);
    return await fn(redis);
  } finally {
    redis.disconnect();
  }
}

export function parseJson(text: string, where: string): unknown {
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new UsageError(`${where} is not valid JSON: ${(err as Error).message}`);
  }
}

/** JSON when it parses, else the text itself. */
export function safeJson(s: string): unknown {
  try {
    return JSON.parse(s);
  } catch {
    return s;
  }
}

export function assertQueueNameForUsage(queue: string): void {
  try {
    assertQueueName(queue);
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
}

export const when = (ms: number | null) => (ms === null ? "none" : new Date(ms).toISOString());

/** The worker image leaves the operator out (Dockerfile): a clear message there, not a stack trace. */
export async function importOperatorPart<T>(specifier: string): Promise<T> {
  try {
    return (await import(specifier)) as T;
  } catch (err) {
    if ((err as { code?: string }).code === "ERR_MODULE_NOT_FOUND")
      throw new UsageError("the operator is not part of this build");
    throw err;
  }
}

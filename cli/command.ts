// What every `conveyor` command is made of: a synopsis, a settings table (lib/options.ts) and a
// run function. The table is the command's flags, their variables and help; `conveyor <cmd>
// --help` and docs/configuration.md are generated from it. Exit status: 0 success, 1 absent or
// refused, 2 usage error (UsageError, or an OptionError from the parser).
import { DURATION_HELP } from "../lib/duration.ts";
import { readOptions, settingsHelp, type Options, type Settings } from "../lib/options.ts";
import { JSON_SETTING, REDIS_URL_SETTING } from "../lib/settings.ts";
import {
  assertQueueName,
  connectRedis,
  QueueAdmin,
  waitUntilReady,
  type RedisClient,
} from "../queue/index.ts";

export class UsageError extends Error {
  override name = "UsageError";
}

export interface Command {
  name: string;
  /** Its lines in `conveyor --help`, each starting "  <name> ". */
  synopsis: string;
  /** Its settings, for docs/configuration.md (worker and operator: their config module's). */
  settings(): Promise<Settings>;
  /** Its `--help`. */
  help(): Promise<string>;
  run(argv: string[]): Promise<number>;
}

export const FOOTER = `conveyor --version prints the version. Redis: --redis URL or REDIS_URL (default redis://127.0.0.1:6379); password via REDIS_PASSWORD.
${DURATION_HELP} Exit status: 0 success, 1 absent or refused, 2 usage error.`;

/** The flags every queue command takes. */
export const COMMON = { redis: REDIS_URL_SETTING, json: JSON_SETTING } as const satisfies Settings;

/** A command parsed by lib/options.ts from its table; `run` gets the parsed options. */
export function defineCommand<K extends string>(def: {
  name: string;
  synopsis: string;
  settings: Settings<K>;
  /** Whether it takes arguments besides flags (default true). */
  positionals?: boolean;
  run(o: Options<K>): Promise<number | void>;
}): Command {
  const help = () =>
    `usage: conveyor ${def.name} [options]\n\n${def.synopsis}\n\n${settingsHelp(def.settings)}\n\n${FOOTER}`;
  return {
    name: def.name,
    synopsis: def.synopsis,
    settings: async () => def.settings,
    help: async () => help(),
    async run(argv) {
      const o = readOptions(argv, process.env, def.settings, { positionals: def.positionals ?? true });
      return (await def.run(o)) ?? 0;
    },
  };
}

/** A command on one job, `<name> <id> [--queue Q] [--json]`: `run` gets the id, --queue and an admin. */
export function defineJobCommand(def: {
  name: string;
  synopsis: string;
  run(job: { id: string; queue: string | undefined; admin: QueueAdmin; json: boolean }): Promise<number>;
}): Command {
  return defineCommand({
    name: def.name,
    synopsis: def.synopsis,
    settings: {
      ...COMMON,
      queue: { kind: "string", arg: "Q", help: "the job's queue (default: looked up from the job)" },
    },
    async run(o) {
      const [id] = o.positionals;
      if (!id || o.positionals.length !== 1) throw new UsageError(`${def.name} <id> [--queue Q]`);
      const [queue, json] = [o.raw("queue"), o.bool("json")];
      return withRedis(o.str("redis")!, (redis) =>
        def.run({ id, queue, admin: new QueueAdmin(redis), json }),
      );
    },
  });
}

export const print = (line: string) => process.stdout.write(`${line}\n`);

export async function withRedis<T>(url: string, fn: (redis: RedisClient) => Promise<T>): Promise<T> {
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

// `conveyor resource`: a pipeline's resources — API keys with budgets per window (docs/budgets.md).
import { auditedCli, pipelineOfQueue } from "../audit.ts";
import {
  formatLimits,
  InvalidResourceError,
  listResources,
  parseLimits,
  removeResource,
  setResource,
  type ResourceKeySpec,
} from "../../queue/resources.ts";
import type { Settings } from "../../lib/options.ts";
import { COMMON, defineCommand, print, UsageError, withRedis, type Command } from "../command.ts";

const USAGE = `resource set <name> --key <id> --limit requests=60/m,tokens=200000/m [--key <id> --limit …] [--ceiling 0.9] --pipeline <pipeline-or-queue>
  resource list [--pipeline <pipeline-or-queue>] [--json]
  resource remove <name> --pipeline <pipeline-or-queue>`;

const SETTINGS = {
  ...COMMON,
  pipeline: {
    kind: "string",
    arg: "P",
    help: "the pipeline (or a queue of it) the resource belongs to: every stage of a pipeline shares its resources",
  },
  key: {
    kind: "string",
    arg: "ID",
    help: "resource set: a key id (never the secret); repeat --key <id> --limit … per key",
  },
  limit: {
    kind: "string",
    arg: "UNIT=N/W,…",
    help: "resource set: the limits of the --key before it, e.g. requests=60/m,tokens=200000/m (windows /s /m /h, /2s, /500ms)",
  },
  ceiling: {
    kind: "string",
    arg: "F",
    help: "resource set: admit jobs only up to this share of each limit (0 < F ≤ 1, default 0.9)",
  },
} as const satisfies Settings;

/** `--key <id> --limit <limits>` pairs, in order, and the other arguments. */
export function keyLimitPairs(argv: string[]): { keys: ResourceKeySpec[]; rest: string[] } {
  const keys: ResourceKeySpec[] = [];
  const rest: string[] = [];
  let pending: string | undefined;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    const m = /^--(key|limit)(?:=(.*))?$/.exec(arg);
    if (!m) {
      rest.push(arg);
      continue;
    }
    const value = m[2] ?? argv[++i];
    if (value === undefined || value === "") throw new UsageError(`--${m[1]} needs a value`);
    if (m[1] === "key") {
      if (pending !== undefined) throw new UsageError(`--key ${pending} has no --limit after it`);
      pending = value;
    } else {
      if (pending === undefined) throw new UsageError(`--limit ${value} must follow a --key <id>`);
      try {
        keys.push({ id: pending, limits: parseLimits(value, `--limit (key ${pending})`) });
      } catch (err) {
        if (err instanceof InvalidResourceError) throw new UsageError(err.message);
        throw err;
      }
      pending = undefined;
    }
  }
  if (pending !== undefined) throw new UsageError(`--key ${pending} has no --limit after it`);
  return { keys, rest };
}

const command = (keys: ResourceKeySpec[]): Command =>
  defineCommand({
    name: "resource",
    args: ["set|remove <name>", "list"],
    settings: SETTINGS,
    async run(o) {
      const [action, name] = o.positionals;
      if (!action) throw new UsageError(USAGE);
      const pipeline = o.raw("pipeline");
      const asJson = o.bool("json");
      const needPipeline = () => {
        if (pipeline === undefined)
          throw new UsageError(`resource ${action} needs --pipeline <pipeline-or-queue>`);
        return pipeline;
      };
      const refused = async <T>(fn: () => Promise<T>): Promise<T> => {
        try {
          return await fn();
        } catch (err) {
          if (err instanceof InvalidResourceError) throw new UsageError(err.message);
          throw err;
        }
      };
      switch (action) {
        case "set": {
          if (!name) throw new UsageError(USAGE);
          const p = needPipeline();
          const ceilingText = o.raw("ceiling");
          const ceiling = ceilingText === undefined ? undefined : Number(ceilingText);
          if (ceilingText !== undefined && !/^\s*\d*\.?\d+\s*$/.test(ceilingText))
            throw new UsageError(`--ceiling must be a number in (0, 1], got ${JSON.stringify(ceilingText)}`);
          if (keys.length === 0)
            throw new UsageError("resource set needs --key <id> --limit … (at least one)");
          await withRedis(o.str("redis")!, async (redis) => {
            await auditedCli(
              redis,
              {
                pipeline: pipelineOfQueue(p),
                verb: "admin",
                operation: "putResource",
                target: `pipeline:${pipelineOfQueue(p)} resource:${name}`,
                params: { keys, ceiling: ceiling ?? null },
              },
              () =>
                refused(() => setResource(redis, p, name, keys, ceiling === undefined ? {} : { ceiling })),
            );
            print(
              asJson
                ? JSON.stringify({ pipeline: p, name, keys, ceiling: ceiling ?? 0.9 })
                : `${name}: ${keys.map((k) => `${k.id} ${formatLimits(k.limits)}`).join("; ")}`,
            );
          });
          return;
        }
        case "remove": {
          if (!name) throw new UsageError(USAGE);
          const p = needPipeline();
          return withRedis(o.str("redis")!, async (redis) => {
            const removed = await auditedCli(
              redis,
              {
                pipeline: pipelineOfQueue(p),
                verb: "admin",
                operation: "deleteResource",
                target: `pipeline:${pipelineOfQueue(p)} resource:${name}`,
                params: {},
              },
              () => refused(() => removeResource(redis, p, name)),
              (removed) => ({ result: { removed } }),
            );
            print(
              asJson
                ? JSON.stringify({ pipeline: p, name, removed })
                : removed
                  ? `${name} removed`
                  : `no resource ${name}`,
            );
            return removed ? 0 : 1;
          });
        }
        case "list": {
          await withRedis(o.str("redis")!, async (redis) => {
            const all = await refused(() => listResources(redis, pipeline));
            if (asJson) {
              print(JSON.stringify(all));
              return;
            }
            if (all.length === 0) print("no resources");
            for (const r of all) {
              print(`${r.pipeline}/${r.name}\tceiling ${r.ceiling}\twaiting for budget ${r.waiting}`);
              for (const k of r.keys) {
                const limits = k.limits
                  .map((l) => `${l.unit} ${l.used}/${l.max} (${Math.round(l.utilization * 100)}%)`)
                  .join(", ");
                const bench = k.benchedUntil
                  ? `\tbenched until ${new Date(k.benchedUntil).toISOString()}`
                  : "";
                print(`  ${k.id}\t${limits}\tadmitted ${k.admitted}${bench}`);
              }
            }
          });
          return;
        }
        default:
          throw new UsageError(USAGE);
      }
    },
  });

const help = command([]);

export default {
  ...help,
  // `--key`/`--limit` come in pairs, in order: taken out here, the rest parsed as usual.
  async run(argv: string[]): Promise<number> {
    const { keys, rest } = keyLimitPairs(argv);
    return command(keys).run(rest);
  },
} satisfies Command;

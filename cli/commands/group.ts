// `conveyor group`: a queue's groups — their concurrency limits, pause/resume, and a listing.
import { auditedCli, pipelineOfQueue } from "../audit.ts";
import { formatRateLimit, parseRateLimit, type RateLimit } from "../../queue/control.ts";
import {
  assertGroup,
  listGroups,
  pauseGroup,
  resumeGroup,
  setGroupLimit,
  type GroupOnDead,
} from "../../queue/groups.ts";
import type { RedisClient } from "../../queue/scripts.ts";
import { assertQueueNameForUsage, COMMON, defineCommand, print, UsageError, withRedis } from "../command.ts";
import { LIMIT_SETTING } from "./dlq.ts";

const USAGE = `group limit|set <queue> [<group>] [--concurrency N|off] [--rate N/<s|m|h>|off] [--weight N|off] [--on-dead block|continue|off]
  group pause|resume <queue> <group>
  group list <queue> [--limit N] [--json]`;

/** `--rate N/<s|m|h>` or `off` (remove it). */
function parseRate(text: string): RateLimit | null {
  if (text === "off") return null;
  try {
    return parseRateLimit(text);
  } catch (err) {
    throw new UsageError(`--rate: ${(err as Error).message}`);
  }
}

/** `--concurrency N` (1..1000000) or `off` (remove the limit). */
function parseConcurrency(text: string): number | null {
  if (text === "off") return null;
  const n = /^\d+$/.test(text) ? Number(text) : NaN;
  if (!Number.isInteger(n) || n < 1 || n > 1_000_000)
    throw new UsageError(`--concurrency must be an integer 1..1000000 or off, got ${JSON.stringify(text)}`);
  return n;
}

/** `--weight N` (1..1000) or `off` (weight 1). */
function parseWeight(text: string): number | null {
  if (text === "off") return null;
  const n = /^\d+$/.test(text) ? Number(text) : NaN;
  if (!Number.isInteger(n) || n < 1 || n > 1000)
    throw new UsageError(`--weight must be an integer 1..1000 or off, got ${JSON.stringify(text)}`);
  return n;
}

/** `--on-dead block|continue|off` (off: the queue's default). */
function parseOnDead(text: string): GroupOnDead | null {
  if (text === "off") return null;
  if (text !== "block" && text !== "continue")
    throw new UsageError(`--on-dead must be block, continue or off, got ${JSON.stringify(text)}`);
  return text;
}

function groupForUsage(group: string): string {
  try {
    assertGroup(group);
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  return group;
}

export default defineCommand({
  name: "group",
  args: ["limit|set <queue> [<group>]", "pause|resume <queue> <group>", "list <queue>"],
  settings: {
    ...COMMON,
    concurrency: {
      kind: "string",
      arg: "N|off",
      help: "group limit: at most N jobs of the group run at once across all workers; off removes the limit",
    },
    rate: {
      kind: "string",
      arg: "N/<s|m|h>|off",
      help: "group limit: at most N job starts of the group in any window of a second, minute or hour; off removes it",
    },
    weight: {
      kind: "string",
      arg: "N|off",
      help: "group set: the group takes N turns per round of the round-robin (1..1000); off = 1",
    },
    "on-dead": {
      kind: "string",
      arg: "block|continue|off",
      help: "group set: a dead job pauses its group until it is retried (block) or the next job runs (continue, the default)",
    },
    limit: { ...LIMIT_SETTING, default: 50, help: "group list: at most this many groups" },
  },
  async run(o) {
    const [action, queue, group] = o.positionals;
    if (!action || !queue) throw new UsageError(USAGE);
    assertQueueNameForUsage(queue);
    const asJson = o.bool("json");
    const withQueue = (fn: (redis: RedisClient) => Promise<void>) => withRedis(o.str("redis")!, fn);
    switch (action) {
      case "limit":
      case "set": {
        const concurrencyText = o.raw("concurrency");
        const rateText = o.raw("rate");
        const weightText = o.raw("weight");
        const onDeadText = o.raw("on-dead");
        if ([concurrencyText, rateText, weightText, onDeadText].every((t) => t === undefined))
          throw new UsageError(
            `group ${action} needs --concurrency N|off, --rate N/<s|m|h>|off, --weight N|off or --on-dead block|continue|off`,
          );
        const concurrency = concurrencyText === undefined ? undefined : parseConcurrency(concurrencyText);
        const rate = rateText === undefined ? undefined : parseRate(rateText);
        const weight = weightText === undefined ? undefined : parseWeight(weightText);
        const onDead = onDeadText === undefined ? undefined : parseOnDead(onDeadText);
        const target = group === undefined ? undefined : groupForUsage(group);
        if (weight !== undefined && target === undefined)
          throw new UsageError("--weight is set per group: group set <queue> <group> --weight N");
        await withQueue(async (redis) => {
          await auditedCli(
            redis,
            {
              pipeline: pipelineOfQueue(queue),
              verb: "operate",
              operation: target === undefined ? "setDefaultGroupLimit" : "setGroupLimit",
              target: target === undefined ? queue : `${queue} group:${target}`,
              params: {
                concurrency,
                rate: rate === undefined ? undefined : rate === null ? null : formatRateLimit(rate),
                weight,
                onDead,
              },
            },
            () => setGroupLimit(redis, queue, target, { concurrency, rate, weight, onDead }),
          );
          const rateShown = rate === undefined ? undefined : rate === null ? "off" : formatRateLimit(rate);
          const parts = [
            ...(concurrency === undefined ? [] : [`concurrency ${concurrency ?? "off"}`]),
            ...(rateShown === undefined ? [] : [`rate ${rateShown}`]),
            ...(weight === undefined ? [] : [`weight ${weight ?? "off"}`]),
            ...(onDead === undefined ? [] : [`on dead ${onDead ?? "off"}`]),
          ];
          print(
            asJson
              ? JSON.stringify({ queue, group: target ?? null, concurrency, rate: rateShown, weight, onDead })
              : `${queue} ${target === undefined ? "every group" : `group ${target}`}: ${parts.join(", ")}`,
          );
        });
        return;
      }
      case "pause":
      case "resume": {
        if (group === undefined) throw new UsageError(`group ${action} <queue> <group>`);
        const target = groupForUsage(group);
        await withQueue(async (redis) => {
          await auditedCli(
            redis,
            {
              pipeline: pipelineOfQueue(queue),
              verb: "operate",
              operation: action === "pause" ? "pauseGroup" : "resumeGroup",
              target: `${queue} group:${target}`,
              params: {},
            },
            () => (action === "pause" ? pauseGroup(redis, queue, target) : resumeGroup(redis, queue, target)),
          );
          print(
            asJson
              ? JSON.stringify({ queue, group: target, paused: action === "pause" })
              : `${queue} group ${target} ${action === "pause" ? "paused" : "resumed"}`,
          );
        });
        return;
      }
      case "list": {
        await withQueue(async (redis) => {
          const all = await listGroups(redis, queue);
          const shown = all.groups.slice(0, o.int("limit"));
          if (asJson) {
            print(JSON.stringify({ ...all, groups: shown, total: all.groups.length }));
            return;
          }
          print(
            `${all.groups.length} groups, ${all.waiting} waiting; default concurrency ${all.defaultConcurrency ?? "none"}, rate ${all.defaultRate ?? "none"}`,
          );
          for (const g of shown) {
            const limit = g.concurrency === null ? "-" : `${g.concurrency}${g.override ? "" : "*"}`;
            print(
              `${g.group}\twaiting ${g.waiting}\trunning ${g.running}/${limit}${g.rate ? `\trate ${g.rate}` : ""}${g.weight !== 1 ? `\tweight ${g.weight}` : ""}${g.paused ? "\tpaused" : ""}${g.blockedBy ? ` (blocked by dead job ${g.blockedBy})` : ""}`,
            );
          }
          if (shown.length < all.groups.length) print(`… ${all.groups.length - shown.length} more (--limit)`);
        });
        return;
      }
      default:
        throw new UsageError(USAGE);
    }
  },
});

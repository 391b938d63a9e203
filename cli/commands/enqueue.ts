// `conveyor enqueue`: one job from the command line, or a file of them (one per line).
import { readFileSync } from "node:fs";
import { startTracing } from "../../lib/telemetry.ts";
import {
  DURABILITY_SETTING,
  REPLICA_TIMEOUT_SETTING,
  ReplicationError,
  type Durability,
} from "../../queue/durability.ts";
import { ContractViolationError, describeViolation } from "../../queue/contracts.ts";
import { EnvelopeError, parseEnvelope } from "../../queue/envelope.ts";
import { assertGroup } from "../../queue/groups.ts";
import { newJobId } from "../../queue/keys.ts";
import { DEDUPE_KEY_MAX, DEDUPE_WINDOW_MAX_MS, Producer, type JobToEnqueue } from "../../queue/producer.ts";
import { InvalidResourceError, parseUses } from "../../queue/resources.ts";
import type { Dedupe } from "../../queue/types.ts";
import { parseDuration } from "../../lib/duration.ts";
import { COMMON, defineCommand, parseJson, print, UsageError, withRedis } from "../command.ts";
import { printWait, WAIT_SETTING, waitExitCode } from "../waits.ts";

export default defineCommand({
  name: "enqueue",
  args: ["<queue> [<json>]"],
  settings: {
    ...COMMON,
    id: { kind: "string", arg: "ID", help: "the job's id (default: a new one)" },
    key: { kind: "string", arg: "KEY", help: "idempotency key: a second enqueue with it is a duplicate" },
    task: {
      kind: "string",
      arg: "NAME",
      help: "the job's task: which of the stage's handlers runs it and which schemas of its contract apply",
    },
    priority: { kind: "int", help: "higher runs first" },
    delay: { kind: "duration", help: "run no sooner than this from now" },
    attempts: { kind: "int", help: "tries before dead-lettering" },
    timeout: { kind: "duration", help: "this job's timeout" },
    group: {
      kind: "string",
      arg: "G",
      help: "the job's group (≤ 128 bytes): groups are served round-robin (docs/protocol.md, Groups)",
    },
    debounce: {
      kind: "string",
      arg: "KEY:WINDOW",
      help: "while a job enqueued with KEY waits, it takes this data and waits WINDOW (e.g. 5s) again: one run per burst, with the latest data",
    },
    throttle: {
      kind: "string",
      arg: "KEY:WINDOW",
      help: "the first job with KEY in a WINDOW (e.g. 1m) is created, the rest are duplicates of it",
    },
    uses: {
      kind: "string",
      arg: "R[:UNIT=N,…][;R…]",
      help: "what the job uses of the pipeline's resources, e.g. openai:tokens=1200 (an estimate; 1 request implied): it starts only when a key has room (docs/budgets.md)",
    },
    file: { kind: "string", arg: "FILE", help: "newline-delimited jobs to enqueue at once" },
    wait: WAIT_SETTING,
    durability: DURABILITY_SETTING,
    "replica-timeout": REPLICA_TIMEOUT_SETTING,
  },
  async run(o) {
    const [queue, json] = o.positionals;
    if (!queue) throw new UsageError("enqueue needs a queue");
    const group = o.raw("group");
    if (group !== undefined) {
      try {
        assertGroup(group, "--group");
      } catch (err) {
        throw new UsageError((err as Error).message);
      }
    }
    const usesText = o.raw("uses");
    let uses: JobToEnqueue["uses"];
    try {
      uses = usesText === undefined ? undefined : parseUses(usesText.split(";"), "--uses");
    } catch (err) {
      if (err instanceof InvalidResourceError) throw new UsageError(err.message);
      throw err;
    }
    const opts: Omit<JobToEnqueue, "data"> = {
      priority: o.maybeInt("priority"),
      delayMs: o.maybeDuration("delay"),
      attempts: o.maybeInt("attempts"),
      timeoutMs: o.maybeDuration("timeout"),
      group,
      dedupe: dedupeFlag(o.raw("debounce"), o.raw("throttle")),
      uses,
      task: o.raw("task"),
    };
    const file = o.raw("file");
    if (file !== undefined && json !== undefined)
      throw new UsageError(
        `enqueue: unexpected argument ${JSON.stringify(json)} (with --file the jobs come from the file)`,
      );
    const asJson = o.bool("json");
    const waitMs = o.maybeDuration("wait");
    if (waitMs !== undefined && file !== undefined)
      throw new UsageError("--wait waits for one job: not with --file");
    // `send {queue}` spans when the OTEL_* variables ask for export (flushed before exit).
    const tracing = await startTracing({ serviceName: "conveyor-cli" });
    const durability = o.choice("durability") as Durability;
    const key = o.raw("key");
    // With "replicated" a job gets its id here, so an unconfirmed enqueue can name it for the retry.
    const id = o.raw("id") ?? (durability === "replicated" && !key && !file ? newJobId() : undefined);
    try {
      return await withRedis(o.str("redis")!, async (redis) => {
        const producer = new Producer(redis, { durability, replicaTimeoutMs: o.duration("replica-timeout") });
        if (file) {
          const results = await producer.enqueueMany(queue, readJobs(file, opts));
          const created = results.filter((r) => r.created).length;
          const replaced = results.filter((r) => r.replaced).length;
          print(
            asJson
              ? JSON.stringify({
                  enqueued: created,
                  duplicates: results.length - created - replaced,
                  replaced,
                })
              : String(created),
          );
          return 0;
        }
        if (json === undefined) throw new UsageError("enqueue needs job data as JSON, or --file");
        const result = await producer.enqueue(queue, parseJson(json, "job data"), {
          ...opts,
          id,
          idempotencyKey: key,
        });
        if (waitMs === undefined) {
          print(asJson ? JSON.stringify(result) : result.id);
          return 0;
        }
        if (!asJson) print(result.id);
        const waited = await producer.waitFor([{ id: result.id, queue }], { timeoutMs: waitMs });
        printWait(waited, asJson);
        return waitExitCode(waited);
      });
    } catch (err) {
      // The job may or may not survive a failover: say how to make sure (enqueue is idempotent).
      if (err instanceof ReplicationError)
        throw new Error(
          `${err.message}; enqueue again with ${file ? "the same file (jobs with ids)" : key ? `--key ${key}` : `--id ${id}`} to be sure`,
        );
      if (err instanceof ContractViolationError) {
        // every refused job on a line of its own: its pointers, rules and values
        if (asJson) print(JSON.stringify({ error: err.message, jobs: err.jobs }));
        process.stderr.write(`conveyor: ${refusal(err, file ? jobLines(file) : undefined)}\n`);
        return 1;
      }
      throw err;
    } finally {
      await tracing?.shutdown();
    }
  },
});

/** A contract refusal, one line per job and violation. */
function refusal(err: ContractViolationError, lines?: number[]): string {
  const out = [
    `${err.queue}: ${err.jobs.length} job(s) break the queue's contract (${err.hash}); nothing enqueued`,
  ];
  for (const j of err.jobs) {
    const who = `${lines ? `line ${lines[j.index]}` : "the job"}${j.id !== undefined ? ` (id ${j.id})` : ""}${j.task !== undefined ? ` task ${j.task}` : ""}`;
    for (const v of j.violations) out.push(`  ${who} ${j.side}: ${describeViolation(v)}`);
  }
  return out.join("\n");
}

/** `--debounce KEY:WINDOW` or `--throttle KEY:WINDOW` (the key may hold `:`; the window is after the last). */
function dedupeFlag(debounce: string | undefined, throttle: string | undefined): Dedupe | undefined {
  if (debounce !== undefined && throttle !== undefined)
    throw new UsageError("--debounce and --throttle cannot be used together");
  const text = debounce ?? throttle;
  if (text === undefined) return undefined;
  const flag = debounce !== undefined ? "--debounce" : "--throttle";
  const cut = text.lastIndexOf(":");
  if (cut <= 0 || cut === text.length - 1)
    throw new UsageError(`${flag} must be KEY:WINDOW (e.g. doc-7:5s), got ${JSON.stringify(text)}`);
  let windowMs: number;
  try {
    windowMs = parseDuration(text.slice(cut + 1), `${flag} window`);
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  if (!Number.isInteger(windowMs) || windowMs < 1 || windowMs > DEDUPE_WINDOW_MAX_MS)
    throw new UsageError(`${flag} window must be 1ms..7d in whole ms, got ${text.slice(cut + 1)}`);
  const key = text.slice(0, cut);
  if (key.length > DEDUPE_KEY_MAX)
    throw new UsageError(`${flag} key is ${key.length} characters, limit ${DEDUPE_KEY_MAX}`);
  return { key, mode: debounce !== undefined ? "debounce" : "throttle", windowMs };
}

/** The line number of each job of the file (its non-empty lines). */
function jobLines(file: string): number[] {
  return readFileSync(file, "utf8")
    .split("\n")
    .flatMap((line, i) => (line.trim() === "" ? [] : [i + 1]));
}

/** One job per non-empty line: bare JSON data, or an envelope whose fields win over the flags. */
function readJobs(file: string, opts: Omit<JobToEnqueue, "data">): JobToEnqueue[] {
  return readFileSync(file, "utf8")
    .split("\n")
    .map((line, i) => [line.trim(), i + 1] as const)
    .filter(([line]) => line !== "")
    .map(([line, n]): JobToEnqueue => {
      const v = parseJson(line, `${file}:${n}`);
      const isEnvelope = typeof v === "object" && v !== null && !Array.isArray(v) && "data" in v;
      if (!isEnvelope) return { ...opts, data: v };
      try {
        return { ...opts, ...definedFields(parseEnvelope(v)) };
      } catch (err) {
        if (err instanceof EnvelopeError) throw new UsageError(`${file}:${n}: ${err.message}`);
        throw err;
      }
    });
}

/** The fields an envelope set, so the flags' defaults fill only the others. */
function definedFields<T extends object>(o: T): T {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as T;
}

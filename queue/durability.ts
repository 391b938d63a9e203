// Durability of acknowledged writes across a failover. Redis replicates asynchronously: a write
// the primary answered can vanish when a replica that had not received it is promoted.
// `durability: "replicated"` makes enqueue and settle wait for a replica (`WAIT 1 <ms>`, on the
// connection that ran the script) before they are acknowledged; "primary" (the default) sends
// nothing more. docs/reliability.md says what each mode can lose or repeat.
import type { Redis } from "ioredis";
import type { Setting } from "../lib/options.ts";
import { WORKER_ENV } from "../lib/workerContract.ts";
import { connectionFor } from "./connection.ts";
import { runScript, type RedisClient, type ScriptArg, type ScriptName } from "./scripts.ts";

export const DURABILITIES = ["primary", "replicated"] as const;
export type Durability = (typeof DURABILITIES)[number];

export interface DurabilityOptions {
  /** "primary" (default): acknowledged when the primary applied it. "replicated": and a replica has it. */
  durability?: Durability;
  /** How long a replicated write waits for its replica before it fails (ms). */
  replicaTimeoutMs?: number;
}

export const DEFAULT_REPLICA_TIMEOUT_MS = 2000;

/** `--durability` / CONVEYOR_DURABILITY: the worker's settles, the API's and the CLI's enqueues. */
export const DURABILITY_SETTING = {
  env: WORKER_ENV.durability,
  kind: "choice",
  choices: DURABILITIES,
  default: "primary",
  help: "primary | replicated: a write (enqueue, settle) is acknowledged only once a replica has it (WAIT; docs/reliability.md)",
} as const satisfies Setting;

/** `--replica-timeout` / CONVEYOR_REPLICA_TIMEOUT. */
export const REPLICA_TIMEOUT_SETTING = {
  env: "CONVEYOR_REPLICA_TIMEOUT",
  kind: "duration",
  default: "2s",
  max: "60s",
  help: "durability replicated: how long a write waits for its replica",
} as const satisfies Setting;

/** The value of a durability flag, setting or field; the error names where it came from. */
export function parseDurability(value: string, where?: string): Durability {
  if ((DURABILITIES as readonly string[]).includes(value)) return value as Durability;
  const message = `invalid durability ${JSON.stringify(value)}: expected primary or replicated`;
  throw new RangeError(where ? `${where}: ${message}` : message);
}

/**
 * A write the primary applied but no replica confirmed in time (or the connection changed before
 * WAIT answered, so nothing can be confirmed). The write may survive or be lost in a failover:
 * enqueue again with the same job id (idempotent), or retry the settle.
 */
export class ReplicationError extends Error {
  override name = "ReplicationError";
  /** The script's reply: what the primary did. */
  readonly reply: unknown;
  constructor(message: string, reply: unknown) {
    super(message);
    this.reply = reply;
  }
}

/** Socket generations per connection: a close makes the next write go over a new one. */
const generations = new WeakMap<Redis, { n: number }>();

function generation(conn: Redis): { n: number } {
  let g = generations.get(conn);
  if (!g) {
    const gen = { n: 0 };
    conn.on("close", () => gen.n++);
    generations.set(conn, (g = gen));
  }
  return g;
}

/**
 * Run a script, then with "replicated" durability wait for `replicas` replicas on the connection
 * that ran it (WAIT counts this connection's writes). Zero extra commands with "primary".
 */
export async function runDurableScript<T>(
  redis: RedisClient,
  opts: DurabilityOptions,
  name: ScriptName,
  keys: string[],
  args: ScriptArg[],
): Promise<T> {
  if (opts.durability !== "replicated") return runScript<T>(redis, name, keys, args);
  const reply = await runScript<T>(redis, name, keys, args);
  // (runs in the reply's continuation: no close event can have come in between)
  const conn = connectionFor(redis, keys[0]!);
  if (!conn)
    throw new ReplicationError(`${name}: no connection to the primary of ${keys[0]} to WAIT on`, reply);
  const gen = generation(conn);
  const before = gen.n;
  const timeoutMs = opts.replicaTimeoutMs ?? DEFAULT_REPLICA_TIMEOUT_MS;
  let acked: number;
  try {
    acked = Number(await conn.call("WAIT", 1, timeoutMs));
  } catch (err) {
    throw new ReplicationError(
      `${name}: applied on the primary, replication unconfirmed: WAIT failed: ${(err as Error).message}`,
      reply,
    );
  }
  if (gen.n !== before)
    throw new ReplicationError(
      `${name}: applied on the primary, replication unconfirmed: the connection changed before WAIT answered`,
      reply,
    );
  if (acked < 1)
    throw new ReplicationError(
      `${name}: applied on the primary, but no replica confirmed it within ${timeoutMs}ms (WAIT 1 ${timeoutMs} = ${acked}); it may be lost in a failover`,
      reply,
    );
  return reply;
}

// Prototype, bench only: "complete and claim the next job for the freed slot" in one script,
// to measure what it would save before anyone changes queue/. The combined script is built
// from the real scripts in queue/scripts/ (read-only): each body becomes a Lua function whose
// parameters shadow KEYS and ARGV, so it keeps working as those scripts change. The keys and
// arguments come from the real `Consumer` methods, captured with a stand-in client instead of
// being re-implemented here.
import { readFileSync } from "node:fs";
import type { Redis } from "ioredis";
import {
  Consumer,
  resolveIncludes,
  scriptSource,
  type ClaimResult,
  type ClaimedJob,
  type ConsumerOptions,
  type Lease,
} from "../../queue/index.ts";

const SCRIPTS = new URL("../../queue/scripts/", import.meta.url);
const body = (name: string) => readFileSync(new URL(`${name}.lua`, SCRIPTS), "utf8");

/**
 * KEYS = complete's keys, then claim's keys.
 * ARGV = 1 #complete keys, 2 #complete args, complete's args, then claim's args.
 * Returns {completed (1|0), claim's reply}.
 */
export function completeAndClaimLua(): string {
  // Both scripts' helpers first (each once), so the bodies below can be wrapped in functions.
  const includes = [body("settle_jobs"), body("claim_jobs")]
    .flatMap((text) => text.split("\n").filter((line) => line.startsWith("--- @include")))
    .join("\n");
  return resolveIncludes(
    `${includes}
-- (named apart from the helper claimJobs, which claim_jobs.lua calls)
local function completeJobScript(KEYS, ARGV)
${body("settle_jobs")}
end
local function claimJobsScript(KEYS, ARGV)
${body("claim_jobs")}
end
local nk, na = tonumber(ARGV[1]), tonumber(ARGV[2])
local ck, ca, lk, la = {}, {}, {}, {}
for i = 1, #KEYS do if i <= nk then ck[#ck + 1] = KEYS[i] else lk[#lk + 1] = KEYS[i] end end
for i = 3, #ARGV do if i <= 2 + na then ca[#ca + 1] = ARGV[i] else la[#la + 1] = ARGV[i] end end
-- (settle_jobs' reply names its fields: codes first)
local completed = completeJobScript(ck, ca)[2][1]
return {completed, claimJobsScript(lk, la)}
`,
    SCRIPTS,
  );
}

/** Whether a settle_jobs reply ('codes', codes, …; Consumer.complete is a batch of one) settled its one job. */
const settledOne = (reply: unknown) => (reply as [string, number[]] | undefined)?.[1]?.[0] === 1;

interface Call {
  keys: string[];
  args: (string | number)[];
}

/**
 * A stand-in client: a `Consumer` over it hands over its script call (keys and arguments)
 * instead of running it, and resolves with `reply`. Scripts are "installed" on it once.
 */
class StandIn {
  call: Call | undefined;
  reply: unknown = 0;
  readonly consumer: Consumer;

  constructor(queue: string, opts: ConsumerOptions) {
    const target = { defineCommand: () => {} };
    const client = new Proxy(target, {
      get: (t, prop) => {
        if (prop in t) return (t as Record<string | symbol, unknown>)[prop];
        if (prop === "then") return undefined;
        return (numKeys: number, ...rest: (string | number)[]) => {
          this.call = { keys: rest.slice(0, numKeys).map(String), args: rest.slice(numKeys) };
          return Promise.resolve(this.reply);
        };
      },
    }) as unknown as Redis;
    this.consumer = new Consumer(client, queue, opts);
  }

  /** The exact script call a Consumer method makes, without running it. */
  capture(invoke: (c: Consumer) => Promise<unknown>): Call {
    this.call = undefined;
    void invoke(this.consumer).catch(() => {});
    const call = this.call as Call | undefined;
    if (!call) throw new Error("the Consumer method made no script call synchronously");
    return call;
  }

  /** Parse a claim_jobs reply the way Consumer.claim does. */
  parseClaim(reply: unknown): Promise<ClaimResult> {
    this.reply = reply;
    const parsed = this.consumer.claim(1);
    this.reply = 0;
    return parsed;
  }
}

/** How the bench-only consumer finishes a job: see bench/proto/worker.ts. */
export type ProtoMode = "separate" | "pipelined" | "combined" | "hb-worker" | "hb-lean";

/**
 * A consumer that runs every call through its own copies of the real scripts (same code path
 * for all modes): `complete` then `claim` (today's worker: two round trips), both in one
 * pipeline (one round trip, two scripts), or the combined script (one round trip, one script).
 */
export class ProtoConsumer {
  private readonly redis: Redis;
  private readonly standIn: StandIn;

  constructor(redis: Redis, queue: string, opts: ConsumerOptions) {
    this.redis = redis;
    this.standIn = new StandIn(queue, opts);
    redis.defineCommand("protoClaim", { lua: scriptSource("claim_jobs") });
    redis.defineCommand("protoComplete", { lua: scriptSource("settle_jobs") });
    redis.defineCommand("protoCompleteAndClaim", { lua: completeAndClaimLua() });
  }

  private run(name: string, call: Call): Promise<unknown> {
    const fn = (this.redis as unknown as Record<string, (...a: (string | number)[]) => Promise<unknown>>)[
      name
    ]!;
    return fn.call(this.redis, call.keys.length, ...call.keys, ...call.args);
  }

  async claim(count: number): Promise<ClaimedJob[]> {
    const call = this.standIn.capture((c) => c.claim(count));
    return (await this.standIn.parseClaim(await this.run("protoClaim", call))).jobs;
  }

  async complete(job: Lease, result: unknown): Promise<boolean> {
    const call = this.standIn.capture((c) => c.complete(job, result));
    return settledOne(await this.run("protoComplete", call));
  }

  /** Pipelined batches for the raw Redis-limit run: `n` × claim(1) in one pipeline. */
  async claimBatch(n: number): Promise<ClaimedJob[]> {
    const p = this.redis.pipeline();
    const pp = p as unknown as Record<string, (...a: (string | number)[]) => unknown>;
    for (let i = 0; i < n; i++) {
      const c = this.standIn.capture((x) => x.claim(1));
      pp.protoClaim!.call(p, c.keys.length, ...c.keys, ...c.args);
    }
    const out: ClaimedJob[] = [];
    for (const [err, reply] of (await p.exec()) ?? []) {
      if (err) throw err;
      out.push(...(await this.standIn.parseClaim(reply)).jobs);
    }
    return out;
  }

  /** One pipeline: complete every job (today's protocol), or complete-and-claim-next for each. */
  async completeBatch(jobs: ClaimedJob[], combined: boolean): Promise<ClaimedJob[]> {
    const p = this.redis.pipeline();
    const pp = p as unknown as Record<string, (...a: (string | number)[]) => unknown>;
    for (const job of jobs) {
      const done = this.standIn.capture((c) => c.complete(job, null));
      if (!combined) {
        pp.protoComplete!.call(p, done.keys.length, ...done.keys, ...done.args);
        continue;
      }
      const claim = this.standIn.capture((c) => c.claim(1));
      pp.protoCompleteAndClaim!.call(
        p,
        done.keys.length + claim.keys.length,
        ...done.keys,
        ...claim.keys,
        done.keys.length,
        done.args.length,
        ...done.args,
        ...claim.args,
      );
    }
    const next: ClaimedJob[] = [];
    for (const [err, reply] of (await p.exec()) ?? []) {
      if (err) throw err;
      if (combined) next.push(...(await this.standIn.parseClaim((reply as [number, unknown])[1])).jobs);
    }
    return next;
  }

  /** Complete `job` and claim at most one job for the slot it frees. */
  async completeAndClaim(
    job: Lease,
    result: unknown,
    mode: "pipelined" | "combined",
  ): Promise<{ completed: boolean; next: ClaimedJob | undefined }> {
    const done = this.standIn.capture((c) => c.complete(job, result));
    const claim = this.standIn.capture((c) => c.claim(1));
    if (mode === "pipelined") {
      const p = this.redis.pipeline();
      const pp = p as unknown as Record<string, (...a: (string | number)[]) => unknown>;
      pp.protoComplete!.call(p, done.keys.length, ...done.keys, ...done.args);
      pp.protoClaim!.call(p, claim.keys.length, ...claim.keys, ...claim.args);
      const replies = (await p.exec()) ?? [];
      for (const [err] of replies) if (err) throw err;
      const jobs = (await this.standIn.parseClaim(replies[1]?.[1])).jobs;
      return { completed: settledOne(replies[0]?.[1]), next: jobs[0] };
    }
    const reply = (await this.run("protoCompleteAndClaim", {
      keys: [...done.keys, ...claim.keys],
      args: [done.keys.length, done.args.length, ...done.args, ...claim.args],
    })) as [number, unknown];
    const jobs = (await this.standIn.parseClaim(reply[1])).jobs;
    return { completed: reply[0] === 1, next: jobs[0] };
  }
}

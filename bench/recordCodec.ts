// What a job's wire form costs Redis: the same per-job work (the enqueue's HSET + ZADD, the
// settle's fence check + HSET + ZREM) with the jobs sent (a) columnar — one field-name list, then
// each job's values by position, the reply by position — (b) one cjson record per job, the reply
// one JSON text, (c) one cmsgpack record per job, the reply one msgpack value. The body is
// identical, so the difference between the forms is the codec's cost. Redis µs per job is the
// EVALSHA time in INFO commandstats over a block of calls, median of the reps.
//   node bench/recordCodec.ts [--reps 7] [--calls 20] [--json]
import { createHash } from "node:crypto";
import type { Redis } from "ioredis";
import { client, snapshot, startBenchRedis } from "./lib/redis.ts";
import { intFlag, cliFlags, progress, round, summarize } from "./lib/util.ts";

type Form = "columnar" | "cjson" | "cmsgpack";
const FORMS: Form[] = ["columnar", "cjson", "cmsgpack"];

// ---- A minimal MessagePack encoder: strings, integers, arrays and string-keyed maps ----

function msgpack(v: unknown): Buffer {
  const parts: Buffer[] = [];
  const head = (small: number, prefix8: number, n: number) => {
    if (n < 16 && small >= 0) parts.push(Buffer.from([small | n]));
    else if (n < 0x10000) parts.push(Buffer.from([prefix8, n >> 8, n & 0xff]));
    else {
      const b = Buffer.alloc(5);
      b[0] = prefix8 + 1;
      b.writeUInt32BE(n, 1);
      parts.push(b);
    }
  };
  const enc = (x: unknown): void => {
    if (typeof x === "string") {
      const s = Buffer.from(x, "utf8");
      if (s.length < 32) parts.push(Buffer.from([0xa0 | s.length]));
      else if (s.length < 0x10000) parts.push(Buffer.from([0xda, s.length >> 8, s.length & 0xff]));
      else {
        const b = Buffer.alloc(5);
        b[0] = 0xdb;
        b.writeUInt32BE(s.length, 1);
        parts.push(b);
      }
      parts.push(s);
    } else if (typeof x === "number") {
      if (Number.isInteger(x) && x >= 0 && x < 128) parts.push(Buffer.from([x]));
      else {
        const b = Buffer.alloc(9);
        b[0] = 0xd3;
        b.writeBigInt64BE(BigInt(Math.trunc(x)), 1);
        parts.push(b);
      }
    } else if (Array.isArray(x)) {
      head(0x90, 0xdc, x.length);
      x.forEach(enc);
    } else {
      const entries = Object.entries(x as Record<string, unknown>);
      head(0x80, 0xde, entries.length);
      for (const [k, val] of entries) {
        enc(k);
        enc(val);
      }
    }
  };
  enc(v);
  return Buffer.concat(parts);
}

// ---- The scripts: one per form and operation, the same body ----

const ENQUEUE_BODY = `
local function enqueue(prefix, j, now)
  local key = prefix .. j.id
  if redis.call('EXISTS', key) == 1 then return 0 end
  local h = {'id', j.id, 'data', j.data, 'state', 'ready', 'createdAt', now,
    'priority', j.priority or 0, 'attempts', j.attempts or 3}
  if j.trace then h[#h + 1] = 'trace'; h[#h + 1] = j.trace end
  redis.call('HSET', key, unpack(h))
  redis.call('ZADD', KEYS[1], -(tonumber(j.priority) or 0), j.id)
  return 1
end
`;

const ENQUEUE: Record<Form, string> = {
  columnar: `${ENQUEUE_BODY}
local at, width = {}, 0
for name in string.gmatch(ARGV[3], '[^,]+') do at[name] = width; width = width + 1 end
local out = {}
for i = 4, #ARGV, width do
  local j = {id = ARGV[i + at.id], data = ARGV[i + at.data], priority = ARGV[i + at.priority]}
  local trace = ARGV[i + at.trace]
  if trace ~= '' then j.trace = trace end
  out[#out + 1] = j.id
  out[#out + 1] = enqueue(ARGV[1], j, ARGV[2])
end
return out`,
  cjson: `${ENQUEUE_BODY}
local out = {}
for i = 3, #ARGV do
  local j = cjson.decode(ARGV[i])
  out[#out + 1] = {id = j.id, code = enqueue(ARGV[1], j, ARGV[2])}
end
return cjson.encode(out)`,
  cmsgpack: `${ENQUEUE_BODY}
local out = {}
for i = 3, #ARGV do
  local j = cmsgpack.unpack(ARGV[i])
  out[#out + 1] = {id = j.id, code = enqueue(ARGV[1], j, ARGV[2])}
end
return cmsgpack.pack(out)`,
};

const SETTLE_BODY = `
local function settle(prefix, j, now)
  local key = prefix .. j.id
  local f = redis.call('HMGET', key, 'token', 'state')
  if f[1] ~= j.token or f[2] ~= 'active' then return 0 end
  local h = {'state', 'completed', 'result', j.result, 'finishedAt', now}
  if j.contentHash then h[#h + 1] = 'contentHash'; h[#h + 1] = j.contentHash end
  redis.call('HSET', key, unpack(h))
  redis.call('ZREM', KEYS[1], j.id)
  return 1
end
`;

const SETTLE: Record<Form, string> = {
  columnar: `${SETTLE_BODY}
local codes = {}
for i = 3, #ARGV, 6 do
  local j = {id = ARGV[i], token = ARGV[i + 1], result = ARGV[i + 2], resultTtlSeconds = ARGV[i + 4], reused = ARGV[i + 5]}
  if ARGV[i + 3] ~= '' then j.contentHash = ARGV[i + 3] end
  codes[#codes + 1] = settle(ARGV[1], j, ARGV[2])
end
return {codes, {}, -1, 0}`,
  cjson: `${SETTLE_BODY}
local codes = {}
for i = 3, #ARGV do codes[#codes + 1] = settle(ARGV[1], cjson.decode(ARGV[i]), ARGV[2]) end
return cjson.encode({codes = codes, nextDueMs = -1})`,
  cmsgpack: `${SETTLE_BODY}
local codes = {}
for i = 3, #ARGV do codes[#codes + 1] = settle(ARGV[1], cmsgpack.unpack(ARGV[i]), ARGV[2]) end
return cmsgpack.pack({codes = codes, nextDueMs = -1})`,
};

// ---- The jobs each form sends ----

function dataOf(bytes: number, i: number): string {
  const head = `{"i":${i},"x":"`;
  return head + "x".repeat(Math.max(0, bytes - head.length - 2)) + `"}`;
}

interface EnqueueJob {
  id: string;
  data: string;
  priority: number;
  trace: string;
}

function enqueueArgs(form: Form, jobs: EnqueueJob[]): (string | Buffer)[] {
  if (form === "columnar") {
    const out: (string | Buffer)[] = ["id,data,priority,trace"];
    for (const j of jobs) out.push(j.id, j.data, String(j.priority), j.trace);
    return out;
  }
  return jobs.map((j) => (form === "cjson" ? JSON.stringify(j) : msgpack(j)));
}

interface SettleJob {
  id: string;
  token: string;
  result: string;
  resultTtlSeconds: number;
}

function settleArgs(form: Form, jobs: SettleJob[]): (string | Buffer)[] {
  if (form === "columnar")
    return jobs.flatMap((j) => [j.id, j.token, j.result, "", String(j.resultTtlSeconds), "0"]);
  return jobs.map((j) => (form === "cjson" ? JSON.stringify(j) : msgpack(j)));
}

// ---- The measurement ----

async function load(redis: Redis, src: string): Promise<string> {
  const sha = createHash("sha1").update(src).digest("hex");
  await redis.script("LOAD", src);
  return sha;
}

/** Redis µs per job inside EVALSHA over `calls` calls, each built by `prepare` (untimed). */
async function measure(
  redis: Redis,
  calls: number,
  jobsPerCall: number,
  prepare: (call: number) => Promise<() => Promise<unknown>>,
): Promise<number> {
  let usec = 0;
  for (let c = 0; c < calls; c++) {
    const run = await prepare(c);
    const before = await snapshot(redis);
    await run();
    const after = await snapshot(redis);
    usec += after.commands.get("evalsha")!.usec - (before.commands.get("evalsha")?.usec ?? 0);
  }
  return usec / (calls * jobsPerCall);
}

const flags = cliFlags(["calls", "json", "reps"]);
const reps = intFlag(flags, "reps", 7);
const calls = intFlag(flags, "calls", 20);
const server = await startBenchRedis();
const redis = client(server.url, "record-codec");
try {
  const results: { op: string; form: Form; usPerJob: number }[] = [];
  const ops: { op: string; form: Form; run: () => Promise<number> }[] = [];
  for (const bytes of [20, 1024])
    for (const form of FORMS)
      ops.push({
        op: `enqueue 1000 × ${bytes} B`,
        form,
        run: async () => {
          const sha = await load(redis, ENQUEUE[form]);
          return measure(redis, calls, 1000, async (c) => {
            await redis.flushall();
            const jobs = Array.from({ length: 1000 }, (_, i) => ({
              id: `j${c}-${i}`,
              data: dataOf(bytes, i),
              priority: i % 5,
              trace: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            }));
            const args = enqueueArgs(form, jobs);
            return () => redis.evalsha(sha, 1, "q:ready", "q:job:", Date.now(), ...args);
          });
        },
      });
  for (const bytes of [20, 1024])
    for (const form of FORMS)
      ops.push({
        op: `settle 32 × ${bytes} B`,
        form,
        run: async () => {
          const sha = await load(redis, SETTLE[form]);
          return measure(redis, calls * 10, 32, async (c) => {
            await redis.flushall();
            const jobs = Array.from({ length: 32 }, (_, i) => ({
              id: `j${c}-${i}`,
              token: String(1000 + i),
              result: dataOf(bytes, i),
              resultTtlSeconds: 0,
            }));
            const pipe = redis.pipeline();
            for (const j of jobs) {
              pipe.hset(`q:job:${j.id}`, "token", j.token, "state", "active", "data", dataOf(20, 0));
              pipe.zadd("q:inflight", 0, j.id);
            }
            await pipe.exec();
            const args = settleArgs(form, jobs);
            return () => redis.evalsha(sha, 1, "q:inflight", "q:job:", Date.now(), ...args);
          });
        },
      });
  const samples = new Map<string, number[]>();
  // Reps interleave the forms, so a slower stretch of a shared machine hits them alike.
  for (let rep = 0; rep < reps; rep++)
    for (const o of ops) {
      const key = `${o.op}|${o.form}`;
      samples.set(key, [...(samples.get(key) ?? []), await o.run()]);
      progress(`rep ${rep + 1}/${reps} ${o.op} ${o.form}: ${round(samples.get(key)!.at(-1)!, 2)} µs/job`);
    }
  for (const o of ops)
    if (!results.some((r) => r.op === o.op && r.form === o.form))
      results.push({
        op: o.op,
        form: o.form,
        usPerJob: round(summarize(samples.get(`${o.op}|${o.form}`)!).median, 2),
      });
  if (flags.has("json")) console.log(JSON.stringify(results));
  else {
    console.log("| operation | columnar µs/job | cjson µs/job | cmsgpack µs/job |\n|---|---|---|---|");
    for (const op of [...new Set(results.map((r) => r.op))]) {
      const of = (f: Form) => results.find((r) => r.op === op && r.form === f)!.usPerJob;
      console.log(`| ${op} | ${of("columnar")} | ${of("cjson")} | ${of("cmsgpack")} |`);
    }
  }
} finally {
  redis.disconnect();
  await server.stop();
}

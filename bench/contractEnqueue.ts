// The cost of contracts at enqueue (issue 45): µs per job and Redis commands per job for one
// Producer on a throwaway redis-server, a ~1 KiB document, without a contract and with a
// 30-field schema; with --before DIR, the same without a contract from another checkout (the
// release before contracts) for comparison. Runs the variants interleaved, --reps times.
//   node bench/contractEnqueue.ts --before /tmp/conveyor-before --reps 5
import { parseArgs } from "node:util";
import { resolve } from "node:path";
import { RedisServer } from "../test/support/redis.ts";
import {
  compileContract,
  connectRedis,
  setContract,
  type Contract,
  type RedisClient,
} from "../queue/index.ts";

const { values } = parseArgs({
  options: {
    before: { type: "string" },
    reps: { type: "string", default: "5" },
    single: { type: "string", default: "3000" },
    bulk: { type: "string", default: "20000" },
    batch: { type: "string", default: "100" },
  },
});
const reps = Number(values.reps);
const [singleN, bulkN, batch] = [Number(values.single), Number(values.bulk), Number(values.batch)];

/** A ~1 KiB document of 30 fields and the schema it keeps (types, formats, ranges, enums, patterns). */
function documentAndSchema(): { doc: Record<string, unknown>; contract: Contract } {
  const doc: Record<string, unknown> = {};
  const properties: Record<string, unknown> = {};
  for (let i = 0; i < 30; i++) {
    const name = `field_${String(i).padStart(2, "0")}`;
    switch (i % 6) {
      case 0:
        doc[name] = `some descriptive text for field ${i}`;
        properties[name] = { type: "string", minLength: 1, maxLength: 200 };
        break;
      case 1:
        doc[name] = `person${i}@example.com`;
        properties[name] = { type: "string", format: "email" };
        break;
      case 2:
        doc[name] = 1000 + i;
        properties[name] = { type: "integer", minimum: 0, maximum: 100000 };
        break;
      case 3:
        doc[name] = `https://example.com/resources/${i}`;
        properties[name] = { type: "string", format: "uri" };
        break;
      case 4:
        doc[name] = ["open", "closed", "pending"][i % 3];
        properties[name] = { enum: ["open", "closed", "pending"] };
        break;
      default:
        doc[name] = `2026-11-${String(1 + (i % 28)).padStart(2, "0")}`;
        properties[name] = { type: "string", format: "date" };
    }
  }
  return {
    doc,
    contract: {
      data: { type: "object", required: Object.keys(properties), properties, additionalProperties: false },
    },
  };
}

interface Producerish {
  enqueue(queue: string, data: unknown): Promise<unknown>;
  enqueueMany(queue: string, jobs: { data: unknown }[]): Promise<unknown>;
}

async function commandStats(redis: RedisClient): Promise<Map<string, number>> {
  const text = (await redis.info("commandstats")) as string;
  const out = new Map<string, number>();
  for (const m of text.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) out.set(m[1]!, Number(m[2]));
  return out;
}

/** Commands per job between two snapshots: sent by the client, and run inside the scripts. */
function perJob(a: Map<string, number>, b: Map<string, number>, jobs: number) {
  // (HMGET is left out: the scripts run it too; a producer reads a contract once, in the warm-up)
  const client = new Set(["fcall", "evalsha", "eval", "sadd", "script|load", "function|load"]);
  let sent = 0;
  let inside = 0;
  for (const [name, calls] of b) {
    const d = calls - (a.get(name) ?? 0);
    if (name === "info" || name === "config|resetstat" || name === "flushall") continue;
    if (client.has(name)) sent += d;
    else inside += d;
  }
  return { sent: sent / jobs, inside: inside / jobs };
}

async function measure(redis: RedisClient, producer: Producerish, queue: string, doc: unknown) {
  await producer.enqueue(queue, doc); // warm: scripts loaded, queue registered, contract read
  const s0 = await commandStats(redis);
  let t = performance.now();
  for (let i = 0; i < singleN; i++) await producer.enqueue(queue, doc);
  const singleUs = ((performance.now() - t) * 1000) / singleN;
  const s1 = await commandStats(redis);
  t = performance.now();
  for (let i = 0; i < bulkN; i += batch)
    await producer.enqueueMany(
      queue,
      Array.from({ length: batch }, () => ({ data: doc })),
    );
  const bulkUs = ((performance.now() - t) * 1000) / bulkN;
  const s2 = await commandStats(redis);
  return { singleUs, bulkUs, single: perJob(s0, s1, singleN), bulk: perJob(s1, s2, bulkN) };
}

const { doc, contract } = documentAndSchema();
const compiled = compileContract(contract);
console.log(`document: ${Buffer.byteLength(JSON.stringify(doc))} B, 30 fields`);
// The check alone, no Redis.
for (let i = 0; i < 2000; i++) compiled.checkData(doc);
let t = performance.now();
for (let i = 0; i < 50_000; i++) compiled.checkData(JSON.parse(JSON.stringify(doc)));
console.log(
  `checkData (JSON.parse + ajv) alone: ${(((performance.now() - t) * 1000) / 50_000).toFixed(2)} µs/job`,
);

const server = await RedisServer.start();
const redis = connectRedis(server.url);
const variants: [string, string][] = [["after, no contract", resolve(import.meta.dirname, "..")]];
if (values.before) variants.unshift(["before, no contract", resolve(values.before)]);
variants.push(["after, 30-field contract", resolve(import.meta.dirname, "..")]);
const results = new Map<string, Awaited<ReturnType<typeof measure>>[]>();
try {
  for (let rep = 0; rep < reps; rep++) {
    for (const [name, root] of variants) {
      await redis.flushall();
      const mod = (await import(`${root}/queue/index.ts`)) as {
        Producer: new (r: RedisClient) => Producerish;
      };
      const queue = `bench${rep}`;
      if (name.includes("30-field")) await setContract(redis, queue, contract, "bench");
      const r = await measure(redis, new mod.Producer(redis), queue, doc);
      (results.get(name) ?? results.set(name, []).get(name)!).push(r);
    }
  }
} finally {
  redis.disconnect();
  await server.stop();
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
console.log(
  `\n${reps} reps, medians; single: ${singleN} calls of 1 job, awaited one by one; bulk: ${bulkN} jobs in calls of ${batch}`,
);
console.log(
  "variant                     single µs/job  bulk µs/job  cmds/job sent (single, bulk)  cmds/job in scripts (single, bulk)",
);
for (const [name, rs] of results) {
  const m = (f: (r: (typeof rs)[number]) => number) => median(rs.map(f));
  console.log(
    `${name.padEnd(28)}${m((r) => r.singleUs)
      .toFixed(1)
      .padStart(13)}${m((r) => r.bulkUs)
      .toFixed(2)
      .padStart(13)}` +
      `${`${m((r) => r.single.sent).toFixed(3)}, ${m((r) => r.bulk.sent).toFixed(3)}`.padStart(30)}` +
      `${`${m((r) => r.single.inside).toFixed(2)}, ${m((r) => r.bulk.inside).toFixed(2)}`.padStart(36)}`,
  );
}

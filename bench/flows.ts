// What a flow costs Redis (docs/flows.md, "Costs"), on a fresh Redis, against the same work
// without a flow: a flow of `--jobs` N (one root → N−2 middle jobs → one sink, 2(N−2) edges) is
// enqueued, the root completed (releasing N−2), the middle jobs claimed and settled in batches of
// 32 (each one's end drops the sink's count) and the sink claimed with N−2 parents' results.
// Plain: N jobs enqueued and claimed and settled the same way. Commands and µs inside the script
// calls (INFO commandstats) per job, and bytes of a waiting middle job's record (MEMORY USAGE).
//   node bench/flows.ts [--jobs 1000] [--json]
import { Consumer, PipelineKeys, Producer, type ClaimedJob } from "../queue/index.ts";
import { client, snapshot, startBenchRedis, type RedisSnapshot } from "./lib/redis.ts";
import { intFlag, cliFlags, round } from "./lib/util.ts";

interface Cost {
  commands: number;
  callUs: number;
}

function cost(a: RedisSnapshot, b: RedisSnapshot): Cost {
  let callUs = 0;
  let commands = 0;
  for (const [name, s] of b.commands) {
    const calls = s.calls - (a.commands.get(name)?.calls ?? 0);
    if (calls <= 0 || name === "info") continue;
    if (name === "fcall" || name === "evalsha") callUs += s.usec - (a.commands.get(name)?.usec ?? 0);
    else commands += calls;
  }
  return { commands, callUs };
}

const per = (c: Cost, n: number) => ({ commands: round(c.commands / n, 2), us: round(c.callUs / n, 1) });

async function settleAll(consumer: Consumer, first: ClaimedJob[]): Promise<number> {
  let held = first;
  let done = 0;
  while (held.length > 0) {
    const r = await consumer.settleMany(
      held.map((job) => ({ job, settlement: { result: { ok: job.id } } })),
      32,
    );
    done += held.length;
    held = r.jobs;
  }
  return done;
}

const flags = cliFlags(["jobs", "json"]);
const n = intFlag(flags, "jobs", 1000);
const server = await startBenchRedis();
const redis = client(server.url, "flows-bench");
try {
  const producer = new Producer(redis);
  const opts = { workerId: "b", leaseMs: 30_000, retentionSeconds: 0 };
  // Warm the scripts (and the Function library) outside the measured blocks.
  await producer.enqueueFlow("warm", [{ key: "w", queue: "warm/a", data: 1 }]);
  await settleAll(
    new Consumer(redis, "warm/a", opts),
    (await new Consumer(redis, "warm/a", opts).claim(1)).jobs,
  );

  // Plain: N jobs, enqueued in one call, claimed and settled in batches of 32.
  let s0 = await snapshot(redis);
  await producer.enqueueMany(
    "plain/w",
    Array.from({ length: n }, (_, i) => ({ data: { i } })),
  );
  let s1 = await snapshot(redis);
  const plainEnqueue = cost(s0, s1);
  const plainBytes = Number(
    await redis.memory(
      "USAGE",
      new PipelineKeys("plain").job((await redis.lrange("cvy:{plain}:q:plain/w:line", 0, 0))[0]!),
    ),
  );
  const plain = new Consumer(redis, "plain/w", opts);
  s0 = await snapshot(redis);
  await settleAll(plain, (await plain.claim(32)).jobs);
  s1 = await snapshot(redis);
  const plainRun = cost(s0, s1);

  // The flow.
  const mids = Array.from({ length: n - 2 }, (_, i) => `m${i}`);
  s0 = await snapshot(redis);
  const { ids } = await producer.enqueueFlow("flow", [
    { key: "root", queue: "flow/a", data: { i: -1 } },
    ...mids.map((key, i) => ({ key, queue: "flow/b", data: { i }, parents: ["root"] })),
    { key: "sink", queue: "flow/c", data: { i: n }, parents: mids },
  ]);
  s1 = await snapshot(redis);
  const flowEnqueue = cost(s0, s1);
  const waitingBytes = Number(await redis.memory("USAGE", new PipelineKeys("flow").job(ids.m0!)));
  const a = new Consumer(redis, "flow/a", opts);
  s0 = await snapshot(redis);
  await settleAll(a, (await a.claim(1)).jobs);
  s1 = await snapshot(redis);
  const rootRelease = cost(s0, s1);
  const b = new Consumer(redis, "flow/b", opts);
  s0 = await snapshot(redis);
  await settleAll(b, (await b.claim(32)).jobs);
  s1 = await snapshot(redis);
  const midsRun = cost(s0, s1);
  const c = new Consumer(redis, "flow/c", opts);
  s0 = await snapshot(redis);
  const [sink] = (await c.claim(1)).jobs;
  s1 = await snapshot(redis);
  const sinkClaim = cost(s0, s1);
  const out = {
    jobs: n,
    edges: 2 * (n - 2),
    plain: {
      enqueuePerJob: per(plainEnqueue, n),
      claimSettlePerJob: per(plainRun, n),
      recordBytes: plainBytes,
    },
    flow: {
      enqueuePerJob: per(flowEnqueue, n),
      rootCompleteReleasingPerDependent: per(rootRelease, n - 2),
      middleClaimSettlePerJob: per(midsRun, n - 2),
      sinkClaim: { ...per(sinkClaim, 1), parents: Object.keys(sink?.parents ?? {}).length },
      waitingRecordBytes: waitingBytes,
    },
  };
  console.log(flags.has("json") ? JSON.stringify(out) : JSON.stringify(out, null, 2));
} finally {
  redis.disconnect();
  await server.stop();
}

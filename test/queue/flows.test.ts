// Flows against a real Redis (and the diamond on a real 3-node Cluster): jobs that wait for
// their parents, the parents' outcomes at claim, the policies on a dead or cancelled parent,
// cancel, and the backlog counts that leave waiting jobs out.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { Cluster } from "ioredis";
import {
  Consumer,
  InvalidFlowError,
  InvalidJobError,
  ContractViolationError,
  PipelineKeys,
  pollQueues,
  QueueKeys,
  setContract,
  type ClaimedJob,
  type RedisClient,
} from "../../queue/index.ts";
import { runScript } from "../../queue/scripts.ts";
import { pollUntil } from "../support/poll.ts";
import { describeOnRedisAndCluster, useQueueRedis } from "../support/redis.ts";

function consumer(redis: RedisClient, queue: string) {
  return new Consumer(redis, queue, { workerId: "w1", leaseMs: 30_000 });
}

/** Claims what is ready in `queue` (up to `count`) and returns the jobs by id. */
async function claimAll(redis: RedisClient, queue: string, count = 1000): Promise<ClaimedJob[]> {
  return (await consumer(redis, queue).claim(count)).jobs;
}

async function complete(redis: RedisClient, job: ClaimedJob, result: unknown): Promise<void> {
  assert.equal(await consumer(redis, job.queue).complete(job, result), true);
}

/** Fails the job for good (attempts spent: it is dead). */
async function kill(redis: RedisClient, job: ClaimedJob): Promise<void> {
  assert.equal(
    await consumer(redis, job.queue).fail(
      job,
      { name: "Error", message: "boom" },
      { retryable: false, retryDelayMs: 0 },
    ),
    "dead",
  );
}

/** Bytes Redis has sent to clients so far, over every primary (a Cluster's too). */
async function netOutput(redis: RedisClient): Promise<number> {
  const nodes = redis instanceof Cluster ? redis.nodes("master") : [redis];
  let total = 0;
  for (const node of nodes)
    total += Number(/total_net_output_bytes:(\d+)/.exec(await node.info("stats"))![1]);
  return total;
}

describeOnRedisAndCluster(
  "flows",
  (clients, name) => {
    test("a diamond (a → b, c → d) across two stages runs in order with its parents' results at hand", async () => {
      const { redis, producer, admin } = clients();
      const p = name();
      const one = `${p}/one`;
      const two = `${p}/two`;
      const { flowId, ids } = await producer.enqueueFlow(p, [
        { key: "d", queue: one, data: { step: "d" }, parents: ["b", "c"] },
        { key: "b", queue: two, data: { step: "b" }, parents: ["a"] },
        { key: "a", queue: one, data: { step: "a" } },
        { key: "c", queue: two, data: { step: "c" }, parents: ["a"] },
      ]);
      assert.deepEqual(Object.keys(ids).sort(), ["a", "b", "c", "d"]);
      assert.equal((await admin.counts(two)).ready, 0);
      assert.equal((await admin.counts(one)).ready, 1);

      const [a, ...noMore] = await claimAll(redis, one);
      assert.equal(a!.id, ids.a);
      assert.deepEqual(noMore, []);
      assert.equal(a!.parents, undefined);
      assert.deepEqual(await claimAll(redis, two), []);
      await complete(redis, a!, { n: 1 });

      const bc = await claimAll(redis, two);
      assert.deepEqual(bc.map((j) => j.id).sort(), [ids.b, ids.c].sort());
      for (const j of bc) assert.deepEqual(j.parents, { a: { id: ids.a, result: { n: 1 } } });
      const b = bc.find((j) => j.id === ids.b)!;
      const c = bc.find((j) => j.id === ids.c)!;
      await complete(redis, b, "B");
      assert.deepEqual(await claimAll(redis, one), [], "d waits for c");
      const view = await admin.flow(flowId);
      assert.equal(view?.jobs.find((j) => j.key === "d")?.pending, 1);
      assert.deepEqual((await admin.job(ids.d!, p))!.flow, {
        id: flowId,
        key: "d",
        parents: ["b", "c"],
        pending: 1,
      });
      await complete(redis, c, ["C"]);

      const [d] = await claimAll(redis, one);
      assert.equal(d!.id, ids.d);
      assert.deepEqual(d!.parents, { b: { id: ids.b, result: "B" }, c: { id: ids.c, result: ["C"] } });
      await complete(redis, d!, null);
      const done = await admin.flow(flowId, p);
      assert.deepEqual(done?.counts, { completed: 4 });
      // (every job ended: the flow's hash expires, 7 days on)
      const ttl = await redis.ttl(new PipelineKeys(p).flow(flowId));
      assert.ok(ttl > 6 * 24 * 3600 && ttl <= 7 * 24 * 3600, `ttl ${ttl}`);
      assert.deepEqual(done?.jobs.find((j) => j.key === "d")?.parents.sort(), ["b", "c"]);
    });

    // The size: every one of the 1,000 middles completes before the sink can be claimed,
    // and the sink's claim carries all 1,000 results (figures printed for docs/flows.md).
    test("wide fan-in 1 → 1,000 → 1 across two stages: the sink starts once all 1,000 completed, with their 1,000 results", async () => {
      const { redis, producer } = clients();
      const p = name();
      const one = `${p}/one`;
      const two = `${p}/two`;
      const mids = Array.from({ length: 1000 }, (_, i) => `m${i}`);
      const t0 = performance.now();
      const { ids } = await producer.enqueueFlow(p, [
        { key: "root", queue: one, data: 0 },
        ...mids.map((key) => ({ key, queue: two, data: key, parents: ["root"] })),
        { key: "sink", queue: one, data: "sink", parents: mids },
      ]);
      const enqueueMs = performance.now() - t0;
      const [root, ...noMore] = await claimAll(redis, one);
      assert.equal(root!.id, ids.root);
      assert.deepEqual(noMore, []);
      await complete(redis, root!, "r");
      const middle: ClaimedJob[] = [];
      while (middle.length < 1000) {
        const got = await claimAll(redis, two);
        assert.ok(got.length > 0, `only ${middle.length} of 1,000 middles were released`);
        middle.push(...got);
      }
      for (const [i, job] of middle.entries()) {
        if (i % 100 === 0 || i === 999)
          assert.deepEqual(await claimAll(redis, one), [], `the sink waits (${i} of 1,000 done)`);
        await complete(redis, job, JSON.parse(job.rawData));
      }
      const before = await netOutput(redis);
      const [sink, ...others] = await claimAll(redis, one);
      const replyBytes = (await netOutput(redis)) - before;
      assert.equal(sink!.id, ids.sink);
      assert.deepEqual(others, []);
      assert.equal(Object.keys(sink!.parents!).length, 1000);
      for (const key of mids) assert.deepEqual(sink!.parents![key], { id: ids[key], result: key });
      process.stderr.write(
        `# fan-in 1 → 1,000 → 1 (${redis instanceof Cluster ? "Cluster" : "single Redis"}): enqueueFlow ${enqueueMs.toFixed(0)} ms; the sink's claim reply ≈ ${(replyBytes / 1024).toFixed(1)} KiB\n`,
      );
    });

    test("large parent results come by reference, fetched on demand; small ones inline; 1,000 large parents claim under a bound", async () => {
      const { redis, producer } = clients();
      const p = name();
      const one = `${p}/one`;
      const two = `${p}/two`;
      const mids = Array.from({ length: 1000 }, (_, i) => `m${i}`);
      const { ids } = await producer.enqueueFlow(p, [
        { key: "root", queue: one, data: 0 },
        ...mids.map((key) => ({ key, queue: two, data: key, parents: ["root"] })),
        { key: "small", queue: two, data: "small", parents: ["root"] },
        { key: "sink", queue: one, data: "sink", parents: [...mids, "small"] },
      ]);
      const [root] = await claimAll(redis, one);
      await complete(redis, root!, "r");
      const middle: ClaimedJob[] = [];
      while (middle.length < 1001) {
        const got = await claimAll(redis, two);
        assert.ok(got.length > 0, `only ${middle.length} of 1,001 were released`);
        middle.push(...got);
      }
      // 10 KiB each, every one different
      const large = (key: string) => ({ key, text: key.padEnd(10_240, "x") });
      for (const job of middle) {
        const key = JSON.parse(job.rawData) as string;
        await complete(redis, job, key === "small" ? { n: 1 } : large(key));
      }
      const before = await netOutput(redis);
      const t0 = performance.now();
      const [sink] = await claimAll(redis, one);
      const claimMs = performance.now() - t0;
      const replyBytes = (await netOutput(redis)) - before;
      process.stderr.write(
        `# fan-in 1 → 1,000 → 1 of 10 KiB results (${redis instanceof Cluster ? "Cluster" : "single Redis"}): the sink's claim reply ≈ ${(replyBytes / 1024).toFixed(1)} KiB, ${claimMs.toFixed(1)} ms\n`,
      );
      assert.equal(sink!.id, ids.sink);
      assert.deepEqual(sink!.parents!.small, { id: ids.small, result: { n: 1 } });
      const flowId = sink!.parents!.m0!.ref!.split(":")[0];
      for (const key of mids)
        assert.deepEqual(sink!.parents![key], {
          id: ids[key],
          ref: `${flowId}:${key}`,
          bytes: Buffer.byteLength(JSON.stringify(large(key))),
        });
      const c = consumer(redis, one);
      assert.deepEqual(await c.parentResult(sink!, "m7"), large("m7"));
      assert.deepEqual(await c.parentResult(sink!, "m999"), large("m999"));
      assert.deepEqual(await c.parentResult(sink!, "small"), { n: 1 });
      await assert.rejects(c.parentResult(sink!, "nope"), {
        name: "ParentResultError",
        message: /no parent "nope"/,
      });
      // 1,000 references of about 70 bytes each, where the results are 10 MiB
      assert.ok(replyBytes < 128 * 1024, `the sink's claim reply is ${replyBytes} bytes`);
    });

    test("a flow's idempotency key: the same flow again returns the first one's ids and writes nothing", async () => {
      const { redis, producer, admin } = clients();
      const p = name();
      const jobs = [
        { key: "a", queue: `${p}/q`, data: 1 },
        { key: "b", queue: `${p}/q`, data: 2, parents: ["a"] },
      ];
      const first = await producer.enqueueFlow(p, jobs, { idempotencyKey: "order-7" });
      assert.equal(first.created, true);
      const outbox = await redis.xlen(new PipelineKeys(p).outbox);
      const again = await producer.enqueueFlow(p, [...jobs].reverse(), { idempotencyKey: "order-7" });
      assert.deepEqual(again, { ...first, created: false });
      assert.equal(await redis.xlen(new PipelineKeys(p).outbox), outbox, "nothing written");
      const counts = await admin.counts(`${p}/q`);
      assert.deepEqual([counts.ready, counts.waitingChildren], [1, 1]);
      // another key: another flow
      const other = await producer.enqueueFlow(p, jobs, { idempotencyKey: "order-8" });
      assert.equal(other.created, true);
      assert.notEqual(other.flowId, first.flowId);
      // the key names a flow without this job: refused by name
      await assert.rejects(
        producer.enqueueFlow(p, [...jobs, { key: "c", queue: `${p}/q`, data: 3 }], {
          idempotencyKey: "order-7",
        }),
        { name: "InvalidFlowError", message: new RegExp(`names flow ${first.flowId}, which has no job c`) },
      );
      await assert.rejects(producer.enqueueFlow(p, jobs, { idempotencyKey: "" }), {
        name: "InvalidFlowError",
        message: /idempotencyKey must be a string of 1\.\.200 characters/,
      });
    });
  },
  { single: (n) => `fl${n}`, cluster: (n) => `flp${n}` },
);

describe("flows (single Redis)", () => {
  const q = useQueueRedis();
  let n = 0;
  const fresh = () => `fx${++n}`;

  test("delayMs: a root waits in delayed from enqueue, a dependent from its release", async () => {
    const { redis, producer, admin } = q();
    const p = fresh();
    const w = `${p}/w`;
    const t0 = Date.now();
    const { ids } = await producer.enqueueFlow(p, [
      { key: "late", queue: w, data: 0, delayMs: 60_000 },
      { key: "root", queue: w, data: 1 },
      { key: "soon", queue: w, data: 2, parents: ["root"], delayMs: 300, priority: 5 },
      { key: "later", queue: w, data: 3, parents: ["root"], delayMs: 60_000 },
    ]);
    const k = new QueueKeys(w);
    assert.equal((await admin.job(ids.late!, p))!.state, "delayed");
    assert.ok(Number(await redis.zscore(k.delayed, ids.late!)) >= t0 + 60_000);
    const [root, ...noMore] = await claimAll(redis, w);
    assert.equal(root!.id, ids.root);
    assert.deepEqual(noMore, []);
    const released = Date.now();
    await complete(redis, root!, "r");
    for (const key of ["soon", "later"]) assert.equal((await admin.job(ids[key]!, p))!.state, "delayed", key);
    assert.ok(Number(await redis.zscore(k.delayed, ids.later!)) >= released + 60_000);
    assert.equal((await admin.counts(w)).waitingChildren ?? 0, 0);
    const soon = await pollUntil("soon claimable", async () => (await claimAll(redis, w))[0], {
      timeoutMs: 10_000,
    });
    assert.equal(soon.id, ids.soon);
    assert.ok(Date.now() >= released + 300);
    assert.deepEqual(soon.parents, { root: { id: ids.root, result: "r" } });
    assert.deepEqual(await claimAll(redis, w), [], "late and later still wait");
  });

  test("uses: a flow job joins its resources' implicit group (or its own), a dependent once released", async () => {
    const { redis, producer } = q();
    const p = fresh();
    const w = `${p}/w`;
    const uses = { llm: { tokens: 100 } };
    const { ids } = await producer.enqueueFlow(p, [
      { key: "u", queue: w, data: 0, uses },
      { key: "a", queue: w, data: 1 },
      { key: "b", queue: w, data: 2, parents: ["a"], uses },
      { key: "c", queue: w, data: 3, parents: ["a"], uses, group: "acme" },
    ]);
    const pk = new PipelineKeys(p);
    const k = new QueueKeys(w);
    const rec = async (id: string) => redis.hmget(pk.job(id), "group", "uses", "state");
    assert.deepEqual(await rec(ids.u!), ["~res:llm", JSON.stringify(uses), "ready"]);
    assert.deepEqual(await rec(ids.b!), ["~res:llm", JSON.stringify(uses), "waiting-children"]);
    assert.deepEqual(await rec(ids.c!), ["acme", JSON.stringify(uses), "waiting-children"]);
    assert.deepEqual(await redis.lrange(k.groupLine("~res:llm"), 0, -1), [ids.u]);
    // (a job with uses waits for its resource: only the plain root is claimed here)
    const [a, ...noMore] = await claimAll(redis, w);
    assert.equal(a?.id, ids.a);
    assert.deepEqual(noMore, []);
    await complete(redis, a!, "ok");
    assert.equal((await rec(ids.b!))[2], "ready");
    assert.deepEqual(await redis.lrange(k.groupLine("~res:llm"), 0, -1), [ids.u, ids.b]);
    assert.deepEqual(await redis.lrange(k.groupLine("acme"), 0, -1), [ids.c]);
  });

  test("notify: a flow job's own notification when it completes, and when a dead parent cancels it", async () => {
    const { redis, producer } = q();
    const p = fresh();
    const w = `${p}/w`;
    const notify = { url: "https://hooks.example/flow", events: ["completed", "cancelled"] as const };
    const { ids } = await producer.enqueueFlow(p, [
      { key: "ok", queue: w, data: 1, notify: { ...notify, events: [...notify.events] } },
      { key: "bad", queue: w, data: 2 },
      { key: "kid", queue: w, data: 3, parents: ["bad"], notify: { ...notify, events: [...notify.events] } },
    ]);
    const jobs = await claimAll(redis, w);
    await complete(
      redis,
      jobs.find((j) => j.id === ids.ok)!,
      "done",
    );
    await kill(
      redis,
      jobs.find((j) => j.id === ids.bad)!,
    );
    const entries = (await redis.xrange(new PipelineKeys(p).notify, "-", "+")).map(([, f]) => {
      const o: Record<string, string> = {};
      for (let i = 0; i < f.length; i += 2) o[f[i]!] = f[i + 1]!;
      return o;
    });
    assert.deepEqual(
      entries.map((e) => [e.id, e.state, e.url]),
      [
        [ids.ok, "completed", notify.url],
        [ids.kid, "cancelled", notify.url],
      ],
    );
  });

  test("options a flow job does not take are refused by name, with the reason", async () => {
    const { producer } = q();
    const p = fresh();
    const job = { key: "a", queue: `${p}/w`, data: 1 };
    await assert.rejects(
      producer.enqueueFlow(p, [{ ...job, dedupe: { key: "k", mode: "throttle", windowMs: 1000 } } as never]),
      {
        name: "InvalidFlowError",
        message: /flow job a: dedupe is not supported in a flow: a debounced or throttled job/,
      },
    );
    await assert.rejects(producer.enqueueFlow(p, [{ ...job, idempotencyKey: "x" } as never]), {
      name: "InvalidFlowError",
      message: /idempotencyKey is not supported on a flow job: give the flow one/,
    });
    await assert.rejects(producer.enqueueFlow(p, [{ ...job, delayMs: -1 }]), {
      name: "InvalidJobError",
      message: /flow job a: delay must be ≥ 0/,
    });
    await assert.rejects(
      producer.enqueueFlow(p, [{ ...job, notify: { url: "ftp://x", events: ["completed"] } }]),
      {
        name: "InvalidJobError",
        message: /flow job a: notify/,
      },
    );
  });

  test("wide fan-in 1 → 200 → 1: the last job starts once all 200 completed, with their 200 results", async () => {
    const { redis, producer } = q();
    const p = fresh();
    const mids = Array.from({ length: 200 }, (_, i) => `m${i}`);
    const { ids } = await producer.enqueueFlow(p, [
      { key: "root", queue: `${p}/a`, data: 0 },
      ...mids.map((key) => ({ key, queue: `${p}/b`, data: key, parents: ["root"] })),
      { key: "sink", queue: `${p}/c`, data: "sink", parents: mids },
    ]);
    const [root] = await claimAll(redis, `${p}/a`);
    await complete(redis, root!, "r");
    const middle = await claimAll(redis, `${p}/b`);
    assert.equal(middle.length, 200);
    for (const [i, job] of middle.entries()) {
      assert.deepEqual(await claimAll(redis, `${p}/c`), [], `sink waits (${i} of 200 done)`);
      await complete(redis, job, JSON.parse(job.rawData));
    }
    const [sink] = await claimAll(redis, `${p}/c`);
    assert.equal(sink!.id, ids.sink);
    assert.equal(Object.keys(sink!.parents!).length, 200);
    for (const key of mids) assert.deepEqual(sink!.parents![key], { id: ids[key], result: key });
  });

  test("a dead parent: fail cancels its dependents transitively, continue runs with its error, ignore without it", async () => {
    const { redis, producer, admin } = q();
    const p = fresh();
    const w = `${p}/w`;
    const { flowId, ids } = await producer.enqueueFlow(p, [
      { key: "bad", queue: w, data: 1 },
      { key: "good", queue: w, data: 2 },
      { key: "f", queue: w, data: 3, parents: ["bad", "good"] },
      { key: "f2", queue: w, data: 4, parents: ["f"], onParentFailure: "continue" },
      { key: "cont", queue: w, data: 5, parents: ["bad", "good"], onParentFailure: "continue" },
      { key: "ign", queue: w, data: 6, parents: ["bad", "good"], onParentFailure: "ignore" },
    ]);
    const first = await claimAll(redis, w);
    assert.deepEqual(first.map((j) => j.id).sort(), [ids.bad, ids.good].sort());
    await complete(
      redis,
      first.find((j) => j.id === ids.good)!,
      "ok",
    );
    await kill(
      redis,
      first.find((j) => j.id === ids.bad)!,
    );

    const view = (await admin.flow(flowId))!;
    const state = (key: string) => view.jobs.find((j) => j.key === key)!;
    assert.equal(state("bad").state, "dead");
    assert.equal(state("f").state, "cancelled");
    assert.match(state("f").reason!, new RegExp(`parent bad \\(${ids.bad}\\) is dead`));
    // (kept as a cancel keeps a job, then reclaimed by the queue's workers)
    const kept = await redis.ttl(new PipelineKeys(p).job(ids.f!));
    assert.ok(kept > 24 * 3600 && kept <= 25 * 3600, `ttl ${kept}`);
    const finished = await redis.zrange(new QueueKeys(w).finished, 0, -1);
    assert.ok(
      finished.some((m) => m.split(" ").includes(ids.f!)),
      finished.join(" | "),
    );
    // f2 follows its own policy: its parent f was cancelled, and it continues with f's error.
    const next = await claimAll(redis, w);
    assert.deepEqual(next.map((j) => j.id).sort(), [ids.f2, ids.cont, ids.ign].sort());
    const byId = new Map(next.map((j) => [j.id, j]));
    assert.equal(byId.get(ids.f2!)!.parents!.f!.id, ids.f);
    assert.match(String(byId.get(ids.f2!)!.parents!.f!.error), /cancelled: parent bad/);
    const cont = byId.get(ids.cont!)!.parents!;
    assert.deepEqual(cont.good, { id: ids.good, result: "ok" });
    assert.equal(cont.bad!.id, ids.bad);
    assert.match(String(cont.bad!.error), /boom/);
    assert.deepEqual(byId.get(ids.ign!)!.parents, { good: { id: ids.good, result: "ok" } });
  });

  test("a cancelled parent: its fail-policy dependents are cancelled naming it, continue ones run with its error", async () => {
    const { redis, producer, admin } = q();
    const p = fresh();
    const w = `${p}/w`;
    const { flowId, ids } = await producer.enqueueFlow(p, [
      { key: "a", queue: w, data: 1 },
      { key: "f", queue: w, data: 2, parents: ["a"] },
      { key: "c", queue: w, data: 3, parents: ["a"], onParentFailure: "continue" },
    ]);
    assert.equal((await admin.cancel(ids.a!)).outcome, "cancelled");
    const view = (await admin.flow(flowId))!;
    assert.equal(view.jobs.find((j) => j.key === "f")!.state, "cancelled");
    assert.match(view.jobs.find((j) => j.key === "f")!.reason!, /parent a \(.*\) was cancelled/);
    const [c] = await claimAll(redis, w);
    assert.equal(c!.id, ids.c);
    assert.deepEqual(c!.parents, { a: { id: ids.a, error: "cancelled" } });
    // A waiting flow job is not deleted (its count and dependents would be left behind): cancel it first.
    const { ids: more } = await producer.enqueueFlow(p, [
      { key: "x", queue: w, data: 1 },
      { key: "y", queue: w, data: 2, parents: ["x"] },
    ]);
    assert.deepEqual(await admin.deleteJobs(w, [more.y!]), [
      { id: more.y, outcome: "refused", state: "waiting-children" },
    ]);
    // A ready one deleted ends as a cancelled one: its fail-policy dependent is cancelled.
    assert.deepEqual(await admin.deleteJobs(w, [more.x!]), [
      { id: more.x, outcome: "deleted", state: "ready" },
    ]);
    assert.equal((await admin.job(more.y!, w))!.state, "cancelled");
  });

  test("a dead parent retried and completed: its fail dependents stay cancelled, a waiting continue dependent sees the result", async () => {
    const { redis, producer, admin } = q();
    const p = fresh();
    const w = `${p}/w`;
    const { flowId, ids } = await producer.enqueueFlow(p, [
      { key: "a", queue: w, data: 1 },
      { key: "b", queue: w, data: 2 },
      { key: "f", queue: w, data: 3, parents: ["a"] },
      { key: "c", queue: w, data: 4, parents: ["a", "b"], onParentFailure: "continue" },
    ]);
    const first = await claimAll(redis, w);
    await kill(
      redis,
      first.find((j) => j.id === ids.a)!,
    );
    assert.equal(await admin.retryDead(w, [ids.a!]), 1);
    const [again] = await claimAll(redis, w);
    assert.equal(again!.id, ids.a);
    await complete(redis, again!, "late");
    await complete(
      redis,
      first.find((j) => j.id === ids.b)!,
      "b",
    );
    const [c, ...rest] = await claimAll(redis, w);
    assert.deepEqual(rest, [], "c released once, f stays cancelled");
    assert.deepEqual(c!.parents, { a: { id: ids.a, result: "late" }, b: { id: ids.b, result: "b" } });
    const view = (await admin.flow(flowId))!;
    assert.equal(view.jobs.find((j) => j.key === "f")!.state, "cancelled");
  });

  test("a parent dead-lettered by the sweeper (stalled) ends its flow edges like one that failed", async () => {
    const { redis, producer, admin } = q();
    const p = fresh();
    const w = `${p}/w`;
    const { flowId, ids } = await producer.enqueueFlow(p, [
      { key: "a", queue: w, data: 1 },
      { key: "f", queue: w, data: 2, parents: ["a"] },
      { key: "c", queue: w, data: 3, parents: ["a"], onParentFailure: "continue" },
    ]);
    const short = new Consumer(redis, w, { workerId: "w1", leaseMs: 1 });
    const [a] = (await short.claim(1)).jobs;
    assert.equal(a!.id, ids.a);
    // (lease 1 ms; maxStalls 0 dead-letters an expired lease at once)
    await pollUntil(
      "a dead-lettered by the sweep",
      async () => (await short.sweep({ maxStalls: 0, lockMs: 1 })).deadLettered === 1,
    );
    const view = (await admin.flow(flowId))!;
    assert.equal(view.jobs.find((j) => j.key === "f")!.state, "cancelled");
    const [c] = await claimAll(redis, w);
    assert.equal(c!.id, ids.c);
    assert.match(String(c!.parents!.a!.error), /stalled 1 times/);
  });

  test("each job's data is checked against its stage's contract; a violation names the key, nothing written", async () => {
    const { redis, producer } = q();
    const p = fresh();
    await setContract(redis, `${p}/typed`, { data: { type: "object", required: ["text"] } }, "test");
    const err = await producer
      .enqueueFlow(p, [
        { key: "ok", queue: `${p}/free`, data: 1 },
        { key: "bad", queue: `${p}/typed`, data: { nope: 1 }, parents: ["ok"] },
      ])
      .then(
        () => assert.fail("enqueued"),
        (e: unknown) => e,
      );
    assert.ok(err instanceof ContractViolationError, String(err));
    assert.equal(err.jobs[0]!.id, "bad");
    assert.deepEqual(
      (await redis.keys(`*{${p}}*`)).filter((k) => !k.endsWith(":contract")),
      [],
    );
    const { ids } = await producer.enqueueFlow(p, [
      { key: "good", queue: `${p}/typed`, data: { text: "t" } },
    ]);
    assert.equal((await claimAll(redis, `${p}/typed`))[0]!.id, ids.good);
  });

  test("a flow job that fans out ends with its join: its dependent gets the join's result", async () => {
    const { redis, producer, admin } = q();
    const p = fresh();
    const w = `${p}/w`;
    const { flowId, ids } = await producer.enqueueFlow(p, [
      { key: "a", queue: w, data: 1 },
      { key: "b", queue: `${p}/after`, data: 2, parents: ["a"] },
    ]);
    const [a] = await claimAll(redis, w);
    assert.equal(await consumer(redis, w).fanOut(a!, [1, 2], `${p}/kids`, `${p}/join`), 2);
    for (const kid of await claimAll(redis, `${p}/kids`))
      await complete(redis, kid, JSON.parse(kid.rawData) * 10);
    assert.deepEqual(await claimAll(redis, `${p}/after`), [], "b waits for the join");
    const [join] = await claimAll(redis, `${p}/join`);
    assert.equal(join!.id, `${ids.a}:join`);
    await complete(redis, join!, "joined");
    const [b] = await claimAll(redis, `${p}/after`);
    assert.equal(b!.id, ids.b);
    assert.deepEqual(b!.parents, { a: { id: `${ids.a}:join`, result: "joined" } });
    await complete(redis, b!, null);
    const view = (await admin.flow(flowId))!;
    assert.deepEqual(view.counts, { joined: 1, completed: 1 });
    assert.ok((await redis.ttl(new PipelineKeys(p).flow(flowId))) > 0, "every job of the flow ended");
  });

  test("a flow job cancelled while fanned out (no join yet) ends as cancelled: its dependents follow their policies", async () => {
    const { redis, producer, admin } = q();
    const p = fresh();
    const w = `${p}/w`;
    const { ids } = await producer.enqueueFlow(p, [
      { key: "a", queue: w, data: 1 },
      { key: "b", queue: `${p}/after`, data: 2, parents: ["a"], onParentFailure: "continue" },
    ]);
    const [a] = await claimAll(redis, w);
    assert.equal(await consumer(redis, w).fanOut(a!, [1], `${p}/kids`, `${p}/join`), 1);
    assert.equal((await admin.cancel(ids.a!)).outcome, "cancelled");
    const [b] = await claimAll(redis, `${p}/after`);
    assert.deepEqual(b!.parents, { a: { id: ids.a, error: "cancelled" } });
  });

  test("cancelling a flow cancels every unfinished job, a running one included; none of its dependents starts", async () => {
    const { redis, producer, admin } = q();
    const p = fresh();
    const w = `${p}/w`;
    const { flowId, ids } = await producer.enqueueFlow(p, [
      { key: "a", queue: w, data: 1 },
      { key: "b", queue: w, data: 2 },
      { key: "c", queue: w, data: 3, parents: ["a", "b"], onParentFailure: "ignore" },
      { key: "d", queue: w, data: 4, parents: ["c"], onParentFailure: "continue" },
    ]);
    const [first] = await claimAll(redis, w, 1);
    await complete(redis, first!, "done");
    const [running] = await claimAll(redis, w, 1);
    assert.deepEqual([first!.id, running!.id].sort(), [ids.a, ids.b].sort());
    const result = await admin.cancelFlow(flowId);
    assert.deepEqual(result, { id: flowId, outcome: "cancelled", jobsCancelled: 3, total: 4 });
    assert.equal(
      await consumer(redis, w).complete(running!, "late"),
      false,
      "the running job's late result is refused",
    );
    assert.deepEqual(await claimAll(redis, w), []);
    assert.deepEqual((await admin.flow(flowId))!.counts, { completed: 1, cancelled: 3 });
    assert.equal((await admin.cancelFlow("nope")).outcome, "notFound");
  });

  test("jobs waiting for their parents are not in the backlog counts, only in waitingChildren", async () => {
    const { redis, producer, admin } = q();
    const p = fresh();
    const w = `${p}/w`;
    const { ids } = await producer.enqueueFlow(p, [
      { key: "a", queue: `${p}/first`, data: 1 },
      ...Array.from({ length: 5 }, (_, i) => ({ key: `k${i}`, queue: w, data: i, parents: ["a"] })),
    ]);
    const waiting = await admin.counts(w, { counters: true });
    assert.equal(waiting.ready, 0);
    assert.equal(waiting.backlog, 0);
    assert.equal(waiting.enqueued, 0);
    assert.equal(waiting.waitingChildren, 5);
    // The operator's poll (poll_queues) sees the same: no backlog to scale for.
    const [polled] = await pollQueues(redis, [w]);
    assert.equal(polled!.counts!.backlog, 0);
    assert.equal(polled!.counts!.waitingChildren, 5);
    assert.equal(polled!.control?.paused, false);
    const [a] = await claimAll(redis, `${p}/first`);
    assert.equal(a!.id, ids.a);
    await complete(redis, a!, 1);
    const ready = await admin.counts(w, { counters: true });
    assert.equal(ready.ready, 5);
    assert.equal(ready.waitingChildren, undefined);
    assert.equal(ready.enqueued, 5);
  });

  test("a bad flow is refused before anything is written, naming what is wrong", async () => {
    const { redis, producer } = q();
    const p = fresh();
    const w = `${p}/w`;
    const refused = async (
      jobs: unknown,
      message: RegExp,
      type: new (...a: never[]) => Error = InvalidFlowError,
    ) =>
      assert.rejects(producer.enqueueFlow(p, jobs as never), (err: Error) => {
        assert.ok(err instanceof type, `${err.name}: ${err.message}`);
        assert.match(err.message, message);
        return true;
      });
    await refused([], /at least one job/);
    await refused(
      [
        { key: "a", queue: w, data: 1, parents: ["b"] },
        { key: "b", queue: w, data: 1, parents: ["a"] },
      ],
      /cycle: a, b/,
    );
    await refused(
      [{ key: "a", queue: w, data: 1, parents: ["zz"] }],
      /parent "zz" is not a key of this flow/,
    );
    await refused(
      [
        { key: "a", queue: w, data: 1 },
        { key: "a", queue: w, data: 2 },
      ],
      /flow job a: duplicate key/,
    );
    await refused([{ key: "a", queue: "other/w", data: 1 }], /queue other\/w is not of pipeline/);
    await refused(
      [{ key: "a", queue: w, data: 1, contentHash: "h" } as never],
      /contentHash is not supported in a flow/,
    );
    await refused([{ key: "a", queue: w, data: 1, onParentFailure: "skip" }], /onParentFailure must be/);
    await refused([{ key: "a b", queue: w, data: 1 }], /key must be/);
    await refused([{ key: "a", queue: w, data: undefined }], /flow job a: data is required/, InvalidJobError);
    await refused(
      Array.from({ length: 10_001 }, (_, i) => ({ key: `k${i}`, queue: w, data: 1 })),
      /at most 10000 jobs/,
    );
    await refused(
      [{ key: "a", queue: w, data: 1, parents: Array.from({ length: 10_001 }, (_, i) => `k${i}`) }],
      /at most 10000 parents/,
    );
    assert.deepEqual(await redis.keys(`*{${p}}*`), []);
  });

  test("enqueue_flow itself refuses what another client might send: a parent after its child or twice, a bad policy, a long group, nothing written", async () => {
    const { redis } = q();
    const p = fresh();
    const k = new QueueKeys(`${p}/w`);
    const pk = new PipelineKeys(p);
    const call = (fields: string, ...values: string[]) =>
      runScript(
        redis,
        "enqueue_flow",
        [pk.outbox, pk.meta, pk.seq, pk.flow("f1"), k.ready, k.delayed, k.counts, k.wake, k.contract],
        [
          JSON.stringify({
            jobPrefix: pk.jobPrefix,
            flowId: "f1",
            now: Date.now(),
            maxPayloadBytes: 1024,
            queues: [k.queue],
            jobFields: fields.split(","),
          }),
          ...values,
        ],
      );
    const refused = (p: Promise<unknown>, message: RegExp) =>
      assert.rejects(p, (err: Error) => {
        assert.ok(err instanceof InvalidFlowError, `${err.name}: ${err.message}`);
        assert.match(err.message, message);
        return true;
      });
    await refused(
      call("id,key,queue,data,parents", "j2", "b", k.queue, "1", "a", "j1", "a", k.queue, "1", ""),
      /job b: parent a is not a job listed before it/,
    );
    await refused(
      call("id,key,queue,data,onParentFailure", "j1", "a", k.queue, "1", "skip"),
      /onParentFailure must be fail, continue or ignore, got skip/,
    );
    await refused(call("id,data,key,queue", "j1", "1", "a", k.queue), /misplaced job field data/);
    await refused(
      call("id,key,queue,data,dedupe", "j1", "a", k.queue, "1", "throttle:5:k"),
      /unknown, repeated or misplaced job field dedupe/,
    );
    await refused(
      call("id,key,queue,data,delayMs", "j1", "a", k.queue, "1", "-5"),
      /job a: delayMs must be an integer ≥ 0/,
    );
    await assert.rejects(call("id,key,queue,data,notify", "j1", "a", k.queue, "1", '{"url":"ftp://x"}'), {
      message: /job a: notify must be JSON/,
    });
    await assert.rejects(call("id,key,queue,data,uses", "j1", "a", k.queue, "1", "[]"), {
      message: /job a: uses must be a JSON object/,
    });
    await assert.rejects(call("id,key,queue,data,group", "j1", "a", k.queue, "1", "g".repeat(129)), {
      message: /job a: group is 129 bytes, limit 128/,
    });
    await refused(
      call("id,key,queue,data,parents", "j1", "a", k.queue, "1", "", "j2", "b", k.queue, "1", "a a"),
      /job b: parent a is listed twice/,
    );
    assert.deepEqual(await redis.keys(`*{${p}}*`), []);
  });

  test("a job with no parents costs what it cost: the claim → complete path sends the same commands", async () => {
    const { redis, producer } = q();
    const p = fresh();
    const keys = new QueueKeys(`${p}/w`);
    await producer.enqueue(keys.queue, 1);
    const [job] = await claimAll(redis, keys.queue);
    await complete(redis, job!, 1);
    // (measured in docs/flows.md with bench/rawLoop.ts; here: the job's record gained no field)
    assert.deepEqual(
      Object.keys(await redis.hgetall(keys.job(job!.id))).filter((f) =>
        /flow|parents|dependents|pending/.test(f),
      ),
      [],
    );
  });
});

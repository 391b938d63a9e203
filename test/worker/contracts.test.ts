// Stage contracts at settle and at advance, with real worker processes on real Redis: a result
// that breaks the stage's result schema is a failed attempt (retried, then dead with the
// violation and the refused result kept); a result handed to the next stage must keep that
// stage's data schema (the producing stage's attempt fails, the next stage gets nothing); a
// contract set while the worker runs is picked up from the claim's hash, and a next stage's
// contract from the settle's refusal. One case on a 3-node Redis Cluster.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import {
  connectRedis,
  Producer,
  QueueAdmin,
  setContract,
  type Contract,
  type RedisClient,
} from "../../queue/index.ts";
import { stopProcess, waitFor } from "../support/processes.ts";
import { RedisClusterServer } from "../support/redis.ts";
import { WorkerTestBed } from "../support/testbed.ts";
import { CONVEYOR, NODE, REPO, startWorker, type WorkerProcess } from "../support/workers.ts";

const HANDLER = `module:${join(REPO, "test/fixtures/contractHandler.js")}`;
/** Retries come soon: the tests wait for their outcome, not for a backoff. */
const FAST_RETRIES = { CONVEYOR_BACKOFF_BASE: "20ms", CONVEYOR_BACKOFF_MAX: "100ms" };

const NAMED: Contract = {
  result: {
    type: "object",
    required: ["name"],
    properties: { name: { type: "string" } },
  },
};
const NEEDS_X: Contract = {
  data: { type: "object", required: ["x"], properties: { x: { type: "integer" } } },
};

async function finished(admin: QueueAdmin, id: string, queue: string) {
  return waitFor(`job ${id} finished`, async () => {
    const info = await admin.job(id, queue);
    return info && ["completed", "dead"].includes(info.state) ? info : null;
  });
}

describe("stage contracts at settle and advance", () => {
  const bed = new WorkerTestBed("sc");
  let redis: RedisClient;
  let producer: Producer;
  let admin: QueueAdmin;
  before(async () => {
    await bed.start();
    ({ redis, producer, admin } = bed);
  });
  after(() => bed.stop());
  const worker = (queue: string, env: Record<string, string> = {}) =>
    bed.worker(queue, { CONVEYOR_HANDLER: HANDLER, ...FAST_RETRIES, ...env });

  test("an invalid result is a failed attempt, retried; a later valid one completes", async () => {
    const q = "typed/retry";
    await setContract(redis, q, NAMED, "test");
    await worker(q);
    await producer.enqueue(
      q,
      { results: [{ title: "no name" }, { name: "acme" }] },
      { id: "r1", attempts: 3 },
    );
    const info = await finished(admin, "r1", q);
    assert.equal(info.state, "completed");
    assert.equal(info.attemptsMade, 2);
    assert.deepEqual(JSON.parse(info.result!), { name: "acme" });
    // (the failed attempts' errors, whatever their layout: cjson escapes "/")
    assert.match(
      JSON.stringify(JSON.parse(info.errors ?? "[]")),
      /result breaks the contract: \/name: is required \(required\)/,
    );
    assert.deepEqual(JSON.parse(info.rejected!), { title: "no name" });
  });

  test("a result always invalid: dead after the last attempt, the violation in its error, the result kept", async () => {
    const q = "typed/dead";
    await setContract(redis, q, NAMED, "test");
    await worker(q);
    await producer.enqueue(q, { results: [{ name: 1 }, { name: 2 }] }, { id: "d1", attempts: 2 });
    const info = await finished(admin, "d1", q);
    assert.equal(info.state, "dead");
    assert.equal(info.attemptsMade, 2);
    assert.match(
      info.deadReason ?? "",
      /^attempts exhausted \(2\/2\): result breaks the contract: \/name: must be string \(type, value 2\)$/,
    );
    const error = JSON.parse(info.error!) as { name: string; message: string };
    assert.equal(error.name, "ResultContractError");
    assert.match(error.message, /\/name: must be string/);
    // (the last refused result wins)
    assert.deepEqual(JSON.parse(info.rejected!), { name: 2 });
    const shown = execFileSync(
      NODE,
      [CONVEYOR, "job", "d1", "--queue", q, "--redis", bed.server.url, "--json"],
      {
        encoding: "utf8",
      },
    );
    assert.deepEqual((JSON.parse(shown) as { rejected: unknown }).rejected, { name: 2 });
  });

  test("a contract set while the worker runs applies from the next claim (its hash in the claim reply)", async () => {
    const q = "typed/late";
    await worker(q);
    await producer.enqueue(q, { results: [{ title: "untyped" }] }, { id: "l1" });
    assert.equal((await finished(admin, "l1", q)).state, "completed");
    await setContract(redis, q, NAMED, "test");
    await producer.enqueue(q, { results: [{ title: "untyped" }] }, { id: "l2", attempts: 1 });
    const info = await finished(admin, "l2", q);
    assert.equal(info.state, "dead");
    assert.match(info.deadReason ?? "", /result breaks the contract: \/name: is required/);
    // and a contract changed again (now every result passes) is read again too
    await setContract(redis, q, { result: { type: "object" } }, "test");
    await producer.enqueue(q, { results: [{ title: "untyped" }] }, { id: "l3", attempts: 1 });
    assert.equal((await finished(admin, "l3", q)).state, "completed");
  });

  test("an advance the next stage's data contract refuses fails the producing stage's attempt; the next stage gets nothing", async () => {
    const [a, b] = ["flow/extract", "flow/enrich"];
    await worker(a, { CONVEYOR_NEXT_QUEUE: b });
    // The worker reads (and keeps) b's contract — none yet — at the first hand-over.
    await producer.enqueue(a, { x: 1 }, { id: "f0" });
    await waitFor("f0 handed to b", async () => (await admin.counts(b)).ready === 1);
    // Set after the worker cached "none": the settle refuses the stale hash, the worker re-reads.
    await setContract(redis, b, NEEDS_X, "test");
    await producer.enqueue(a, { y: "no x" }, { id: "f1", attempts: 2 });
    const info = await finished(admin, "f1", a);
    assert.equal(info.state, "dead");
    assert.equal(info.queue, a);
    assert.equal(info.attemptsMade, 2);
    assert.match(
      info.deadReason ?? "",
      /result breaks the data contract of the next stage flow\/enrich: \/x: is required \(required\)/,
    );
    assert.deepEqual(JSON.parse(info.rejected!), { y: "no x" });
    assert.equal((await admin.counts(b)).ready, 1, "only f0 reached the next stage");
    assert.equal((await admin.counters(b)).enqueued, 1);
    // Data that keeps the contract goes on.
    await producer.enqueue(a, { x: 2 }, { id: "f2" });
    await waitFor("f2 handed to b", async () => (await admin.job("f2"))?.queue === b);
    assert.equal((await admin.counts(b)).ready, 2);
  });
});

describe("stage contracts at a fan-out", () => {
  const bed = new WorkerTestBed("scf");
  before(() => bed.start());
  after(() => bed.stop());

  test("children that break the next stage's data contract fail the fan-out's attempt; valid ones go on", async () => {
    const [a, b, join] = ["fans/split", "fans/each", "fans/join"];
    await bed.worker(a, { CONVEYOR_HANDLER: HANDLER, CONVEYOR_NEXT_QUEUE: b, ...FAST_RETRIES });
    await setContract(bed.redis, b, NEEDS_X, "test");
    const fanOut = (children: unknown[]) => ({ $conveyor: { fanOut: children, join } });
    await bed.producer.enqueue(
      a,
      { results: [fanOut([{ x: 1 }, { y: 2 }]), fanOut([{ x: 1 }, { x: 2 }])] },
      { id: "s1", attempts: 2 },
    );
    const info = await waitFor("s1 fanned out", async () => {
      const job = await bed.admin.job("s1", a);
      return job && job.state !== "ready" && job.state !== "active" && job.state !== "delayed" ? job : null;
    });
    assert.equal(info.state, "fannedOut");
    assert.match(
      JSON.stringify(JSON.parse(info.errors ?? "[]")),
      /fan-out children break the data contract of the next stage fans\/each: \/\$conveyor\/fanOut\/1\/x: is required/,
    );
    assert.equal((await bed.admin.counts(b)).ready, 2);
    assert.deepEqual(JSON.parse((await bed.admin.job("s1:2", b))!.data), { x: 2 });
  });

  test("a join whose data breaks its stage's data contract is dead at its first attempt, the violation named; a keeping one runs", async () => {
    const [a, b, join] = ["joins/split", "joins/each", "joins/join"];
    await setContract(
      bed.redis,
      join,
      {
        data: {
          type: "object",
          required: ["parent", "results"],
          properties: {
            results: {
              type: "array",
              items: { type: "object", required: ["result"], properties: { result: NEEDS_X.data! } },
            },
          },
        },
      },
      "test",
    );
    await bed.worker(a, { CONVEYOR_HANDLER: HANDLER, CONVEYOR_NEXT_QUEUE: b, ...FAST_RETRIES });
    await bed.worker(b, { CONVEYOR_HANDLER: HANDLER, ...FAST_RETRIES });
    await bed.worker(join, { CONVEYOR_HANDLER: HANDLER, ...FAST_RETRIES });
    const fanOut = (children: unknown[]) => ({ $conveyor: { fanOut: children, join } });
    await bed.producer.enqueue(a, fanOut([{ x: 1 }, { x: 2 }]), { id: "good", attempts: 3 });
    await bed.producer.enqueue(a, fanOut([{ x: 1 }, { y: 2 }]), { id: "bad", attempts: 3 });
    const good = await finished(bed.admin, "good:join", join);
    assert.equal(good.state, "completed");
    const bad = await finished(bed.admin, "bad:join", join);
    assert.equal(bad.state, "dead");
    assert.equal(bad.attemptsMade, 1, "not retried: the data cannot change");
    assert.match(
      JSON.stringify(JSON.parse(bad.errors ?? "[]")),
      /the fan-out's join data breaks the data contract of joins\/join: \/results\/1\/result\/x: is required/,
    );
  });
});

describe("stage contracts on Redis Cluster", () => {
  let cluster: RedisClusterServer;
  let redis: RedisClient;
  let dir: string;
  let worker: WorkerProcess | undefined;
  before(async () => {
    cluster = await RedisClusterServer.start(3);
    redis = connectRedis(cluster.url);
    dir = mkdtempSync(join(tmpdir(), "cvy-contracts-cluster-"));
  });
  after(async () => {
    if (worker) await stopProcess(worker, 2000);
    redis?.disconnect();
    await cluster?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  test("result and next-stage contracts are checked and their hashes compared in the pipeline's slot", async () => {
    const [a, b] = ["cflow/a", "cflow/b"];
    const producer = new Producer(redis);
    const admin = new QueueAdmin(redis);
    worker = await startWorker({
      dir,
      name: "ccw",
      env: {
        REDIS_URL: cluster.url,
        CONVEYOR_QUEUE: a,
        CONVEYOR_NEXT_QUEUE: b,
        CONVEYOR_HANDLER: HANDLER,
        ...FAST_RETRIES,
      },
    });
    await producer.enqueue(a, { x: 1 }, { id: "c0" });
    await waitFor("c0 handed to b", async () => (await admin.counts(b)).ready === 1);
    await setContract(redis, a, { result: { type: "object", required: ["x"] } }, "test");
    await setContract(redis, b, NEEDS_X, "test");
    await producer.enqueue(a, { results: [{}, { x: "text" }, { x: 3 }] }, { id: "c1", attempts: 3 });
    await waitFor("c1 handed to b", async () => (await admin.job("c1"))?.queue === b);
    const info = (await admin.job("c1"))!;
    assert.deepEqual(JSON.parse(info.data), { x: 3 });
    assert.equal((await admin.counts(b)).ready, 2);
    assert.equal((await admin.counts(a)).dead, 0);
  });
});

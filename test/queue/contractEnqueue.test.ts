// Contracts at enqueue (the TypeScript producer): data that breaks the queue's contract is refused
// before anything of the call is written, every bad job named with its pointers; a contract set
// or changed under a producer's cache is caught by the enqueue script (ERR_CONTRACT_CHANGED) and
// applied; a queue without a contract costs no command more than before. Real Redis and a real
// 3-node Cluster.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { Redis } from "ioredis";
import {
  ContractChangedError,
  ContractViolationError,
  InvalidJobError,
  Producer,
  QueueKeys,
  deleteContract,
  scriptSource,
  setContract,
  type Contract,
  type RedisClient,
} from "../../queue/index.ts";
import { pollUntil } from "../support/poll.ts";
import { describeOnRedisAndCluster, useQueueRedis } from "../support/redis.ts";
import { enqueueJobsKeys, enqueueJobsRecord } from "../support/enqueueCall.ts";

const person: Contract = {
  data: {
    type: "object",
    required: ["name", "email"],
    properties: { name: { type: "string" }, email: { type: "string", format: "email" } },
  },
};

/** The number of jobs (job hashes) the queue holds. */
async function jobCount(redis: RedisClient, queue: string): Promise<number> {
  const counts = await redis.hget(new QueueKeys(queue).counts, "enqueued");
  return Number(counts ?? 0);
}

function contractCases(clients: () => { redis: RedisClient }, queue: () => string): void {
  test("bad data is refused before anything of the batch is written, every bad job named with its pointer", async () => {
    const { redis } = clients();
    const q = queue();
    await setContract(redis, q, person, "test");
    const producer = new Producer(redis);
    const err = await producer
      .enqueueMany(q, [
        { data: { name: "a", email: "a@example.com" } },
        { data: { name: "b" }, id: "b1" },
        { data: { name: 3, email: "not an email" } },
      ])
      .then(
        () => assert.fail("enqueued"),
        (e: unknown) => e,
      );
    assert.ok(err instanceof ContractViolationError, String(err));
    assert.deepEqual(
      err.jobs.map((j) => [j.index, j.id, j.side, j.violations.map((v) => `${v.pointer} ${v.rule}`)]),
      [
        [1, "b1", "data", ["/email required"]],
        [2, undefined, "data", ["/name type", "/email format"]],
      ],
    );
    assert.equal(err.jobs[1]!.violations[1]!.value, '"not an email"');
    assert.match(err.message, /job 1 \(id b1\) data: \/email: is required/);
    assert.equal(await jobCount(redis, q), 0);
    assert.equal(await redis.exists(new QueueKeys(q).job("b1")), 0);
    // Good data goes through, checked against the cached contract.
    const ok = await producer.enqueue(q, { name: "c", email: "c@example.com" });
    assert.equal(ok.created, true);
  });

  test("a contract set or changed under a producer's cache is caught by the script and applied", async () => {
    const { redis } = clients();
    const q = queue();
    const producer = new Producer(redis);
    // Cached: the queue has no contract.
    await producer.enqueue(q, { anything: true });
    await setContract(redis, q, person, "test");
    await assert.rejects(producer.enqueue(q, { anything: true }), ContractViolationError);
    await producer.enqueue(q, { name: "a", email: "a@example.com" });
    // Changed again: the new contract applies to the next call.
    await setContract(
      redis,
      q,
      { data: { type: "object", required: ["id"], properties: { id: { type: "integer" } } } },
      "test",
    );
    const err = await producer.enqueue(q, { name: "a", email: "a@example.com" }).catch((e: unknown) => e);
    assert.ok(err instanceof ContractViolationError, String(err));
    assert.deepEqual(err.jobs[0]!.violations, [{ pointer: "/id", rule: "required", message: "is required" }]);
    await producer.enqueue(q, { id: 7 });
    // Deleted: anything goes again.
    await deleteContract(redis, q);
    await producer.enqueue(q, "free");
    assert.equal(await jobCount(redis, q), 4);
  });

  test("a job's task is stored on its record and checked against the task's schema; an unknown task is refused where the contract lists tasks", async () => {
    const { redis } = clients();
    const q = queue();
    await setContract(
      redis,
      q,
      {
        tasks: {
          summarize: { data: { type: "object", required: ["text"] } },
          classify: { data: { type: "object", required: ["labels"] } },
        },
      },
      "test",
    );
    const producer = new Producer(redis);
    const { id } = await producer.enqueue(q, { text: "t" }, { task: "summarize" });
    assert.equal(await redis.hget(new QueueKeys(q).job(id), "task"), "summarize");
    const err = await producer
      .enqueueMany(q, [
        { data: { text: "t" }, task: "classify" },
        { data: { text: "t" }, task: "translate" },
      ])
      .catch((e: unknown) => e);
    assert.ok(err instanceof ContractViolationError, String(err));
    assert.deepEqual(
      err.jobs.map((j) => [j.index, j.task, j.violations.map((v) => `${v.pointer} ${v.rule}`)]),
      [
        [0, "classify", ["/labels required"]],
        [1, "translate", [" task"]],
      ],
    );
    assert.match(
      err.jobs[1]!.violations[0]!.message,
      /unknown task 'translate' \(the stage's tasks: summarize, classify\)/,
    );
    assert.equal(await jobCount(redis, q), 1);
  });
}

describeOnRedisAndCluster("contracts at enqueue", contractCases, {
  single: (n) => `ce${n}`,
  cluster: (n) => `p${n}/ce`,
});

describeOnRedisAndCluster(
  "the task field at enqueue",
  (clients, queue) => {
    test("a bad task name is refused by the producer and by the script, nothing written", async () => {
      const { redis, producer } = clients();
      const q = queue();
      for (const task of ["", "-x", "a b", "x".repeat(101)])
        await assert.rejects(producer.enqueue(q, 1, { task }), InvalidJobError, JSON.stringify(task));
      const k = new QueueKeys(q);
      const call = (contract: string, ...values: string[]) =>
        redis.eval(
          scriptSource("enqueue_jobs"),
          8,
          ...enqueueJobsKeys(k),
          JSON.stringify(
            enqueueJobsRecord(k, { jobFields: ["id", "data", "task"], contract: contract || undefined }),
          ),
          ...values,
        );
      await assert.rejects(call("", "n1", "1", "ok", "n2", "2", "a b"), /ERR_INVALID_TASK job n2/);
      await assert.rejects(call("", "n1", "1", "x".repeat(101)), /ERR_INVALID_TASK job n1/);
      assert.equal(await redis.exists(k.job("n1")), 0);
      // A hash that is not the one in force is refused with the one in force ('' = none).
      await assert.rejects(call("0123456789abcdef", "n1", "1", "ok"), /ERR_CONTRACT_CHANGED\s*$/);
      const stored = await setContract(redis, q, person, "test");
      await assert.rejects(call("", "n1", "1", "ok"), new RegExp(`ERR_CONTRACT_CHANGED ${stored.hash}$`));
      assert.equal(await redis.exists(k.job("n1")), 0);
      assert.deepEqual(await call(stored.hash, "n1", "1", "ok"), ["ids", ["n1"], "codes", [1]]);
      assert.equal(await redis.hget(k.job("n1"), "task"), "ok");
    });

    test("a contract that changes again between the re-read and the retry is reported, not retried forever", async () => {
      const { redis } = clients();
      const q = queue();
      await setContract(redis, q, { data: { type: "integer" } }, "test");
      // The real client, but every read of the contract is followed by another change.
      let n = 0;
      const racing = new Proxy(redis, {
        get(target, prop, receiver) {
          if (prop !== "hmget") return Reflect.get(target, prop, receiver) as unknown;
          return async (...args: Parameters<RedisClient["hmget"]>) => {
            const reply = await target.hmget(...args);
            await setContract(target, q, { data: { type: "integer", minimum: -++n } }, "test");
            return reply;
          };
        },
      });
      await assert.rejects(new Producer(racing).enqueue(q, 5), ContractChangedError);
      assert.equal(await jobCount(redis, q), 0);
    });
  },
  { single: (n) => `ct${n}`, cluster: (n) => `p${n}/ct` },
);

describe("a queue without a contract (single Redis)", () => {
  const q = useQueueRedis();

  test("costs no command: one script call per enqueue call, as before", async () => {
    const producer = new Producer(q().redis);
    await producer.enqueue("plain", 0);
    // Every command the server runs, as MONITOR reports it (a script's own commands come from "lua").
    const monitor = await (q().redis as Redis).monitor();
    const seen: string[] = [];
    monitor.on("monitor", (_time: string, args: string[], source: string) => {
      if (source !== "lua") seen.push(String(args[0]).toLowerCase());
    });
    for (let i = 1; i <= 20; i++) await producer.enqueue("plain", i);
    await producer.enqueueMany("plain", [{ data: 1 }, { data: 2 }, { data: 3 }]);
    // (a marker: every command before it has been reported)
    await q().redis.echo("end-of-calls");
    await pollUntil("the marker in MONITOR", () => seen.at(-1) === "echo", { intervalMs: 5 });
    monitor.disconnect();
    assert.deepEqual(seen, [...Array<string>(21).fill("fcall"), "echo"]);
  });
});

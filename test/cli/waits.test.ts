// `conveyor enqueue --wait` and `conveyor flow <id> --wait` as a user runs them, against a real
// Redis: the outcome printed and the exit code (0 completed, 3 dead, 4 cancelled, 5 timed out).
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { after, before, describe, test } from "node:test";
import { connectRedis, Consumer, Producer, QueueAdmin, type RedisClient } from "../../queue/index.ts";
import { pollUntil } from "../support/poll.ts";
import { RedisServer } from "../support/redis.ts";
import { CONVEYOR, NODE } from "../support/workers.ts";

describe("conveyor enqueue --wait, conveyor flow --wait", () => {
  let server: RedisServer;
  let redis: RedisClient;
  before(async () => {
    server = await RedisServer.start();
    redis = connectRedis(server.url);
  });
  after(async () => {
    redis.disconnect();
    await server.stop();
  });
  const env = () => ({ ...process.env, REDIS_URL: server.url });

  /** Runs the CLI in the background: its output so far, and its exit code when it ends. */
  function start(...args: string[]) {
    const child = spawn(NODE, [CONVEYOR, ...args], { env: env() });
    const out = { stdout: "", stderr: "" };
    child.stdout.on("data", (d: Buffer) => (out.stdout += d));
    child.stderr.on("data", (d: Buffer) => (out.stderr += d));
    const code = new Promise<number | null>((resolve) => child.on("close", resolve));
    return { out, code };
  }

  /** The job the CLI printed the id of, claimed once it is ready. */
  async function claimPrinted(out: { stdout: string }, queue: string) {
    const id = await pollUntil("the job's id printed", () => out.stdout.match(/^(\S+)\n/)?.[1]);
    const c = new Consumer(redis, queue, { workerId: "w", leaseMs: 30_000, retentionSeconds: 60 });
    const [job] = (await c.claim(1)).jobs;
    assert.equal(job?.id, id);
    return { c, job: job! };
  }

  test("completed: prints the result, exit 0", async () => {
    const run = start("enqueue", "wq/a", '{"n":1}', "--wait", "60s");
    const { c, job } = await claimPrinted(run.out, "wq/a");
    assert.equal(await c.complete(job, { doubled: 2 }), true);
    assert.equal(await run.code, 0, run.out.stderr);
    assert.match(run.out.stdout, new RegExp(`${job.id} {2}completed \\{"doubled":2\\}`));
  });

  test("dead: exit 3 with the error; cancelled: exit 4", async () => {
    const dead = start("enqueue", "wq/b", "1", "--wait", "60s", "--attempts", "1");
    const d = await claimPrinted(dead.out, "wq/b");
    await d.c.fail(d.job, { name: "Error", message: "boom" }, { retryable: false, retryDelayMs: 0 });
    assert.equal(await dead.code, 3, dead.out.stderr);
    assert.match(dead.out.stdout, /dead: .*boom|dead: /);

    const cancelled = start("enqueue", "wq/c", "1", "--wait", "60s", "--json");
    await pollUntil("the job enqueued", async () => (await new QueueAdmin(redis).counts("wq/c")).ready > 0);
    const [job] = (await new Consumer(redis, "wq/c", { workerId: "w", leaseMs: 30_000 }).claim(1)).jobs;
    assert.equal((await new QueueAdmin(redis).cancel(job!.id)).outcome, "cancelled");
    assert.equal(await cancelled.code, 4, cancelled.out.stderr);
    const printed = JSON.parse(cancelled.out.stdout);
    assert.equal(printed.jobs[job!.id].state, "cancelled");
    assert.deepEqual(printed.open, []);
  });

  test("still open at the deadline: exit 5 naming it; a bad duration is a usage error", () => {
    const r = spawnSync(NODE, [CONVEYOR, "enqueue", "wq/d", "1", "--wait", "300ms"], {
      env: env(),
      encoding: "utf8",
    });
    assert.equal(r.status, 5, r.stderr);
    assert.match(r.stdout, /still open \(timed out\)/);
    const bad = spawnSync(NODE, [CONVEYOR, "enqueue", "wq/d", "1", "--wait", "soon"], {
      env: env(),
      encoding: "utf8",
    });
    assert.notEqual(bad.status, 0);
    assert.match(bad.stderr, /wait/);
  });

  test("flow --wait: each job's outcome by key; a cancelled flow exits 4", async () => {
    const { flowId, ids } = await new Producer(redis).enqueueFlow("wf", [
      { key: "a", queue: "wf/one", data: 1 },
      { key: "b", queue: "wf/two", data: 2, parents: ["a"] },
    ]);
    const run = start("flow", flowId, "--wait", "60s");
    const c = new Consumer(redis, "wf/one", { workerId: "w", leaseMs: 30_000, retentionSeconds: 60 });
    const [a] = (await c.claim(1)).jobs;
    assert.equal(await c.complete(a!, "A"), true);
    await new QueueAdmin(redis).cancelFlow(flowId);
    assert.equal(await run.code, 4, run.out.stderr);
    assert.match(run.out.stdout, new RegExp(`a {2}${ids.a} {2}completed "A"`));
    assert.match(run.out.stdout, new RegExp(`b {2}${ids.b} {2}cancelled`));
  });
});

// The generic worker as real processes against a real Redis: exactly-once under SIGTERM,
// redelivery after SIGKILL, hand-back at the drain deadline, retries and dead letters,
// malformed jobs, atomic stage chaining, handler kinds, and a heartbeat that survives a
// blocked event loop.
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { Producer, QueueAdmin, QueueKeys, QUEUES_KEY, type RedisClient } from "../../queue/index.ts";
import { waitFor } from "../support/processes.ts";
import type { RedisServer } from "../support/redis.ts";
import { WorkerTestBed } from "../support/testbed.ts";
import { countBy, metricValue, readExecutions, RECORDING_HANDLER, REPO } from "../support/workers.ts";

describe("worker processes", () => {
  const bed = new WorkerTestBed("w");
  let server: RedisServer;
  let redis: RedisClient;
  let producer: Producer;
  let admin: QueueAdmin;
  let dir: string;
  before(async () => {
    await bed.start();
    ({ server, redis, producer, admin, dir } = bed);
  });
  after(() => bed.stop());
  const worker = (queue: string, extra: Record<string, string> = {}) => bed.worker(queue, extra);
  const execLog = (queue: string) => bed.execLog(queue);
  const settled = (queue: string, total: number) =>
    waitFor(
      `${total} jobs settled on ${queue}`,
      async () => {
        const c = await admin.counts(queue);
        return c.completed + c.dead >= total && c.backlog === 0 ? c : null;
      },
      180_000,
      100,
    );

  test("1,000 jobs through 3 workers, one SIGTERMed mid-run: each runs exactly once, none redelivered, exit 0", async () => {
    const q = "exactly-once";
    const ws = [
      await worker(q, { CONVEYOR_CONCURRENCY: "8" }),
      await worker(q, { CONVEYOR_CONCURRENCY: "8" }),
      await worker(q, { CONVEYOR_CONCURRENCY: "8" }),
    ];
    await producer.enqueueMany(
      q,
      Array.from({ length: 1000 }, (_, i) => ({ id: `j${i}`, data: { sleepMs: 15 } })),
    );
    await waitFor("a third done", async () => (await admin.counts(q)).completed >= 300);
    const victim = ws[0]!;
    const busyBefore = metricValue(await victim.metrics(), "conveyor_jobs_in_flight");
    victim.signal("SIGTERM");
    assert.equal(await victim.exited, 0, victim.logs());
    await settled(q, 1000);
    const execs = readExecutions(execLog(q));
    const perJob = countBy(execs, (e) => e.id);
    assert.equal(perJob.size, 1000);
    assert.deepEqual(
      [...perJob.values()].filter((v) => v !== 1),
      [],
      "a job ran more than once",
    );
    const counters = await admin.counters(q);
    assert.equal(counters.completed, 1000);
    assert.equal(counters.stalled ?? 0, 0);
    assert.equal(counters.handedBack ?? 0, 0);
    assert.match(victim.logs(), /draining/);
    assert.ok(busyBefore >= 0);
    const victimRan = execs.filter((e) => e.pid === victim.child.pid).length;
    assert.ok(victimRan > 0, "the stopped worker had done work");
  });

  test("--concurrency 10000 with 12,000 jobs waiting: the first claim takes 10,000 and every job completes", async () => {
    const q = "ceiling";
    await producer.enqueueMany(
      q,
      Array.from({ length: 12_000 }, (_, i) => ({ id: `c${i}`, data: null })),
    );
    const w = await worker(q, { CONVEYOR_CONCURRENCY: "10000", LOG_LEVEL: "warn" });
    await settled(q, 12_000);
    assert.equal((await admin.counters(q)).completed, 12_000);
    assert.equal(countBy(readExecutions(execLog(q)), (e) => e.id).size, 12_000);
    assert.doesNotMatch(w.logs(), /claim failed/);
  });

  test("a SIGKILLed worker's jobs run again elsewhere after lease expiry, counted as stalls; nothing lost", async () => {
    const q = "sigkill";
    const lease = { CONVEYOR_LEASE: "1s", CONVEYOR_CONCURRENCY: "4" };
    const doomed = await worker(q, lease);
    await producer.enqueueMany(
      q,
      Array.from({ length: 4 }, (_, i) => ({ id: `k${i}`, data: { sleepMs: 60_000 } })),
    );
    await waitFor("doomed worker busy", async () => readExecutions(execLog(q)).length === 4);
    doomed.signal("SIGKILL");
    await doomed.exited;
    // Short jobs now, so the rescuer finishes them: rewrite the data, keep the ids.
    const k = new QueueKeys(q);
    for (let i = 0; i < 4; i++) await redis.hset(k.job(`k${i}`), "data", JSON.stringify({ sleepMs: 10 }));
    await worker(q, lease);
    await settled(q, 4);
    const perJob = countBy(readExecutions(execLog(q)), (e) => e.id);
    assert.deepEqual([...perJob.values()], [2, 2, 2, 2]);
    const counters = await admin.counters(q);
    assert.equal(counters.stalled, 4);
    assert.equal(counters.completed, 4);
    for (let i = 0; i < 4; i++) {
      const info = await admin.job(`k${i}`, q);
      assert.equal(info!.stalls, 1);
      assert.equal(info!.attemptsMade, 1, "the attempt that completed; a stall is not an attempt");
    }
  });

  test("drain deadline: a job longer than the drain is handed back and finished elsewhere without a failed attempt", async () => {
    const q = "drain";
    const a = await worker(q, { CONVEYOR_DRAIN_SECONDS: "1" });
    await producer.enqueue(q, { sleepMs: 3000 }, { id: "long" });
    await waitFor("job started", async () => readExecutions(execLog(q)).length === 1);
    a.signal("SIGTERM");
    assert.equal(await a.exited, 0);
    assert.match(a.logs(), /handed back for immediate redelivery/);
    await worker(q, {});
    await settled(q, 1);
    const info = await admin.job("long", q);
    assert.equal(info!.state, "completed");
    assert.equal(info!.attemptsMade, 1, "the attempt that completed; a hand-back is not an attempt");
    assert.equal(info!.handbacks, 1);
    assert.equal((await admin.counters(q)).handedBack, 1);
    assert.equal(readExecutions(execLog(q)).length, 2);
  });

  test("a second SIGTERM hands back at once", async () => {
    const q = "second-signal";
    const a = await worker(q, { CONVEYOR_DRAIN_SECONDS: "600" });
    await producer.enqueue(q, { sleepMs: 600_000 }, { id: "forever" });
    await waitFor("job started", async () => readExecutions(execLog(q)).length === 1);
    a.signal("SIGTERM");
    await waitFor("draining", async () => /draining/.test(a.logs()));
    a.signal("SIGTERM");
    assert.equal(await a.exited, 0);
    const info = await admin.job("forever", q);
    assert.equal(info!.state, "ready");
    assert.equal(info!.handbacks, 1);
  });

  test("retries with backoff, then dead letters with reason and stack; dlq retry brings them back", async () => {
    const q = "retries";
    const w = await worker(q, { CONVEYOR_BACKOFF_BASE: "10ms", CONVEYOR_BACKOFF_MAX: "50ms" });
    await producer.enqueue(q, { failTimes: 1 }, { id: "flaky", attempts: 3 });
    await producer.enqueue(q, { failTimes: 99 }, { id: "broken", attempts: 3 });
    await settled(q, 2);
    assert.equal((await admin.job("flaky", q))!.state, "completed");
    const broken = await admin.job("broken", q);
    assert.equal(broken!.state, "dead");
    assert.match(broken!.deadReason!, /attempts exhausted \(3\/3\): planned failure 3/);
    assert.match(JSON.parse(broken!.error!).stack, /recordingHandler\.js/);
    assert.equal(JSON.parse(broken!.errors!).length, 3);
    assert.equal(metricValue(await w.metrics(), "conveyor_jobs_retried_total", { queue: q }), 3);
    assert.equal(metricValue(await w.metrics(), "conveyor_jobs_dead_lettered_total", { queue: q }), 1);
    await redis.hset(new QueueKeys(q).job("broken"), "data", JSON.stringify({}));
    assert.equal(await admin.retryDead(q), 1);
    await waitFor("revived job completes", async () => (await admin.job("broken", q))!.state === "completed");
  });

  test("malformed jobs and odd throws go to dead letters with a reason; the worker keeps running", async () => {
    const q = "malformed";
    const w = await worker(q, {});
    const k = new QueueKeys(q);
    await redis.hset(
      k.job("notjson"),
      "id",
      "notjson",
      "queue",
      q,
      "data",
      "{not json",
      "score",
      1,
      "attempts",
      3,
    );
    await redis.zadd(k.ready, 1, "notjson");
    await redis.zadd(k.ready, 2, "ghost");
    await producer.enqueue(q, { throwValue: "a string" }, { id: "str", attempts: 1 });
    await producer.enqueue(q, { throwValue: null }, { id: "nul", attempts: 1 });
    await producer.enqueue(q, { final: true }, { id: "final", attempts: 5 });
    await producer.enqueue(q, {}, { id: "fine" });
    await redis.lpush(k.wake, "1");
    await waitFor("all settled", async () => {
      const c = await admin.counts(q);
      return c.dead === 5 && c.completed === 1;
    });
    const dead = Object.fromEntries((await admin.deadJobs(q)).map((d) => [d.id, d.reason]));
    assert.match(dead.notjson!, /not retryable: job data is not JSON/);
    assert.match(dead.ghost!, /malformed/);
    assert.match(dead.str!, /handler threw a non-Error value: a string/);
    assert.match(dead.nul!, /handler threw a non-Error value: null/);
    assert.match(dead.final!, /not retryable: bad input/);
    assert.equal((await admin.job("final", q))!.attemptsMade, 1);
    assert.equal(w.child.exitCode, null, "worker still running");
  });

  test("a worker registers its next stage at start: a stage fed only by advances is listed before its first job", async () => {
    const a = "listed/a";
    const b = "listed/b";
    await worker(a, { CONVEYOR_NEXT_QUEUE: b });
    await waitFor(
      "the next stage in cvy:queues",
      async () => ((await redis.smembers(QUEUES_KEY)).includes(b) ? true : null),
      30_000,
      50,
    );
    // (a queue of its own is listed from its first enqueue on: an empty dashboard stays empty)
    assert.equal((await redis.smembers(QUEUES_KEY)).includes(a), false);
    assert.equal((await admin.counts(b)).enqueued ?? 0, 0, "no job reached the next stage");
  });

  test("two-stage pipeline: each job enters stage B exactly once even when stage-A workers are killed", async () => {
    const a = "docs/a";
    const b = "docs/b";
    const lease = { CONVEYOR_LEASE: "1s", CONVEYOR_CONCURRENCY: "8" };
    const aw = [
      await worker(a, { ...lease, CONVEYOR_NEXT_QUEUE: b }),
      await worker(a, { ...lease, CONVEYOR_NEXT_QUEUE: b }),
    ];
    await worker(b, { CONVEYOR_CONCURRENCY: "8" });
    await producer.enqueueMany(
      a,
      Array.from({ length: 300 }, (_, i) => ({ id: `d${i}`, data: { sleepMs: 5 } })),
    );
    await waitFor("some advanced", async () => (await admin.counts(b)).completed >= 50);
    aw[0]!.signal("SIGKILL");
    await aw[0]!.exited;
    await worker(a, { ...lease, CONVEYOR_NEXT_QUEUE: b });
    await settled(b, 300);
    const bRuns = countBy(readExecutions(execLog(b)), (e) => e.id);
    assert.equal(bRuns.size, 300);
    assert.deepEqual(
      [...bRuns.values()].filter((v) => v !== 1),
      [],
    );
    assert.equal((await admin.counts(a)).backlog, 0);
  });

  test("a CPU-bound handler that blocks the event loop past its lease keeps its lease (heartbeat thread)", async () => {
    const q = "cpu";
    await worker(q, { CONVEYOR_LEASE: "600ms" });
    await worker(q, { CONVEYOR_LEASE: "600ms" }); // a second worker that would steal a lapsed lease
    await producer.enqueue(q, { cpuMs: 3000 }, { id: "cpu" });
    await settled(q, 1);
    assert.equal((await admin.counters(q)).stalled ?? 0, 0);
    assert.equal(readExecutions(execLog(q)).length, 1);
  });

  test("a handler past its timeout is aborted; one that ignores the abort is abandoned and the job retried", async () => {
    const q = "timeouts";
    const w = await worker(q, { CONVEYOR_KILL_GRACE: "200ms", CONVEYOR_BACKOFF_BASE: "10ms" });
    await producer.enqueue(q, { sleepMs: 60_000 }, { id: "slow", timeoutMs: 300, attempts: 1 });
    await producer.enqueue(q, { hang: true }, { id: "hung", timeoutMs: 300, attempts: 1 });
    await waitFor("both dead", async () => (await admin.counts(q)).dead === 2);
    for (const id of ["slow", "hung"])
      assert.match((await admin.job(id, q))!.deadReason!, /exceeded its timeout of 300ms/);
    assert.equal(w.child.exitCode, null);
    assert.equal(
      metricValue(await w.metrics(), "conveyor_jobs_in_flight", { queue: q }),
      0,
      "the hung handler's slot is free",
    );
  });

  test("command handler: argv without a shell, JSON in and out; shell syntax in job data is inert", async () => {
    const q = "cmd";
    const marker = join(dir, "pwned");
    const argv = [
      join(REPO, "node_modules/.bin/node"),
      join(REPO, "test/fixtures/echoCommand.mjs"),
      "--flag",
      "$(touch x)",
    ];
    await worker(q, { CONVEYOR_HANDLER: `command:${JSON.stringify(argv)}` });
    const evil = `$(touch ${marker}); touch ${marker}; \`touch ${marker}\``;
    await producer.enqueue(q, { text: evil }, { id: "c1" });
    await producer.enqueue(q, { garbage: true }, { id: "c2", attempts: 1 });
    await producer.enqueue(q, { exit: 65 }, { id: "c3", attempts: 5 });
    await waitFor("settled", async () => {
      const c = await admin.counts(q);
      return c.completed + c.dead === 3;
    });
    const result = JSON.parse((await admin.job("c1", q))!.result!);
    assert.deepEqual(result, { argv: ["--flag", "$(touch x)"], data: { text: evil }, job: "c1" });
    assert.match((await admin.job("c2", q))!.deadReason!, /not JSON/);
    assert.match((await admin.job("c3", q))!.deadReason!, /not retryable: handler command exited with 65/);
    const { existsSync } = await import("node:fs");
    assert.equal(existsSync(marker), false);
  });

  test("command handler: the pod's environment without the worker's Redis and PostgreSQL secrets, unless the pool opts in", async () => {
    const argv = [join(REPO, "node_modules/.bin/node"), join(REPO, "test/fixtures/echoCommand.mjs")];
    const names = ["REDIS_URL", "REDIS_PASSWORD", "DATABASE_URL", "POD_NAME", "CONVEYOR_JOB_ID"];
    // (the test Redis has no password: the worker's AUTH with this one is answered with a warning)
    const env = { CONVEYOR_HANDLER: `command:${JSON.stringify(argv)}`, REDIS_PASSWORD: "s3cret" };
    const seen = async (q: string, handlerEnv: Record<string, string>) => {
      await worker(q, { ...env, ...handlerEnv });
      await producer.enqueue(q, { env: names }, { id: `${q}-1` });
      await waitFor(`${q} completed`, async () => (await admin.counts(q)).completed === 1);
      return { env: JSON.parse((await admin.job(`${q}-1`, q))!.result!) as Record<string, string | null> };
    };
    const plain = await seen("cmd-env", {});
    const { POD_NAME, ...rest } = plain.env;
    assert.match(POD_NAME ?? "", /^w\d+$/, "the pod's own environment is kept");
    assert.deepEqual(rest, {
      REDIS_URL: null,
      REDIS_PASSWORD: null,
      DATABASE_URL: null,
      CONVEYOR_JOB_ID: "cmd-env-1",
    });
    const optedIn = await seen("cmd-env-creds", { CONVEYOR_HANDLER_CREDENTIALS: "true" });
    assert.equal(optedIn.env.REDIS_URL, server.url);
    assert.equal(optedIn.env.REDIS_PASSWORD, "s3cret");
  });

  test("http handler: POSTs the data to a sidecar; 4xx is final, 5xx retried", async () => {
    const q = "http";
    let calls = 0;
    const sidecar = createServer((req, res) => {
      let body = "";
      req.on("data", (c) => (body += c));
      req.on("end", () => {
        calls++;
        const data = JSON.parse(body);
        if (data.status) {
          res.writeHead(data.status);
          return res.end("nope");
        }
        res.writeHead(200, { "content-type": "application/json" });
        res.end(
          JSON.stringify({
            echoed: data,
            id: req.headers["conveyor-job-id"],
            attempt: req.headers["conveyor-attempt"],
          }),
        );
      });
    });
    await new Promise<void>((r) => sidecar.listen(0, "127.0.0.1", r));
    const port = (sidecar.address() as { port: number }).port;
    try {
      await worker(q, { CONVEYOR_HANDLER: `http://127.0.0.1:${port}/run`, CONVEYOR_BACKOFF_BASE: "10ms" });
      await producer.enqueue(q, { x: 1 }, { id: "h1" });
      await producer.enqueue(q, { status: 422 }, { id: "h2", attempts: 3 });
      await producer.enqueue(q, { status: 503 }, { id: "h3", attempts: 2 });
      await waitFor("settled", async () => {
        const c = await admin.counts(q);
        return c.completed + c.dead === 3 && c.delayed === 0;
      });
      assert.deepEqual(JSON.parse((await admin.job("h1", q))!.result!), {
        echoed: { x: 1 },
        id: "h1",
        attempt: "1",
      });
      assert.equal((await admin.job("h2", q))!.attemptsMade, 1);
      assert.equal((await admin.job("h3", q))!.attemptsMade, 2);
      assert.equal(calls, 4);
    } finally {
      sidecar.close();
    }
  });

  test("Redis down under a running worker: still live, not ready; afterwards every job completes", async () => {
    const q = "redis-outage";
    // Liveness fails after 2 leases without a heartbeat tick: 1.5 s leaves room on a loaded machine.
    const w = await worker(q, { CONVEYOR_CONCURRENCY: "4", CONVEYOR_LEASE: "1500ms" });
    await producer.enqueueMany(
      q,
      Array.from({ length: 40 }, (_, i) => ({ id: `o${i}`, data: { sleepMs: 50 } })),
    );
    await waitFor("some done", async () => (await admin.counts(q)).completed >= 5);
    await server.kill("SIGKILL");
    const down = Date.now();
    await waitFor(
      "not ready while Redis is down",
      async () => (await fetch(`http://127.0.0.1:${w.port}/readyz`)).status === 503,
    );
    // Liveness is judged over time: every probe answers 200 until three lease lengths passed.
    await waitFor("three lease lengths of outage, live at every probe", async () => {
      const status = (await fetch(`http://127.0.0.1:${w.port}/healthz`)).status;
      assert.equal(status, 200, `a Redis outage must not fail liveness (${Date.now() - down} ms in)`);
      return Date.now() - down > 4500;
    });
    await server.resume();
    await waitFor("ready again", async () => (await fetch(`http://127.0.0.1:${w.port}/readyz`)).ok);
    // Redis ran without persistence here: what it held is gone, so enqueue a fresh batch.
    await producer.enqueueMany(
      q,
      Array.from({ length: 20 }, (_, i) => ({ id: `after${i}`, data: {} })),
    );
    await waitFor("post-outage jobs complete", async () => (await admin.counts(q)).completed >= 20);
    assert.equal(w.child.exitCode, null);
  });

  test("a settle Redis refuses for good (OOM) frees the slot, is counted, makes the worker unready after 3; the jobs run again once Redis takes writes", async () => {
    const q = "refused";
    const go = join(dir, "refused.go");
    const w = await worker(q, { CONVEYOR_CONCURRENCY: "3", CONVEYOR_LEASE: "1s" });
    await producer.enqueueMany(
      q,
      Array.from({ length: 3 }, (_, i) => ({ id: `r${i}`, data: { untilFile: go } })),
    );
    await waitFor("3 jobs running", async () => readExecutions(execLog(q)).length === 3);
    const ready = async () => {
      const r = await fetch(`http://127.0.0.1:${w.port}/readyz`);
      return { status: r.status, reason: await r.text() };
    };
    assert.equal((await ready()).status, 200);
    // Every write is refused with OOM from now on (noeviction is Redis' default policy).
    await redis.config("SET", "maxmemory", "1");
    try {
      writeFileSync(go, "");
      await waitFor(
        "3 refusals counted and every slot freed",
        async () => {
          const m = await w.metrics();
          return (
            metricValue(m, "conveyor_settle_writes_refused_total", { queue: q, code: "OOM" }) === 3 &&
            metricValue(m, "conveyor_jobs_in_flight", { queue: q }) === 0
          );
        },
        60_000,
      );
      const unready = await ready();
      assert.equal(unready.status, 503);
      assert.match(unready.reason, /3 settle writes in a row refused by Redis, the last: complete: OOM/);
      assert.match(w.logs(), /complete: Redis refused the write for good/);
    } finally {
      await redis.config("SET", "maxmemory", "0");
    }
    // Their leases were no longer renewed: swept back to ready, run again, completed.
    await settled(q, 3);
    assert.deepEqual([...countBy(readExecutions(execLog(q)), (e) => e.id).values()], [2, 2, 2]);
    await waitFor("ready again after a write went through", async () => (await ready()).status === 200);
  });

  test("bad configuration stops the worker at start with a message naming the variable", async () => {
    const { spawnSync } = await import("node:child_process");
    const r = spawnSync(join(REPO, "node_modules/.bin/node"), [join(REPO, "bin/conveyor.js"), "worker"], {
      env: {
        ...process.env,
        CONVEYOR_QUEUE: "ok",
        CONVEYOR_HANDLER: RECORDING_HANDLER,
        CONVEYOR_CONCURRENCY: "-3",
      },
      encoding: "utf8",
    });
    assert.equal(r.status, 2);
    assert.match(r.stderr, /CONVEYOR_CONCURRENCY/);
  });
});

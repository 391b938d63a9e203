// Queue control with real worker processes, the CLI and the job API: cancelling running jobs of
// every handler kind (the command's processes are gone afterwards), pausing three workers
// mid-run, a 20/s rate limit across 4 workers × 8 slots, and a 1 s schedule through a pool that
// starts at zero, collapses missed ticks, and survives a worker restart.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { startJobApi } from "../../api/server.ts";
import {
  CATCH_UP_MS,
  QueueEvents,
  QueueKeys,
  type Producer,
  type QueueAdmin,
  type RedisClient,
} from "../../queue/index.ts";
import { stopProcess, waitFor } from "../support/processes.ts";
import type { RedisServer } from "../support/redis.ts";
import { WorkerTestBed } from "../support/testbed.ts";
import {
  CONVEYOR,
  countBy,
  metricValue,
  NODE,
  readExecutions,
  type WorkerProcess,
} from "../support/workers.ts";

/** Fast heartbeats (a third of the lease) and a short kill grace, so cancels are seen quickly. */
const FAST = { CONVEYOR_LEASE: "1500ms", CONVEYOR_KILL_GRACE: "500ms", CONVEYOR_CONCURRENCY: "1" };

describe("queue control with workers, CLI and API", { timeout: 15 * 60_000 }, () => {
  const bed = new WorkerTestBed("ctl");
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

  /** `conveyor …` as a process: exit code and output. */
  const cli = (...args: string[]) =>
    new Promise<{ code: number; out: string; err: string }>((resolve) => {
      execFile(
        NODE,
        [CONVEYOR, ...args],
        { env: { ...process.env, REDIS_URL: server.url } },
        (error, out, err) => resolve({ code: error ? Number(error.code ?? 1) : 0, out, err }),
      );
    });
  const executions = (queue: string) => readExecutions(bed.execLog(queue));
  const alive = (pid: number) => {
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  };

  /**
   * Wait until each worker's claim loop sent two more claims than now (the second one was sent
   * after this call): whatever a worker could claim meanwhile, it has claimed. Absence is
   * asserted after this, never after a guessed time.
   */
  async function claimsAfter(workers: WorkerProcess[]): Promise<void> {
    const polls = () =>
      Promise.all(workers.map(async (w) => metricValue(await w.metrics(), "conveyor_claim_polls_total")));
    const before = await polls();
    await waitFor("two more claims by each worker", async () =>
      (await polls()).every((n, i) => n >= before[i]! + 2),
    );
  }

  async function expectCancelledRunning(queue: string, id: string): Promise<void> {
    const r = await cli("cancel", id, "--queue", queue, "--json");
    assert.equal(r.code, 0, r.err);
    assert.deepEqual([JSON.parse(r.out).outcome, JSON.parse(r.out).state], ["cancelled", "active"]);
    await waitFor(`${id} aborted and its slot free`, async () => (await admin.counts(queue)).inflight === 0);
    assert.equal((await admin.job(id, queue))?.state, "cancelled");
  }

  test("cancel a running module job: ctx.signal aborts with a cancel reason at the next heartbeat; never retried; the slot is free again", async () => {
    const q = "cancel-module";
    const w = await bed.worker(q, FAST);
    await producer.enqueue(q, { sleepMs: 600_000 }, { id: "m1", attempts: 3 });
    await waitFor("m1 running", async () => executions(q).length === 1);
    await expectCancelledRunning(q, "m1");
    await waitFor("the worker logged the cancel", async () =>
      /job was cancelled while it ran/.test(w.logs()),
    );
    await producer.enqueue(q, {}, { id: "m2" });
    await waitFor("the next job ran", async () => (await admin.job("m2", q))?.state === "completed");
    // A sweep past m1's lease (1.5 s) would have brought it back: ready again, then run again.
    const [seconds] = await redis.time();
    const leaseEnd = Number(seconds) * 1000 + 1500;
    await waitFor(
      "a sweep past m1's lease",
      async () => Number(await redis.hget(new QueueKeys(q).sweeper, "sweptAt")) > leaseEnd,
    );
    assert.deepEqual(
      executions(q).map((e) => e.id),
      ["m1", "m2"],
      "m1 ran once",
    );
    const counters = await admin.counters(q);
    assert.equal(counters.retried, undefined);
    assert.equal(counters.dead, undefined);
    assert.equal(counters.fenced, undefined);
    assert.equal((await admin.job("m1", q))?.state, "cancelled");
    assert.doesNotMatch(w.logs(), /"level":50/, "no error logged");
  });

  test("cancel a running http job: the request to the sidecar is aborted", async () => {
    const q = "cancel-http";
    let closed = false;
    let received = false;
    const sidecar: Server = createServer((req, res) => {
      received = true;
      res.on("close", () => (closed = true)); // never answers: only an abort ends it
    });
    await new Promise<void>((r) => sidecar.listen(0, "127.0.0.1", r));
    try {
      const port = (sidecar.address() as AddressInfo).port;
      await bed.worker(q, { ...FAST, CONVEYOR_HANDLER: `http://127.0.0.1:${port}/run` });
      await producer.enqueue(q, { x: 1 }, { id: "h1" });
      await waitFor("sidecar called", async () => received);
      await expectCancelledRunning(q, "h1");
      await waitFor("sidecar connection closed", async () => closed);
    } finally {
      sidecar.closeAllConnections();
      sidecar.close();
    }
  });

  test("cancel a running command job that ignores SIGTERM: SIGKILL after the kill grace, its processes are gone", async () => {
    const q = "cancel-command";
    const pidFile = join(dir, "command.pid");
    const argv = ["/bin/sh", "-c", `echo $$ > ${pidFile}; trap '' TERM; exec sleep 600`];
    await bed.worker(q, { ...FAST, CONVEYOR_HANDLER: `command:${JSON.stringify(argv)}` });
    await producer.enqueue(q, {}, { id: "c1" });
    const pid = await waitFor("command started", async () => {
      const text = (() => {
        try {
          return readFileSync(pidFile, "utf8").trim();
        } catch {
          return "";
        }
      })();
      return text ? Number(text) : null;
    });
    assert.ok(alive(pid));
    await expectCancelledRunning(q, "c1");
    await waitFor("the command's process is gone", async () => !alive(pid), 30_000);
  });

  test("pause with 3 workers mid-run: no claim while paused (enqueues accepted), running jobs finish, resume drains everything, nothing lost or run twice", async () => {
    const q = "pause3";
    const workers = [];
    for (let i = 0; i < 3; i++) workers.push(await bed.worker(q, { CONVEYOR_CONCURRENCY: "4" }));
    const jobs = Array.from({ length: 300 }, (_, i) => ({ id: `p${i}`, data: { sleepMs: 20 } }));
    await producer.enqueueMany(q, jobs);
    await waitFor("mid-run", async () => (await admin.counts(q)).completed >= 40);
    const paused = await cli("pause", q, "--json");
    assert.equal(paused.code, 0, paused.err);
    assert.deepEqual(JSON.parse(paused.out), { queue: q, paused: true });
    await waitFor("running jobs finished", async () => (await admin.counts(q)).inflight === 0);
    const startedAtPause = (await admin.counters(q)).started;
    await producer.enqueueMany(q, [
      { id: "late1", data: {} },
      { id: "late2", data: {} },
    ]); // wakes the workers
    await claimsAfter(workers);
    assert.equal((await admin.counters(q)).started, startedAtPause, "no claim while paused");
    const stats = JSON.parse((await cli("stats", q, "--json")).out) as Record<string, unknown>;
    assert.equal(stats.paused, true);
    assert.ok((stats.ready as number) > 0);
    assert.equal((await cli("resume", q)).code, 0);
    await waitFor(
      "everything done after resume",
      async () => {
        const c = await admin.counts(q);
        return c.completed === 302 && c.backlog === 0;
      },
      180_000,
    );
    const perJob = countBy(executions(q), (e) => e.id);
    assert.equal(perJob.size, 302);
    assert.ok(
      [...perJob.values()].every((n) => n === 1),
      "each job ran exactly once",
    );
  });

  test("rate limit 20/s, 4 workers × concurrency 8, 10 s: no 1 s window holds more than 20 handler starts, and about 200 complete", async () => {
    const q = "limited";
    await producer.enqueueMany(
      q,
      Array.from({ length: 600 }, (_, i) => ({ id: `r${i}`, data: {} })),
    );
    const set = await cli("limit", q, "20/s");
    assert.equal(set.code, 0, set.err);
    const workers = [];
    for (let i = 0; i < 4; i++) workers.push(await bed.worker(q, { CONVEYOR_CONCURRENCY: "8" }));
    // (the limit is kept where the handler starts: a claim that reaches its worker too late in its
    // window is handed back unstarted, so the handlers' own start times are what is counted)
    const handlerStarts = () => executions(q).map((e) => e.t);
    const first = await waitFor("first start", async () => {
      const t = handlerStarts();
      return t.length > 0 && Math.min(...t);
    });
    await waitFor("10 s of starts", async () => Date.now() > first + 10_500, 60_000, 200);
    assert.equal((await cli("pause", q)).code, 0);
    await waitFor("started jobs completed", async () => (await admin.counts(q)).inflight === 0);
    const all = handlerStarts().sort((a, b) => a - b);
    for (const s of all) {
      const inWindow = all.filter((t) => t >= s && t < s + 1000).length;
      assert.ok(inWindow <= 20, `${inWindow} starts in the 1 s from ${s - first} ms`);
    }
    // (below 200: claims handed back for arriving late, more of them on a loaded machine)
    const inTen = all.filter((t) => t < first + 10_000).length;
    assert.ok(inTen >= 150 && inTen <= 200, `${inTen} starts in 10 s (at most 200, not starved)`);
    const completed = (await admin.counters(q)).completed ?? 0;
    assert.equal(completed, all.length, "every start completed (each once)");
    const byId = countBy(executions(q), (e) => e.id);
    assert.ok([...byId.values()].every((n) => n === 1));
    assert.equal(JSON.parse((await cli("stats", q, "--json")).out).rateLimit, "20/s");
    assert.equal((await cli("limit", q, "off")).code, 0);
    await Promise.all(workers.map((w) => stopProcess(w, 5000)));
  });

  test("schedule --every 1s: waits as a due job with no worker (missed ticks collapse to one), then one job per tick through two workers and a restart; remove stops it", async () => {
    const q = "ticks";
    const add = await cli("schedule", "add", q, "tick", "--every", "1s", '{"n":1}', "--json");
    assert.equal(add.code, 0, add.err);
    const firstDue = Date.parse(JSON.parse(add.out).nextRun);
    assert.ok(firstDue > 0, "next run shown");
    // A pool scaled to zero: the tick is due, the backlog counts it, and it stays one job.
    await waitFor("tick due, counted in the backlog", async () => (await admin.counts(q)).backlog === 1);
    // What is waited for is time itself: ticks fall due with no worker to run them, until even the
    // second tick is past the catch-up window (queue/schedules.ts tickAfter), so that the first run
    // stands for every missed one however fast the workers below start.
    await waitFor(
      "the second tick past the catch-up window",
      async () => Date.now() > firstDue + 1000 + CATCH_UP_MS + 500,
      30_000,
      100,
    );
    const idle = await admin.counts(q);
    assert.deepEqual(
      [idle.delayed, idle.dueDelayed, idle.backlog],
      [1, 1, 1],
      "missed ticks collapse to one",
    );
    const w1 = await bed.worker(q, { CONVEYOR_CONCURRENCY: "2" });
    const w2 = await bed.worker(q, { CONVEYOR_CONCURRENCY: "2" });
    await waitFor("3 ticks run", async () => executions(q).length >= 3, 30_000);
    await stopProcess(w1, 10_000); // a restart: SIGTERM, drained, then a fresh worker
    const w3 = await bed.worker(q, { CONVEYOR_CONCURRENCY: "2" });
    await waitFor("3 more ticks", async () => executions(q).length >= 6, 30_000);
    const list = await cli("schedule", "list", q, "--json");
    assert.equal(list.code, 0);
    const [view] = JSON.parse(list.out) as { name: string; nextRun: string | null; every: string }[];
    assert.deepEqual([view!.name, view!.every], ["tick", "1000ms"]);
    assert.ok(view!.nextRun && Date.parse(view!.nextRun) > Date.now() - 2000, "next run shown");
    assert.equal((await cli("schedule", "remove", q, "tick")).code, 0);
    // A tick already due or running is left to finish (it enqueues nothing).
    await waitFor("no tick left", async () => {
      const c = await admin.counts(q);
      return c.backlog === 0 && c.delayed === 0;
    });
    const execs = executions(q);
    const ticks = execs.map((e) => Number(e.id.split(":")[2])).sort((a, b) => a - b);
    assert.equal(new Set(execs.map((e) => e.id)).size, execs.length, "no tick doubled");
    const gaps = ticks.slice(2).map((t, i) => t - ticks[i + 1]!);
    assert.ok(
      gaps.every((g) => g === 1000),
      `one job per tick, none lost after the catch-up: gaps ${gaps}`,
    );
    assert.ok(ticks[1]! - ticks[0]! > 5000, "the missed ticks were collapsed into the first run");
    await claimsAfter([w2, w3]);
    assert.equal(executions(q).length, execs.length, "removed: no more ticks");
    assert.equal((await admin.counts(q)).backlog, 0);
    assert.equal((await cli("schedule", "remove", q, "tick")).code, 1, "already gone");
  });

  test("CLI: exit codes and clear errors; stats --json keeps its five keys and adds six", async () => {
    const q = "cli-ctl";
    await producer.enqueue(q, 1, { id: "k1" });
    assert.equal((await cli("cancel", "k1")).code, 0);
    const again = await cli("cancel", "k1");
    assert.deepEqual([again.code, again.out.trim()], [1, "k1 is already cancelled: nothing to cancel"]);
    assert.equal((await cli("cancel", "nope")).code, 1);
    const stats = JSON.parse((await cli("stats", q, "--json")).out) as Record<string, unknown>;
    assert.deepEqual(Object.keys(stats), [
      "ready",
      "delayed",
      "inflight",
      "completed",
      "dead",
      "waitingForBudget",
      "paused",
      "rateLimit",
      "cancelled",
      "schedules",
      "served",
    ]);
    assert.deepEqual(
      [stats.waitingForBudget, stats.cancelled, stats.paused, stats.rateLimit, stats.schedules],
      [0, 1, false, null, 0],
    );
    const bad: [string[], RegExp][] = [
      [["limit", q, "20/d"], /invalid rate limit "20\/d"/],
      [["limit", q, "lots"], /invalid rate limit "lots"/],
      [["limit", "bad queue!", "5/s"], /invalid queue name/],
      [["schedule", "add", q, "x", "--cron", "61 * * * *"], /invalid cron expression "61 \* \* \* \*"/],
      [
        ["schedule", "add", q, "x", "--cron", "0 * * * *", "--tz", "Nowhere/Land"],
        /invalid time zone "Nowhere\/Land"/,
      ],
      [["schedule", "add", q, "bad name!", "--every", "5s"], /invalid schedule name "bad name!"/],
      [["schedule", "add", q, "x"], /exactly one of every/],
      [["schedule", "add", q, "x", "--every", "soon"], /invalid --every "soon"/],
      [["schedule", "add", q, "x", "--every", "5s", "{nope"], /schedule data is not valid JSON/],
      [["cancel"], /cancel <id>/],
      [["pause"], /pause <queue>/],
    ];
    for (const [args, message] of bad) {
      const r = await cli(...args);
      assert.equal(r.code, 2, `${args.join(" ")}: ${r.err}`);
      assert.match(r.err, message);
    }
  });

  test("job API: cancel, pause/resume, rate limit and schedules endpoints; bad input is a 4xx naming the field", async () => {
    const q = "api-ctl";
    const api = await startJobApi({ redis, port: 0, host: "127.0.0.1" });
    const base = `http://127.0.0.1:${(api.address() as AddressInfo).port}`;
    const call = async (method: string, path: string, body?: unknown) => {
      const res = await fetch(`${base}${path}`, {
        method,
        headers: body === undefined ? {} : { "content-type": "application/json" },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      return { status: res.status, body: (await res.json()) as Record<string, unknown> };
    };
    try {
      await producer.enqueue(q, 1, { id: "a1" });
      const enc = encodeURIComponent(q);
      assert.deepEqual(
        [
          (await call("POST", `/jobs/a1/cancel?queue=${enc}`)).status,
          (await call("POST", "/jobs/a1/cancel")).status,
        ],
        [200, 409],
      );
      assert.equal((await call("POST", "/jobs/none/cancel")).status, 404);
      assert.deepEqual((await call("POST", `/queues/${enc}/pause`)).body, { queue: q, paused: true });
      assert.equal((await call("GET", `/queues/${enc}`)).body.paused, true);
      assert.deepEqual((await call("POST", `/queues/${enc}/resume`)).body, { queue: q, paused: false });
      assert.deepEqual((await call("PUT", `/queues/${enc}/rate-limit`, { limit: "50/m" })).body, {
        queue: q,
        rateLimit: "50/m",
      });
      assert.equal((await call("GET", `/queues/${enc}`)).body.rateLimit, "50/m");
      assert.equal((await call("DELETE", `/queues/${enc}/rate-limit`)).body.rateLimit, null);
      const put = await call("PUT", `/queues/${enc}/schedules/nightly`, {
        cron: "0 3 * * *",
        tz: "Europe/Berlin",
      });
      assert.equal(put.status, 200);
      assert.equal(put.body.name, "nightly");
      assert.ok(put.body.nextRun);
      const listed = (await call("GET", `/queues/${enc}/schedules`)).body.schedules as { name: string }[];
      assert.deepEqual(
        listed.map((s) => s.name),
        ["nightly"],
      );
      assert.equal((await call("DELETE", `/queues/${enc}/schedules/nightly`)).status, 200);
      assert.equal((await call("DELETE", `/queues/${enc}/schedules/nightly`)).status, 404);
      const bad: [string, string, unknown, number, RegExp][] = [
        ["PUT", `/queues/${enc}/rate-limit`, { limit: "fast" }, 400, /invalid rate limit "fast"/],
        ["PUT", `/queues/${enc}/rate-limit`, { limit: 20 }, 400, /"limit" must be a string/],
        ["PUT", `/queues/${enc}/rate-limit`, { rate: "20/s" }, 400, /unknown field "rate"/],
        ["PUT", `/queues/${enc}/schedules/x`, { cron: "nope" }, 400, /invalid cron expression "nope"/],
        ["PUT", `/queues/${enc}/schedules/x`, { every: "5s", tz: "UTC" }, 400, /tz applies to cron/],
        [
          "PUT",
          `/queues/${enc}/schedules/x`,
          { cron: "0 * * * *", tz: "Bad/Zone" },
          400,
          /invalid time zone/,
        ],
        ["PUT", `/queues/${enc}/schedules/x`, { every: "often" }, 400, /invalid "every" "often"/],
        ["PUT", `/queues/${enc}/schedules/bad%20name`, { every: "5s" }, 400, /invalid schedule name/],
        ["PUT", `/queues/bad%20q!/schedules/x`, { every: "5s" }, 400, /invalid queue name/],
        ["GET", `/queues/${enc}/pause`, undefined, 405, /use POST/],
        ["POST", "/jobs/bad%20id/cancel", undefined, 400, /invalid job id/],
      ];
      for (const [method, path, body, status, message] of bad) {
        const r = await call(method, path, body);
        assert.equal(r.status, status, `${method} ${path}`);
        assert.match(String(r.body.error), message);
      }
    } finally {
      api.close();
    }
  });
});

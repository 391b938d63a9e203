// Queue control in the protocol, against a real Redis (and PostgreSQL for the records): cancel
// in every state, cancel racing completion, pause, the rate limit's window, what each costs in
// Redis commands, and the records of a cancelled job.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import pino from "pino";
import {
  Consumer,
  PipelineKeys,
  Producer,
  QueueAdmin,
  QueueEvents,
  QueueKeys,
  connectRedis,
  setGroupLimit,
  type RedisClient,
} from "../../queue/index.ts";
import { claimJobs } from "../../queue/gateway.ts";
import { readableLayouts } from "../../queue/layout.ts";
import { JobRecorder, RECORDER_GROUP } from "../../records/index.ts";
import { PostgresServer } from "../support/postgres.ts";
import { waitFor } from "../support/processes.ts";
import { rng } from "../support/random.ts";
import { RedisServer, startQueueRedis, stopQueueRedis } from "../support/redis.ts";

const consumer = (redis: RedisClient, queue: string, workerId = "w1") =>
  new Consumer(redis, queue, { workerId, leaseMs: 30_000, retentionSeconds: 3600 });

/** Commands Redis ran (scripts' own calls included), from INFO commandstats; `set` apart. */
async function commandStats(redis: RedisClient): Promise<{ total: number; sets: number }> {
  const info = await redis.info("commandstats");
  let total = 0;
  let sets = 0;
  for (const m of info.matchAll(/^cmdstat_(\w+):calls=(\d+)/gm)) {
    if (["info", "evalsha", "eval", "script", "time"].includes(m[1]!)) continue;
    total += Number(m[2]);
    if (m[1] === "set") sets += Number(m[2]);
  }
  return { total, sets };
}

/**
 * The commands `run` makes Redis run, less the fencing-token floor's SETs: the first claim of
 * each second of the server clock raises the pipeline's token counter with one SET
 * (includes/fencingTokens.lua), so a run that crosses a second runs one more per second crossed
 * — what made this count differ by one now and then.
 */
async function commandCount(redis: RedisClient, run: () => Promise<void>): Promise<number> {
  const [secondBefore] = await redis.time();
  const before = await commandStats(redis);
  await run();
  const after = await commandStats(redis);
  const [secondAfter] = await redis.time();
  const floorSets = Math.min(after.sets - before.sets, Number(secondAfter) - Number(secondBefore));
  return after.total - before.total - floorSets;
}

describe("queue control (protocol)", () => {
  let server: RedisServer;
  let redis: RedisClient;
  let producer: Producer;
  let admin: QueueAdmin;
  let n = 0;
  const fresh = (p = "ctl") => `${p}${++n}/a`;

  before(async () => {
    ({ server, redis, producer, admin } = await startQueueRedis());
  });
  after(() => stopQueueRedis({ server, redis }));

  test("cancel a waiting and a delayed job: they leave the queue, end `cancelled` with an event; again says finished; an unknown id is notFound", async () => {
    const q = fresh();
    await producer.enqueue(q, 1, { id: "wait" });
    await producer.enqueue(q, 2, { id: "later", delayMs: 60_000 });
    assert.deepEqual(await admin.cancel("wait", q), {
      id: "wait",
      outcome: "cancelled",
      state: "ready",
      queue: q,
      jobsCancelled: 1,
    });
    assert.equal((await admin.cancel("later")).state, "delayed", "found without the queue too");
    const counts = await admin.counts(q);
    assert.equal(counts.ready + counts.delayed + counts.backlog, 0);
    assert.equal((await admin.job("wait", q))?.state, "cancelled");
    assert.ok((await redis.ttl(new QueueKeys(q).job("wait"))) > 0, "the record is kept for a while");
    assert.deepEqual(await admin.cancel("wait", q), {
      id: "wait",
      outcome: "finished",
      state: "cancelled",
      queue: q,
      jobsCancelled: 0,
    });
    assert.equal((await admin.cancel("no-such-job")).outcome, "notFound");
    const events = (await new QueueEvents(redis).recent(q)).filter((e) => e.type === "cancelled");
    assert.deepEqual(
      events.map((e) => [e.id, e.fields.was]),
      [
        ["wait", "ready"],
        ["later", "delayed"],
      ],
    );
    assert.equal((await admin.stats(q)).cancelled, 2);
    assert.equal((await consumer(redis, q).claim(10)).jobs.length, 0, "nothing left to claim");
  });

  test("run a delayed job now: it moves to ready at its priority and is claimed next, with a `promoted` event; a job not delayed is refused", async () => {
    const q = fresh();
    await producer.enqueue(q, 1, { id: "low" });
    await producer.enqueue(q, 2, { id: "later", delayMs: 3_600_000, priority: 5 });
    assert.deepEqual(await admin.promote("later", q), {
      id: "later",
      queue: q,
      outcome: "promoted",
      state: "delayed",
    });
    const counts = await admin.counts(q);
    assert.deepEqual([counts.ready, counts.delayed], [2, 0]);
    assert.equal((await admin.job("later", q))?.state, "ready");
    const c = consumer(redis, q);
    assert.deepEqual(
      (await c.claim(1)).jobs.map((j) => j.id),
      ["later"],
      "the higher priority job is claimed first",
    );
    assert.deepEqual(await admin.promote("later", q), {
      id: "later",
      queue: q,
      outcome: "notDelayed",
      state: "active",
    });
    assert.equal((await admin.promote("low", q)).outcome, "notDelayed", "a ready job is refused");
    assert.equal((await admin.counts(q)).ready, 1, "and stays where it was");
    assert.equal((await admin.promote("no-such-job", q)).outcome, "notFound");
    const events = (await new QueueEvents(redis).recent(q)).filter((e) => e.type === "promoted");
    assert.deepEqual(
      events.map((e) => e.id),
      ["later"],
    );
  });

  test("cancel a finished job changes nothing", async () => {
    const q = fresh();
    await producer.enqueue(q, 1, { id: "done" });
    const c = consumer(redis, q);
    const [job] = (await c.claim(1)).jobs;
    assert.equal(await c.complete(job!, "r"), true);
    const r = await admin.cancel("done", q);
    assert.deepEqual([r.outcome, r.state], ["finished", "completed"]);
    assert.equal((await admin.job("done", q))?.result, '"r"');
  });

  test("cancel a running job: the renewal reports it cancelled, its late result and failure are refused (not counted as fenced), the sweeper leaves it alone", async () => {
    const q = fresh();
    await producer.enqueueMany(q, [
      { id: "run", data: 1 },
      { id: "run2", data: 2 },
    ]);
    const c = consumer(redis, q);
    const [job, job2] = (await c.claim(2)).jobs;
    const r = await admin.cancel("run", q);
    assert.deepEqual([r.outcome, r.state], ["cancelled", "active"]);
    assert.deepEqual(await c.renew([job!, job2!]), { lost: ["run"], cancelled: ["run"] });
    assert.equal((await c.settle(job!, { result: "late" })).outcome, "cancelled");
    assert.equal(
      await c.fail(job!, { name: "E", message: "x" }, { retryable: true, retryDelayMs: 0 }),
      "cancelled",
    );
    assert.equal(await c.releaseOutcome(job!, "drain"), "cancelled");
    const info = await admin.job("run", q);
    assert.equal(info?.state, "cancelled");
    assert.equal(info?.result, undefined, "the late result was refused");
    const counters = await admin.counters(q);
    assert.equal(counters.fenced, undefined);
    assert.equal(counters.cancelled, 1);
    assert.equal((await admin.counts(q)).inflight, 1, "only run2 is in flight");
    assert.equal(await c.complete(job2!, "ok"), true, "the other job is untouched");
  });

  test("cancel racing completion, both orders, 200 seeded runs: exactly one wins", async () => {
    const q = fresh();
    const other = connectRedis(server.url); // a second connection, so the two really race
    try {
      const c = consumer(redis, q);
      const otherAdmin = new QueueAdmin(other);
      const random = rng(20261123);
      const wins = { cancel: 0, complete: 0 };
      for (let i = 0; i < 200; i++) {
        const id = `race-${i}`;
        await producer.enqueue(q, i, { id });
        const [job] = (await c.claim(1)).jobs;
        const cancelFirst = random() < 0.5;
        const gap = Math.floor(random() * 3);
        const doCancel = async () => {
          if (!cancelFirst) for (let k = 0; k < gap; k++) await Promise.resolve();
          return otherAdmin.cancel(id, q);
        };
        const doComplete = async () => {
          if (cancelFirst) for (let k = 0; k < gap; k++) await Promise.resolve();
          return c.settle(job!, { result: i });
        };
        const [cancel, done] = await Promise.all([doCancel(), doComplete()]);
        const state = (await admin.job(id, q))?.state;
        if (cancel.outcome === "cancelled") {
          wins.cancel++;
          assert.equal(done.outcome, "cancelled", `${id}: cancel won, the result must be refused`);
          assert.equal(state, "cancelled");
        } else {
          wins.complete++;
          assert.deepEqual([cancel.outcome, cancel.state], ["finished", "completed"], id);
          assert.equal(done.outcome, "settled", id);
          assert.equal(state, "completed");
        }
      }
      assert.equal(wins.cancel + wins.complete, 200);
      const counters = await admin.counters(q);
      assert.equal(counters.completed ?? 0, wins.complete);
      assert.equal(counters.cancelled ?? 0, wins.cancel);
      assert.equal(counters.fenced, undefined);
      assert.equal((await admin.counts(q)).inflight, 0);
    } finally {
      other.disconnect();
    }
  });

  test("cancel a fan-out parent: its unfinished children are cancelled, finished ones kept, and the join never runs", async () => {
    const p = `fan${++n}`;
    const a = `${p}/a`;
    const b = `${p}/b`;
    const j = `${p}/join`;
    await producer.enqueue(a, {}, { id: "parent" });
    const ca = consumer(redis, a);
    const [parent] = (await ca.claim(1)).jobs;
    assert.equal(await ca.fanOut(parent!, [1, 2, 3], b, j), 3);
    const cb = consumer(redis, b);
    const [first, second] = (await cb.claim(2)).jobs; // parent:1 completes, parent:2 is running
    assert.equal(await cb.complete(first!, "one"), true);
    const r = await admin.cancel("parent", a);
    assert.deepEqual([r.outcome, r.state, r.jobsCancelled], ["cancelled", "fannedOut", 2]);
    assert.equal((await admin.job("parent:1", b))?.state, "completed");
    assert.equal((await admin.job("parent:2", b))?.state, "cancelled");
    assert.equal((await admin.job("parent:3", b))?.state, "cancelled");
    assert.equal((await admin.job("parent", a))?.state, "cancelled");
    assert.equal((await cb.settle(second!, { result: "two" })).outcome, "cancelled");
    assert.equal((await cb.claim(5)).jobs.length, 0);
    assert.equal(await redis.exists(new PipelineKeys(p).job("parent:join")), 0, "no join job");
    assert.equal((await admin.counts(j)).backlog, 0);
    assert.equal((await admin.cancel("parent", a)).outcome, "finished");
  });

  /**
   * Job `par` of `${p}/a` fans out into `par:1`, `par:2` (stage b, join stage `join`); `remove`
   * takes `par:2` out, then `par:1` completes. Returns the join's results as [id, outcome].
   */
  async function joinAfterRemovingChild(p: string, remove: () => Promise<void>): Promise<string[][]> {
    await producer.enqueue(`${p}/a`, {}, { id: "par" });
    const ca = consumer(redis, `${p}/a`);
    const [parent] = (await ca.claim(1)).jobs;
    await ca.fanOut(parent!, [1, 2], `${p}/b`, `${p}/join`);
    await remove();
    const cb = consumer(redis, `${p}/b`);
    const [child] = (await cb.claim(5)).jobs;
    assert.equal(await cb.complete(child!, "one"), true);
    const [join] = (await consumer(redis, `${p}/join`).claim(1)).jobs;
    const data = JSON.parse(join!.rawData) as { results: { id: string; error?: { name: string } }[] };
    return data.results.map((r) => [r.id, r.error?.name ?? "ok"]);
  }

  test("a fan-out child cancelled on its own: the join still runs, with the child's outcome as cancelled", async () => {
    const p = `fan${++n}`;
    const results = await joinAfterRemovingChild(p, async () => {
      assert.equal((await admin.cancel("par:2", `${p}/b`)).outcome, "cancelled");
    });
    assert.deepEqual(results, [
      ["par:1", "ok"],
      ["par:2", "CancelledError"],
    ]);
  });

  test("delete jobs of a queue: waiting, delayed, completed, dead and malformed ones leave Redis with a `deleted` event; running ones, fan-out parents, other queues' jobs and unknown ids are left alone", async () => {
    const q = fresh();
    const other = q.replace(/\/a$/, "/b");
    const keys = new QueueKeys(q);
    await producer.enqueue(q, 1, { id: "w", idempotencyKey: "k-w" }); // stays waiting: lowest priority
    await producer.enqueue(q, 2, { id: "d", delayMs: 60_000 });
    await producer.enqueue(q, 3, { id: "c", priority: 10 });
    await producer.enqueue(q, 4, { id: "x", priority: 10 });
    await producer.enqueue(q, 5, { id: "r", priority: 10 });
    await producer.enqueue(other, 6, { id: "o" });
    const c = consumer(redis, q);
    const [cj, xj, rj] = (await c.claim(3)).jobs;
    assert.deepEqual([cj!.id, xj!.id, rj!.id], ["c", "x", "r"]);
    assert.equal(await c.appendLog(cj!, "a line", 600), true);
    assert.equal(await c.complete(cj!, "done"), true);
    await c.fail(xj!, { name: "Error", message: "bad input" }, { retryable: false, retryDelayMs: 0 });
    // Another client broke a dead job's record: it is not a hash.
    await redis.set(keys.job("m"), "garbage");
    await redis.zadd(keys.dead, Date.now(), "m");
    assert.equal(await redis.exists(keys.logs("c")), 1);

    const results = await admin.deleteJobs(q, ["w", "d", "c", "x", "m", "r", "o", "none"]);
    assert.deepEqual(
      results.map((r) => [r.id, r.outcome, r.state]),
      [
        ["w", "deleted", "ready"],
        ["d", "deleted", "delayed"],
        ["c", "deleted", "completed"],
        ["x", "deleted", "dead"],
        ["m", "deleted", "malformed"],
        ["r", "refused", "active"],
        ["o", "notFound", ""],
        ["none", "notFound", ""],
      ],
    );
    for (const id of ["w", "d", "c", "x", "m"]) assert.equal(await redis.exists(keys.job(id)), 0, id);
    assert.equal(await redis.exists(keys.logs("c")), 0, "the log goes with the job");
    assert.equal(await redis.exists(keys.idempotencyPrefix + "k-w"), 0, "the key is free");
    const counts = await admin.counts(q);
    assert.deepEqual([counts.ready, counts.delayed, counts.dead, counts.inflight], [0, 0, 0, 1]);
    assert.equal((await admin.counters(q)).deleted, 5);
    assert.equal((await admin.job("r", q))?.state, "active", "the running job runs on");
    assert.equal(await c.complete(rj!, "r"), true, "and completes");
    assert.equal((await admin.job("o", other))?.state, "ready");
    const events = (await new QueueEvents(redis).recent(q)).filter((e) => e.type === "deleted");
    assert.deepEqual(
      events.map((e) => [e.id, e.fields.was, e.fields.reason ?? ""]),
      [
        ["w", "ready", ""],
        ["d", "delayed", ""],
        ["c", "completed", ""],
        ["x", "dead", "not retryable: bad input"],
      ],
    );
    assert.ok(events[2]!.fields.finishedAt, "a finished job's event keeps when it finished");
    const again = await producer.enqueue(q, 7, { id: "w3", idempotencyKey: "k-w" });
    assert.deepEqual([again.id, again.created], ["w3", true]);
    assert.deepEqual(await admin.deleteJobs(q, []), []);
  });

  test("delete a fan-out child: the join still runs, with the child's outcome as deleted; the waiting parent is refused", async () => {
    const p = `fan${++n}`;
    const results = await joinAfterRemovingChild(p, async () => {
      assert.deepEqual(
        (await admin.deleteJobs(`${p}/a`, ["par"])).map((r) => [r.outcome, r.state]),
        [["refused", "fannedOut"]],
      );
      assert.equal((await admin.deleteJobs(`${p}/b`, ["par:2"]))[0]!.outcome, "deleted");
    });
    assert.deepEqual(results, [
      ["par:1", "ok"],
      ["par:2", "DeletedError"],
    ]);
  });

  test("pause: no claim (nor complete-and-claim) takes a job while paused, enqueues are accepted; resume wakes a waiting worker and the jobs come out in order", async () => {
    const q = fresh();
    await producer.enqueueMany(
      q,
      [1, 2, 3, 4].map((i) => ({ id: `p${i}`, data: i })),
    );
    const c = consumer(redis, q);
    const [running] = (await c.claim(1)).jobs;
    await admin.pause(q);
    assert.equal((await admin.stats(q)).paused, true);
    assert.equal((await c.claim(10)).jobs.length, 0);
    const settled = await c.settle(running!, { result: 1, claim: 3 });
    assert.deepEqual(
      [settled.outcome, settled.jobs.length],
      ["settled", 0],
      "the running job finishes normally",
    );
    await producer.enqueue(q, 5, { id: "p5" });
    assert.equal((await admin.counts(q)).ready, 4);
    const blocking = connectRedis(server.url, { blocking: true });
    try {
      await redis.del(new QueueKeys(q).wake);
      const woke = c.waitForWork(blocking, 20_000).then(() => Date.now());
      const resumedAt = Date.now();
      await admin.resume(q);
      assert.ok((await woke) - resumedAt < 5_000, "resume wakes a waiting worker");
    } finally {
      blocking.disconnect();
    }
    assert.deepEqual(
      (await c.claim(10)).jobs.map((j) => j.id),
      ["p2", "p3", "p4", "p5"],
    );
    assert.equal((await admin.stats(q)).paused, false);
  });

  test("rate limit: never more than N starts in any window; the claim says when the window has room; limited jobs keep their attempts and their order", async () => {
    const q = fresh();
    await producer.enqueueMany(
      q,
      Array.from({ length: 20 }, (_, i) => ({ id: `r${i}`, data: i })),
    );
    await admin.setRateLimit(q, { max: 5, perMs: 1000 });
    assert.equal((await admin.stats(q)).rateLimit, "5/s");
    const c = consumer(redis, q);
    const t0 = Date.now();
    const first = await c.claim(8);
    assert.deepEqual(
      first.jobs.map((j) => j.id),
      ["r0", "r1", "r2", "r3", "r4"],
    );
    const second = await c.claim(8);
    assert.equal(second.jobs.length, 0);
    // (a window of 1 s counts its entries 50 ms longer: the start slack, control.lua)
    assert.ok(
      second.nextDueAt !== null && second.nextDueAt >= t0 + 1000 && second.nextDueAt <= Date.now() + 1050,
      String(second.nextDueAt),
    );
    // completions claim through the limiter too
    const after = await c.settle(first.jobs[0]!, { result: 0, claim: 2 });
    assert.equal(after.jobs.length, 0);
    // (a claim before the window has room takes nothing and changes nothing)
    const third = await waitFor("the window has room", async () => {
      const r = await c.claim(8);
      return r.jobs.length > 0 ? r : null;
    });
    assert.deepEqual(
      third.jobs.map((j) => [j.id, j.attempt]),
      ["r5", "r6", "r7", "r8", "r9"].map((id) => [id, 1]),
    );
    await admin.setRateLimit(q, null);
    assert.equal((await c.claim(20)).jobs.length, 10, "no limit: the rest at once");
    assert.equal((await admin.stats(q)).rateLimit, null);
  });

  /** claim_jobs called as a caller whose clock reads `now`. */
  const claimer = (q: string) => {
    const keys = new QueueKeys(q);
    return async (now: number, count: number) => {
      const { jobs, nextDueMs } = await claimJobs(redis, {
        keys,
        now,
        leaseMs: 30_000,
        count,
        workerId: "w",
        readsLayout: readableLayouts().max,
      });
      // (the reply names its per-job fields first, then the values job by job)
      return { started: jobs.length && (jobs.length - 1) / jobs[0]!.split(",").length, nextDue: nextDueMs };
    };
  };

  test("rate limits run on Redis' clock: callers whose clocks are off (ahead, behind) fill no window past the limit, queue or group; the reply's next chance is on the caller's clock", async () => {
    const skewed = async (q: string) => {
      const claimAt = claimer(q);
      const t = Date.now();
      assert.equal((await claimAt(t - 5000, 5)).started, 5, "a caller 5 s behind starts the first window");
      // Before: a caller 1005 ms ahead saw that window as past and started 5 more at once.
      const ahead = await claimAt(t + 1005, 5);
      assert.equal(ahead.started, 0, "a caller 1005 ms ahead: still the window Redis is in");
      // (its next chance on its own clock: about 1 s (+ the 50 ms start slack) after the first
      // claim, seen from 1005 ms ahead)
      const wait = ahead.nextDue - (t + 1005);
      assert.ok(wait > 0 && wait <= 1050, `next chance ${wait} ms after the ahead caller's now`);
      assert.equal((await claimAt(t, 5)).started, 0, "a caller on time: the window is full");
      const room = await waitFor("the window has room", async () => {
        const r = await claimAt(Date.now(), 8);
        return r.started > 0 ? r : null;
      });
      assert.equal(room.started, 5);
      return (await new QueueEvents(redis).recent(q)).filter((e) => e.type === "started").length;
    };
    const q = fresh();
    await producer.enqueueMany(
      q,
      Array.from({ length: 20 }, (_, i) => ({ data: i })),
    );
    await admin.setRateLimit(q, { max: 5, perMs: 1000 });
    assert.equal(await skewed(q), 10);
    const g = fresh("grp");
    await producer.enqueueMany(
      g,
      Array.from({ length: 20 }, (_, i) => ({ data: i, group: "tenant" })),
    );
    await setGroupLimit(redis, g, "tenant", { rate: { max: 5, perMs: 1000 } });
    assert.equal(await skewed(g), 10);
  });

  test("the rate window's clock only moves forward: a claim older than the log's newest entry counts at that entry's time", async () => {
    const q = fresh();
    const k = new QueueKeys(q);
    await producer.enqueueMany(
      q,
      Array.from({ length: 10 }, (_, i) => ({ data: i })),
    );
    await admin.setRateLimit(q, { max: 5, perMs: 1000 });
    // An entry stamped 3 s ahead of Redis' clock (Redis' clock stepped back, or an older release's
    // stamp from a caller's clock): the window is full until 1 s after it.
    await redis.hset(k.meta, `rlog:${q}`, `${Date.now() + 3000}:5`);
    const claimAt = claimer(q);
    assert.equal((await claimAt(Date.now() + 10_000, 5)).started, 0);
  });

  test("cost: a claim + complete cycle costs the same Redis commands with no control set, and at most one more per claim with pause or a rate limit set", async () => {
    const cycle = async (q: string, jobs: number) => {
      await producer.enqueueMany(
        q,
        Array.from({ length: jobs + 1 }, (_, i) => ({ data: i })),
      );
      const c = consumer(redis, q);
      let [job] = (await c.claim(1)).jobs;
      return commandCount(redis, async () => {
        for (let i = 0; i < jobs; i++) {
          const r = await c.settle(job!, { result: i, claim: 1 });
          job = r.jobs[0] ?? (await c.claim(1)).jobs[0];
        }
      });
    };
    const jobs = 50;
    const plain = await cycle(fresh("cost"), jobs);
    // A queue that had control once but has none now: the same.
    const q2 = fresh("cost");
    await admin.pause(q2);
    await admin.resume(q2);
    await redis.del(new QueueKeys(q2).wake);
    const unset = await cycle(q2, jobs);
    assert.equal(unset, plain, "nothing extra when neither is set");
    const q3 = fresh("cost");
    await admin.setRateLimit(q3, { max: 1_000_000, perMs: 1000 });
    await redis.del(new QueueKeys(q3).wake);
    const limited = await cycle(q3, jobs);
    assert.ok(limited <= plain + jobs, `rate-limited: ${limited} commands vs ${plain} (+${jobs} allowed)`);
    // An empty queue's claim reads no control at all.
    const emptyClaim = async (paused: boolean) => {
      const q = fresh("cost");
      if (paused) await admin.pause(q);
      const c = consumer(redis, q);
      await c.claim(1);
      return commandCount(redis, async () => {
        await c.claim(1);
      });
    };
    assert.equal(
      await emptyClaim(true),
      await emptyClaim(false),
      "an empty claim costs the same paused or not",
    );
  });
});

describe("queue control: records in PostgreSQL", () => {
  let pg: PostgresServer;
  let server: RedisServer;
  let redis: RedisClient;

  before(async () => {
    [pg, server] = await Promise.all([PostgresServer.start(), RedisServer.start()]);
    redis = connectRedis(server.url);
  });
  after(async () => {
    redis.disconnect();
    await Promise.all([pg.stop(), server.stop()]);
  });

  test("cancelled jobs (waiting and running) are recorded as `cancelled`, the running execution too", async () => {
    const db = await pg.createDatabase("cancelrec");
    const recorder = new JobRecorder({
      redis,
      redisUrl: server.url,
      database: db,
      pipelines: ["rec"],
      logger: pino({ level: "silent" }),
      blockMs: 200,
    });
    await recorder.start();
    try {
      const producer = new Producer(redis);
      const admin = new QueueAdmin(redis);
      await producer.enqueueMany("rec/a", [
        { id: "w", data: 1 },
        { id: "r", data: 2 },
      ]);
      const c = consumer(redis, "rec/a");
      await admin.cancel("w", "rec/a");
      const [running] = (await c.claim(1)).jobs;
      await admin.cancel("r", "rec/a");
      const keys = new PipelineKeys("rec");
      await waitFor("outbox drained", async () => {
        const [len, pending] = await Promise.all([
          redis.xlen(keys.outbox),
          redis.xpending(keys.outbox, RECORDER_GROUP) as Promise<[number]>,
        ]);
        return len === 0 && Number(pending[0]) === 0;
      });
      const jobs = await pg.query<{ id: string; state: string; finished_at: Date | null }>(
        "SELECT id, state, finished_at FROM conveyor_jobs ORDER BY id",
        [],
        "cancelrec",
      );
      assert.deepEqual(
        jobs.map((j) => [j.id, j.state, j.finished_at !== null]),
        [
          ["r", "cancelled", true],
          ["w", "cancelled", true],
        ],
      );
      const attempts = await pg.query<{ job_id: string; execution: string; outcome: string }>(
        "SELECT job_id, execution, outcome FROM conveyor_attempts",
        [],
        "cancelrec",
      );
      assert.deepEqual(
        attempts.map((a) => [a.job_id, a.execution, a.outcome]),
        [["r", running!.token, "cancelled"]],
      );
    } finally {
      await recorder.stop();
    }
  });
});

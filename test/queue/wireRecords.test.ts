// The scripts' named wire form against a real Redis (docs/protocol.md, "How the scripts are
// called"): a call's settings and each job travel as a named JSON record, an optional field left
// out; every reply names its fields; a malformed record is refused naming what is wrong, with
// nothing written.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  Consumer,
  PipelineKeys,
  QueueKeys,
  type Producer,
  type QueueAdmin,
  type RedisClient,
} from "../../queue/index.ts";
import { sweepKeys } from "../../queue/gateway.ts";
import { runScript } from "../../queue/scripts.ts";
import { enqueueJobsKeys, enqueueJobsRecord } from "../support/enqueueCall.ts";
import { startQueueRedis, stopQueueRedis, type RedisServer } from "../support/redis.ts";

/** A named reply's name/value pairs as an object. */
function named(pairs: unknown[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (let i = 0; i < pairs.length; i += 2) out[String(pairs[i])] = pairs[i + 1];
  return out;
}

describe("named records on the wire", () => {
  let server: RedisServer;
  let redis: RedisClient;
  let producer: Producer;
  let admin: QueueAdmin;
  let n = 0;
  const fresh = () => `wire${++n}`;
  const consumer = (queue: string) =>
    new Consumer(redis, queue, { workerId: "w1", leaseMs: 60_000, retentionSeconds: 0 });

  before(async () => {
    ({ server, redis, producer, admin } = await startQueueRedis());
  });
  after(() => stopQueueRedis({ server, redis }));

  test("settle_jobs: the required job fields alone settle a job; the reply names codes and the claim", async () => {
    const q = fresh();
    await producer.enqueueMany(q, [
      { id: "a", data: 1 },
      { id: "b", data: 2 },
    ]);
    const c = consumer(q);
    const [a] = (await c.claim(1)).jobs;
    const reply = await runScript<unknown[]>(
      redis,
      "settle_jobs",
      [c.keys.inflight, c.keys.counts, c.keys.outbox, c.keys.meta],
      [
        JSON.stringify({
          jobPrefix: c.keys.jobPrefix,
          queue: q,
          now: Date.now(),
          // (the columns in any order; a JSON null counts as left out)
          jobFields: ["token", "id"],
          retentionSeconds: null,
          claim: 1,
          leaseMs: 60_000,
          workerId: "w1",
        }),
        a!.token,
        a!.id,
        '{"r":1}',
      ],
    );
    const r = named(reply);
    assert.deepEqual(Object.keys(r), ["codes", "jobs", "nextDueMs", "startSlackMs"]);
    assert.deepEqual(r.codes, [1]);
    assert.equal((r.jobs as string[])[1], "b");
    assert.equal((await admin.counts(q)).completed, 1);
  });

  test("settle_jobs: the optional job fields are read by name, '' their default", async () => {
    const q = fresh();
    await producer.enqueueMany(q, [
      { id: "a", data: 1 },
      { id: "b", data: 2 },
    ]);
    const c = consumer(q);
    const [a, b] = (await c.claim(2)).jobs;
    const reply = await runScript<unknown[]>(
      redis,
      "settle_jobs",
      [c.keys.inflight, c.keys.counts, c.keys.outbox, c.keys.meta],
      [
        JSON.stringify({
          jobPrefix: c.keys.jobPrefix,
          queue: q,
          now: Date.now(),
          jobFields: ["reused", "id", "resultTtlSeconds", "contentHash", "token"],
        }),
        ...["", a!.id, "60", "h-a", a!.token, '"ra"'],
        ...["1", b!.id, "", "h-b", b!.token, '"rb"'],
      ],
    );
    assert.deepEqual(named(reply).codes, [1, 1]);
    const counters = await admin.counters(q);
    assert.equal(counters.completed, 2);
    assert.equal(counters.reused, 1);
    // (a's result remembered under its hash for 60 s; b's was reused, not remembered again)
    const base = c.keys.jobPrefix.slice(0, -"job:".length);
    assert.equal(await redis.get(`${base}result:${q}:h-a`), '"ra"');
    assert.equal(await redis.exists(`${base}result:${q}:h-b`), 0);
  });

  test("settle_jobs: a malformed call, job field list or job is refused naming it, nothing written", async () => {
    const q = fresh();
    await producer.enqueueMany(q, [
      { id: "a", data: 1 },
      { id: "b", data: 2 },
    ]);
    const c = consumer(q);
    const [a, b] = (await c.claim(2)).jobs;
    const keys = [c.keys.inflight, c.keys.counts, c.keys.outbox, c.keys.meta];
    const base = { jobPrefix: c.keys.jobPrefix, queue: q, now: Date.now() };
    const callRecord = JSON.stringify({ ...base, jobFields: ["id", "token"] });
    const jobA = [a!.id, a!.token, "1"];
    for (const [args, message] of [
      [["not json", ...jobA], /ERR_INVALID_RECORD settle_jobs call is not a JSON object: not json/],
      [
        [JSON.stringify({ queue: q, now: 1, jobFields: ["id", "token"] }), ...jobA],
        /ERR_INVALID_RECORD settle_jobs call: field jobPrefix must be a string, got none/,
      ],
      [
        [JSON.stringify(base), ...jobA],
        /ERR_INVALID_RECORD settle_jobs call: field jobFields must be a list of job field names/,
      ],
      [
        [JSON.stringify({ ...base, jobFields: ["id", "token", "colour"] }), ...jobA, "red"],
        /ERR_INVALID_RECORD settle_jobs call: jobFields: unknown or repeated job field colour/,
      ],
      [
        [JSON.stringify({ ...base, jobFields: ["id", "token", "id"] }), ...jobA, "a"],
        /ERR_INVALID_RECORD settle_jobs call: jobFields: unknown or repeated job field id/,
      ],
      [
        [JSON.stringify({ ...base, jobFields: ["id"] }), a!.id, "1"],
        /ERR_INVALID_RECORD settle_jobs call: jobFields must name id and token/,
      ],
      [
        [callRecord, ...jobA, b!.id, b!.token],
        /ERR_INVALID_RECORD settle_jobs: 5 values after the call record are not whole jobs of 3 \(id,token, result\)/,
      ],
      // (the first job valid, the second not: neither is settled)
      [
        [callRecord, ...jobA, b!.id, "", "2"],
        /ERR_INVALID_RECORD settle_jobs job b: field token must not be empty/,
      ],
      [
        [callRecord, ...jobA, "", b!.token, "2"],
        /ERR_INVALID_RECORD settle_jobs job #2: field id must not be empty/,
      ],
      [
        [
          JSON.stringify({ ...base, jobFields: ["id", "token", "resultTtlSeconds"] }),
          ...jobA.slice(0, 2),
          "soon",
          "1",
        ],
        /ERR_INVALID_RECORD settle_jobs job a: field resultTtlSeconds must be a number, got soon/,
      ],
      [
        [JSON.stringify({ ...base, jobFields: ["id", "token", "reused"] }), ...jobA.slice(0, 2), "yes", "1"],
        /ERR_INVALID_RECORD settle_jobs job a: field reused must be 1, 0 or empty, got yes/,
      ],
      [
        [JSON.stringify({ ...base, claim: 1, jobFields: ["id", "token"] }), ...jobA],
        /field leaseMs must be a number, got none/,
      ],
      [
        [
          JSON.stringify({ ...base, claim: "1", leaseMs: 1000, workerId: "w", jobFields: ["id", "token"] }),
          ...jobA,
        ],
        /ERR_INVALID_RECORD settle_jobs call: field claim must be a number, got string/,
      ],
    ] as const)
      await assert.rejects(runScript(redis, "settle_jobs", keys, [...args]), message);
    const counts = await admin.counts(q);
    assert.equal(counts.inflight, 2);
    assert.equal((await admin.counters(q)).completed, undefined);
    assert.equal(await c.complete(a!, 1), true);
    assert.equal(await c.complete(b!, 2), true);
  });

  test("fail_job and release_job: one record, optional fields left out; a malformed one is refused naming it", async () => {
    const q = fresh();
    await producer.enqueueMany(q, [
      { id: "f", data: 1 },
      { id: "r", data: 2 },
    ]);
    const c = consumer(q);
    const [f, r] = (await c.claim(2)).jobs;
    const k = c.keys;
    const failKeys = [k.inflight, k.delayed, k.dead, k.counts, k.outbox, k.meta];
    const releaseKeys = [k.inflight, k.ready, k.counts, k.wake, k.outbox, k.meta];
    const base = { jobPrefix: k.jobPrefix, queue: q, now: Date.now() };
    for (const [script, keys, args, message] of [
      ["fail_job", failKeys, ["[1]"], /ERR_INVALID_RECORD fail_job call is not a JSON object: \[1\]/],
      [
        "fail_job",
        failKeys,
        [JSON.stringify({ ...base, id: "f", token: f!.token })],
        /fail_job call: field error must be a string, got none/,
      ],
      [
        "release_job",
        releaseKeys,
        [JSON.stringify({ ...base, id: "r", token: r!.token, reason: "x" })],
        /release_job call: field cause must be a string, got none/,
      ],
      [
        "release_job",
        releaseKeys,
        [
          JSON.stringify({
            ...base,
            id: "r",
            token: r!.token,
            reason: "x",
            cause: "rateLimited",
            resource: "api",
          }),
        ],
        /release_job call: field key must be a string, got none/,
      ],
    ] as const)
      await assert.rejects(runScript(redis, script, [...keys], [...args]), message);
    assert.equal((await admin.counts(q)).inflight, 2);
    // (no retryable: the failure is final; no templateVersion, details or rejected: none)
    assert.equal(
      await runScript(redis, "fail_job", failKeys, [
        JSON.stringify({ ...base, id: "f", token: f!.token, error: '{"message":"boom"}' }),
      ]),
      "dead",
    );
    assert.equal(
      await runScript(redis, "release_job", releaseKeys, [
        JSON.stringify({ ...base, id: "r", token: r!.token, reason: "draining", cause: "handedBack" }),
      ]),
      1,
    );
    const counts = await admin.counts(q);
    assert.deepEqual([counts.dead, counts.ready, counts.inflight], [1, 1, 0]);
    assert.equal((await admin.job("f", q))?.deadReason, "not retryable: boom");
  });

  test("complete_job and advance_job: a claim without its lease or a missing text is refused naming it", async () => {
    const q = fresh();
    await producer.enqueue(q, 1, { id: "a" });
    const c = consumer(q);
    const [a] = (await c.claim(1)).jobs;
    const k = c.keys;
    const base = { jobPrefix: k.jobPrefix, queue: q, id: "a", token: a!.token, now: Date.now() };
    await assert.rejects(
      runScript(
        redis,
        "complete_job",
        [k.inflight, k.counts, k.outbox, k.meta],
        [JSON.stringify({ ...base, claim: 1 }), "1"],
      ),
      /ERR_INVALID_RECORD complete_job call: field leaseMs must be a number, got none/,
    );
    const next = new QueueKeys(`${q}x`);
    await assert.rejects(
      runScript(
        redis,
        "advance_job",
        [k.inflight, k.counts, k.outbox, k.meta, next.ready, next.counts, next.wake],
        [JSON.stringify({ ...base, nextQueue: `${q}x` }), "1"],
      ),
      /ERR_INVALID_RECORD advance_job: the result and next data \(ARGV 2, 3\) are missing/,
    );
    assert.equal((await admin.counts(q)).inflight, 1);
    assert.equal(
      await runScript(
        redis,
        "complete_job",
        [k.inflight, k.counts, k.outbox, k.meta],
        [JSON.stringify(base), "1"],
      ),
      1,
    );
    assert.equal((await admin.counts(q)).completed, 1);
  });

  test("cancel_job, promote_job, cancel_flow: named replies, a field that does not apply left out", async () => {
    const q = fresh();
    await producer.enqueue(q, 1, { id: "later", delayMs: 60_000 });
    const k = new QueueKeys(q);
    const p = new PipelineKeys(q.split("/")[0]!);
    const promote = (id: string) =>
      runScript<unknown[]>(
        redis,
        "promote_job",
        [k.delayed, k.ready, k.wake, k.outbox, k.meta],
        [JSON.stringify({ jobPrefix: k.jobPrefix, id, queue: q, now: Date.now() })],
      );
    assert.deepEqual(await promote("nope"), ["outcome", "notFound"]);
    assert.deepEqual(await promote("later"), ["outcome", "promoted", "state", "delayed"]);
    assert.deepEqual(await promote("later"), ["outcome", "notDelayed", "state", "ready"]);
    const cancel = (id: string) =>
      runScript<unknown[]>(
        redis,
        "cancel_job",
        [p.outbox, p.meta],
        [JSON.stringify({ jobPrefix: p.jobPrefix, id, now: Date.now() })],
      );
    assert.deepEqual(await cancel("nope"), ["outcome", "notFound", "jobsCancelled", 0]);
    assert.deepEqual(await cancel("later"), [
      "outcome",
      "cancelled",
      "state",
      "ready",
      "queue",
      q,
      "jobsCancelled",
      1,
    ]);
    assert.deepEqual(
      await runScript(
        redis,
        "cancel_flow",
        [p.outbox, p.meta, p.flow("none")],
        [JSON.stringify({ jobPrefix: p.jobPrefix, now: Date.now() })],
      ),
      ["cancelled", -1, "total", 0],
    );
    await assert.rejects(
      runScript(
        redis,
        "promote_job",
        [k.delayed, k.ready, k.wake, k.outbox, k.meta],
        [JSON.stringify({ jobPrefix: k.jobPrefix, id: "x", queue: q })],
      ),
      /ERR_INVALID_RECORD promote_job call: field now must be a number, got none/,
    );
  });

  test("a record's text with a lone surrogate is sent as U+FFFD, as a plain argument is, not refused", async () => {
    const q = fresh();
    await producer.enqueue(q, 1, { id: "a" });
    const c = consumer(q);
    const [a] = (await c.claim(1)).jobs;
    assert.equal(await c.release(a!, "dependency \ud800 down", "deferred"), true);
    assert.equal(await redis.hget(c.keys.job("a"), "requeued"), "deferred: dependency \ufffd down");
  });

  test("sweep_leases, reclaim_finished, group_admission, report_progress: named in, named out", async () => {
    const q = fresh();
    await producer.enqueue(q, 1, { id: "a" });
    const c = consumer(q);
    const [a] = (await c.claim(1)).jobs;
    const k = c.keys;
    const sweep = {
      jobPrefix: k.jobPrefix,
      queue: q,
      now: Date.now(),
      maxStalls: 1,
      limit: 100,
      lockMs: 1,
      workerStaleMs: 60_000,
    };
    const swept = await runScript<unknown[]>(redis, "sweep_leases", sweepKeys(k), [JSON.stringify(sweep)]);
    assert.deepEqual(swept, ["requeued", 0, "dead", 0, "graceLeftMs", 0]);
    await assert.rejects(
      runScript(redis, "sweep_leases", sweepKeys(k), [JSON.stringify({ ...sweep, lockMs: "1" })]),
      /ERR_INVALID_RECORD sweep_leases call: field lockMs must be a number, got string/,
    );
    assert.deepEqual(
      await runScript(
        redis,
        "reclaim_finished",
        [k.finished],
        [JSON.stringify({ jobPrefix: k.jobPrefix, now: Date.now() })],
      ),
      ["reclaimed", 0, "more", 0],
    );
    await assert.rejects(
      runScript(
        redis,
        "reclaim_finished",
        [k.finished],
        [JSON.stringify({ jobPrefix: k.jobPrefix, limit: 10 })],
      ),
      /ERR_INVALID_RECORD reclaim_finished call: field now must be a number, got none/,
    );
    assert.deepEqual(
      await runScript(
        redis,
        "group_admission",
        [k.groupRing, k.groupWaiting, k.groupRunning, k.groupControl],
        [JSON.stringify({ enough: 10, scanLimit: 10 })],
      ),
      ["waiting", 0, "admissible", 0, "scanned", 0, "ring", 0],
    );
    await assert.rejects(
      runScript(
        redis,
        "group_admission",
        [k.groupRing, k.groupWaiting, k.groupRunning, k.groupControl],
        [JSON.stringify({ enough: 10 })],
      ),
      /ERR_INVALID_RECORD group_admission call: field scanLimit must be a number, got none/,
    );
    // (the fraction is stored as the text the record gives; no message: '')
    assert.equal(
      await runScript(
        redis,
        "report_progress",
        [k.outbox, k.meta],
        [
          JSON.stringify({
            jobPrefix: k.jobPrefix,
            queue: q,
            id: "a",
            token: a!.token,
            now: Date.now(),
            fraction: "0.1",
          }),
        ],
      ),
      1,
    );
    assert.deepEqual(await redis.hmget(k.job("a"), "progress", "progressMessage"), ["0.1", ""]);
  });

  test("fan_out: the record counts the children whose texts follow it; a mismatch is refused, nothing written", async () => {
    const q = fresh();
    await producer.enqueue(q, 1, { id: "p" });
    const c = consumer(q);
    const [p] = (await c.claim(1)).jobs;
    const k = c.keys;
    const n = new QueueKeys(`${q.split("/")[0]}/kids`);
    const keys = [k.inflight, k.counts, k.outbox, k.meta, n.ready, n.counts, n.wake, k.seq, n.contract];
    const record = {
      jobPrefix: k.jobPrefix,
      queue: q,
      id: "p",
      token: p!.token,
      now: Date.now(),
      nextQueue: n.queue,
      joinQueue: n.queue,
      children: 2,
    };
    await assert.rejects(
      runScript(redis, "fan_out", keys, [JSON.stringify({ ...record, traced: true }), "1", "2"]),
      /ERR_INVALID_RECORD fan_out call: 2 children with traces need 4 texts after the record, got 2/,
    );
    assert.equal((await admin.counts(q)).inflight, 1);
    assert.equal(await runScript(redis, "fan_out", keys, [JSON.stringify(record), "1", "2"]), 2);
    assert.equal((await admin.counts(n.queue)).ready, 2);
  });
  test("delete_jobs: the required fields and the ids after them; the reply names each id's outcome and state", async () => {
    const q = fresh();
    await producer.enqueueMany(q, [
      { id: "a", data: 1 },
      { id: "b", data: 2 },
    ]);
    const k = new QueueKeys(q);
    const keys = [k.ready, k.delayed, k.dead, k.counts, k.outbox, k.meta];
    const record = {
      jobPrefix: k.jobPrefix,
      idempotencyPrefix: k.idempotencyPrefix,
      queue: q,
      now: Date.now(),
    };
    await assert.rejects(
      runScript(redis, "delete_jobs", keys, [
        JSON.stringify({ ...record, idempotencyPrefix: undefined }),
        "a",
      ]),
      /ERR_INVALID_RECORD delete_jobs call: field idempotencyPrefix must be a string, got none/,
    );
    await assert.rejects(
      runScript(redis, "delete_jobs", keys, ["a", "b"]),
      /ERR_INVALID_RECORD delete_jobs call is not a JSON object: a/,
    );
    assert.equal((await admin.counts(q)).ready, 2);
    assert.deepEqual(await runScript(redis, "delete_jobs", keys, [JSON.stringify(record), "a", "none"]), [
      ["id", "a", "outcome", "deleted", "state", "ready"],
      // (no state: there was no job)
      ["id", "none", "outcome", "notFound"],
    ]);
    assert.equal((await admin.counts(q)).ready, 1);
  });

  test("retry_dead: the ids after the record, or the record's limit; neither is refused naming limit", async () => {
    const q = fresh();
    await producer.enqueueMany(q, [
      { id: "a", data: 1, attempts: 1 },
      { id: "b", data: 2, attempts: 1 },
    ]);
    const c = consumer(q);
    for (const job of (await c.claim(2)).jobs) {
      assert.equal(
        await c.fail(job, { name: "Error", message: "x" }, { retryable: true, retryDelayMs: 0 }),
        "dead",
      );
    }
    const k = c.keys;
    const keys = [k.dead, k.ready, k.counts, k.wake, k.outbox, k.meta];
    const record = { jobPrefix: k.jobPrefix, queue: q, now: Date.now() };
    await assert.rejects(
      runScript(redis, "retry_dead", keys, [JSON.stringify(record)]),
      /ERR_INVALID_RECORD retry_dead call: field limit must be a number when no ids follow, got none/,
    );
    await assert.rejects(
      runScript(redis, "retry_dead", keys, [JSON.stringify({ ...record, now: "soon" }), "a"]),
      /ERR_INVALID_RECORD retry_dead call: field now must be a number, got string/,
    );
    assert.equal((await admin.counts(q)).dead, 2);
    assert.equal(await runScript(redis, "retry_dead", keys, [JSON.stringify(record), "a", "none"]), 1);
    assert.equal(await runScript(redis, "retry_dead", keys, [JSON.stringify({ ...record, limit: 5 })]), 1);
    assert.equal((await admin.counts(q)).ready, 2);
  });
  test("resource_set and resource_usage: one record, the keys or corrections after it; a malformed one is refused naming it", async () => {
    const p = new PipelineKeys(`wireres${++n}`);
    const keys = [p.resource("llm"), p.resources];
    await assert.rejects(
      runScript(redis, "resource_set", keys, [JSON.stringify({ ceiling: 0.5 }), "k1", "tokens=100/60000"]),
      /ERR_INVALID_RECORD resource_set call: field ceiling must be a string, got number/,
    );
    assert.equal(await redis.exists(p.resource("llm")), 0);
    assert.equal(
      await runScript(redis, "resource_set", keys, [
        JSON.stringify({ ceiling: "0.5" }),
        "k1",
        "tokens=100/60000",
      ]),
      1,
    );
    assert.deepEqual(await redis.hmget(p.resource("llm"), "ceiling", "keys"), ["0.5", "k1"]);
    const usage = { key: "k1", at: Date.now(), now: Date.now() };
    await assert.rejects(
      runScript(
        redis,
        "resource_usage",
        [p.resource("llm")],
        [JSON.stringify({ ...usage, at: undefined }), "tokens", "5"],
      ),
      /ERR_INVALID_RECORD resource_usage call: field at must be a number, got none/,
    );
    await assert.rejects(
      runScript(
        redis,
        "resource_usage",
        [p.resource("llm")],
        [JSON.stringify({ ...usage, benchUntilMs: "later" })],
      ),
      /ERR_INVALID_RECORD resource_usage call: field benchUntilMs must be a number, got string/,
    );
    assert.deepEqual(await redis.hmget(p.resource("llm"), "log:k1:tokens", "bench:k1"), [null, null]);
    assert.equal(
      await runScript(redis, "resource_usage", [p.resource("llm")], [JSON.stringify(usage), "tokens", "5"]),
      1,
    );
    assert.notEqual(await redis.hget(p.resource("llm"), "log:k1:tokens"), null);
    const until = Date.now() + 60_000;
    assert.equal(
      await runScript(
        redis,
        "resource_usage",
        [p.resource("llm")],
        [JSON.stringify({ ...usage, benchUntilMs: until })],
      ),
      1,
    );
    assert.equal(await redis.hget(p.resource("llm"), "bench:k1"), String(until));
  });
  test("backlog_counts and poll_queues: named in, named out, a field that does not apply left out", async () => {
    const q = fresh();
    await producer.enqueue(q, 1, { id: "a" });
    const k = new QueueKeys(q);
    const counts = named(
      await runScript<unknown[]>(
        redis,
        "backlog_counts",
        [k.ready, k.delayed, k.inflight, k.dead, k.counts],
        [JSON.stringify({ jobPrefix: k.jobPrefix, now: Date.now() })],
      ),
    );
    assert.equal(counts.ready, 1);
    assert.equal(counts.enqueued, 1);
    assert.ok((counts.oldestReadyAt as number) > 0);
    await assert.rejects(
      runScript(redis, "backlog_counts", [k.ready, k.delayed, k.inflight, k.dead, k.counts], ['{"now":1}']),
      /ERR_INVALID_RECORD backlog_counts call: field jobPrefix must be a string, got none/,
    );
    const empty = new QueueKeys(fresh());
    const keys = [...sweepKeys(k), ...sweepKeys(empty)];
    const queues = [k.jobPrefix, q, empty.jobPrefix, empty.queue];
    const polls = (
      await runScript<unknown[][]>(redis, "poll_queues", keys, [
        JSON.stringify({ now: Date.now() }),
        ...queues,
      ])
    ).map(named);
    assert.equal(polls[0]!.ready, 1);
    assert.equal(polls[0]!.groupedWaiting, 0);
    // (not paused, no rate limit, no sweep asked: left out; nothing ready: no oldestReadyAt)
    for (const absent of ["paused", "rate", "sweep", "oldestReadyAt"])
      assert.ok(!(absent in polls[1]!), absent);
    await assert.rejects(
      runScript(redis, "poll_queues", keys, [
        JSON.stringify({ now: Date.now(), sweep: true, maxStalls: 1 }),
        ...queues,
      ]),
      /ERR_INVALID_RECORD poll_queues call: field limit must be a number, got none/,
    );
    await assert.rejects(
      runScript(redis, "poll_queues", keys, [JSON.stringify({ now: Date.now(), sweep: "1" }), ...queues]),
      /ERR_INVALID_RECORD poll_queues call: field sweep must be a boolean, got string/,
    );
    assert.equal(await redis.exists(k.sweeper), 0);
    const sweep = {
      now: Date.now(),
      sweep: true,
      maxStalls: 1,
      limit: 100,
      lockMs: 1,
      workerStaleMs: 60_000,
    };
    const [swept] = await runScript<unknown[][]>(redis, "poll_queues", keys, [
      JSON.stringify(sweep),
      ...queues,
    ]);
    assert.deepEqual(named(swept!).sweep, ["requeued", 0, "dead", 0, "graceLeftMs", 0]);
  });
  test("job_states: per key its fields by name, a missing one left out; type for a key that is not a hash", async () => {
    const q = fresh();
    await producer.enqueueMany(q, [
      { id: "open", data: 1 },
      { id: "done", data: 2 },
    ]);
    // (records kept after they end)
    const c = new Consumer(redis, q, { workerId: "w1", leaseMs: 60_000 });
    for (const job of (await c.claim(2)).jobs)
      if (job.id === "done") assert.equal(await c.complete(job, 7), true);
    const p = new PipelineKeys(q.split("/")[0]!);
    await redis.set(p.job("str"), "x");
    const keys = ["open", "done", "none", "str"].map((id) => p.job(id));
    const replies = await runScript<unknown[][]>(redis, "job_states", keys, [
      JSON.stringify({ whole: true }),
      "queue",
      "deadReason",
    ]);
    assert.deepEqual(replies[0], ["state", "active", "queue", q]);
    assert.deepEqual(replies[1]!.slice(0, 4), ["state", "completed", "queue", q]);
    assert.equal(replies[1]![4], "record");
    assert.equal(named(replies[1]![5] as unknown[]).result, "7");
    assert.deepEqual(replies[2], ["type", "none"]);
    assert.deepEqual(replies[3], ["type", "string"]);
    // (no whole: no record)
    assert.deepEqual(await runScript(redis, "job_states", [p.job("done")], ["{}"]), [["state", "completed"]]);
    await assert.rejects(
      runScript(redis, "job_states", keys, [JSON.stringify({ whole: 1 })]),
      /ERR_INVALID_RECORD job_states call: field whole must be a boolean, got number/,
    );
  });
  test("claim_jobs and renew_leases: the required fields alone; named replies, cordonedUntil left out when not cordoned", async () => {
    const q = fresh();
    await producer.enqueue(q, 1, { id: "a" });
    const k = new QueueKeys(q);
    const claimKeys = [
      k.ready,
      k.delayed,
      k.inflight,
      k.dead,
      k.counts,
      k.fence,
      k.wake,
      k.outbox,
      k.meta,
      k.contract,
    ];
    const claim = {
      jobPrefix: k.jobPrefix,
      queue: q,
      now: Date.now(),
      leaseMs: 60_000,
      count: 1,
      workerId: "w1",
    };
    await assert.rejects(
      runScript(redis, "claim_jobs", claimKeys, [JSON.stringify({ ...claim, count: "1" })]),
      /ERR_INVALID_RECORD claim_jobs call: field count must be a number, got string/,
    );
    assert.equal((await admin.counts(q)).ready, 1);
    const claimed = named(
      await runScript<unknown[]>(redis, "claim_jobs", claimKeys, [JSON.stringify(claim)]),
    );
    assert.deepEqual(Object.keys(claimed), ["jobs", "nextDueMs", "startSlackMs"]);
    const jobs = claimed.jobs as string[];
    const names = jobs[0]!.split(",");
    const token = jobs[1 + names.indexOf("token")]!;
    const renewKeys = [k.inflight, k.workers, k.cordon];
    const renew = { jobPrefix: k.jobPrefix, now: Date.now(), leaseMs: 60_000, workerId: "w1" };
    await assert.rejects(
      runScript(redis, "renew_leases", renewKeys, [
        JSON.stringify({ ...renew, workerId: undefined }),
        "a",
        token,
      ]),
      /ERR_INVALID_RECORD renew_leases call: field workerId must be a string, got none/,
    );
    assert.deepEqual(
      await runScript(redis, "renew_leases", renewKeys, [JSON.stringify(renew), "a", token, "b", "1"]),
      ["lost", ["b"], "cancelled", []],
    );
    await redis.hset(k.cordon, "pod-1", String(Date.now() + 60_000));
    const cordoned = named(
      await runScript<unknown[]>(redis, "renew_leases", renewKeys, [
        JSON.stringify({ ...renew, pod: "pod-1" }),
      ]),
    );
    assert.ok(Number(cordoned.cordonedUntil) > Date.now());
  });

  test("purge_dead, schedule_remove, resource_remove, records_enable, token_rate: one record, named replies; a malformed one is refused naming it, nothing written", async () => {
    const q = fresh();
    const k = new QueueKeys(q);
    const p = new PipelineKeys(q.split("/")[0]!);
    await redis.zadd(k.dead, 1, "d1", 2, "d2");
    await redis.hset(k.job("d1"), "state", "dead");
    await assert.rejects(
      runScript(redis, "purge_dead", [k.dead], [JSON.stringify({ jobPrefix: k.jobPrefix })]),
      /ERR_INVALID_RECORD purge_dead call: field limit must be a number, got none/,
    );
    await assert.rejects(
      runScript(redis, "purge_dead", [k.dead], [k.jobPrefix, "10"]),
      /ERR_INVALID_RECORD purge_dead call is not a JSON object/,
    );
    assert.equal(await redis.zcard(k.dead), 2);
    assert.deepEqual(
      await runScript(redis, "purge_dead", [k.dead], [JSON.stringify({ jobPrefix: k.jobPrefix, limit: 1 })]),
      ["purged", 1],
    );
    assert.deepEqual([await redis.zcard(k.dead), await redis.exists(k.job("d1"))], [1, 0]);

    await redis.hset(k.schedules, "nightly", "{}", "next:nightly", "5");
    await redis.zadd(k.delayed, 5, "sched:nightly:5");
    const removeSchedule = (record: object) =>
      runScript(redis, "schedule_remove", [k.schedules, k.delayed], [JSON.stringify(record)]);
    await assert.rejects(
      removeSchedule({ jobPrefix: k.jobPrefix, name: 7 }),
      /ERR_INVALID_RECORD schedule_remove call: field name must be a string, got number/,
    );
    assert.equal(await redis.hlen(k.schedules), 2);
    assert.deepEqual(await removeSchedule({ jobPrefix: k.jobPrefix, name: "nightly" }), ["existed", 1]);
    assert.deepEqual([await redis.hlen(k.schedules), await redis.zcard(k.delayed)], [0, 0]);
    assert.deepEqual(await removeSchedule({ jobPrefix: k.jobPrefix, name: "nightly" }), ["existed", 0]);

    const resKeys = [p.resource("llm"), p.resources];
    await redis.hset(p.resource("llm"), "ceiling", "1");
    assert.deepEqual(await runScript(redis, "resource_remove", resKeys, []), ["existed", 1]);
    assert.deepEqual(await runScript(redis, "resource_remove", resKeys, []), ["existed", 0]);

    const enable = (record: unknown) =>
      runScript(redis, "records_enable", [p.outbox, p.meta], [JSON.stringify(record)]);
    await assert.rejects(
      enable({}),
      /ERR_INVALID_RECORD records_enable call: field group must be a string, got none/,
    );
    assert.equal(await redis.exists(p.outbox), 0);
    assert.deepEqual(await enable({ group: "conveyor-records" }), ["switched", 1]);
    assert.deepEqual(await enable({ group: "conveyor-records" }), ["switched", 0]);

    const rate = (record: object) =>
      runScript<unknown[]>(redis, "token_rate", [`${p.meta}:rate`], [JSON.stringify(record)]);
    await assert.rejects(
      rate({ max: 1, windowMs: "60000" }),
      /ERR_INVALID_RECORD token_rate call: field windowMs must be a number, got string/,
    );
    await assert.rejects(
      rate({ max: 0, windowMs: 60_000 }),
      /ERR_INVALID_RECORD token_rate call: max and windowMs/,
    );
    assert.equal(await redis.exists(`${p.meta}:rate`), 0);
    assert.deepEqual(await rate({ max: 1, windowMs: 60_000 }), ["admitted", 1]);
    const refused = named(await rate({ max: 1, windowMs: 60_000 }));
    assert.equal(refused.admitted, 0);
    assert.ok(Number(refused.retryAfterMs) > 0, `retryAfterMs ${String(refused.retryAfterMs)}`);
  });

  test("group_control and layout_finalize: one record (the queues after it), named replies; a malformed one is refused naming it, nothing written", async () => {
    const q = fresh();
    await producer.enqueue(q, 1, { id: "g1", group: "g" });
    const k = new QueueKeys(q);
    const p = new PipelineKeys(q.split("/")[0]!);
    const control = (record: unknown) =>
      runScript(
        redis,
        "group_control",
        [k.groupControl, k.groupWaiting, k.groupRing, k.wake],
        [JSON.stringify(record)],
      );
    await assert.rejects(
      control({ group: "g" }),
      /ERR_INVALID_RECORD group_control call: field action must be a string, got none/,
    );
    await assert.rejects(
      control({ action: "limit", value: 2 }),
      /ERR_INVALID_RECORD group_control call: field value must be a string, got number/,
    );
    assert.equal(await redis.hget(k.groupControl, "concurrency"), null);
    // (group left out: every group; value left out: the setting removed)
    assert.deepEqual(await control({ action: "limit", value: "2" }), ["regrouped", 1]);
    assert.equal(await redis.hget(k.groupControl, "concurrency"), "2");
    assert.deepEqual(await control({ action: "limit" }), ["regrouped", 1]);
    assert.equal(await redis.hget(k.groupControl, "concurrency"), null);
    assert.deepEqual(await control({ action: "pause", group: "g" }), ["regrouped", 0]);
    assert.equal(await redis.hget(k.groupControl, "paused:g"), "1");
    await assert.rejects(control({ action: "resume" }), /ERR_INVALID_GROUP a group is required to resume/);

    const finalize = (record: unknown, ...queues: string[]) =>
      runScript(redis, "layout_finalize", [p.layout, p.meta], [JSON.stringify(record), ...queues]);
    const record = { to: 2, firstVersion: "0.9.0", finalizedAt: 1_700_000_000_000, finalizedBy: "test" };
    await assert.rejects(
      finalize({ ...record, finalizedBy: undefined }, q),
      /ERR_INVALID_RECORD layout_finalize call: field finalizedBy must be a string, got none/,
    );
    await assert.rejects(
      finalize({ ...record, to: 1.5 }, q),
      /ERR_INVALID_RECORD layout_finalize call: field to must be a positive integer/,
    );
    assert.equal(await redis.exists(p.layout), 0);
    assert.deepEqual(await finalize(record, q), ["previous", 1]);
    assert.deepEqual(await redis.hgetall(p.layout), {
      inForce: "2",
      firstVersion: "0.9.0",
      finalizedAt: "1700000000000",
      finalizedBy: "test",
    });
    assert.deepEqual(await redis.hmget(p.meta, "layout", `paused:${q}`), ["2", "1"]);
    assert.deepEqual(await finalize(record, q), ["previous", 2]);
  });

  test("cancel_flow and flow_repair: the required fields alone; a malformed record is refused naming it, nothing written", async () => {
    const flow = await producer.enqueueFlow("wireflow", [
      { key: "a", queue: "wireflow/q", data: 1 },
      { key: "b", queue: "wireflow/q", data: 2, parents: ["a"] },
    ]);
    const p = new PipelineKeys("wireflow");
    const cancelKeys = [p.outbox, p.meta, p.flow(flow.flowId)];
    await assert.rejects(
      runScript(redis, "cancel_flow", cancelKeys, [JSON.stringify({ jobPrefix: p.jobPrefix, now: "now" })]),
      /ERR_INVALID_RECORD cancel_flow call: field now must be a number, got string/,
    );
    await assert.rejects(
      runScript(redis, "cancel_flow", cancelKeys, [
        JSON.stringify({ jobPrefix: p.jobPrefix, now: Date.now(), retentionSeconds: "60" }),
      ]),
      /ERR_INVALID_RECORD cancel_flow call: field retentionSeconds must be a number, got string/,
    );
    assert.equal(await redis.hget(p.job(flow.ids.a!), "state"), "ready");
    const repair = (record: unknown) =>
      runScript<unknown[]>(redis, "flow_repair", [p.flow(flow.flowId)], [JSON.stringify(record)]);
    await assert.rejects(
      repair({ jobPrefix: p.jobPrefix, now: Date.now() }),
      /ERR_INVALID_RECORD flow_repair call: field id must be a string, got none/,
    );
    assert.deepEqual(await repair({ jobPrefix: p.jobPrefix, now: Date.now(), id: flow.flowId }), [
      "told",
      0,
      "gone",
      0,
      "total",
      2,
    ]);
    assert.deepEqual(
      await runScript(redis, "cancel_flow", cancelKeys, [
        JSON.stringify({ jobPrefix: p.jobPrefix, now: Date.now() }),
      ]),
      ["cancelled", 2, "total", 2],
    );
    assert.deepEqual(await redis.hmget(p.job(flow.ids.a!), "state"), ["cancelled"]);
    // (no retentionSeconds: the records are kept, no TTL)
    assert.equal(await redis.ttl(p.job(flow.ids.a!)), -1);
  });

  test("enqueue_flow: the call's record names the queues and job fields once, the values follow by job; a named reply; a malformed record is refused naming it, nothing written", async () => {
    const p = new PipelineKeys(`wireflow${++n}`);
    const k = new QueueKeys(`${p.pipeline}/q`);
    const keys = (flowId: string, idem?: string) => [
      p.outbox,
      p.meta,
      p.seq,
      p.flow(flowId),
      k.ready,
      k.delayed,
      k.counts,
      k.wake,
      k.contract,
      ...(idem ? [p.flowIdempotency(idem)] : []),
    ];
    const record = {
      jobPrefix: p.jobPrefix,
      flowId: "f1",
      now: Date.now(),
      maxPayloadBytes: 1000,
      queues: [k.queue],
      jobFields: ["id", "key", "queue", "data", "parents"],
    };
    const jobs = ["j1", "a", k.queue, "1", "", "j2", "b", k.queue, "2", "a"];
    const flow = (r: { flowId?: string; [field: string]: unknown }, idem?: string) =>
      runScript<unknown[]>(redis, "enqueue_flow", keys(r.flowId ?? "f1", idem), [JSON.stringify(r), ...jobs]);
    await assert.rejects(
      flow({ ...record, flowId: undefined }),
      /ERR_INVALID_RECORD enqueue_flow call: field flowId must be a string, got none/,
    );
    await assert.rejects(
      flow({ ...record, queues: [k.queue, 7] }),
      /ERR_INVALID_RECORD enqueue_flow call: field queues must be a list of names, got a number in it/,
    );
    await assert.rejects(
      flow({ ...record, contractHashes: "abc" }),
      /ERR_INVALID_RECORD enqueue_flow call: field contractHashes must be a table, got string/,
    );
    await assert.rejects(
      flow({ ...record, contractHashes: { [k.queue]: "abc" } }),
      /contract changed \(in force: none\)/,
    );
    assert.deepEqual(await redis.keys(`*{${p.pipeline}}*`), []);
    assert.deepEqual(await flow(record, "once"), ["written", 2]);
    assert.deepEqual(await redis.hmget(p.job("j2"), "state", "parents"), ["waiting-children", "a"]);
    // (the same flow again under its idempotency key: the first one's id and jobs, nothing written)
    assert.deepEqual(await flow({ ...record, flowId: "f2" }, "once"), ["flowId", "f1", "ids", ["j1", "j2"]]);
  });

  test("enqueue_jobs: the call's record names the job fields once, the values follow by job; the reply names ids and codes", async () => {
    const q = fresh();
    const k = new QueueKeys(q);
    const keys = enqueueJobsKeys(k);
    // (no contract: the field left out, or null)
    const record = enqueueJobsRecord(k, { jobFields: ["id", "data", "priority"] });
    const enqueue = (r: unknown, ...values: string[]) =>
      runScript<unknown[]>(redis, "enqueue_jobs", keys, [JSON.stringify(r), ...values]);
    assert.deepEqual(await enqueue(record, "a", "1", "", "b", "2", "7"), [
      "ids",
      ["a", "b"],
      "codes",
      [1, 1],
    ]);
    assert.deepEqual(await enqueue({ ...record, contract: null, jobFields: ["id", "data"] }, "a", "9"), [
      "ids",
      ["a"],
      "codes",
      [0],
    ]);
    assert.deepEqual(await redis.hmget(k.job("a"), "data", "attempts", "priority"), ["1", "3", null]);
    assert.deepEqual(await redis.hmget(k.job("b"), "data", "priority"), ["2", "7"]);
    // (a call of no jobs names both lists, empty)
    assert.deepEqual(await enqueue(record), ["ids", [], "codes", []]);
  });

  test("enqueue_jobs: a malformed call record, job field list or count of values is refused naming it, nothing written", async () => {
    const q = fresh();
    const k = new QueueKeys(q);
    const keys = enqueueJobsKeys(k);
    const record = enqueueJobsRecord(k);
    const cases: [unknown[], RegExp][] = [
      [["not json", "a", "1"], /ERR_INVALID_RECORD enqueue_jobs call is not a JSON object: not json/],
      [
        [{ ...record, queue: undefined }, "a", "1"],
        /ERR_INVALID_RECORD enqueue_jobs call: field queue must be a string, got none/,
      ],
      [
        [{ ...record, now: String(record.now) }, "a", "1"],
        /ERR_INVALID_RECORD enqueue_jobs call: field now must be a number, got string/,
      ],
      [
        [{ ...record, jobFields: "id,data" }, "a", "1"],
        /ERR_INVALID_RECORD enqueue_jobs call: field jobFields must be a table, got string/,
      ],
      [
        [{ ...record, contract: 5 }, "a", "1"],
        /ERR_INVALID_RECORD enqueue_jobs call: field contract must be a string, got number/,
      ],
      [
        [{ ...record, jobFields: ["id", "data", "colour"] }, "a", "1", "red"],
        /ERR_INVALID_RECORD enqueue_jobs call: jobFields: unknown, repeated or misplaced job field colour at 3 \(id, data first\)/,
      ],
      [
        [{ ...record, jobFields: ["id", "data", "group", "group"] }, "a", "1", "g", "h"],
        /ERR_INVALID_RECORD enqueue_jobs call: jobFields: unknown, repeated or misplaced job field group at 4/,
      ],
      [
        [{ ...record, jobFields: ["data", "id"] }, "1", "a"],
        /ERR_INVALID_RECORD enqueue_jobs call: jobFields: unknown, repeated or misplaced job field data at 1/,
      ],
      [
        [{ ...record, jobFields: ["id", "data", 3] }, "a", "1", "x"],
        /ERR_INVALID_RECORD enqueue_jobs call: jobFields: unknown, repeated or misplaced job field 3 at 3/,
      ],
      [
        [{ ...record, jobFields: ["id"] }, "a"],
        /ERR_INVALID_RECORD enqueue_jobs call: jobFields must name id and data first/,
      ],
      [
        [record, "a", "1", "b"],
        /ERR_INVALID_RECORD enqueue_jobs call: 3 values after the call record are not whole jobs of 2 \(id,data\)/,
      ],
    ];
    for (const [[r, ...values], error] of cases)
      await assert.rejects(
        runScript(redis, "enqueue_jobs", keys, [
          typeof r === "string" ? r : JSON.stringify(r),
          ...(values as string[]),
        ]),
        error,
      );
    await assert.rejects(
      runScript(redis, "enqueue_jobs", keys.slice(0, 7), [JSON.stringify(record), "a", "1"]),
      /ERR_INVALID_RECORD enqueue_jobs call: 8 KEYS wanted, the 8th <Q>contract, got 7/,
    );
    assert.deepEqual(await redis.keys(`*{${q}}*`), []);
  });
});

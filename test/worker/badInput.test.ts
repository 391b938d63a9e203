// Bad job input, on purpose: what other producers, handlers and commands can throw at the queue
// and the worker. Jobs: seeded fuzzed payloads through the real producer (JSON-ish values with
// unicode, NUL, lone surrogates, deep nesting, strings near the size limit); oversized or
// unserializable data refused at enqueue with a clear error naming the job, nothing of the
// batch enqueued; raw entries written straight into Redis (random bytes, missing hashes and
// fields, non-numeric fields and scores, job keys of the wrong type) — every job ends completed
// or dead-lettered with a reason, none is lost, the worker stays up and keeps completing good
// jobs. Handlers: module handlers that throw non-Errors or values that cannot even be turned
// into text, return values that are not JSON, exit the process or throw outside their promise,
// or write garbage to stdout; command handlers that exit non-zero, die by a signal, write
// garbage or flood stdout, ignore SIGTERM or leave a grandchild holding stdout.
// (Fuzzed WorkerPools, API-server restarts and field-manager fights: test/operator/badPools.test.ts.)
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import {
  connectRedis,
  InvalidJobError,
  PayloadTooLargeError,
  Producer,
  QueueAdmin,
  QueueKeys,
  DEFAULT_MAX_PAYLOAD_BYTES,
  type RedisClient,
} from "../../queue/index.ts";
import { rng } from "../support/random.ts";
import { stopProcess, waitFor } from "../support/processes.ts";
import { RedisServer } from "../support/redis.ts";
import { CONVEYOR, NODE, readExecutions, REPO, startWorker, type WorkerProcess } from "../support/workers.ts";

const BAD_HANDLER = `module:${join(REPO, "test/fixtures/badInputHandler.js")}`;
const BAD_COMMAND = `command:${JSON.stringify([NODE, join(REPO, "test/fixtures/badInputCommand.mjs")])}`;
const SEED = Number(process.env.BADINPUT_SEED ?? 20260101);

/** A seeded JSON-ish value: odd numbers, odd strings, odd keys, some nesting. */
function fuzzValue(r: () => number, depth = 0): unknown {
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]!;
  const kind = depth > 5 ? Math.floor(r() * 4) : Math.floor(r() * 7);
  switch (kind) {
    case 0:
      return pick([null, true, false]);
    case 1:
      return pick([
        0,
        -0,
        1,
        -1,
        0.1,
        1e308,
        -1e308,
        5e-324,
        2 ** 53 + 1,
        Number.MAX_SAFE_INTEGER,
        Math.round(r() * 1e9),
        r(),
      ]);
    case 2:
    case 3:
      return fuzzString(r);
    case 4:
      return Array.from({ length: Math.floor(r() * 6) }, () => fuzzValue(r, depth + 1));
    default: {
      const o: Record<string, unknown> = {};
      for (let i = Math.floor(r() * 6); i > 0; i--)
        o[
          pick([
            "__proto__",
            "constructor",
            "$conveyor",
            "",
            "\u0000",
            "ключ",
            "🔑",
            "a.b",
            "toString",
            fuzzString(r),
          ])
        ] = fuzzValue(r, depth + 1);
      return o;
    }
  }
}

const CHAR_POOLS = [
  "abcdefghijklmnopqrstuvwxyz0123456789 ",
  "\u0000\u0001\u0007\b\t\n\v\f\r\u001b\u007f",
  "\"\\/'`$(){}[];|&<>*?~#!",
  "éüßçø中文字日本語한국어",
  "😀🚀👩‍👩‍👧‍👦🏳️‍🌈",
  "\u200b\u200d\u2028\u2029\ufeff\u202e",
  "\ud800\udbff\udc00\udfff", // lone surrogates
];

function fuzzString(r: () => number): string {
  const pool = CHAR_POOLS[Math.floor(r() * CHAR_POOLS.length)]!;
  const chars = [...pool];
  let s = "";
  for (let i = Math.floor(r() * 40); i > 0; i--)
    s += pool.includes("\ud800")
      ? pool[Math.floor(r() * pool.length)]
      : chars[Math.floor(r() * chars.length)];
  return s;
}

function deep(depth: number): unknown {
  let v: unknown = "bottom";
  for (let i = 0; i < depth; i++) v = i % 2 ? [v] : { d: v };
  return v;
}

describe("bad job input", { timeout: 15 * 60_000 }, () => {
  let server: RedisServer;
  let redis: RedisClient;
  let producer: Producer;
  let admin: QueueAdmin;
  let dir: string;
  let n = 0;
  const workers: WorkerProcess[] = [];

  before(async () => {
    server = await RedisServer.start();
    redis = connectRedis(server.url);
    producer = new Producer(redis);
    admin = new QueueAdmin(redis);
    dir = mkdtempSync(join(tmpdir(), "cvy-badinput-"));
  });
  after(async () => {
    await Promise.all(workers.map((w) => stopProcess(w, 3000)));
    redis.disconnect();
    await server.stop();
    if (!process.env.CONVEYOR_KEEP_TMP) rmSync(dir, { recursive: true, force: true });
  });

  const execLog = (q: string) => join(dir, `${q.replace("/", "_")}.exec`);
  async function worker(q: string, extra: Record<string, string> = {}): Promise<WorkerProcess> {
    const w = await startWorker({
      dir,
      name: `bad${++n}`,
      env: {
        REDIS_URL: server.url,
        CONVEYOR_QUEUE: q,
        CONVEYOR_HANDLER: BAD_HANDLER,
        EXEC_LOG: execLog(q),
        CONVEYOR_BACKOFF_BASE: "10ms",
        CONVEYOR_BACKOFF_MAX: "50ms",
        CONVEYOR_KILL_GRACE: "300ms",
        ...extra,
      },
    });
    workers.push(w);
    return w;
  }
  /** Every one of `ids` completed or dead-lettered; returns their states. */
  async function settled(
    q: string,
    ids: string[],
    timeoutMs = 120_000,
  ): Promise<Map<string, { state: string; queue: string; deadReason?: string; result?: string }>> {
    const k = new QueueKeys(q);
    let last = new Map<string, { state: string; queue: string; deadReason?: string; result?: string }>();
    try {
      await waitFor(
        `${ids.length} jobs of ${q} settled`,
        async () => {
          const m = new Map<string, { state: string; queue: string; deadReason?: string; result?: string }>();
          for (const id of ids) {
            const [state, queue, deadReason, result] = await redis.hmget(
              k.job(id),
              "state",
              "queue",
              "deadReason",
              "result",
            );
            m.set(id, {
              state: state ?? "missing",
              queue: queue ?? "",
              deadReason: deadReason ?? undefined,
              result: result ?? undefined,
            });
          }
          last = m;
          return [...m.values()].every((s) => s.state === "completed" || s.state === "dead") ? m : null;
        },
        timeoutMs,
        200,
      );
    } catch (err) {
      const stuck = [...last]
        .filter(([, s]) => s.state !== "completed" && s.state !== "dead")
        .map(([id, s]) => `${id}: ${s.state}${s.queue ? ` at ${s.queue}` : ""}`);
      throw new Error(`${(err as Error).message}; not settled: ${stuck.slice(0, 10).join("; ")}`);
    }
    return last;
  }
  const alive = (w: WorkerProcess) => w.child.exitCode === null && w.child.signalCode === null;
  async function stillWorks(w: WorkerProcess, q: string, id: string): Promise<void> {
    await producer.enqueue(q, { fine: true }, { id });
    await waitFor(
      `good job ${id} completes`,
      async () => (await admin.job(id, q))?.state === "completed",
      60_000,
    );
    assert.ok(alive(w), `the worker is still running:\n${w.logs().slice(-2000)}`);
  }

  test("seeded fuzzed payloads through the producer arrive intact and complete; deep nesting and odd strings included", async () => {
    const q = "fuzz";
    const w = await worker(q, { CONVEYOR_CONCURRENCY: "8" });
    const r = rng(SEED);
    const jobs = Array.from({ length: 300 }, (_, i) => ({
      id: `f${i}`,
      data: i % 50 === 0 ? deep(500 + i * 4) : fuzzValue(r),
      attempts: 1,
    }));
    jobs.push({ id: "huge-unicode", data: "😀".repeat(DEFAULT_MAX_PAYLOAD_BYTES / 4 - 1), attempts: 1 });
    jobs.push({ id: "near-limit", data: "x".repeat(DEFAULT_MAX_PAYLOAD_BYTES - 2), attempts: 1 });
    jobs.push({
      id: "nul-and-surrogates",
      data: { s: "a\u0000b\ud800c\udfff", k: { "\u0000": "\u2028" } },
      attempts: 1,
    });
    for (let i = 0; i < jobs.length; i += 50) await producer.enqueueMany(q, jobs.slice(i, i + 50));
    const states = await settled(
      q,
      jobs.map((j) => j.id),
    );
    for (const j of jobs) {
      const s = states.get(j.id)!;
      assert.equal(s.state, "completed", `${j.id} ${JSON.stringify(j.data).slice(0, 200)}: ${s.deadReason}`);
      assert.deepEqual(
        JSON.parse(s.result!),
        { ok: j.id, bytes: JSON.stringify(j.data).length },
        `${j.id}: the handler saw the data the producer sent`,
      );
    }
    assert.ok(alive(w));
  });

  test("oversized payloads are refused at enqueue with a clear error, in the library and the CLI; nothing of the batch is enqueued", async () => {
    const q = "oversized";
    const limit = DEFAULT_MAX_PAYLOAD_BYTES;
    await producer.enqueue(q, "x".repeat(limit - 2), { id: "exactly-the-limit" });
    await assert.rejects(
      producer.enqueue(q, "x".repeat(limit - 1), { id: "one-byte-over" }),
      (err: Error) => {
        assert.ok(err instanceof PayloadTooLargeError);
        assert.match(err.message, new RegExp(`job one-byte-over is ${limit + 1} bytes, limit ${limit}`));
        return true;
      },
    );
    // the limit is in bytes, not characters
    await assert.rejects(
      producer.enqueue(q, "é".repeat(limit / 2), { id: "multibyte" }),
      PayloadTooLargeError,
    );
    // one oversized job in a batch: the batch is refused as a whole
    await assert.rejects(
      producer.enqueueMany(q, [
        { id: "ok-1", data: 1 },
        { id: "too-big", data: "x".repeat(limit) },
        { id: "ok-2", data: 2 },
      ]),
      /job too-big is \d+ bytes/,
    );
    // the CLI: an ndjson file with an oversized line
    const file = join(dir, "big.ndjson");
    writeFileSync(file, `{"small":1}\n${JSON.stringify({ data: "y".repeat(limit + 10), id: "cli-big" })}\n`);
    const cli = spawnSync(NODE, [CONVEYOR, "enqueue", q, "--file", file], {
      env: { ...process.env, REDIS_URL: server.url },
      encoding: "utf8",
    });
    assert.notEqual(cli.status, 0, "the CLI fails");
    assert.match(cli.stderr, /cli-big is \d+ bytes, limit 524288/);
    assert.doesNotMatch(cli.stderr, /^\s+at /m, "a message, not a stack trace");
    const counters = await admin.counters(q);
    assert.equal(counters.enqueued, 1, "only the job at the limit was enqueued");
    for (const id of ["one-byte-over", "multibyte", "ok-1", "too-big", "ok-2", "cli-big"])
      assert.equal(await admin.job(id, q), null, `${id} was not enqueued`);
  });

  test("data that is not JSON-serializable is refused at enqueue with an InvalidJobError naming the job", async () => {
    const q = "unserializable";
    const circular: Record<string, unknown> = {};
    circular.self = circular;
    for (const [id, data] of [
      ["fn", () => 1],
      ["sym", Symbol("s")],
      ["big", 10n],
      ["cycle", circular],
    ] as const) {
      await assert.rejects(producer.enqueue(q, data, { id }), (err: Error) => {
        assert.ok(err instanceof InvalidJobError, `${id}: ${err.name}: ${err.message}`);
        assert.match(err.message, new RegExp(id));
        return true;
      });
    }
    assert.equal((await admin.counters(q)).enqueued ?? 0, 0);
  });

  test("raw entries written into Redis by another producer: random bytes, missing hashes and fields, non-numeric fields — dead letters with a reason or completed, none lost, the worker stays up", async () => {
    const q = "raw";
    const k = new QueueKeys(q);
    const r = rng(SEED + 1);
    const ids: string[] = [];
    const put = async (id: string, fields: Record<string, string | Buffer>, score = ids.length + 1) => {
      if (Object.keys(fields).length) await redis.hset(k.job(id), fields);
      await redis.zadd(k.ready, score, id);
      ids.push(id);
    };
    const base = (id: string) => ({
      id,
      queue: q,
      priority: "0",
      score: String(ids.length + 1),
      attempts: "1",
      attemptsMade: "0",
      stalls: "0",
      handbacks: "0",
      timeout: "0",
      createdAt: String(Date.now()),
      state: "ready",
    });
    for (let i = 0; i < 40; i++) {
      const bytes = Buffer.from(
        Array.from({ length: 1 + Math.floor(r() * 64) }, () => Math.floor(r() * 256)),
      );
      await put(`bytes${i}`, { ...base(`bytes${i}`), data: bytes });
    }
    await put("no-data", { ...base("no-data") });
    await put("empty-data", { ...base("empty-data"), data: "" });
    await put("only-data", { data: '{"a":1}' });
    await put("non-numeric", {
      ...base("non-numeric"),
      data: "{}",
      attempts: "lots",
      attemptsMade: "some",
      timeout: "forever",
      stalls: "NaN",
      createdAt: "yesterday",
      priority: "high",
    });
    await put("negative", { ...base("negative"), data: "[]", attempts: "-5", timeout: "-1" });
    await put("deep-raw", { ...base("deep-raw"), data: `${"[".repeat(100_000)}${"]".repeat(100_000)}` });
    await put("truncated", { ...base("truncated"), data: '{"a":[1,2,' });
    // a delayed entry and an expired lease without any record
    await redis.zadd(k.delayed, 1, "ghost-delayed");
    await redis.zadd(k.inflight, 1, "ghost-inflight");
    ids.push("ghost-delayed", "ghost-inflight");
    const w = await worker(q, { CONVEYOR_CONCURRENCY: "4", CONVEYOR_LEASE: "1s" });
    await redis.lpush(k.wake, "1");
    const states = await settled(q, ids);
    for (const [id, s] of states) {
      if (s.state === "dead")
        assert.ok(s.deadReason && s.deadReason.length > 5, `${id} is dead with a reason: ${s.deadReason}`);
      if (id.startsWith("bytes") && s.state === "dead") assert.match(s.deadReason!, /not JSON/);
    }
    assert.match(states.get("no-data")!.deadReason!, /malformed: job record missing or has no data/);
    assert.match(states.get("truncated")!.deadReason!, /not retryable: job data is not JSON/);
    assert.match(states.get("ghost-delayed")!.deadReason!, /malformed/);
    assert.match(states.get("ghost-inflight")!.deadReason!, /stalled|malformed/);
    assert.equal(
      states.get("non-numeric")!.state,
      "completed",
      "fields a consumer can default are defaulted",
    );
    const counts = await admin.counts(q);
    assert.equal(counts.backlog, 0);
    await stillWorks(w, q, "raw-good");
  });

  test("a raw record without a score (or with a non-numeric one) is dead-lettered, not lost, when it moves to the next stage", async () => {
    const q = "rawscore/a";
    const next = "rawscore/b";
    const k = new QueueKeys(q);
    await redis.hset(k.job("no-score"), { id: "no-score", queue: q, data: "{}", attempts: "1" });
    await redis.hset(k.job("bad-score"), {
      id: "bad-score",
      queue: q,
      data: "{}",
      attempts: "1",
      score: "abc",
    });
    await redis.zadd(k.ready, 1, "no-score", 2, "bad-score");
    await worker(q, { CONVEYOR_NEXT_QUEUE: next });
    await worker(next, {});
    await redis.lpush(k.wake, "1");
    const states = await settled(q, ["no-score", "bad-score"], 30_000);
    for (const [id, s] of states)
      assert.ok(
        s.state === "dead" || (s.state === "completed" && s.queue === next),
        `${id}: ${JSON.stringify(s)}`,
      );
  });

  test("a job key of the wrong type in the ready set is dead-lettered; the good jobs claimed with it are not lost", async () => {
    const q = "wrongtype";
    const k = new QueueKeys(q);
    await producer.enqueue(q, { first: true }, { id: "good-1" });
    await redis.set(k.job("a-string"), "not a hash");
    await redis.zadd(k.ready, 0, "a-string"); // sorts first
    await producer.enqueue(q, { second: true }, { id: "good-2" });
    await worker(q, { CONVEYOR_CONCURRENCY: "4", CONVEYOR_LEASE: "1s" });
    const states = await settled(q, ["good-1", "good-2"], 30_000);
    assert.equal(states.get("good-1")!.state, "completed");
    assert.equal(states.get("good-2")!.state, "completed");
    assert.equal(
      (await redis.zscore(k.dead, "a-string")) !== null,
      true,
      "the wrong-type entry is dead-lettered",
    );
  });

  test("module handlers that throw non-Error values: dead letters with the value; the worker keeps going", async () => {
    const q = "throws";
    const w = await worker(q, { CONVEYOR_CONCURRENCY: "4" });
    const modes = [
      "throw-undefined",
      "throw-number",
      "throw-symbol",
      "throw-bigint",
      "throw-function",
      "throw-cycle",
      "reject-later",
    ];
    await producer.enqueueMany(
      q,
      modes.map((mode) => ({ id: mode, data: { mode }, attempts: 1 })),
    );
    const states = await settled(q, modes);
    const expected: Record<string, RegExp> = {
      "throw-undefined": /non-Error value: undefined/,
      "throw-number": /non-Error value: 42/,
      "throw-symbol": /non-Error value: Symbol\(odd\)/,
      "throw-bigint": /non-Error value: 10/,
      "throw-function": /non-Error value: function thrown/,
      "throw-cycle": /non-Error value: \[object Object\]/,
      "reject-later": /non-Error value: rejected with a string/,
    };
    for (const mode of modes) {
      assert.equal(states.get(mode)!.state, "dead", mode);
      assert.match(states.get(mode)!.deadReason!, expected[mode]!, mode);
    }
    await stillWorks(w, q, "after-throws");
  });

  test("a thrown value that cannot be turned into text (a null-prototype cycle, a throwing toString, an Error whose message getter throws) does not crash the worker", async () => {
    const q = "hostile";
    const modes = ["throw-null-proto-cycle", "throw-hostile", "throw-hostile-error"];
    const w = await worker(q, {});
    await producer.enqueueMany(
      q,
      modes.map((mode) => ({ id: mode, data: { mode }, attempts: 1 })),
    );
    const states = await settled(q, modes, 30_000);
    for (const s of states.values()) assert.equal(s.state, "dead");
    await stillWorks(w, q, "after-hostile");
  });

  test("a handler result that is not JSON (BigInt, cycle) fails the job with a clear reason instead of holding the slot", async () => {
    const q = "badresult";
    const w = await worker(q, { CONVEYOR_JOB_TIMEOUT_SECONDS: "3", CONVEYOR_LEASE: "1s" });
    await producer.enqueueMany(
      q,
      ["return-bigint", "return-circular"].map((mode) => ({ id: mode, data: { mode }, attempts: 1 })),
    );
    const states = await settled(q, ["return-bigint", "return-circular"], 30_000);
    for (const [mode, s] of states) {
      assert.equal(s.state, "dead", mode);
      assert.match(s.deadReason!, /BigInt|circular|JSON/i, mode);
    }
    await stillWorks(w, q, "after-badresult");
  });

  test("a handler that returns a function (JSON.stringify gives undefined) stores a JSON result, and the next stage can read it", async () => {
    const q = "fnresult/a";
    await worker(q, { CONVEYOR_NEXT_QUEUE: "fnresult/b" });
    await worker("fnresult/b", {});
    await producer.enqueue(q, { mode: "return-function" }, { id: "fn" });
    const states = await settled("fnresult/b", ["fn"]);
    assert.equal(states.get("fn")!.state, "completed", states.get("fn")!.deadReason);
  });

  test("a handler that kills its worker (process.exit, an uncaught exception): redelivered as a stall until the poison-pill guard dead-letters it; other jobs complete", async () => {
    const q = "poison";
    // one slot: a dying worker takes only the job that killed it down with it
    const lease = { CONVEYOR_LEASE: "1s", CONVEYOR_MAX_STALLS: "2", CONVEYOR_CONCURRENCY: "1" };
    // a supervisor that restarts the worker whenever it dies, like the kubelet
    let stop = false;
    let restarts = 0;
    const supervisor = (async () => {
      while (!stop) {
        const w = await startWorker({
          dir,
          name: `poison${++n}`,
          waitReady: false,
          env: {
            REDIS_URL: server.url,
            CONVEYOR_QUEUE: q,
            CONVEYOR_HANDLER: BAD_HANDLER,
            EXEC_LOG: execLog(q),
            ...lease,
          },
        });
        workers.push(w);
        await Promise.race([w.exited, waitFor("stop", async () => stop, 600_000, 200)]);
        if (!stop) restarts++;
      }
    })();
    await producer.enqueue(q, { mode: "exit" }, { id: "exits", attempts: 5 });
    await producer.enqueue(q, { mode: "crash" }, { id: "crashes", attempts: 5 });
    await producer.enqueueMany(
      q,
      Array.from({ length: 10 }, (_, i) => ({ id: `ok${i}`, data: { i } })),
    );
    const states = await settled(
      q,
      ["exits", "crashes", ...Array.from({ length: 10 }, (_, i) => `ok${i}`)],
      180_000,
    );
    stop = true;
    await supervisor;
    for (const id of ["exits", "crashes"]) {
      assert.equal(states.get(id)!.state, "dead", id);
      assert.match(
        states.get(id)!.deadReason!,
        /stalled 3 times: lease expired while running \(poison-pill guard\)/,
        id,
      );
    }
    for (let i = 0; i < 10; i++) assert.equal(states.get(`ok${i}`)!.state, "completed");
    for (const id of ["exits", "crashes"]) {
      assert.equal((await admin.job(id, q))!.stalls, 3, `${id} stalled maxStalls + 1 times`);
      assert.equal(
        readExecutions(execLog(q)).filter((e) => e.id === id).length,
        3,
        `${id} ran maxStalls + 1 times`,
      );
    }
    assert.ok(restarts >= 6, `the workers it killed were restarted (${restarts})`);
  });

  test("a handler writing garbage, partial lines or more than a pipe holds to stdout: the worker keeps working; its own log lines and the handler's lines stay whole", async () => {
    const q = "stdout";
    const w = await worker(q, {});
    await producer.enqueueMany(q, [
      { id: "g1", data: { mode: "stdout-garbage" } },
      { id: "g2", data: { mode: "stdout-garbage" } },
      { id: "f1", data: { mode: "stdout-flood" } },
      { id: "p1", data: { mode: "stdout-partial" } },
    ]);
    const states = await settled(q, ["g1", "g2", "f1", "p1"]);
    for (const s of states.values()) assert.equal(s.state, "completed");
    const floodLines = (JSON.parse(states.get("f1")!.result!) as { lines: number }).lines;
    await stillWorks(w, q, "after-garbage");
    // A job's "job completed" line is logged after its settle: wait for it to reach the log file.
    await waitFor(
      "5 job completed lines in the log",
      async () =>
        w
          .logs()
          .split("\n")
          .filter((l) => l.includes('"job completed"')).length === 5,
      30_000,
    );
    // Every line of the worker's own is one whole JSON object; the handler's lines are whole too.
    const own = w
      .logs()
      .split("\n")
      .filter((l) => l.includes('"worker":"bad'));
    for (const l of own) {
      assert.ok(
        l.startsWith('{"level":'),
        `a worker log line that does not start its line: ${l.slice(0, 200)}`,
      );
      JSON.parse(l);
    }
    assert.equal(own.filter((l) => l.includes('"job completed"')).length, 5);
    // A partial line is held a moment for the rest of it, then written as a line of its own.
    const lines = await waitFor(
      "the handler's partial line on a line of its own",
      async () => {
        const ls = w.logs().split("\n");
        return ls.includes("a partial line from the handler") && ls;
      },
      30_000,
    );
    const flood = lines.filter((l) => l.includes("flood "));
    assert.equal(flood.length, floodLines);
    for (const l of flood) assert.match(l, /^flood \d{5} x{100}$/);
  });

  test("command handlers that exit non-zero, die by a signal, write garbage or flood stdout, ignore SIGTERM, or leave a grandchild holding stdout: each fails with a clear reason; no process is left behind", async () => {
    const q = "commands";
    const w = await worker(q, {
      CONVEYOR_HANDLER: BAD_COMMAND,
      CONVEYOR_CONCURRENCY: "4",
      CONVEYOR_KILL_GRACE: "500ms",
    });
    const cases: [string, RegExp, number?][] = [
      ["exit1", /attempts exhausted \(2\/2\): handler command exited with 1: something went wrong/],
      ["segv", /handler command was killed by SIGSEGV/],
      ["garbage", /handler command wrote output that is not JSON/],
      ["flood", /not retryable: handler command wrote more than 16777216 bytes to stdout/],
      ["hang-ignoring-term", /exceeded its timeout of 1500ms/, 1500],
      ["grandchild", /exceeded its timeout of 1500ms/, 1500],
    ];
    await producer.enqueueMany(
      q,
      cases.map(([mode, , timeoutMs]) => ({
        id: mode,
        data: { mode },
        attempts: 2,
        ...(timeoutMs ? { timeoutMs } : {}),
      })),
    );
    await producer.enqueue(q, { mode: "empty" }, { id: "empty" });
    const states = await settled(q, [...cases.map(([m]) => m), "empty"], 120_000);
    for (const [mode, reason] of cases) {
      assert.equal(states.get(mode)!.state, "dead", mode);
      assert.match(states.get(mode)!.deadReason!, reason, mode);
    }
    assert.equal(states.get("empty")!.state, "completed");
    assert.equal(states.get("empty")!.result, "null", "no output is a null result");
    await stillWorks(w, q, "after-commands");
    // the hung command and the grandchild were killed with their process group
    const leftovers = spawnSync("pgrep", ["-f", "setTimeout\\(\\(\\) => \\{\\}, 600000\\)"], {
      encoding: "utf8",
    }).stdout.trim();
    assert.equal(leftovers, "", "no grandchild left running");
    const hung = spawnSync("pgrep", ["-f", `badInputCommand.mjs`], { encoding: "utf8" }).stdout.trim();
    assert.equal(hung, "", "no command left running");
  });
});

// The `conveyor` command as a user runs it, against a real Redis.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { connectRedis, Consumer, QueueKeys, type RedisClient } from "../../queue/index.ts";
import { RedisServer } from "../support/redis.ts";
import { CONVEYOR, NODE } from "../support/workers.ts";

describe("conveyor CLI", () => {
  let server: RedisServer;
  let redis: RedisClient;
  let dir: string;
  before(async () => {
    server = await RedisServer.start();
    redis = connectRedis(server.url);
    dir = mkdtempSync(join(tmpdir(), "cvy-cli-"));
  });
  after(async () => {
    redis.disconnect();
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  });
  const run = (...args: string[]) =>
    spawnSync(NODE, [CONVEYOR, ...args], {
      env: { ...process.env, REDIS_URL: server.url },
      encoding: "utf8",
    });

  test("enqueue prints the id; stats --json has exactly the documented keys", () => {
    const r = run(
      "enqueue",
      "emails",
      '{"to":"a@example.com"}',
      "--id",
      "e1",
      "--priority",
      "5",
      "--attempts",
      "2",
      "--timeout",
      "30s",
    );
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stdout.trim(), "e1");
    assert.equal(run("enqueue", "emails", "{}", "--delay", "10m").status, 0);
    const stats = run("stats", "emails", "--json");
    // The five counts first (unchanged), then queue control (issue 13).
    assert.deepEqual(JSON.parse(stats.stdout), {
      ready: 1,
      delayed: 1,
      inflight: 0,
      completed: 0,
      dead: 0,
      waitingForBudget: 0,
      paused: false,
      rateLimit: null,
      cancelled: 0,
      schedules: 0,
      served: false,
    });
    assert.match(run("stats", "emails").stdout, /ready\s+1/);
    assert.match(run("stats", "emails").stdout, /warning: no worker has claimed from this queue/);
  });

  test("enqueue --file takes NDJSON and prints the count; --key dedupes", () => {
    const file = join(dir, "jobs.ndjson");
    writeFileSync(file, '{"n":1}\n{"n":2}\n\n{"data":{"n":3},"id":"x3","priority":9}\n');
    const r = run("enqueue", "bulk", "--file", file);
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stdout.trim(), "3");
    const a = run("enqueue", "bulk", "{}", "--key", "k");
    const b = run("enqueue", "bulk", "{}", "--key", "k");
    assert.equal(a.stdout, b.stdout);
    assert.equal(JSON.parse(run("stats", "bulk", "--json").stdout).ready, 4);
    const both = run("enqueue", "bulk", '{"n":9}', "--file", file);
    assert.equal(both.status, 2);
    assert.match(both.stderr, /unexpected argument "\{\\"n\\":9\}" \(with --file/);
    assert.equal(JSON.parse(run("stats", "bulk", "--json").stdout).ready, 4);
  });

  test("job shows state, attempts and result; unknown ids exit 1", async () => {
    run("enqueue", "jobs", '{"v":1}', "--id", "j1");
    const c = new Consumer(redis, "jobs", { workerId: "t", leaseMs: 10_000 });
    const [job] = (await c.claim(1)).jobs;
    await c.complete(job!, { answer: 42 });
    const r = run("job", "j1", "--json");
    assert.equal(r.status, 0, r.stderr);
    const { stages, ...view } = JSON.parse(r.stdout);
    assert.deepEqual(view, {
      id: "j1",
      queue: "jobs",
      state: "completed",
      attempts: 1, // the one that succeeded
      maxAttempts: 3,
      stalls: 0,
      handbacks: 0,
      result: { answer: 42 },
      previousErrors: [], // its failed attempts (none)
      logs: [], // its handler's ctx.log lines (none here)
    });
    const [{ startedAt, finishedAt, ...stage }] = stages;
    assert.deepEqual(stage, { queue: "jobs", state: "completed", attempts: 1, result: { answer: 42 } });
    assert.ok(Date.parse(startedAt) <= Date.parse(finishedAt));
    assert.match(run("job", "j1").stdout, /completed/);
    const missing = run("job", "nope");
    assert.equal(missing.status, 1);
    assert.match(missing.stdout, /not found/);
  });

  test("job shows the task, the failed attempts with their violations, and the rejected result", async () => {
    run("enqueue", "typed", '{"v":1}', "--id", "t1", "--attempts", "1");
    await redis.hset(new QueueKeys("typed").job("t1"), "task", "summarize");
    const c = new Consumer(redis, "typed", { workerId: "t", leaseMs: 10_000 });
    const [job] = (await c.claim(1)).jobs;
    const details = [{ pointer: "/name", rule: "required", message: "must have required property 'name'" }];
    await c.fail(
      job!,
      { name: "ContractViolationError", message: "result breaks the contract: /name required" },
      { retryable: true, retryDelayMs: 0, kind: "invalid-result", details, rejected: '{"nom":"x"}' },
    );
    const view = JSON.parse(run("job", "t1", "--json").stdout);
    assert.equal(view.task, "summarize");
    assert.deepEqual(view.rejected, { nom: "x" });
    assert.deepEqual(
      view.previousErrors.map((e: { attempt: number; kind: string; details: unknown }) => [
        e.attempt,
        e.kind,
        e.details,
      ]),
      [[1, "invalid-result", details]],
    );
    const text = run("job", "t1").stdout;
    assert.match(text, /^job t1 on typed \(task summarize\): dead$/m);
    assert.match(
      text,
      /#1 invalid-result .*: result breaks the contract: \/name required\n {6}\/name: must have required property 'name'/,
    );
    assert.match(text, /rejected result \{"nom":"x"\}/);
  });

  test("dlq list, retry and purge", async () => {
    run("enqueue", "dl", "{}", "--id", "d1", "--attempts", "1");
    run("enqueue", "dl", "{}", "--id", "d2", "--attempts", "1");
    const c = new Consumer(redis, "dl", { workerId: "t", leaseMs: 10_000 });
    for (const job of (await c.claim(2)).jobs)
      await c.fail(job, { name: "Error", message: "kaput" }, { retryable: true, retryDelayMs: 0 });
    const list = JSON.parse(run("dlq", "list", "dl", "--json").stdout);
    assert.deepEqual(list.map((d: { id: string }) => d.id).sort(), ["d1", "d2"]);
    assert.match(list[0].reason, /kaput/);
    assert.match(run("dlq", "retry", "dl").stdout, /retried 2/);
    assert.equal(JSON.parse(run("stats", "dl", "--json").stdout).ready, 2);
    for (const job of (await c.claim(2)).jobs)
      await c.fail(job, { name: "Error", message: "again" }, { retryable: false, retryDelayMs: 0 });
    assert.match(run("dlq", "purge", "dl").stdout, /purged 2/);
    assert.equal(JSON.parse(run("stats", "dl", "--json").stdout).dead, 0);
  });

  test("dlq retry <queue> <id>… retries exactly those ids and names the others (exit 1: none was dead)", async () => {
    const queue = "pipe/extract";
    for (const id of ["r1", "r2", "r3", "r4"]) run("enqueue", queue, "{}", "--id", id, "--attempts", "1");
    const c = new Consumer(redis, queue, { workerId: "t", leaseMs: 10_000 });
    const claimed = (await c.claim(4)).jobs;
    assert.equal(claimed.length, 4);
    for (const job of claimed)
      await c.fail(job, { name: "Error", message: "kaput" }, { retryable: false, retryDelayMs: 0 });
    const deadIds = () =>
      (JSON.parse(run("dlq", "list", queue, "--json").stdout) as { id: string }[]).map((d) => d.id).sort();
    assert.deepEqual(deadIds(), ["r1", "r2", "r3", "r4"]);

    const one = run("dlq", "retry", queue, "r2");
    assert.equal(one.status, 0, one.stderr);
    assert.equal(one.stdout, "retried 1\n");
    assert.deepEqual(deadIds(), ["r1", "r3", "r4"]);
    assert.equal(JSON.parse(run("stats", queue, "--json").stdout).ready, 1);

    // r2 is no longer dead: named, like an id never seen; the one dead id given is retried
    const mixed = run("dlq", "retry", queue, "r3", "nope", "r2", "--json");
    assert.equal(mixed.status, 0, mixed.stderr);
    assert.deepEqual(JSON.parse(mixed.stdout), { retried: 1, notDead: ["nope", "r2"] });
    assert.deepEqual(deadIds(), ["r1", "r4"]);

    const none = run("dlq", "retry", queue, "nope");
    assert.equal(none.status, 1);
    assert.equal(none.stdout, "retried 0\nnope: no such dead letter in pipe/extract\n");
    const bad = run("dlq", "retry", queue, "bad id!");
    assert.equal(bad.status, 2);
    assert.match(bad.stderr, /invalid job id "bad id!"/);
    assert.deepEqual(deadIds(), ["r1", "r4"], "nothing else was retried");
  });

  test("delete removes waiting and delayed jobs, refuses a running one (exit 1), and names unknown ids", async () => {
    run("enqueue", "del", "{}", "--id", "x1");
    run("enqueue", "del", "{}", "--id", "x2", "--delay", "1h");
    run("enqueue", "del", "{}", "--id", "x3");
    const c = new Consumer(redis, "del", { workerId: "t", leaseMs: 10_000 });
    const [running] = (await c.claim(1)).jobs;
    assert.equal(running!.id, "x1");
    const r = run("delete", "del", "x2", "x3");
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stdout, "deleted x2 (was delayed)\ndeleted x3 (was ready)\n");
    const refused = run("delete", "del", "x1", "nope", "--json");
    assert.equal(refused.status, 1);
    assert.deepEqual(JSON.parse(refused.stdout), [
      { id: "x1", outcome: "refused", state: "active" },
      { id: "nope", outcome: "notFound", state: "" },
    ]);
    assert.match(run("delete", "del", "x1").stdout, /x1 is running: cancel it first/);
    assert.equal(run("delete", "del").status, 2, "no ids: usage");
    assert.match(run("delete", "del", "bad id!").stderr, /invalid job id/);
    const stats = JSON.parse(run("stats", "del", "--json").stdout);
    assert.deepEqual([stats.ready, stats.delayed, stats.inflight], [0, 0, 1]);
  });

  test("bad input gets a clear error and exit 2", () => {
    const bad = run("enqueue", "q", "{not json");
    assert.equal(bad.status, 2);
    assert.match(bad.stderr, /job data is not valid JSON/);
    assert.match(run("enqueue", "q", "{}", "--delay", "soon").stderr, /invalid --delay/);
    assert.match(run("enqueue", "bad queue!", "{}").stderr, /invalid queue name/);
    assert.equal(run("frobnicate").status, 2);
    const bigFile = join(dir, "big.ndjson");
    writeFileSync(bigFile, `${JSON.stringify({ n: 1 })}\n${JSON.stringify("x".repeat(600_000))}\n`);
    const big = run("enqueue", "q", "--file", bigFile);
    assert.equal(big.status, 1);
    assert.match(big.stderr, /bytes, limit 524288/);
    assert.equal(JSON.parse(run("stats", "q", "--json").stdout).ready, 0, "a refused batch enqueues nothing");
  });
  test("every command answers --help with exit 0 and says how durations are written", () => {
    // every command `conveyor --help` lists
    const commands = [...run("--help").stdout.matchAll(/^ {2}([a-z]+) /gm)].map((m) => m[1]!);
    assert.ok(commands.length >= 14, `conveyor --help lists ${commands.join(", ")}`);
    for (const command of new Set(commands)) {
      for (const flag of ["--help", "-h"]) {
        const r = run(command, flag);
        assert.equal(r.status, 0, `${command} ${flag}: ${r.stderr}`);
        assert.match(r.stdout, new RegExp(`usage: conveyor ${command}`), command);
        assert.equal(r.stdout.match(/a bare number is seconds/g)?.length, 1, `${command}: ${r.stdout}`);
      }
    }
    assert.equal(run("--help").status, 0);
    assert.equal(run("frobnicate", "--help").status, 2);
  });

  test("start-up loads only the command that runs: --version none, stats --help no Redis client", () => {
    // a module hook that writes every file URL the process loads to a file
    const hook = join(dir, "loaded-hook.mjs");
    writeFileSync(
      hook,
      `import { registerHooks } from "node:module";
import { appendFileSync } from "node:fs";
registerHooks({ load(url, context, next) { appendFileSync(process.env.LOADED_FILE, url + "\\n"); return next(url, context); } });`,
    );
    const loaded = (...args: string[]) => {
      const file = join(dir, `loaded-${args.join("-")}.txt`);
      const r = spawnSync(NODE, ["--import", hook, CONVEYOR, ...args], {
        env: { ...process.env, REDIS_URL: server.url, LOADED_FILE: file },
        encoding: "utf8",
      });
      assert.equal(r.status, 0, r.stderr);
      const urls = readFileSync(file, "utf8").trim().split("\n");
      return {
        commands: urls.flatMap((u) => /\/cli\/commands\/([a-z]+)\.[jt]s$/.exec(u)?.[1] ?? []),
        packages: [
          ...new Set(urls.flatMap((u) => /\/node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(u)?.[1] ?? [])),
        ],
      };
    };
    assert.deepEqual(loaded("--version"), { commands: ["index"], packages: [] });
    assert.deepEqual(loaded("stats", "--help"), { commands: ["index", "stats"], packages: [] });
    const stats = loaded("stats", "emails");
    assert.deepEqual(stats.commands, ["index", "stats"]);
    assert.ok(stats.packages.includes("ioredis"), stats.packages.join(", "));
  });

  test("boolean flags work bare and with =true/=false; durations take a bare number as seconds", () => {
    assert.equal(run("enqueue", "flags", "{}", "--delay", "30").status, 0);
    assert.deepEqual(JSON.parse(run("stats", "flags", "--json=true").stdout).delayed, 1);
    assert.match(run("stats", "flags", "--json=false").stdout, /^ready\s+0/m);
    assert.equal(run("events", "flags", "--follow=false", "--json").status, 0);
  });

  test("enqueue --file refuses an envelope with an unknown field, naming the field and the line", () => {
    const file = join(dir, "typo.ndjson");
    writeFileSync(file, '{"data":{"n":1}}\n{"data":{"n":2},"priorty":5}\n');
    const r = run("enqueue", "typo", "--file", file);
    assert.equal(r.status, 2, r.stderr);
    assert.match(r.stderr, /typo\.ndjson:2: unknown field "priorty"/);
    const wrongType = join(dir, "type.ndjson");
    writeFileSync(wrongType, '{"data":1,"priority":"high"}\n');
    assert.match(
      run("enqueue", "typo", "--file", wrongType).stderr,
      /type\.ndjson:1: "priority" must be a number/,
    );
    assert.equal(
      JSON.parse(run("stats", "typo", "--json").stdout).ready,
      0,
      "nothing of a refused file is enqueued",
    );
  });

  test("resources: resource set/list/remove; enqueue --uses and a uses field in --file; jobs waiting for budget in stats; bad input named", async () => {
    const set = run(
      "resource",
      "set",
      "openai",
      "--key",
      "k1",
      "--limit",
      "requests=1/h,tokens=5000/m",
      "--key=k2",
      "--limit=requests=1/h",
      "--ceiling",
      "1",
      "--pipeline",
      "llm/summarize",
    );
    assert.equal(set.status, 0, set.stderr);
    assert.equal(set.stdout.trim(), "openai: k1 requests=1/h,tokens=5000/m; k2 requests=1/h");
    assert.equal(run("enqueue", "llm/summarize", '{"n":1}', "--uses", "openai:tokens=1200").status, 0);
    const file = join(dir, "uses.ndjson");
    writeFileSync(
      file,
      '{"data":{"n":2},"uses":{"openai":{"tokens":100}}}\n{"data":{"n":3},"uses":{"openai":{}}}\n',
    );
    assert.equal(run("enqueue", "llm/summarize", "--file", file).stdout.trim(), "2");
    const c = new Consumer(redis, "llm/summarize", { workerId: "cli", leaseMs: 30_000 });
    const started = (await c.claim(10)).jobs;
    assert.equal(started.length, 2, "one request per key per hour");
    const stats = JSON.parse(run("stats", "llm/summarize", "--json").stdout) as {
      ready: number;
      waitingForBudget: number;
    };
    assert.deepEqual([stats.ready, stats.waitingForBudget], [0, 1]);
    const listed = JSON.parse(run("resource", "list", "--pipeline", "llm", "--json").stdout) as {
      name: string;
      waiting: number;
      keys: { id: string; limits: { unit: string; used: number }[] }[];
    }[];
    assert.equal(listed[0]!.name, "openai");
    assert.equal(listed[0]!.waiting, 1);
    assert.deepEqual(
      listed[0]!.keys.map((k) => k.limits.find((l) => l.unit === "requests")!.used),
      [1, 1],
    );
    assert.match(run("resource", "list").stdout, /^llm\/openai\tceiling 1\twaiting for budget 1$/m);
    for (const [args, message] of [
      [
        ["resource", "set", "x", "--key", "k", "--limit", "requests=60/week", "--pipeline", "llm"],
        /--limit \(key k\): "requests=60\/week" is not <unit>=<max>\/<window>/,
      ],
      [["resource", "set", "x", "--key", "k", "--pipeline", "llm"], /--key k has no --limit after it/],
      [["resource", "set", "x", "--key", "k", "--limit", "requests=1/s"], /needs --pipeline/],
      [
        [
          "resource",
          "set",
          "x",
          "--key",
          "k",
          "--limit",
          "requests=1/s",
          "--ceiling",
          "2",
          "--pipeline",
          "llm",
        ],
        /ceiling must be a number in \(0, 1\]/,
      ],
      [
        ["enqueue", "llm/summarize", "1", "--uses", "openai:tokens=-3"],
        /--uses: "tokens=-3"|--uses\.openai\.tokens must be an integer 0/,
      ],
      [
        ["enqueue", "llm/summarize", "1", "--uses", "open ai"],
        /--uses: "open ai" is not <resource>\[:<unit>=<amount>,…\]/,
      ],
    ] as const) {
      const r = run(...args);
      assert.equal(r.status, 2, `${args.join(" ")}: ${r.stderr}`);
      assert.match(r.stderr, message);
    }
    writeFileSync(file, '{"data":1,"uses":{"openai":{"tokens":"many"}}}\n');
    assert.match(
      run("enqueue", "llm/summarize", "--file", file).stderr,
      /uses\.openai\.tokens must be an integer/,
    );
    assert.equal(run("resource", "remove", "openai", "--pipeline", "llm").stdout.trim(), "openai removed");
    assert.equal(run("resource", "remove", "openai", "--pipeline", "llm").status, 1);
  });

  test("groups: enqueue --group and a group field in --file; group limit, pause, resume and list", async () => {
    assert.equal(run("enqueue", "tenants", '{"n":1}', "--group", "acme", "--id", "a1").status, 0);
    const file = join(dir, "grouped.ndjson");
    writeFileSync(file, '{"data":{"n":2},"group":"acme"}\n{"data":{"n":3},"group":"globex"}\n{"n":4}\n');
    assert.equal(run("enqueue", "tenants", "--file", file, "--group", "initech").stdout.trim(), "3");
    const limit = run("group", "limit", "tenants", "--concurrency", "2");
    assert.equal(limit.status, 0, limit.stderr);
    assert.equal(limit.stdout.trim(), "tenants every group: concurrency 2");
    assert.equal(run("group", "limit", "tenants", "acme", "--concurrency", "1").status, 0);
    assert.equal(run("group", "pause", "tenants", "globex").stdout.trim(), "tenants group globex paused");
    assert.equal(
      run("group", "limit", "tenants", "initech", "--rate", "5/s").stdout.trim(),
      "tenants group initech: rate 5/s",
    );
    assert.match(
      run("group", "limit", "tenants", "--rate", "fast").stderr,
      /--rate: invalid rate limit "fast"/,
    );
    const listed = JSON.parse(run("group", "list", "tenants", "--json").stdout) as {
      defaultConcurrency: number;
      waiting: number;
      groups: { group: string; waiting: number; concurrency: number; paused: boolean }[];
    };
    assert.equal(listed.defaultConcurrency, 2);
    assert.equal(listed.waiting, 4);
    assert.deepEqual(
      listed.groups.map((g) => [g.group, g.waiting, g.concurrency, g.paused]),
      [
        ["acme", 2, 1, false],
        ["globex", 1, 2, true],
        ["initech", 1, 2, false],
      ],
    );
    assert.match(run("group", "list", "tenants").stdout, /^acme\twaiting 2\trunning 0\/1$/m);
    assert.match(run("group", "list", "tenants").stdout, /^initech\twaiting 1\trunning 0\/2\*\trate 5\/s$/m);
    // the paused group and acme's second job wait; the others start
    const c = new Consumer(redis, "tenants", { workerId: "cli", leaseMs: 30_000 });
    const started = (await c.claim(10)).jobs.map((j) => j.rawData).sort();
    assert.deepEqual(started, ['{"n":1}', '{"n":4}']);
    assert.equal(run("group", "resume", "tenants", "globex").status, 0);
    assert.deepEqual(
      (await c.claim(10)).jobs.map((j) => j.rawData),
      ['{"n":3}'],
    );
    // bad input: exit 2 with the flag or field named
    const long = run("enqueue", "tenants", "{}", "--group", "x".repeat(129));
    assert.equal(long.status, 2);
    assert.match(long.stderr, /--group is 129 bytes, limit 128/);
    assert.match(
      run("group", "limit", "tenants", "--concurrency", "0").stderr,
      /--concurrency must be an integer/,
    );
    assert.equal(run("group", "limit", "tenants").status, 2);
    assert.equal(run("group", "pause", "tenants").status, 2);
    assert.equal(run("group", "frob", "tenants").status, 2);
    const badField = join(dir, "badgroup.ndjson");
    writeFileSync(badField, '{"data":1,"group":7}\n');
    assert.match(
      run("enqueue", "tenants", "--file", badField).stderr,
      /badgroup\.ndjson:1: "group" must be a string/,
    );
  });

  test("enqueue --debounce / --throttle and dedupe in --file lines; group set --weight and --on-dead", () => {
    const first = run("enqueue", "bursty", '{"n":1}', "--debounce", "doc:7:1m", "--json");
    assert.equal(first.status, 0, first.stderr);
    const id = (JSON.parse(first.stdout) as { id: string; created: boolean }).id;
    const second = JSON.parse(
      run("enqueue", "bursty", '{"n":2}', "--debounce", "doc:7:1m", "--json").stdout,
    ) as {
      id: string;
      replaced: boolean;
    };
    assert.deepEqual(second, { id, created: false, replaced: true });
    const file = join(dir, "dedupe.ndjson");
    writeFileSync(
      file,
      '{"data":{"n":3},"dedupe":{"key":"doc:7","mode":"debounce","windowMs":60000}}\n{"n":4}\n{"n":5}\n',
    );
    // the flag applies to the lines without their own dedupe: n 4 and 5 share one throttle window
    const batch = JSON.parse(run("enqueue", "bursty", "--file", file, "--throttle", "t:1h", "--json").stdout);
    assert.deepEqual(batch, { enqueued: 1, duplicates: 1, replaced: 1 });
    const bad = [
      [["--debounce", "nowindow"], /--debounce must be KEY:WINDOW/],
      [["--throttle", "k:soon"], /invalid --throttle window/],
      [["--debounce", "k:1s", "--throttle", "k:1s"], /cannot be used together/],
    ] as const;
    for (const [flags, message] of bad) {
      const r = run("enqueue", "bursty", "1", ...flags);
      assert.equal(r.status, 2, r.stderr);
      assert.match(r.stderr, message);
    }
    const weight = run("group", "set", "bursty", "acme", "--weight", "3", "--on-dead", "block");
    assert.equal(weight.stdout.trim(), "bursty group acme: weight 3, on dead block");
    assert.match(run("group", "list", "bursty").stdout, /^acme\twaiting 0\trunning 0\/-\tweight 3$/m);
    assert.match(run("group", "set", "bursty", "--weight", "2").stderr, /--weight is set per group/);
    assert.match(
      run("group", "set", "bursty", "acme", "--on-dead", "explode").stderr,
      /--on-dead must be block/,
    );
  });
});

// The job API as a real `conveyor api` process: 202 + status URL, progress while a job runs,
// clear 400s, 404 for unknown ids, body limit and bearer token.
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { freePort } from "../support/ports.ts";
import { startProcess, stopProcess, waitFor, type Started } from "../support/processes.ts";
import { connectRedis, Consumer, listGroups, Producer, QueueKeys } from "../../queue/index.ts";
import { RedisServer } from "../support/redis.ts";
import { CONVEYOR, NODE, RECORDING_HANDLER, startWorker, type WorkerProcess } from "../support/workers.ts";

describe("job API", () => {
  let server: RedisServer;
  let apiProc: Started;
  let worker: WorkerProcess;
  let base: string;
  let dir: string;
  const TOKEN = "s3cret-token-for-tests";
  const call = (path: string, init: RequestInit = {}, token: string | null = TOKEN) =>
    fetch(`${base}${path}`, {
      ...init,
      headers: {
        ...(token ? { authorization: `Bearer ${token}` } : {}),
        ...(init.body ? { "content-type": "application/json" } : {}),
        ...(init.headers as Record<string, string>),
      },
    });

  before(async () => {
    server = await RedisServer.start();
    dir = mkdtempSync(join(tmpdir(), "cvy-api-"));
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    apiProc = startProcess(
      NODE,
      [CONVEYOR, "api", "--port", String(port), "--host", "127.0.0.1", "--max-body", "2048"],
      {
        logFile: join(dir, "api.log"),
        env: { ...process.env, REDIS_URL: server.url, CONVEYOR_API_TOKEN: TOKEN },
      },
    );
    await waitFor("api up", async () => (await fetch(`${base}/healthz`)).ok);
    worker = await startWorker({
      dir,
      name: "api-w",
      env: { REDIS_URL: server.url, CONVEYOR_QUEUE: "docs/ocr", CONVEYOR_HANDLER: RECORDING_HANDLER },
    });
  });
  after(async () => {
    await stopProcess(worker, 2000);
    await stopProcess(apiProc, 2000);
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  test("POST enqueues (202 + status URL) and GET shows progress while it runs, then the result", async () => {
    const res = await call("/queues/docs%2Focr/jobs", {
      method: "POST",
      body: JSON.stringify({ data: { progressSteps: 3, stepMs: 200, result: { pages: 3 } }, priority: 2 }),
    });
    assert.equal(res.status, 202);
    const body = (await res.json()) as { id: string; status: string; created: boolean };
    assert.equal(body.created, true);
    assert.equal(res.headers.get("location"), body.status);
    const running = await waitFor("progress visible", async () => {
      const s = (await (await call(body.status)).json()) as { state: string; progress: number | null };
      return s.state === "active" && s.progress !== null && s.progress > 0 && s.progress < 1 ? s : null;
    });
    assert.equal(running.state, "active");
    const done = await waitFor("completed", async () => {
      const s = (await (await call(`/jobs/${body.id}`)).json()) as {
        state: string;
        result: unknown;
        attempts: number;
      };
      return s.state === "completed" ? s : null;
    });
    assert.deepEqual(done.result, { pages: 3 });
    const counts = (await (await call("/queues/docs%2Focr")).json()) as {
      completed: number;
      backlog: number;
    };
    assert.equal(counts.completed, 1);
  });

  test("a job's status and detail show its task, its failed attempts and the rejected result", async () => {
    const redis = connectRedis(server.url);
    try {
      await new Producer(redis).enqueue("typed/api", { v: 1 }, { id: "ta1", attempts: 2 });
      await redis.hset(new QueueKeys("typed/api").job("ta1"), "task", "extract");
      const c = new Consumer(redis, "typed/api", { workerId: "t", leaseMs: 10_000 });
      const [job] = (await c.claim(1)).jobs;
      const details = [{ pointer: "/name", rule: "required", message: "must have required property 'name'" }];
      await c.fail(
        job!,
        { name: "ContractViolationError", message: "result breaks the contract: /name required" },
        { retryable: true, retryDelayMs: 60_000, kind: "invalid-result", details, rejected: '{"nom":"x"}' },
      );
      const status = (await (await call("/jobs/ta1?queue=typed%2Fapi")).json()) as Record<string, unknown>;
      assert.equal(status.task, "extract");
      assert.deepEqual(status.rejected, { nom: "x" });
      const [entry] = status.previousErrors as {
        attempt: number;
        kind: string;
        details: unknown;
        at: number;
      }[];
      assert.deepEqual([entry!.attempt, entry!.kind, entry!.details], [1, "invalid-result", details]);
      const detail = (await (await call("/jobs/ta1/detail?queue=typed%2Fapi")).json()) as Record<
        string,
        unknown
      >;
      assert.equal(detail.task, "extract");
      assert.deepEqual(detail.previousErrors, status.previousErrors);
      assert.deepEqual(detail.rejected, { value: { nom: "x" }, bytes: 11, truncated: false });
    } finally {
      redis.disconnect();
    }
  });

  test("bad requests get 400 with a reason; unknown ids 404; limits and auth hold", async () => {
    const post = (body: string, headers: Record<string, string> = {}) =>
      call("/queues/q/jobs", { method: "POST", body, headers });
    const cases: [Response, number, RegExp][] = [
      [await post("{nope"), 400, /not valid JSON/],
      [await post("[1,2]"), 400, /must be an object/],
      [await post('{"priority": 1}'), 400, /"data" is required/],
      [await post('{"data": 1, "prio": 1}'), 400, /unknown field "prio"/],
      [await post('{"data": 1, "priority": "high"}'), 400, /"priority" must be an integer/],
      [await post('{"data": 1, "priority": 5000}'), 400, /"priority" must be ≤ 1000/],
      [
        await call("/queues/bad%20name!/jobs", { method: "POST", body: '{"data":1}' }),
        400,
        /invalid queue name/,
      ],
      [await post(JSON.stringify({ data: "x".repeat(5000) })), 413, /larger than 2048 bytes/],
      [await post('{"data":1}', { "content-type": "text/plain" }), 415, /JSON/],
      [await call("/jobs/does-not-exist"), 404, /not found/],
      [await call("/nowhere"), 404, /no route/],
      [await call("/queues/q/jobs", { method: "DELETE" }), 405, /POST/],
      [await call("/queues/q", {}, null), 401, /bearer token/],
      [await call("/queues/q", {}, "wrong-token!"), 401, /bearer token/],
      // A malformed %-escape is the client's mistake: 400 naming it, not a 500 and an error log.
      [await call("/jobs/%E0%A4%A"), 400, /malformed %-escape in the path: "%E0%A4%A"/],
      [await call("/queues/%zz/jobs", { method: "POST", body: '{"data":1}' }), 400, /malformed %-escape/],
    ];
    for (const [res, status, message] of cases) {
      assert.equal(res.status, status, `${res.url}: ${status}`);
      assert.match(((await res.json()) as { error: string }).error, message);
    }
    assert.doesNotMatch(readFileSync(join(dir, "api.log"), "utf8"), /request failed/);
  });

  test("POST and batch take uses; bad uses is a 400 naming the field", async () => {
    const one = await call("/queues/llm/jobs", {
      method: "POST",
      body: JSON.stringify({ data: { n: 1 }, uses: { openai: { tokens: 1200 } } }),
    });
    assert.equal(one.status, 202, await one.clone().text());
    const batch = await call("/queues/llm/jobs/batch", {
      method: "POST",
      body: JSON.stringify({ jobs: [{ data: { n: 2 }, uses: { openai: {} } }, { data: { n: 3 } }] }),
    });
    assert.equal(batch.status, 202, await batch.clone().text());
    const redis = connectRedis(server.url);
    try {
      const groups = await listGroups(redis, "llm");
      assert.deepEqual(
        groups.groups.map((g) => [g.group, g.waiting]),
        [["~res:openai", 2]],
      );
    } finally {
      redis.disconnect();
    }
    for (const [uses, message] of [
      [{ openai: { tokens: -1 } }, /uses/],
      [{ openai: { tokens: 1.5 } }, /uses/],
      [{ "bad name": {} }, /uses/],
      [{ openai: { requests: 3 } }, /uses\.openai\.requests/],
      ["openai", /uses/],
    ] as const) {
      const res = await call("/queues/llm/jobs", { method: "POST", body: JSON.stringify({ data: 1, uses }) });
      assert.equal(res.status, 400, JSON.stringify(uses));
      assert.match(((await res.json()) as { error: string }).error, message);
    }
  });

  test("POST and batch take a group; a group over 128 bytes is a 400 naming the field", async () => {
    const one = await call("/queues/tenants/jobs", {
      method: "POST",
      body: JSON.stringify({ data: { n: 1 }, group: "acme" }),
    });
    assert.equal(one.status, 202);
    const batch = await call("/queues/tenants/jobs/batch", {
      method: "POST",
      body: JSON.stringify({
        jobs: [
          { data: { n: 2 }, group: "acme" },
          { data: { n: 3 }, group: "globex" },
        ],
      }),
    });
    assert.equal(batch.status, 202, await batch.clone().text());
    const redis = connectRedis(server.url);
    try {
      const groups = await listGroups(redis, "tenants");
      assert.deepEqual(
        groups.groups.map((g) => [g.group, g.waiting]),
        [
          ["acme", 2],
          ["globex", 1],
        ],
      );
    } finally {
      redis.disconnect();
    }
    // debounce and throttle: a replaced job and an existing one, in the single and the batch call
    const debounce = { key: "doc", mode: "debounce", windowMs: 60_000 };
    const first = (await (
      await call("/queues/tenants/jobs", {
        method: "POST",
        body: JSON.stringify({ data: 1, dedupe: debounce }),
      })
    ).json()) as { id: string; created: boolean };
    assert.equal(first.created, true);
    const second = await call("/queues/tenants/jobs", {
      method: "POST",
      body: JSON.stringify({ data: 2, dedupe: debounce }),
    });
    assert.deepEqual(
      ((await second.json()) as { id: string; created: boolean; replaced: boolean }).replaced,
      true,
    );
    const throttle = { key: "t", mode: "throttle", windowMs: 60_000 };
    const mixed = await call("/queues/tenants/jobs/batch", {
      method: "POST",
      body: JSON.stringify({
        jobs: [
          { data: 3, dedupe: throttle },
          { data: 4, dedupe: throttle },
          { data: 5, dedupe: debounce },
        ],
      }),
    });
    const body = (await mixed.json()) as {
      created: number;
      existing: number;
      replaced: number;
      jobs: { outcome: string; id: string }[];
    };
    assert.deepEqual(
      [body.created, body.existing, body.replaced, body.jobs.map((j) => j.outcome)],
      [1, 1, 1, ["created", "existing", "replaced"]],
    );
    assert.equal(body.jobs[2]!.id, first.id);
    for (const group of ["x".repeat(129), "é".repeat(65), ""]) {
      const res = await call("/queues/tenants/jobs", {
        method: "POST",
        body: JSON.stringify({ data: 1, group }),
      });
      assert.equal(res.status, 400, group);
      assert.match(((await res.json()) as { error: string }).error, /group/);
    }
  });
});

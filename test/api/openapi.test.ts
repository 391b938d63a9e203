// Every operation of the OpenAPI document against a real `conveyor api` (real Redis, PostgreSQL
// records, a real worker): each reply is validated with ajv against the schema the document
// gives for its status, and the test fails if an operation was never called. Then bad input on
// every route — malformed JSON, unknown fields, oversized batches, bad path/query values — is a
// 4xx in the one error shape naming the field, never a 5xx.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Ajv2020, type ValidateFunction } from "ajv/dist/2020.js";
import { ROUTES } from "../../api/definitions.ts";
import { openApiDocument } from "../../api/openapi.ts";
import { DashboardStack } from "../support/dashboard.ts";
import { waitFor } from "../support/processes.ts";
import { parseLimits, Producer, setResource } from "../../queue/index.ts";

const Q = "docs/ocr";
const IDLE = "docs/idle"; // no worker: its jobs wait
const q = encodeURIComponent(Q);
const idle = encodeURIComponent(IDLE);

type Operation = { operationId: string; responses: Record<string, unknown> };
interface Reply {
  status: number;
  body: Record<string, unknown>;
  headers: Headers;
}

describe("OpenAPI: every operation against a real server", () => {
  let s: DashboardStack;
  const doc = openApiDocument() as { paths: Record<string, Record<string, Operation>> };
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  ajv.addFormat("date-time", (v: string) => !Number.isNaN(Date.parse(v)));
  ajv.addSchema(doc, "openapi.json");
  const esc = (p: string) => p.replaceAll("~", "~0").replaceAll("/", "~1");
  const exercised = new Set<string>();
  const byId = new Map<string, { path: string; method: string; op: Operation }>();
  for (const [path, methods] of Object.entries(doc.paths))
    for (const [method, op] of Object.entries(methods)) byId.set(op.operationId, { path, method, op });

  /** The schema the document gives this operation's reply with this status (4XX/5XX: the Error shape). */
  function schemaFor(operationId: string, status: number, type = "application/json"): ValidateFunction {
    const { path, method, op } = byId.get(operationId)!;
    if (String(status) in op.responses) {
      const at = `openapi.json#/paths/${esc(path)}/${method}/responses/${status}/content/${esc(type)}/schema`;
      const v = ajv.getSchema(at);
      assert.ok(v, `${operationId} ${status}: no ${type} schema`);
      return v;
    }
    assert.ok(
      `${String(status)[0]}XX` in op.responses,
      `${operationId} answered ${status}, not in the document`,
    );
    return ajv.getSchema("openapi.json#/components/schemas/Error")!;
  }

  function validate(operationId: string, r: Reply): Reply {
    const v = schemaFor(operationId, r.status);
    assert.ok(
      v(r.body),
      `${operationId} ${r.status}: ${ajv.errorsText(v.errors)}\n${JSON.stringify(r.body)}`,
    );
    exercised.add(operationId);
    return r;
  }

  /** Calls an operation by its operationId (method from the document) and validates the reply. */
  async function call(
    operationId: string,
    path: string,
    opts: { body?: unknown; raw?: string; headers?: Record<string, string>; token?: boolean } = {},
  ): Promise<Reply> {
    const { method } = byId.get(operationId)!;
    const hasBody = opts.body !== undefined || opts.raw !== undefined;
    const res = await fetch(`${s.api.base}${path}`, {
      method: method.toUpperCase(),
      headers: {
        ...(opts.token === false ? {} : { authorization: `Bearer ${s.token}` }),
        ...(hasBody ? { "content-type": "application/json" } : {}),
        ...opts.headers,
      },
      body: opts.raw ?? (opts.body === undefined ? undefined : JSON.stringify(opts.body)),
    });
    const text = await res.text();
    let body: Record<string, unknown>;
    try {
      body = JSON.parse(text) as Record<string, unknown>;
    } catch {
      assert.fail(`${operationId} ${res.status}: not JSON: ${text.slice(0, 200)}`);
    }
    return validate(operationId, { status: res.status, body, headers: res.headers });
  }

  const expectStatus = (r: Reply, status: number) => assert.equal(r.status, status, JSON.stringify(r.body));

  async function jobState(id: string, queue = Q): Promise<string> {
    return (await call("jobStatus", `/jobs/${id}?queue=${encodeURIComponent(queue)}`)).body.state as string;
  }

  before(async () => {
    s = await DashboardStack.start({ queues: [Q] });
  });
  after(async () => {
    await s?.stop();
  });

  test("the served document is the generated one, without credentials", async () => {
    const r = await call("openapi", "/openapi.json", { token: false });
    expectStatus(r, 200);
    assert.deepEqual(r.body, openApiDocument());
    expectStatus(await call("health", "/healthz", { token: false }), 200);
  });

  test("auth: session, sign in, sign out", async () => {
    expectStatus(await call("session", "/auth/session", { token: false }), 200);
    // A browser signs in: no bearer token, its own Origin (the CSRF check); a missing one is refused.
    const origin = { origin: s.api.base };
    const noOrigin = await call("signIn", "/auth/session", { body: { token: s.token }, token: false });
    assert.deepEqual([noOrigin.status, noOrigin.body.field], [403, "header.Origin"]);
    const signed = await call("signIn", "/auth/session", {
      body: { token: s.token },
      token: false,
      headers: origin,
    });
    expectStatus(signed, 200);
    assert.match(signed.headers.get("set-cookie") ?? "", /HttpOnly/);
    expectStatus(
      await call("signIn", "/auth/session", { body: { token: "wrong" }, token: false, headers: origin }),
      401,
    );
    expectStatus(await call("signOut", "/auth/session"), 200);
  });

  test("enqueue one and a batch; status, logs, detail, payload, search", async () => {
    const one = await call("enqueue", `/queues/${q}/jobs`, {
      body: { id: "logged-1", data: { logLines: 2, result: { pages: 2 } }, priority: 3 },
    });
    expectStatus(one, 202);
    assert.equal(one.headers.get("location"), one.body.status);

    const batch = await call("enqueueBatch", `/queues/${q}/jobs/batch`, {
      body: {
        jobs: [
          { id: "b-1", data: { i: 1 } },
          { data: { i: 2 }, idempotencyKey: "batch-key" },
          { id: "logged-1", data: { ignored: true } },
          { data: { i: 3 }, idempotencyKey: "batch-key" },
        ],
      },
    });
    expectStatus(batch, 202);
    const outcomes = batch.body.jobs as { index: number; id: string; outcome: string }[];
    assert.deepEqual(
      outcomes.map((o) => [o.index, o.outcome]),
      [
        [0, "created"],
        [1, "created"],
        [2, "existing"],
        [3, "existing"],
      ],
    );
    assert.equal(outcomes[3]!.id, outcomes[1]!.id, "the same idempotency key is the same job");
    assert.deepEqual([batch.body.created, batch.body.existing], [2, 2]);

    await waitFor("logged-1 completed", async () => (await jobState("logged-1")) === "completed", 60_000);
    const logs = await call("jobLogs", `/jobs/logged-1/logs?queue=${q}`);
    expectStatus(logs, 200);
    assert.deepEqual(
      (logs.body.logs as { message: string }[]).map((l) => l.message),
      ["line 1 of attempt 1", "line 2 of attempt 1"],
    );
    expectStatus(await call("jobLogs", "/jobs/never-was/logs"), 404);
    await waitFor(
      "logged-1 recorded",
      async () =>
        ((await call("jobDetail", "/jobs/logged-1/detail")).body.sources as { records: boolean }).records,
      60_000,
    );
    const payload = await fetch(`${s.api.base}/jobs/logged-1/payload?part=result`, {
      headers: { authorization: `Bearer ${s.token}` },
    });
    const result = validate("jobPayload", {
      status: payload.status,
      body: (await payload.json()) as Record<string, unknown>,
      headers: payload.headers,
    });
    assert.deepEqual(result.body, { pages: 2 });
    const found = await call("search", "/search?q=logged-1");
    expectStatus(found, 200);
    assert.ok((found.body.items as { id: string }[]).some((h) => h.id === "logged-1"));
    expectStatus(await call("search", "/search?q=pages%3D2"), 200);
  });

  test("queue reads: list, counts, jobs (live and records), stats, workers", async () => {
    expectStatus(await call("listQueues", "/queues"), 200);
    expectStatus(await call("queueCounts", `/queues/${q}`), 200);
    expectStatus(await call("listJobs", `/queues/${q}/jobs?state=completed&limit=2`), 200);
    expectStatus(await call("listJobs", `/queues/${q}/jobs?state=ready`), 200);
    expectStatus(await call("queueStats", `/queues/${q}/stats`), 200);
    const workers = await waitFor("a worker heartbeat", async () => {
      const r = await call("queueWorkers", `/queues/${q}/workers`);
      return (r.body.workers as unknown[]).length > 0 ? r : null;
    });
    expectStatus(workers, 200);
    // The pipeline's layout: its worker among the readers (docs/protocol.md, The layout in force).
    const layout = await waitFor("the worker among the layout's readers", async () => {
      const r = await call("pipelineLayout", "/pipelines/docs/layout");
      return (r.body.readers as { kind: string }[]).some((x) => x.kind === "worker") ? r : null;
    });
    expectStatus(layout, 200);
  });

  test("queue control: pause/resume, rate limit, schedules", async () => {
    expectStatus(await call("pause", `/queues/${idle}/pause`), 200);
    expectStatus(await call("resume", `/queues/${idle}/resume`), 200);
    expectStatus(await call("setRateLimit", `/queues/${idle}/rate-limit`, { body: { limit: "20/s" } }), 200);
    expectStatus(await call("removeRateLimit", `/queues/${idle}/rate-limit`), 200);
    // Groups: the defaults, one group's own limit, pause/resume, the listing.
    await call("enqueue", `/queues/${idle}/jobs`, { body: { data: {}, group: "acme", delayMs: 3_600_000 } });
    const defaults = await call("setDefaultGroupLimit", `/queues/${idle}/group-limit`, {
      body: { concurrency: 4, rate: "10/s" },
    });
    expectStatus(defaults, 200);
    assert.deepEqual([defaults.body.defaultConcurrency, defaults.body.defaultRate], [4, "10/s"]);
    const own = await call("setGroupLimit", `/queues/${idle}/groups/acme/limit`, {
      body: { concurrency: 1 },
    });
    expectStatus(own, 200);
    assert.deepEqual([own.body.concurrency, own.body.override, own.body.rate], [1, true, "10/s"]);
    const weighted = await call("setGroupLimit", `/queues/${idle}/groups/acme/limit`, {
      body: { weight: 3, onDead: "block" },
    });
    expectStatus(weighted, 200);
    assert.deepEqual(
      [weighted.body.weight, weighted.body.onDead, weighted.body.blockedBy],
      [3, "block", null],
    );
    expectStatus(await call("pauseGroup", `/queues/${idle}/groups/acme/pause`), 200);
    const groupList = await call("listGroups", `/queues/${idle}/groups`);
    expectStatus(groupList, 200);
    const acme = (groupList.body.groups as { group: string; paused: boolean; concurrency: number }[]).find(
      (g) => g.group === "acme",
    );
    assert.deepEqual([acme?.paused, acme?.concurrency], [true, 1]);
    const resumed = await call("resumeGroup", `/queues/${idle}/groups/acme/resume`);
    expectStatus(resumed, 200);
    assert.equal(resumed.body.paused, false);
    expectStatus(
      await call("setDefaultGroupLimit", `/queues/${idle}/group-limit`, {
        body: { concurrency: null, rate: null },
      }),
      200,
    );
    expectStatus(
      await call("setGroupLimit", `/queues/${idle}/groups/acme/limit`, { body: { concurrency: null } }),
      200,
    );
    const put = await call("putSchedule", `/queues/${idle}/schedules/nightly`, {
      body: { cron: "0 3 * * *", tz: "Europe/Berlin", data: { report: true } },
    });
    expectStatus(put, 200);
    expectStatus(
      await call("putSchedule", `/queues/${idle}/schedules/often`, { body: { every: "5m" } }),
      200,
    );
    const listed = await call("listSchedules", `/queues/${idle}/schedules`);
    assert.deepEqual((listed.body.schedules as { name: string }[]).map((x) => x.name).sort(), [
      "nightly",
      "often",
    ]);
    expectStatus(await call("deleteSchedule", `/queues/${idle}/schedules/nightly`), 200);
    expectStatus(await call("deleteSchedule", `/queues/${idle}/schedules/nightly`), 404);
    expectStatus(await call("deleteSchedule", `/queues/${idle}/schedules/often`), 200);
  });

  test("cancel, bulk cancel, promote", async () => {
    const batch = await call("enqueueBatch", `/queues/${idle}/jobs/batch`, {
      body: { jobs: ["c-1", "c-2", "c-3", "c-4"].map((id) => ({ id, data: {}, delayMs: 3_600_000 })) },
    });
    expectStatus(batch, 202);
    expectStatus(await call("cancelJob", `/jobs/c-1/cancel?queue=${idle}`), 200);
    const again = await call("cancelJob", `/jobs/c-1/cancel?queue=${idle}`);
    expectStatus(again, 409);
    assert.equal(again.body.code, "already_finished");
    const bulk = await call("bulkCancel", `/queues/${idle}/cancel`, {
      body: { ids: ["c-2", "c-3", "nope"] },
    });
    expectStatus(bulk, 200);
    assert.equal(bulk.body.cancelled, 2);
    // QueueAdmin has no promote yet: a 501 in the error shape (the document allows any 5XX there).
    const promote = await call("promoteJob", `/jobs/c-4/promote?queue=${idle}`);
    assert.ok([200, 501].includes(promote.status), JSON.stringify(promote.body));
  });

  test("a flow's view; an unknown flow", async () => {
    const { flowId, ids } = await new Producer(s.redis).enqueueFlow("docs", [
      { key: "a", queue: IDLE, data: {} },
      { key: "b", queue: IDLE, data: {}, parents: ["a"], onParentFailure: "continue" },
    ]);
    const r = await call("flow", `/flows/${flowId}`);
    expectStatus(r, 200);
    assert.deepEqual(r.body.counts, { ready: 1, "waiting-children": 1 });
    assert.deepEqual(
      (r.body.jobs as { id: string }[]).map((j) => j.id),
      [ids.a, ids.b],
    );
    expectStatus(await call("flow", `/flows/no-such-flow?pipeline=docs`), 404);
  });

  test("dead letters: list, retry one, retry some, purge", async () => {
    // (the page and the total are two reads: wait until both say n)
    const dead = async (n: number) =>
      waitFor(
        `${n} dead`,
        async () => {
          const r = await call("listDead", `/queues/${q}/dead`);
          return r.body.total === n && (r.body.dead as unknown[]).length === n ? r : null;
        },
        60_000,
      );
    await call("enqueueBatch", `/queues/${q}/jobs/batch`, {
      body: { jobs: ["d-1", "d-2"].map((id) => ({ id, data: { final: true }, attempts: 1 })) },
    });
    const listed = await dead(2);
    assert.deepEqual((listed.body.dead as { id: string }[]).map((d) => d.id).sort(), ["d-1", "d-2"]);
    expectStatus(await call("listDead", `/queues/${q}/dead?limit=1`), 200);
    expectStatus(await call("retryJob", `/jobs/d-1/retry?queue=${q}`), 200);
    expectStatus(await call("retryJob", `/jobs/b-1/retry?queue=${q}`), 409);
    await dead(2); // d-1 fails again (final)
    const retried = await call("retryDead", `/queues/${q}/dead/retry`, { body: { ids: ["d-1", "d-2"] } });
    expectStatus(retried, 200);
    assert.equal(retried.body.retried, 2);
    await dead(2);
    const purged = await call("purgeDead", `/queues/${q}/dead`);
    expectStatus(purged, 200);
    assert.equal(purged.body.purged, 2);
  });

  test("events: an SSE job event, and Last-Event-ID resumes after it", async () => {
    // Resolves once the reply has started (the server then follows the queue) with the wanted event to come.
    const read = async (
      headers: Record<string, string>,
      want: (data: Record<string, unknown>) => boolean,
    ): Promise<{ event: Promise<{ id: string; data: Record<string, unknown> }> }> => {
      const ac = new AbortController();
      const res = await fetch(`${s.api.base}/events?queue=${idle}`, {
        headers: { authorization: `Bearer ${s.token}`, ...headers },
        signal: ac.signal,
      });
      assert.equal(res.status, 200);
      assert.match(res.headers.get("content-type") ?? "", /^text\/event-stream/);
      const v = schemaFor("events", 200, "text/event-stream");
      const decoder = new TextDecoder();
      let text = "";
      const jobEvent = ajv.getSchema("openapi.json#/components/schemas/JobEvent")!;
      const event = async () => {
        try {
          for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
            text += decoder.decode(chunk, { stream: true });
            for (const frame of text.split("\n\n").slice(0, -1)) {
              const id = /^id: (.*)$/m.exec(frame)?.[1];
              const data = /^data: (.*)$/m.exec(frame)?.[1];
              if (!/^event: job$/m.test(frame) || !id || !data) continue;
              const parsed = JSON.parse(data) as Record<string, unknown>;
              assert.ok(jobEvent(parsed), ajv.errorsText(jobEvent.errors));
              if (want(parsed)) {
                assert.ok(v(text));
                exercised.add("events");
                return { id, data: parsed };
              }
            }
          }
        } finally {
          ac.abort();
        }
        assert.fail("the stream ended without the event");
      };
      return { event: event() };
    };
    const first = await read({}, (d) => d.id === "ev-1");
    await call("enqueue", `/queues/${idle}/jobs`, { body: { id: "ev-1", data: {} } });
    const seen = await first.event;
    await call("enqueue", `/queues/${idle}/jobs`, { body: { id: "ev-2", data: {} } });
    const resumed = await (await read({ "last-event-id": seen.id }, () => true)).event;
    assert.equal(resumed.data.id, "ev-2", "the first event after Last-Event-ID is the next one");
    const bad = await fetch(`${s.api.base}/events`, {
      headers: { authorization: `Bearer ${s.token}`, "last-event-id": "yesterday" },
    });
    const body = validate("events", {
      status: bad.status,
      body: (await bad.json()) as Record<string, unknown>,
      headers: bad.headers,
    });
    assert.deepEqual([body.status, body.body.field], [400, "header.Last-Event-ID"]);
  });

  test("contracts: put, get, enqueue refused with 422 naming each job's pointer (single and batch), delete", async () => {
    const typed = encodeURIComponent("docs/typed");
    expectStatus(await call("getContract", `/queues/${typed}/contract`), 404);
    const contract = {
      tasks: {
        extract: {
          data: {
            type: "object",
            required: ["text", "source"],
            properties: { text: { type: "string" }, source: { type: "string", format: "uri" } },
          },
        },
      },
    };
    const put = await call("putContract", `/queues/${typed}/contract`, { body: contract });
    expectStatus(put, 200);
    assert.deepEqual([put.body.contract, put.body.source], [contract, "api"]);
    const got = await call("getContract", `/queues/${typed}/contract`);
    assert.deepEqual([got.body.hash, got.body.contract], [put.body.hash, contract]);

    const one = await call("enqueue", `/queues/${typed}/jobs`, {
      body: { data: { text: "t", source: "not a uri" }, task: "extract", id: "t-1" },
    });
    expectStatus(one, 422);
    assert.deepEqual([one.body.code, one.body.field], ["contract_violation", "body.data"]);
    assert.deepEqual(one.body.jobs, [
      {
        index: 0,
        id: "t-1",
        task: "extract",
        side: "data",
        violations: [
          { pointer: "/source", rule: "format", message: 'must match format "uri"', value: '"not a uri"' },
        ],
      },
    ]);
    const batch = await call("enqueueBatch", `/queues/${typed}/jobs/batch`, {
      body: {
        jobs: [
          { data: { text: "t", source: "https://example.com" }, task: "extract", id: "t-2" },
          { data: { source: "https://example.com" }, task: "extract" },
          { data: {}, task: "summarize", id: "t-4" },
        ],
      },
    });
    expectStatus(batch, 422);
    assert.equal(batch.body.field, "body.jobs");
    const refused = batch.body.jobs as {
      index: number;
      task: string;
      violations: { pointer: string; rule: string }[];
    }[];
    assert.deepEqual(
      refused.map((j) => [j.index, j.task, j.violations.map((v) => `${v.pointer} ${v.rule}`)]),
      [
        [1, "extract", ["/text required"]],
        [2, "summarize", [" task"]],
      ],
    );
    // Nothing of the refused batch was written: t-2 does not exist.
    expectStatus(await call("jobStatus", `/jobs/t-2?queue=${typed}`), 404);
    const ok = await call("enqueueBatch", `/queues/${typed}/jobs/batch`, {
      body: { jobs: [{ data: { text: "t", source: "https://example.com" }, task: "extract", id: "t-2" }] },
    });
    expectStatus(ok, 202);
    // A task name the grammar refuses is a 400 naming the field.
    const badTask = await call("enqueue", `/queues/${typed}/jobs`, { body: { data: {}, task: "no spaces" } });
    assert.deepEqual([badTask.status, badTask.body.field], [400, "body.task"]);
    // A contract whose schema does not compile is a 400 naming it; the one in force stays.
    const badSchema = await call("putContract", `/queues/${typed}/contract`, {
      body: { data: { type: "nonsense" } },
    });
    assert.deepEqual([badSchema.status, badSchema.body.code], [400, "invalid_contract"]);
    assert.match(String(badSchema.body.error), /^data: not a valid JSON Schema/);
    const badTaskName = await call("putContract", `/queues/${typed}/contract`, {
      body: { tasks: { "no spaces": {} } },
    });
    assert.equal(badTaskName.status, 400, JSON.stringify(badTaskName.body));
    expectStatus(await call("getContract", `/queues/${typed}/contract`), 200);
    const deleted = await call("deleteContract", `/queues/${typed}/contract`);
    assert.deepEqual([deleted.status, deleted.body.deleted], [200, true]);
    assert.equal((await call("deleteContract", `/queues/${typed}/contract`)).body.deleted, false);
    // Without a contract anything goes again, the task kept on the job.
    expectStatus(
      await call("enqueue", `/queues/${typed}/jobs`, { body: { data: {}, task: "summarize" } }),
      202,
    );
  });

  test("pools without a Kubernetes API: 404 in the error shape", async () => {
    expectStatus(await call("listPools", "/pools"), 404);
    expectStatus(await call("poolDetail", "/pools/default/ocr"), 404);
  });

  test("bad input on every route is a 4xx naming the field, never a 5xx", async () => {
    const bad = async (
      operationId: string,
      path: string,
      opts: Parameters<typeof call>[2],
      status: number,
      field: string | null,
      code?: string,
    ) => {
      const r = await call(operationId, path, opts);
      assert.equal(r.status, status, `${operationId} ${path}: ${JSON.stringify(r.body)}`);
      assert.equal(r.body.field, field, `${operationId} ${path}: ${JSON.stringify(r.body)}`);
      if (code) assert.equal(r.body.code, code);
    };
    // Oversized and malformed batches: nothing is enqueued.
    const before = (await call("queueCounts", `/queues/${idle}`)).body.ready;
    const jobs = Array.from({ length: 501 }, (_, i) => ({ data: i }));
    await bad(
      "enqueueBatch",
      `/queues/${idle}/jobs/batch`,
      { body: { jobs } },
      413,
      "body.jobs",
      "too_many_items",
    );
    await bad(
      "enqueueBatch",
      `/queues/${idle}/jobs/batch`,
      { body: { jobs: [{ data: 1 }, { data: 2, priorty: 1 }] } },
      400,
      "body.jobs.1.priorty",
      "unknown_field",
    );
    await bad(
      "enqueueBatch",
      `/queues/${idle}/jobs/batch`,
      { body: { jobs: [{ data: 1 }, { data: 2, priority: "high" }] } },
      400,
      "body.jobs.1.priority",
    );
    await bad(
      "enqueueBatch",
      `/queues/${idle}/jobs/batch`,
      { body: { jobs: [{ data: 1 }], extra: 1 } },
      400,
      "body.extra",
      "unknown_field",
    );
    await bad("enqueueBatch", `/queues/${idle}/jobs/batch`, { body: { jobs: {} } }, 400, "body.jobs");
    await bad(
      "enqueueBatch",
      `/queues/${idle}/jobs/batch`,
      { body: { jobs: [{ data: 1 }, { data: "x".repeat(600 * 1024) }] } },
      413,
      "body.jobs.1.data",
      "payload_too_large",
    );
    await bad(
      "enqueue",
      `/queues/${idle}/jobs`,
      { body: { data: "x".repeat(600 * 1024) } },
      413,
      "body.data",
      "payload_too_large",
    );
    await bad("enqueue", `/queues/${idle}/jobs`, { body: { data: 1, id: "has space" } }, 400, "body.id");
    await bad("enqueue", `/queues/${idle}/jobs`, { body: { data: 1, attempts: 0 } }, 400, "body.attempts");
    await bad(
      "enqueue",
      `/queues/${idle}/jobs`,
      { body: { data: 1 }, headers: { "content-type": "text/plain" } },
      415,
      "header.Content-Type",
    );
    assert.equal((await call("queueCounts", `/queues/${idle}`)).body.ready, before, "nothing was enqueued");

    // Every route with a body: malformed JSON, a non-object, an unknown field.
    const sample: Record<string, string> = {
      queue: idle,
      id: "c-4",
      schedule: "s1",
      group: "acme",
      namespace: "default",
      name: "x",
      pipeline: "docs",
    };
    for (const r of ROUTES) {
      const path = r.path.replace(/\{(\w+)\}/g, (_, n: string) => sample[n]!);
      if (r.body) {
        await bad(r.name, path, { raw: "{nope" }, 400, "body", "invalid_json");
        await bad(r.name, path, { raw: "[1]" }, 400, "body");
        await bad(r.name, path, { body: { zzz: 1 } }, 400, "body.zzz", "unknown_field");
      }
      if (!r.public || r.name === "signIn") {
        // An unknown query parameter on every route, and a bad value in each path parameter.
        const q1 = await call(
          r.name,
          `${path}${path.includes("?") ? "&" : "?"}zzz=1`,
          r.body ? { body: {} } : {},
        );
        assert.equal(q1.status, 400, `${r.name}: ${JSON.stringify(q1.body)}`);
        assert.equal(q1.body.field, "query.zzz");
      }
      for (const [, name] of r.path.matchAll(/\{(\w+)\}/g)) {
        // (any string is a group name: a group's bad value is one over 128 characters)
        const badValue = name === "group" ? "x".repeat(129) : "bad%20value!";
        const broken = r.path.replace(/\{(\w+)\}/g, (_, n: string) => (n === name ? badValue : sample[n]!));
        const b = await call(r.name, broken, r.body ? { body: {} } : {});
        assert.ok(
          b.status === 400 || b.status === 404,
          `${r.name} ${broken}: ${b.status} ${JSON.stringify(b.body)}`,
        );
        if (b.status === 400) assert.equal(b.body.field, `path.${name}`);
      }
    }
    // Odd values in every declared query parameter: a NUL, a long string, a JSON-looking one.
    for (const r of ROUTES) {
      const path = r.path.replace(/\{(\w+)\}/g, (_, n: string) => sample[n]!);
      const names = Object.keys((r.query as { properties?: object } | undefined)?.properties ?? {});
      for (const name of names)
        for (const value of ["%00", "x".repeat(5000), "%7B%22a%22%3A1%7D", "data%3Aa.b%3D%00"]) {
          const extra = name === "q" ? "" : "&q=x";
          const res = await call(
            r.name,
            `${path}?${name}=${value}${r.name === "search" ? extra : ""}`,
            r.body ? { body: {} } : {},
          );
          assert.ok(
            res.status < 500,
            `${r.name} ?${name}=${value.slice(0, 20)}: ${res.status} ${JSON.stringify(res.body)}`,
          );
        }
    }
    for (const q of ["%00", "data%3Aa.b%3D%00", "a%3Db", "result%3A%3D1", "x".repeat(600)])
      assert.ok((await call("search", `/search?q=${q}`)).status < 500, q);
    // Query values of the wrong type or shape.
    await bad("listJobs", `/queues/${idle}/jobs?limit=0`, {}, 400, "query.limit");
    await bad("listJobs", `/queues/${idle}/jobs?state=lost`, {}, 400, "query.state");
    await bad("listJobs", `/queues/${idle}/jobs?state=completed&cursor=garbage`, {}, 400, "query.cursor");
    await bad("listJobs", `/queues/${idle}/jobs?state=ready&cursor=garbage`, {}, 400, "query.cursor");
    await bad("listDead", `/queues/${idle}/dead?limit=5000`, {}, 400, "query.limit");
    await bad("search", "/search", {}, 400, "query.q", "missing_field");
    await bad("search", "/search?q=x&cursor=abc", {}, 400, "query.cursor");
    await bad("jobPayload", "/jobs/c-4/payload?part=everything", {}, 400, "query.part");
    await bad("retryJob", "/jobs/c-4/retry", {}, 400, "query.queue", "missing_field");
    await bad("setRateLimit", `/queues/${idle}/rate-limit`, { body: { limit: "fast" } }, 400, "body.limit");
    await bad(
      "setGroupLimit",
      `/queues/${idle}/groups/acme/limit`,
      { body: { rate: "fast" } },
      400,
      "body.rate",
    );
    await bad(
      "setGroupLimit",
      `/queues/${idle}/groups/acme/limit`,
      { body: {} },
      400,
      "body",
      "missing_field",
    );
    await bad(
      "setDefaultGroupLimit",
      `/queues/${idle}/group-limit`,
      { body: { concurrency: 0 } },
      400,
      "body.concurrency",
    );
    await bad(
      "setDefaultGroupLimit",
      `/queues/${idle}/group-limit`,
      { body: { weight: 2 } },
      400,
      "body.weight",
    );
    await bad(
      "setGroupLimit",
      `/queues/${idle}/groups/acme/limit`,
      { body: { onDead: "explode" } },
      400,
      "body.onDead",
    );
    await bad(
      "enqueue",
      `/queues/${idle}/jobs`,
      { body: { data: 1, dedupe: { key: "k", mode: "squash", windowMs: 10 } } },
      400,
      "body.dedupe.mode",
    );
    await bad("pauseGroup", `/queues/${idle}/groups/${"é".repeat(65)}/pause`, {}, 400, "path.group");
    await bad("putSchedule", `/queues/${idle}/schedules/x`, { body: { cron: "nope" } }, 400, "body.cron");
    await bad("putSchedule", `/queues/${idle}/schedules/x`, { body: { every: "often" } }, 400, "body.every");
    await bad(
      "putSchedule",
      `/queues/${idle}/schedules/x`,
      { body: { cron: "0 * * * *", tz: "Mars/Base" } },
      400,
      "body.tz",
    );
    await bad(
      "putSchedule",
      `/queues/${idle}/schedules/bad%20name`,
      { body: { every: "5s" } },
      400,
      "path.schedule",
    );
    await bad(
      "retryDead",
      `/queues/${idle}/dead/retry`,
      { body: { ids: Array.from({ length: 1001 }, (_, i) => `i${i}`) } },
      413,
      "body.ids",
      "too_many_items",
    );
    await bad("listQueues", "/queues", { token: false }, 401, null, "unauthorized");
  });

  test("metrics: Prometheus text with the API's error counter, behind the token", async () => {
    const res = await fetch(`${s.api.base}/metrics`, { headers: { authorization: `Bearer ${s.token}` } });
    assert.equal(res.status, 200);
    assert.match(res.headers.get("content-type") ?? "", /^text\/plain/);
    const text = await res.text();
    assert.ok(schemaFor("metrics", 200, "text/plain")(text));
    assert.match(text, /^# TYPE conveyor_api_errors_total counter$/m);
    exercised.add("metrics");
    expectStatus(await call("metrics", "/metrics", { token: false }), 401);
  });

  test("audit: the state changes made through the API, newest first, filtered", async () => {
    const r = await call("audit", "/audit?verb=operate&limit=5");
    assert.equal(r.status, 200);
    const items = (r.body as { items: { verb: string; token: string }[] }).items;
    assert.ok(items.length > 0, "the operations above were audited");
    assert.ok(items.every((i) => i.verb === "operate" && i.token === "api-token"));
    assert.equal((await call("audit", "/audit?verb=read")).status, 400);
  });

  test("the queue allow-list holds on every operation that names a queue or a job", async () => {
    const walled = await s.startApi("api-allow-list", ["--queues", Q]);
    await call("enqueue", `/queues/${idle}/jobs`, { body: { id: "walled-1", data: {}, delayMs: 3_600_000 } });
    // Operations that name neither a queue nor a job: nothing for the allow-list to check.
    const queueFree = ["health", "metrics", "openapi", "session", "signIn", "signOut"];
    queueFree.push(
      "listQueues",
      "groupsOverview",
      "search",
      "listPools",
      "poolDetail",
      "listResources",
      "audit",
    );
    // (a pipeline: served when one of its queues is; checked below)
    queueFree.push("pipelineLayout");
    type Param = { name: string; in: string; required?: boolean };
    let walked = 0;
    for (const [id, { path, method, op }] of byId) {
      const params = ((op as { parameters?: Param[] }).parameters ?? []).filter((p) => p.in !== "header");
      const inPath = params.filter((p) => p.in === "path").map((p) => p.name);
      const queueQuery = params.some((p) => p.in === "query" && p.name === "queue");
      if (!inPath.includes("queue") && !inPath.includes("id") && !queueQuery) {
        assert.ok(
          queueFree.includes(id),
          `${id} names no queue or job: add it to queueFree if that is right`,
        );
        continue;
      }
      const filled = path
        .replace("{queue}", idle)
        .replace("{id}", "walled-1")
        .replace("{schedule}", "nightly")
        .replace("{group}", "acme");
      // A job named by id alone is checked by its queue; with ?queue= by that queue.
      const variants = inPath.includes("queue") ? [filled] : [];
      if (inPath.includes("id") && !params.some((p) => p.name === "queue" && p.required))
        variants.push(filled);
      if (queueQuery) variants.push(`${filled}?queue=${idle}`);
      for (const url of variants) {
        const res = await fetch(`${walled.base}${url}`, {
          method: method.toUpperCase(),
          headers: { authorization: `Bearer ${s.token}` },
        });
        const body = (await res.json()) as { code: string; error: string };
        assert.deepEqual(
          [res.status, body.code],
          [404, "not_found"],
          `${id} ${method.toUpperCase()} ${url}: ${body.error}`,
        );
        walked++;
      }
    }
    assert.ok(walked >= 30, `${walked} calls`);
    // The allowed queue still answers (the guard refuses only what is outside the list).
    const own = await fetch(`${walled.base}/queues/${q}`, {
      headers: { authorization: `Bearer ${s.token}` },
    });
    assert.equal(own.status, 200);
    // Resources are listed for the allow-list's pipelines only (docs/ocr: pipeline docs).
    await setResource(s.redis, "elsewhere", "walled", [{ id: "k1", limits: parseLimits("requests=1/s") }]);
    const listed = async (base: string) =>
      (
        (await (
          await fetch(`${base}/resources`, { headers: { authorization: `Bearer ${s.token}` } })
        ).json()) as {
          resources: { name: string }[];
        }
      ).resources.map((r) => r.name);
    assert.ok((await listed(s.api.base)).includes("walled"));
    assert.ok(!(await listed(walled.base)).includes("walled"));
    // A pipeline's layout likewise: the allow-list's pipeline only.
    const layoutOf = async (pipeline: string) =>
      (
        await fetch(`${walled.base}/pipelines/${pipeline}/layout`, {
          headers: { authorization: `Bearer ${s.token}` },
        })
      ).status;
    assert.deepEqual([await layoutOf("docs"), await layoutOf("elsewhere")], [200, 404]);
  });

  test("every operation in the document was exercised", () => {
    assert.deepEqual(
      [...byId.keys()].filter((id) => !exercised.has(id)),
      [],
    );
  });
});

// The dashboard's JSON API against real Redis, PostgreSQL, worker and `conveyor api`
// processes: cursor paging (records and live Redis sets), search by id / idempotency key /
// task / payload and result fields, SSE with Last-Event-ID resume, and auth — bad tokens, sessions,
// missing and foreign Origins, read-only, allow-lists — with every malformed input a 4xx
// JSON naming the field, never a 500.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Consumer, EVENT_LIST_SEPARATOR, Producer, QueueKeys } from "../../queue/index.ts";
import { DashboardStack } from "../support/dashboard.ts";
import { startProcess, waitFor } from "../support/processes.ts";
import { CONVEYOR, NODE } from "../support/workers.ts";

const Q = "shop/orders";
const IDLE = "shop/idle"; // no worker: its jobs stay delayed/ready in Redis

describe("dashboard API", () => {
  let s: DashboardStack;
  let producer: Producer;
  const get = async (path: string, headers: Record<string, string> = {}) => {
    const res = await fetch(`${s.api.base}${path}`, {
      headers: { authorization: `Bearer ${s.token}`, ...headers },
    });
    return { status: res.status, body: (await res.json()) as Record<string, unknown>, headers: res.headers };
  };

  before(async () => {
    s = await DashboardStack.start({ queues: [Q] });
    producer = new Producer(s.redis);
    for (let i = 0; i < 60; i++)
      await producer.enqueue(
        Q,
        { customer: { id: i % 7 }, n: i, result: { total: i * 10 } },
        { id: `order-${i}`, idempotencyKey: `key-${i}` },
      );
    for (let i = 0; i < 25; i++)
      await producer.enqueue(IDLE, { n: i }, { id: `idle-${i}`, delayMs: 3_600_000 + i });
    await waitFor(
      "60 completed records",
      async () =>
        (
          await s.pg.query<{ n: number }>(
            "SELECT count(*)::int AS n FROM conveyor_jobs WHERE queue = $1 AND state = 'completed'",
            [Q],
          )
        )[0]!.n === 60,
      120_000,
      200,
    );
  });
  after(async () => {
    await s?.stop();
  });

  test("the queue list shows both queues with live counts", async () => {
    // (the API's queue directory is refreshed at most once a second: IDLE was new a moment ago)
    type Row = { queue: string; completed: number; delayed: number };
    const queues = await waitFor("both queues listed", async () => {
      const r = await get("/queues");
      assert.equal(r.status, 200);
      const rows = r.body.queues as Row[];
      return rows.length === 2 ? rows : null;
    });
    assert.deepEqual(
      queues.map((q) => q.queue),
      [IDLE, Q],
    );
    assert.equal(queues.find((q) => q.queue === Q)!.completed, 60);
    assert.equal(queues.find((q) => q.queue === IDLE)!.delayed, 25);
  });

  test("a queue's history pages by cursor, newest first, every job once", async () => {
    const seen: string[] = [];
    let cursor: string | null = null;
    let last = Infinity;
    let pages = 0;
    do {
      const r = await get(
        `/queues/${encodeURIComponent(Q)}/jobs?state=completed&limit=25${cursor ? `&cursor=${cursor}` : ""}`,
      );
      assert.equal(r.status, 200, JSON.stringify(r.body));
      assert.equal(r.body.source, "records");
      for (const j of r.body.items as { id: string; updatedAt: string }[]) {
        const t = Date.parse(j.updatedAt);
        assert.ok(t <= last, "newest first");
        last = t;
        seen.push(j.id);
      }
      cursor = r.body.next as string | null;
      pages++;
    } while (cursor);
    assert.equal(pages, 3);
    assert.equal(new Set(seen).size, 60);
  });

  test("live states page from the Redis sets by score cursor", async () => {
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const r = await get(
        `/queues/${encodeURIComponent(IDLE)}/jobs?state=delayed&limit=10${cursor ? `&cursor=${cursor}` : ""}`,
      );
      assert.equal(r.status, 200, JSON.stringify(r.body));
      assert.equal(r.body.source, "redis");
      seen.push(...(r.body.items as { id: string }[]).map((j) => j.id));
      cursor = r.body.next as string | null;
    } while (cursor);
    assert.deepEqual(
      seen,
      Array.from({ length: 25 }, (_, i) => `idle-${i}`),
      "soonest due first",
    );
  });

  test("search finds a job by id, by idempotency key, and by payload and result fields", async () => {
    const byId = await get("/search?q=order-7");
    assert.deepEqual(
      (byId.body.items as { id: string; matched: string }[]).map((h) => [h.id, h.matched]),
      [["order-7", "id"]],
    );
    const byKey = await get("/search?q=key-12");
    assert.deepEqual(
      (byKey.body.items as { id: string; matched: string }[]).map((h) => [h.id, h.matched]),
      [["order-12", "idempotencyKey"]],
    );
    // The Redis key expires (its TTL); the records still know it.
    await s.redis.del(new QueueKeys(Q).idempotencyPrefix + "key-12");
    const afterExpiry = await get("/search?q=key-12");
    assert.deepEqual(
      (afterExpiry.body.items as { id: string; matched: string; state: string }[]).map((h) => [
        h.id,
        h.matched,
        h.state,
      ]),
      [["order-12", "idempotencyKey", "completed"]],
    );
    const byField = await get(`/search?q=${encodeURIComponent("customer.id=3")}&limit=100`);
    const ids = (byField.body.items as { id: string }[]).map((h) => h.id).sort();
    assert.deepEqual(ids, [
      "order-10",
      "order-17",
      "order-24",
      "order-3",
      "order-31",
      "order-38",
      "order-45",
      "order-52",
      "order-59",
    ]);
    const byResult = await get(`/search?q=${encodeURIComponent("result:total=420")}`);
    assert.deepEqual(
      (byResult.body.items as { id: string }[]).map((h) => h.id),
      ["order-42"],
    );
    const paged = await get(`/search?q=${encodeURIComponent("customer.id=3")}&limit=4`);
    assert.equal((paged.body.items as unknown[]).length, 4);
    const rest = await get(
      `/search?q=${encodeURIComponent("customer.id=3")}&limit=100&cursor=${paged.body.next}`,
    );
    assert.equal((rest.body.items as unknown[]).length, 5);
    assert.deepEqual((await get("/search?q=no-such-thing")).body.items, []);
  });

  test("search task:<name> finds the records' jobs of that task", async () => {
    const q = "shop/tasks";
    await producer.enqueue(q, { n: 1 }, { id: "tasked-1" });
    await s.redis.hset(new QueueKeys(q).job("tasked-1"), "task", "summarize");
    const c = new Consumer(s.redis, q, { workerId: "t", leaseMs: 10_000 });
    const [job] = (await c.claim(1)).jobs;
    assert.equal(await c.complete(job!, { ok: true }), true);
    // (the recorder may have the start and not yet the completion: wait for the record to end)
    const hits = await waitFor("the task's completion recorded", async () => {
      const r = await get("/search?q=task%3Asummarize");
      const items = r.body.items as { id: string; matched: string; state: string }[];
      return items.some((h) => h.state === "completed") ? { kind: r.body.kind, items } : null;
    });
    assert.deepEqual(
      [hits.kind, hits.items.map((h) => [h.id, h.matched, h.state])],
      ["task", [["tasked-1", "task", "completed"]]],
    );
    assert.deepEqual((await get("/search?q=task%3Aclassify")).body.items, []);
  });

  test("a job's detail has its executions, events and payload", async () => {
    const r = await get(`/jobs/order-5/detail?queue=${encodeURIComponent(Q)}`);
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.equal(r.body.state, "completed");
    assert.equal(r.body.idempotencyKey, "key-5");
    assert.deepEqual((r.body.data as { value: unknown }).value, {
      customer: { id: 5 },
      n: 5,
      result: { total: 50 },
    });
    const executions = r.body.executions as { outcome: string }[];
    assert.deepEqual(
      executions.map((e) => e.outcome),
      ["completed"],
    );
    const types = (r.body.events as { type: string; token?: string }[]).map((e) => e.type);
    assert.deepEqual(types, ["enqueued", "started", "completed"]);
    assert.ok(
      (r.body.events as { token?: string }[]).every((e) => e.token === undefined),
      "lease tokens stay server-side",
    );
  });

  test("SSE pushes new events and resumes from Last-Event-ID", async () => {
    const read = async (headers: Record<string, string>, until: (text: string) => boolean) => {
      const ctl = new AbortController();
      const res = await fetch(`${s.api.base}/events?queue=${encodeURIComponent(IDLE)}`, {
        headers: { authorization: `Bearer ${s.token}`, ...headers },
        signal: ctl.signal,
      });
      assert.equal(res.status, 200);
      assert.match(res.headers.get("content-type") ?? "", /text\/event-stream/);
      const reader = res.body!.getReader();
      let text = "";
      const done = (async () => {
        for (;;) {
          const { value, done } = await reader.read();
          if (done) return;
          text += Buffer.from(value).toString("utf8");
          if (until(text)) return;
        }
      })();
      return { done, ctl, text: () => text };
    };
    // read() resolves with the reply's headers, sent once the hub follows every queue.
    const first = await read({}, (t) => t.includes("live-1"));
    await producer.enqueue(IDLE, { n: 1 }, { id: "live-1", delayMs: 3_600_000 });
    await first.done;
    first.ctl.abort();
    const ids = [...first.text().matchAll(/^id: (.+)$/gm)].map((m) => m[1]!);
    assert.ok(ids.length >= 1);
    // Missed while disconnected: replayed on reconnect.
    await producer.enqueue(IDLE, { n: 2 }, { id: "live-2", delayMs: 3_600_000 });
    const again = await read({ "last-event-id": ids.at(-1)! }, (t) => t.includes("live-2"));
    await again.done;
    again.ctl.abort();
    assert.ok(!again.text().includes('"live-1"'), "nothing before Last-Event-ID is sent again");

    // A batch entry (several jobs completed by one call) is one event per job, with ids
    // `<entry>/<part>` after the first, and Last-Event-ID resumes inside the entry.
    const sep = EVENT_LIST_SEPARATOR;
    const entry = (await s.redis.xadd(
      new QueueKeys(IDLE).events,
      "*",
      ...["type", "completed", "n", "3", "queue", IDLE, "at", String(Date.now())],
      ...["id[]", ["bat-a", "bat-b", "bat-c"].join(sep), "token[]", ["1", "2", "3"].join(sep)],
      ...["result[]", ["1", "2", "3"].join(sep), "reused[]", ["0", "0", "0"].join(sep)],
    ))!;
    const jobsAfter = async (lastId: string) => {
      const r = await read({ "last-event-id": lastId }, (t) => t.includes("bat-c"));
      await r.done;
      r.ctl.abort();
      return [...r.text().matchAll(/^id: (.+)\nevent: job\ndata: (.+)$/gm)]
        .map((m) => {
          const data = JSON.parse(m[2]!) as { id: string; result: string; token?: string };
          assert.equal(data.token, undefined, "lease tokens stay server-side");
          return [m[1]!, data.id, data.result];
        })
        .filter(([, id]) => id!.startsWith("bat-"));
    };
    assert.deepEqual(await jobsAfter(ids.at(-1)!), [
      [entry, "bat-a", "1"],
      [`${entry}/1`, "bat-b", "2"],
      [`${entry}/2`, "bat-c", "3"],
    ]);
    assert.deepEqual(
      (await jobsAfter(entry)).map(([, id]) => id),
      ["bat-b", "bat-c"],
    );
    assert.deepEqual(
      (await jobsAfter(`${entry}/1`)).map(([, id]) => id),
      ["bat-c"],
    );
  });

  test("auth: bad tokens 401; a browser session needs this Origin on every change", async () => {
    assert.equal((await get("/queues", { authorization: "Bearer nope" })).status, 401);
    assert.equal((await fetch(`${s.api.base}/queues`)).status, 401);
    const origin = s.api.base;
    const wrong = await fetch(`${s.api.base}/auth/session`, {
      method: "POST",
      headers: { "content-type": "application/json", origin },
      body: JSON.stringify({ token: "nope" }),
    });
    assert.equal(wrong.status, 401);
    const signIn = await fetch(`${s.api.base}/auth/session`, {
      method: "POST",
      headers: { "content-type": "application/json", origin },
      body: JSON.stringify({ token: s.token }),
    });
    assert.equal(signIn.status, 200);
    const cookie = signIn.headers.get("set-cookie")!;
    assert.match(cookie, /HttpOnly/);
    assert.match(cookie, /SameSite=Strict/);
    const session = cookie.split(";")[0]!;
    const asBrowser = (path: string, method: string, headers: Record<string, string> = {}) =>
      fetch(`${s.api.base}${path}`, { method, headers: { cookie: session, ...headers } });
    assert.equal((await asBrowser("/queues", "GET")).status, 200);
    const retry = `/jobs/idle-0/retry?queue=${encodeURIComponent(IDLE)}`;
    const noOrigin = await asBrowser(retry, "POST");
    assert.equal(noOrigin.status, 403);
    assert.match(((await noOrigin.json()) as { error: string }).error, /Origin/);
    const foreign = await asBrowser(retry, "POST", { origin: "https://evil.example" });
    assert.equal(foreign.status, 403);
    // Same origin passes the CSRF check and reaches the action (idle-0 is not dead: 409).
    assert.equal((await asBrowser(retry, "POST", { origin })).status, 409);
    // A bearer client without Origin is no CSRF risk; with a foreign Origin it is refused.
    const bearer = (headers: Record<string, string>) =>
      fetch(`${s.api.base}${retry}`, {
        method: "POST",
        headers: { authorization: `Bearer ${s.token}`, ...headers },
      });
    assert.equal((await bearer({})).status, 409);
    assert.equal((await bearer({ origin: "https://evil.example" })).status, 403);
    // Signing out clears the browser's cookie (sessions are stateless: rotating the token ends them all).
    const out = await asBrowser("/auth/session", "DELETE", { origin });
    assert.equal(out.status, 200);
    assert.match(out.headers.get("set-cookie") ?? "", /^conveyor_session=; .*Max-Age=0/);
    assert.equal((await fetch(`${s.api.base}/queues`)).status, 401, "signed out: no cookie, no access");
  });

  test("malformed cursors, queries and paths are 4xx JSON naming the field, never 500", async () => {
    const qp = encodeURIComponent(Q);
    const cases: [string, number, RegExp, Record<string, string>?][] = [
      [`/queues/${qp}/jobs?cursor=garbage`, 400, /cursor/],
      [
        `/queues/${qp}/jobs?cursor=${Buffer.from('["2026-13-45 99:00:00+00","x"]').toString("base64url")}`,
        400,
        /cursor|bad query value/,
      ],
      [`/queues/${encodeURIComponent(IDLE)}/jobs?state=delayed&cursor=bm9wZQ`, 400, /cursor/],
      [`/queues/${qp}/jobs?limit=abc`, 400, /"limit" must be an integer/],
      [`/queues/${qp}/jobs?limit=100000`, 400, /"limit"/],
      [`/queues/${qp}/jobs?state=bogus`, 400, /"state" must be one of/],
      [`/queues/${qp}/jobs?sort=asc`, 400, /unknown query parameter "sort"/],
      [`/queues/${qp}/jobs?limit=1&limit=2`, 400, /given twice/],
      [`/queues/bad%E0%A4%A/jobs`, 400, /malformed %-escape/],
      [`/jobs/%ZZ`, 400, /malformed %-escape/],
      [`/jobs/bad id!`, 400, /invalid job id/],
      [`/search`, 400, /"q" is required/],
      [`/search?q=${"x".repeat(600)}`, 400, /"q"/],
      [`/search?q=order-1&cursor=abc`, 400, /cursor/],
      [`/search?q=${encodeURIComponent("a.b=1")}&cursor=!!`, 400, /cursor/],
      [`/events`, 400, /Last-Event-ID/, { "last-event-id": "yesterday" }],
      [`/pools`, 404, /Kubernetes/],
      [`/jobs/order-1/detail?queue=${encodeURIComponent("bad queue")}`, 400, /"queue"/],
    ];
    for (const [path, status, message, headers] of cases) {
      const r = await get(path, headers);
      assert.equal(r.status, status, `${path}: ${JSON.stringify(r.body)}`);
      assert.match(String(r.body.error), message, path);
    }
    const post = async (path: string, body: string, method = "POST") => {
      const res = await fetch(`${s.api.base}${path}`, {
        method,
        headers: { authorization: `Bearer ${s.token}`, "content-type": "application/json" },
        body,
      });
      return { status: res.status, error: ((await res.json()) as { error: string }).error };
    };
    const r1 = await post(`/queues/${qp}/rate-limit`, '{"limit": "fast"}', "PUT");
    assert.equal(r1.status, 400);
    assert.match(r1.error, /invalid rate limit "fast"/);
    const r2 = await post(`/queues/${qp}/dead/retry`, '{"ids": "all"}');
    assert.equal(r2.status, 400);
    assert.match(r2.error, /"ids" must be an array/);
    const r3 = await post(`/queues/${qp}/cancel`, "{}");
    assert.equal(r3.status, 400);
    assert.match(r3.error, /"ids" is required/);
  });

  test("--read-only refuses every mutating route with 403; --queues hides the others", async () => {
    const ro = await s.startApi("api-ro", ["--read-only", "--queues", IDLE]);
    const call = (path: string, method = "GET", body?: unknown) =>
      fetch(`${ro.base}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${s.token}`,
          ...(body ? { "content-type": "application/json" } : {}),
        },
        body: body ? JSON.stringify(body) : undefined,
      });
    const session = (await (await call("/auth/session")).json()) as { readOnly: boolean };
    assert.equal(session.readOnly, true);
    for (const [path, method, body] of [
      [`/queues/${encodeURIComponent(IDLE)}/jobs`, "POST", { data: 1 }],
      [`/queues/${encodeURIComponent(IDLE)}/dead/retry`, "POST", {}],
      [`/queues/${encodeURIComponent(IDLE)}/dead`, "DELETE"],
      [`/queues/${encodeURIComponent(IDLE)}/pause`, "POST"],
      [`/jobs/idle-1/cancel`, "POST"],
      [`/queues/${encodeURIComponent(IDLE)}/delete`, "POST", { ids: ["idle-1"] }],
    ] as [string, string, unknown?][]) {
      const r = await call(path, method, body);
      assert.equal(r.status, 403, `${method} ${path}`);
      assert.match(((await r.json()) as { error: string }).error, /read-only/);
    }
    const list = (await (await call("/queues")).json()) as { queues: { queue: string }[] };
    assert.deepEqual(
      list.queues.map((q) => q.queue),
      [IDLE],
    );
    assert.equal((await call(`/queues/${encodeURIComponent(Q)}`)).status, 404);
    assert.equal((await call(`/jobs/order-1`)).status, 404);
    assert.deepEqual(((await (await call("/search?q=order-1")).json()) as { items: unknown[] }).items, []);
  });

  test("without a token it refuses to listen beyond loopback unless told", async () => {
    const p = startProcess(NODE, [CONVEYOR, "api", "--port", "0", "--host", "0.0.0.0"], {
      env: { ...process.env, REDIS_URL: s.redisServer.url, CONVEYOR_API_TOKEN: "" },
    });
    let out = "";
    p.child.stderr?.on("data", (d: Buffer) => (out += d.toString()));
    assert.equal(await p.exited, 2);
    assert.match(out, /refusing to serve queue actions without a token/);
  });

  test("run now: a delayed job moves to ready; a job not delayed is refused with 409, an unknown one 404", async () => {
    const run = async (id: string) => {
      const res = await fetch(`${s.api.base}/jobs/${id}/promote?queue=${encodeURIComponent(IDLE)}`, {
        method: "POST",
        headers: { authorization: `Bearer ${s.token}` },
      });
      return { status: res.status, body: (await res.json()) as Record<string, unknown> };
    };
    const idleCounts = async () => {
      const queues = (await get("/queues")).body.queues as {
        queue: string;
        ready: number;
        delayed: number;
      }[];
      const idle = queues.find((q) => q.queue === IDLE)!;
      return [idle.ready, idle.delayed];
    };
    const [ready, delayed] = await idleCounts();
    const detail = await get(`/jobs/idle-24/detail?queue=${encodeURIComponent(IDLE)}`);
    assert.equal((detail.body.actions as { promote: boolean }).promote, true, "the button is shown");
    const r = await run("idle-24");
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.deepEqual(r.body, { id: "idle-24", queue: IDLE, promoted: true });
    const again = await run("idle-24");
    assert.equal(again.status, 409);
    assert.match(again.body.error as string, /job idle-24 is ready, not delayed/);
    assert.equal((await run("no-such-job")).status, 404);
    assert.deepEqual(
      await idleCounts(),
      [ready! + 1, delayed! - 1],
      "other tests add jobs to the idle queue too",
    );
  });

  test("the dashboard is served at / with cache headers and compression", async () => {
    const index = await fetch(`${s.api.base}/`, { headers: { "accept-encoding": "br, gzip" } });
    // An API without its build (npm run build not run) answers a page saying so: nothing else to check
    // (test/api/dashboardNotBuilt.test.ts reads that page).
    if (index.status === 503) return;
    assert.equal(index.status, 200);
    assert.equal(index.headers.get("cache-control"), "no-cache");
    assert.match(index.headers.get("content-security-policy") ?? "", /default-src 'self'/);
    const html = await index.text();
    const asset = /src="(\/assets\/[^"]+\.js)"/.exec(html)![1]!;
    const js = await fetch(`${s.api.base}${asset}`, { headers: { "accept-encoding": "br" } });
    assert.equal(js.status, 200);
    assert.equal(js.headers.get("content-encoding"), "br");
    assert.match(js.headers.get("cache-control") ?? "", /immutable/);
  });

  test("bulk delete: waiting, delayed, dead and finished jobs leave Redis, their records stay marked deleted; a running job is refused; bad bodies are 4xx", async () => {
    const post = async (queue: string, body: unknown, headers: Record<string, string> = {}) => {
      const res = await fetch(`${s.api.base}/queues/${encodeURIComponent(queue)}/delete`, {
        method: "POST",
        headers: { authorization: `Bearer ${s.token}`, "content-type": "application/json", ...headers },
        body: typeof body === "string" ? body : JSON.stringify(body),
      });
      return { status: res.status, body: (await res.json()) as Record<string, unknown> };
    };
    const keys = { idle: new QueueKeys(IDLE), q: new QueueKeys(Q) };
    await producer.enqueue(IDLE, { n: "a" }, { id: "del-a", delayMs: 3_600_000 });
    await producer.enqueue(IDLE, { n: "b" }, { id: "del-b", idempotencyKey: "del-key-b" });
    await producer.enqueue(Q, { final: true }, { id: "del-dead", attempts: 1 });
    await producer.enqueue(Q, { sleepMs: 60_000 }, { id: "del-running" });
    const state = async (id: string) => (await get(`/jobs/${id}`)).body.state;
    await waitFor("del-dead is dead", async () => (await state("del-dead")) === "dead");
    await waitFor("del-running runs", async () => (await state("del-running")) === "active");
    const recorded = (where: string, params: unknown[]) => s.recorded(where, params);
    await recorded("id = $1 AND state = 'dead'", ["del-dead"]);
    await recorded("id = $1", ["del-b"]);
    const [before] = await s.pg.query<{ finished_at: Date }>(
      "SELECT finished_at FROM conveyor_jobs WHERE id = 'order-1'",
      [],
    );
    const deadBefore = (await get(`/queues/${encodeURIComponent(Q)}`)).body.dead as number;

    const idle = await post(IDLE, { ids: ["del-a", "del-b", "no-such-job", "order-2", "del-a"] });
    assert.equal(idle.status, 200, JSON.stringify(idle.body));
    assert.deepEqual(idle.body, {
      queue: IDLE,
      deleted: 2,
      refused: [],
      notFound: ["no-such-job", "order-2"], // order-2 is a job of another queue
    });
    const q = await post(Q, { ids: ["del-dead", "order-1", "del-running"] });
    assert.equal(q.status, 200, JSON.stringify(q.body));
    assert.deepEqual(q.body, {
      queue: Q,
      deleted: 2,
      refused: [{ id: "del-running", state: "active", reason: "running: cancel it first" }],
      notFound: [],
    });

    // Gone from Redis: record, place in line, idempotency key; counted; an event each.
    for (const id of ["del-a", "del-b", "del-dead", "order-1"])
      assert.equal(await s.redis.exists(keys.q.job(id)), 0, id);
    assert.equal(await s.redis.zscore(keys.idle.delayed, "del-a"), null);
    assert.equal(await s.redis.zscore(keys.idle.ready, "del-b"), null);
    assert.equal(await s.redis.zscore(keys.q.dead, "del-dead"), null);
    assert.equal(await s.redis.exists(keys.idle.idempotencyPrefix + "del-key-b"), 0, "the key is free again");
    assert.equal((await get(`/queues/${encodeURIComponent(Q)}`)).body.dead, deadBefore - 1);
    assert.equal(await s.redis.hget(keys.idle.counts, "deleted"), "2");
    const events = await s.redis.xrevrange(keys.idle.events, "+", "-", "COUNT", 50);
    const deletedA = events.find(([, f]) => f.includes("deleted") && f.includes("del-a"))![1];
    assert.equal(deletedA[deletedA.indexOf("was") + 1], "delayed");
    assert.equal(await state("del-running"), "active", "the running job is untouched");
    assert.equal((await get(`/jobs/del-a`)).status, 404);
    // The key can be used again: a new job, not the deleted one.
    const again = await producer.enqueue(IDLE, { n: "b2" }, { id: "del-b2", idempotencyKey: "del-key-b" });
    assert.deepEqual([again.id, again.created], ["del-b2", true]);

    // The records keep each job, marked deleted (finished time and dead reason kept).
    await recorded("id = $1 AND state = 'deleted'", ["order-1"]);
    await recorded("id = $1 AND state = 'deleted'", ["del-dead"]);
    await recorded("id = $1 AND state = 'deleted'", ["del-a"]);
    const rows = await s.pg.query<{ id: string; finished_at: Date | null; dead_reason: string | null }>(
      "SELECT id, finished_at, dead_reason FROM conveyor_jobs WHERE id IN ('order-1', 'del-dead') ORDER BY id",
      [],
    );
    assert.equal(rows[1]!.id, "order-1");
    assert.equal(rows[1]!.finished_at?.getTime(), before!.finished_at.getTime(), "finished time kept");
    assert.match(rows[0]!.dead_reason ?? "", /bad input/);
    const detail = await get(`/jobs/order-1/detail?queue=${encodeURIComponent(Q)}`);
    assert.equal(detail.status, 200);
    assert.deepEqual([detail.body.state, detail.body.sources], ["deleted", { redis: false, records: true }]);
    // `all` lists what the queue holds or held, not what was deleted; `deleted` lists those.
    const list = async (st: string) =>
      (
        (await get(`/queues/${encodeURIComponent(Q)}/jobs?state=${st}&limit=200`)).body.items as {
          id: string;
        }[]
      ).map((j) => j.id);
    assert.ok(!(await list("all")).includes("order-1"));
    assert.deepEqual((await list("deleted")).sort(), ["del-dead", "order-1"]);

    // Cancel first, then delete: the way to remove a running job.
    const cancel = await fetch(`${s.api.base}/jobs/del-running/cancel?queue=${encodeURIComponent(Q)}`, {
      method: "POST",
      headers: { authorization: `Bearer ${s.token}` },
    });
    assert.equal(cancel.status, 200);
    assert.equal((await post(Q, { ids: ["del-running"] })).body.deleted, 1);

    // Bad bodies: 4xx naming the field, never a 500; nothing deleted.
    const bad: [unknown, number, RegExp][] = [
      [{}, 400, /"ids" is required/],
      [{ ids: [] }, 400, /"ids"/],
      [{ ids: "order-3" }, 400, /"ids" must be an array/],
      [{ ids: ["bad id!"] }, 400, /"ids.0"/],
      [{ ids: ["order-3"], all: true }, 400, /unknown field "all"/],
      [{ ids: Array.from({ length: 1001 }, (_, i) => `x${i}`) }, 413, /at most 1000/],
      ["not json", 400, /JSON/],
    ];
    for (const [body, status, message] of bad) {
      const r = await post(Q, body);
      assert.equal(r.status, status, JSON.stringify(r.body));
      assert.match(String(r.body.error), message);
    }
    assert.equal(await state("order-3"), "completed");

    // A browser session must send this Origin (CSRF), as for every change.
    const signIn = await fetch(`${s.api.base}/auth/session`, {
      method: "POST",
      headers: { "content-type": "application/json", origin: s.api.base },
      body: JSON.stringify({ token: s.token }),
    });
    const cookie = signIn.headers.get("set-cookie")!.split(";")[0]!;
    const asBrowser = (headers: Record<string, string>) =>
      fetch(`${s.api.base}/queues/${encodeURIComponent(Q)}/delete`, {
        method: "POST",
        headers: { cookie, "content-type": "application/json", ...headers },
        body: JSON.stringify({ ids: ["order-3"] }),
      });
    assert.equal((await asBrowser({})).status, 403);
    assert.equal((await asBrowser({ origin: "https://evil.example" })).status, 403);
    assert.equal(await state("order-3"), "completed");
    assert.equal((await asBrowser({ origin: s.api.base })).status, 200);
    assert.equal((await get(`/jobs/order-3`)).status, 404);
  });
});

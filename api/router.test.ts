// The router and its schema validation without a server: every bad request is a 4xx naming
// the field, the right route wins, and a malformed %-escape is a 400.
import assert from "node:assert/strict";
import type { IncomingMessage, ServerResponse } from "node:http";
import { Readable } from "node:stream";
import { test } from "node:test";
import { ROUTES } from "./definitions.ts";
import { HttpError } from "./http.ts";
import { Router, type Handlers } from "./router.ts";

const handlers: Handlers = Object.fromEntries(
  ROUTES.map((r) => [
    r.name,
    async ({ params, query, body }) => ({ body: { route: r.name, params, query, body } }),
  ]),
);
const router = new Router(handlers);

async function call(method: string, path: string, body?: string) {
  const url = new URL(path, "http://api");
  const req = Readable.from(body === undefined ? [] : [Buffer.from(body)]) as unknown as IncomingMessage;
  req.headers = body === undefined ? {} : { "content-type": "application/json" };
  try {
    const m = router.match(method, url.pathname);
    const reply = await router.handle(req, {} as ServerResponse, url, m, 1024);
    return { status: 200, body: reply!.body as Record<string, unknown> };
  } catch (err) {
    if (err instanceof HttpError) return { status: err.status, error: err.message };
    return { status: 400, error: (err as Error).message };
  }
}

test("routes match by path and method; defaults and coercion apply to the query", async () => {
  const r = await call("GET", "/queues/docs%2Focr/jobs?limit=20");
  assert.equal(r.body!.route, "listJobs");
  assert.deepEqual(r.body!.params, { queue: "docs/ocr" });
  assert.deepEqual(r.body!.query, { limit: 20, state: "all" });
  assert.equal((await call("POST", "/queues/q/jobs", '{"data": 1}')).body!.route, "enqueue");
  assert.equal((await call("GET", "/auth/session")).body!.route, "session");
  assert.equal((await call("DELETE", "/auth/session")).body!.route, "signOut");
});

test("unknown paths are 404, wrong methods 405 naming the allowed ones", async () => {
  assert.deepEqual(await call("GET", "/nowhere"), { status: 404, error: "no route GET /nowhere" });
  const r = await call("PUT", "/queues/q/jobs");
  assert.equal(r.status, 405);
  assert.match(r.error!, /use POST or GET|use GET or POST/);
});

test("bad input is a 400 naming the field", async () => {
  const cases: [string, string, string | undefined, RegExp][] = [
    ["GET", "/queues/q/jobs?limit=0", undefined, /query field "limit" must be >= 1/],
    ["GET", "/queues/q/jobs?limit=x", undefined, /query field "limit" must be an integer/],
    ["GET", "/queues/q/jobs?state=nope", undefined, /query field "state" must be one of all, ready/],
    ["GET", "/queues/q/jobs?x=1", undefined, /unknown query parameter "x" in query/],
    ["GET", "/queues/q/jobs?limit=1&limit=2", undefined, /"limit" is given twice/],
    ["GET", "/search", undefined, /query field "q" is required/],
    ["GET", "/jobs/%E0%A4%A", undefined, /malformed %-escape in the path: "%E0%A4%A"/],
    ["GET", "/queues/bad%20name/jobs", undefined, /invalid queue name/],
    ["GET", "/jobs/a%20b", undefined, /invalid job id/],
    ["GET", "/pools/Not_A_Namespace/x", undefined, /path field "namespace"/],
    ["POST", "/queues/q/jobs", "[1]", /body must be an object/],
    ["POST", "/queues/q/jobs", "{nope", /not valid JSON/],
    // (the job envelope's own fields are checked by parseEnvelope in the handler: test/api/api.test.ts)
    ["PUT", "/queues/q/schedules/nightly", '{"every":5}', /body field "every" must be a string/],
    ["PUT", "/queues/q/rate-limit", '{"limit":20}', /body field "limit" must be a string/],
    [
      "POST",
      "/queues/q/dead/retry",
      `{"ids":["${"x".repeat(300)}"]}`,
      /body field "ids.0" must NOT have more than 200 characters/,
    ],
  ];
  for (const [method, path, body, message] of cases) {
    const r = await call(method, path, body);
    assert.equal(r.status, 400, `${method} ${path}: ${JSON.stringify(r)}`);
    assert.match(r.error!, message, `${method} ${path}`);
  }
  const big = await call("POST", "/queues/q/jobs", JSON.stringify({ data: "x".repeat(2000) }));
  assert.equal(big.status, 413);
});

test("every route has a handler, a unique (method, path) and a tag", () => {
  const seen = new Set<string>();
  for (const r of ROUTES) {
    const key = `${r.method} ${r.path}`;
    assert.ok(!seen.has(key), key);
    seen.add(key);
  }
  assert.throws(() => new Router({}), /has no handler/);
});

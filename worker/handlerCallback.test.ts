// The handler callback's HTTP surface without Redis: tokens per execution, void after close or
// abort, bad bodies answered 4xx naming the field, refused writes 409, failures 503 — never 500.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { HandlerCallbacks, type ExecutionReporter } from "./handlerCallback.ts";

describe("handler callback", () => {
  let callbacks: HandlerCallbacks;
  before(async () => {
    callbacks = await HandlerCallbacks.start();
  });
  after(() => callbacks.close());

  const calls: string[] = [];
  function reporter(controller = new AbortController(), ok = true): ExecutionReporter {
    return {
      signal: controller.signal,
      progress: async (fraction, message) => {
        calls.push(`progress ${fraction} ${message}`);
        return ok;
      },
      log: async (message) => {
        if (message === "explode") throw new Error("Redis is down");
        calls.push(`log ${message}`);
        return ok;
      },
    };
  }
  const call = (token: string, path: string, body?: unknown, raw?: string) =>
    fetch(`${callbacks.url}${path}`, {
      method: body === undefined && raw === undefined ? "GET" : "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: raw ?? (body === undefined ? undefined : JSON.stringify(body)),
    });

  test("progress, log and status while the execution runs; 410 after it ends", async () => {
    const controller = new AbortController();
    const exec = callbacks.open(reporter(controller));
    assert.match(exec.url, /^http:\/\/127\.0\.0\.1:\d+$/);
    assert.equal((await call(exec.token, "/progress", { fraction: 0.5, message: "half" })).status, 204);
    assert.equal((await call(exec.token, "/progress", { fraction: 1 })).status, 204);
    assert.equal((await call(exec.token, "/log", { message: "hello" })).status, 204);
    assert.deepEqual(await (await call(exec.token, "/status")).json(), { cancelled: false });
    assert.deepEqual(calls.splice(0), ["progress 0.5 half", "progress 1 ", "log hello"]);
    controller.abort(new Error("timeout"));
    assert.equal((await call(exec.token, "/status")).status, 410, "void once aborted");
    assert.equal((await call(exec.token, "/log", { message: "late" })).status, 410);
    const other = callbacks.open(reporter());
    other.close();
    assert.equal((await call(other.token, "/progress", { fraction: 0.1 })).status, 410, "void once closed");
    assert.equal((await call("made-up", "/status")).status, 410);
    assert.equal((await fetch(`${callbacks.url}/status`)).status, 410, "no token at all");
    assert.deepEqual(calls, []);
  });

  test("GET /parents/<key>: the parent's result; 404 naming a key without one; 400 a bad encoding", async () => {
    const exec = callbacks.open({
      ...reporter(),
      parentResult: async (key) => {
        if (key === "a b/c") return { big: true };
        if (key === "boom") throw new Error("Redis is down");
        throw Object.assign(new Error(`no parent ${JSON.stringify(key)}`), { name: "ParentResultError" });
      },
    });
    const res = await call(exec.token, `/parents/${encodeURIComponent("a b/c")}`);
    assert.equal(res.status, 200);
    assert.deepEqual(await res.json(), { result: { big: true } });
    const missing = await call(exec.token, "/parents/zz");
    assert.equal(missing.status, 404);
    assert.deepEqual(await missing.json(), { error: 'no parent "zz"' });
    assert.equal((await call(exec.token, "/parents/%E0%A4%A")).status, 400);
    assert.equal((await call(exec.token, "/parents/boom")).status, 503);
    const none = callbacks.open(reporter());
    assert.equal((await call(none.token, "/parents/a")).status, 404, "an execution without parents");
  });

  test("bad requests are 4xx naming the field; refused writes 409; failures 503", async () => {
    const exec = callbacks.open(reporter());
    const cases: [string, unknown, string | undefined, number, RegExp][] = [
      ["/progress", { fraction: 2 }, undefined, 400, /fraction/],
      ["/progress", { fraction: "0.5" }, undefined, 400, /fraction/],
      ["/progress", {}, undefined, 400, /fraction/],
      ["/progress", { fraction: 0.5, message: 7 }, undefined, 400, /message/],
      ["/log", { message: "" }, undefined, 400, /message/],
      ["/log", { text: "x" }, undefined, 400, /message/],
      ["/log", undefined, "not json", 400, /JSON object/],
      ["/log", undefined, "[1]", 400, /JSON object/],
      ["/log", undefined, JSON.stringify({ message: "x".repeat(70_000) }), 400, /larger than/],
      ["/log", { message: "explode" }, undefined, 503, /Redis is down/],
      ["/nope", { message: "x" }, undefined, 404, /POST \/progress/],
    ];
    for (const [path, body, raw, status, error] of cases) {
      const res = await call(exec.token, path, body, raw);
      assert.equal(res.status, status, `${path} ${raw ?? JSON.stringify(body)}`.slice(0, 80));
      assert.match(((await res.json()) as { error: string }).error, error);
    }
    exec.close();
    const lost = callbacks.open(reporter(new AbortController(), false));
    assert.equal((await call(lost.token, "/log", { message: "x" })).status, 409);
    assert.equal((await call(lost.token, "/progress", { fraction: 0 })).status, 409);
    lost.close();
  });
});

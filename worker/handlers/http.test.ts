// Unit tier: the http handler against a local sidecar (no Redis). A sidecar's response is read
// as a stream and capped in bytes: past the cap the request is aborted and the job fails.
import assert from "node:assert/strict";
import { once } from "node:events";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { after, describe, test } from "node:test";
import pino from "pino";
import { httpHandler, MAX_RESPONSE_BYTES } from "./http.ts";
import { serializeError } from "../errors.ts";
import {
  foreignError,
  isDependencyFailure,
  MAX_FOREIGN_MESSAGE_CHARS,
  MAX_FOREIGN_STACK_CHARS,
  parseRetryAfter,
  rateLimitOf,
  resourceEnvName,
  type HandlerContext,
  type JobView,
} from "./types.ts";

const job: JobView = {
  id: "j1",
  queue: "q",
  data: { x: 1 },
  attempt: 1,
  maxAttempts: 3,
  executionId: "1",
  createdAt: 0,
  previousErrors: [],
};
const ctx = (resources: HandlerContext["resources"] = {}): HandlerContext => ({
  signal: new AbortController().signal,
  previousErrors: [],
  log: pino({ level: "silent" }) as HandlerContext["log"], // (the http handler never logs)
  progress: () => {},
  resources,
  usage: () => {},
  parentResult: () => Promise.reject(new Error("no parents")),
});

const servers: Server[] = [];
after(() => servers.forEach((s) => s.closeAllConnections()));
after(() => servers.forEach((s) => s.close()));

async function sidecar(handle: Parameters<typeof createServer>[1]): Promise<string> {
  const server = createServer(handle);
  servers.push(server);
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/run`;
}

describe("http handler responses", () => {
  test("a job's granted resource keys go in headers; a 429 benches the key (Retry-After) only for a job holding one", async () => {
    let seen = "";
    const url = await sidecar((req, res) => {
      seen = String(req.headers["conveyor-resource-openai"] ?? "");
      res.writeHead(429, { "retry-after": "7" }).end("slow down");
    });
    await assert.rejects(httpHandler(url).run(job, ctx({ openai: { key: "k2" } })), (err: Error) => {
      assert.equal(err.name, "RateLimitedError");
      assert.deepEqual(rateLimitOf(err), { retryAfterMs: 7000 });
      return true;
    });
    assert.equal(seen, "k2");
    await assert.rejects(httpHandler(url).run(job, ctx()), (err: Error & { retryable?: boolean }) => {
      assert.equal(err.name, "HandlerError");
      assert.equal(err.retryable, true);
      assert.equal(rateLimitOf(err), null);
      return true;
    });
    assert.equal(parseRetryAfter("1.5"), 1500);
    assert.equal(parseRetryAfter(new Date(10_000).toUTCString(), 4_000), 6_000);
    assert.equal(parseRetryAfter("soon"), undefined);
    assert.equal(resourceEnvName("open-ai.v1"), "CONVEYOR_RESOURCE_OPEN_AI_V1_KEY");
  });

  test(
    "an endless response fails the job once the byte cap is passed, and the request is aborted",
    { timeout: 60_000 },
    async () => {
      let sent = 0;
      let closed!: () => void;
      const connectionClosed = new Promise<void>((resolve) => (closed = resolve));
      const url = await sidecar((req, res) => {
        res.writeHead(200, { "content-type": "application/json" });
        const chunk = Buffer.alloc(256 * 1024, "a");
        const pump = () => {
          while (!res.destroyed && res.write(chunk)) sent += chunk.length;
        };
        res.on("drain", pump);
        res.on("close", closed);
        pump();
      });
      await assert.rejects(httpHandler(url).run(job, ctx()), (err: Error & { retryable?: boolean }) => {
        assert.match(err.message, new RegExp(`larger than ${MAX_RESPONSE_BYTES} bytes`));
        assert.equal(err.retryable, false);
        return true;
      });
      await connectionClosed;
      // Bounded: the cap plus what sat in socket buffers when the reader stopped.
      assert.ok(sent < MAX_RESPONSE_BYTES + 32 * 1024 * 1024, `sidecar sent ${sent} bytes`);
    },
  );

  test("the cap counts bytes, not UTF-16 units: multi-byte text over the cap in bytes is refused", async () => {
    // 9 Mi two-byte characters: 18 MiB of UTF-8, but only 9 Mi string units.
    const body = Buffer.from(JSON.stringify("é".repeat(9 * 1024 * 1024)));
    assert.ok(body.length > MAX_RESPONSE_BYTES);
    const url = await sidecar((_req, res) => res.end(body));
    await assert.rejects(httpHandler(url).run(job, ctx()), /larger than \d+ bytes/);
  });

  test("a declared Content-Length over the cap is refused before reading the body", async () => {
    const url = await sidecar((_req, res) => {
      res.writeHead(200, { "content-length": String(MAX_RESPONSE_BYTES + 1) });
      res.write("{");
    });
    await assert.rejects(httpHandler(url).run(job, ctx()), /larger than \d+ bytes/);
  });

  test("a response at the cap in bytes, multi-byte text included, is accepted; 4xx bodies are quoted", async () => {
    const text = JSON.stringify({ s: "é".repeat(1000) });
    const ok = await sidecar((_req, res) => res.end(text));
    assert.deepEqual(await httpHandler(ok).run(job, ctx()), JSON.parse(text));
    const bad = await sidecar((_req, res) => {
      res.statusCode = 422;
      res.end("no such field");
    });
    await assert.rejects(httpHandler(bad).run(job, ctx()), /answered 422: no such field/);
  });

  test("a redirect is not followed: the job fails naming the location, and the target gets nothing", async () => {
    let reached = 0;
    const elsewhere = await sidecar((req, res) => {
      reached++;
      res.end("{}");
    });
    for (const status of [301, 302, 303, 307, 308]) {
      const url = await sidecar((req, res) => {
        res.writeHead(status, { location: elsewhere });
        res.end();
      });
      const withCallback = { ...ctx(), callback: { url: "http://127.0.0.1:1/cb", token: "secret" } };
      await assert.rejects(
        httpHandler(url).run(job, withCallback),
        (err: Error & { retryable?: boolean }) => {
          assert.match(err.message, new RegExp(`answered ${status}, a redirect to "${elsewhere}"`));
          assert.equal(err.retryable, false);
          return true;
        },
      );
    }
    assert.equal(reached, 0, "the redirect target received the request (callback token, job data)");
  });
});

describe("a sidecar's error envelope", () => {
  test("{name, message, stack} is the job's error: the handler's type, message and traceback", async () => {
    const traceback =
      'Traceback (most recent call last):\n  File "/app/handler.py", line 3, in handle\nRuntimeError: LLM timeout\n';
    const envelope = (status: number, body: unknown, headers: Record<string, string> = {}) =>
      sidecar((_req, res) =>
        res.writeHead(status, { "content-type": "application/json", ...headers }).end(JSON.stringify(body)),
      );
    const failed = await envelope(500, { name: "RuntimeError", message: "LLM timeout", stack: traceback });
    await assert.rejects(httpHandler(failed).run(job, ctx()), (err: Error & { retryable?: boolean }) => {
      assert.deepEqual(serializeError(err), {
        name: "RuntimeError",
        message: "LLM timeout",
        stack: traceback,
      });
      assert.equal(err.retryable, true);
      return true;
    });
    const bad = await envelope(422, { name: "NonRetryableError", message: "no recipient", stack: traceback });
    await assert.rejects(httpHandler(bad).run(job, ctx()), (err: Error & { retryable?: boolean }) => {
      assert.equal(err.name, "NonRetryableError");
      assert.equal(err.retryable, false);
      return true;
    });
    const down = await envelope(
      503,
      { name: "DependencyFailure", message: "db down" },
      { "conveyor-failure": "dependency" },
    );
    await assert.rejects(httpHandler(down).run(job, ctx()), (err: Error) => {
      assert.ok(isDependencyFailure(err));
      // no stack sent: none of the worker's either
      assert.equal(
        err.stack,
        "DependencyFailure: db down\n    (raised in the handler sidecar, which sent no stack)",
      );
      return true;
    });
    // not an envelope: the status and the body, as for any sidecar
    const other = await envelope(500, { error: "boom" });
    await assert.rejects(
      httpHandler(other).run(job, ctx()),
      /^HandlerError: handler sidecar answered 500: \{"error":"boom"\}/,
    );
  });

  test("foreignError bounds what it keeps and refuses what is not an envelope", () => {
    const long = foreignError(
      { name: "E", message: "m".repeat(10_000), stack: "x".repeat(100_000) + "END" },
      "k",
    )!;
    assert.equal(long.stack!.length, MAX_FOREIGN_STACK_CHARS + 1);
    assert.ok(
      long.stack!.endsWith("END"),
      "the end of a traceback is its innermost frame and exception line",
    );
    assert.equal(long.message.length, MAX_FOREIGN_MESSAGE_CHARS + 1);
    assert.equal(foreignError('{"name":"KeyError","message":"x"}', "k")!.name, "KeyError");
    for (const body of [
      "",
      "not json",
      "[]",
      "null",
      { name: "", message: "m" },
      { name: "E" },
      { name: 1, message: "m" },
    ])
      assert.equal(foreignError(body, "k"), null, JSON.stringify(body));
  });
});

describe("http handler batch calls", () => {
  const jobs: JobView[] = [
    { ...job, id: "b1", data: { n: 1 }, task: "embed" },
    { ...job, id: "b2", data: { n: 2 }, attempt: 2 },
    { ...job, id: "b3", data: { n: 3 } },
  ];
  const batchCtx = () => ({
    signal: new AbortController().signal,
    log: pino({ level: "silent" }),
    contexts: jobs.map(() => ctx()),
  });

  test('POST {"jobs": [...]}; {"outcomes": [...]} gives a result or an Error per job, in order', async () => {
    let seen: unknown;
    const url = await sidecar((req, res) => {
      let body = "";
      req.on("data", (c: Buffer) => (body += c.toString()));
      req.on("end", () => {
        seen = JSON.parse(body);
        res.writeHead(200, { "content-type": "application/json" }).end(
          JSON.stringify({
            outcomes: [
              { result: { v: 1 } },
              { error: { name: "ValueError", message: "bad n" }, retryable: false },
              { error: { name: "Timeout", message: "slow" } },
            ],
          }),
        );
      });
    });
    const out = await httpHandler(url).batch!(jobs, batchCtx());
    const sent = (seen as { jobs: { id: string; data: unknown; attempt: number; task?: string }[] }).jobs;
    assert.deepEqual(
      sent.map((j) => [j.id, j.data, j.attempt, j.task]),
      [
        ["b1", { n: 1 }, 1, "embed"],
        ["b2", { n: 2 }, 2, undefined],
        ["b3", { n: 3 }, 1, undefined],
      ],
    );
    assert.deepEqual(out[0], { v: 1 });
    assert.ok(out[1] instanceof Error);
    assert.deepEqual([(out[1] as Error).name, (out[1] as Error).message], ["ValueError", "bad n"]);
    assert.equal((out[1] as unknown as { retryable: boolean }).retryable, false);
    assert.equal((out[2] as unknown as { retryable: boolean }).retryable, true);
  });

  test("a wrong count, a body without outcomes or not JSON fails the call with what is wrong", async () => {
    for (const [body, message] of [
      [JSON.stringify({ outcomes: [{ result: 1 }] }), /answered 1 outcome\(s\) for 3 job\(s\)/],
      [JSON.stringify({ results: [] }), /without an "outcomes" array/],
      ["oops", /not JSON: "oops"/],
    ] as const) {
      const url = await sidecar((_req, res) => res.writeHead(200).end(body));
      await assert.rejects(httpHandler(url).batch!(jobs, batchCtx()), message);
    }
    const url = await sidecar((_req, res) =>
      res.writeHead(200).end(JSON.stringify({ outcomes: [{ result: 1 }, { nothing: true }, 7] })),
    );
    const out = await httpHandler(url).batch!(jobs, batchCtx());
    assert.equal(out[0], 1);
    assert.match((out[1] as Error).message, /outcome 1 has neither "result" nor "error"/);
    assert.match((out[2] as Error).message, /outcome 2 is not an object/);
  });
});

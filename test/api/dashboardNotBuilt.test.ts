// `conveyor api` where the dashboard was never built (a clone without `npm run build`): a
// warning at start says how to build it, and `/` answers an HTML page saying the same — not
// the API's JSON 404 — while the API itself keeps answering.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { pino } from "pino";
import { startJobApi, type JobApi } from "../../api/server.ts";
import { connectRedis, type RedisClient } from "../../queue/index.ts";
import { RedisServer } from "../support/redis.ts";

describe("job API without a built dashboard", () => {
  let server: RedisServer;
  let redis: RedisClient;
  let api: JobApi;
  let base: string;
  let dir: string;
  const lines: { level: number; msg: string }[] = [];

  before(async () => {
    server = await RedisServer.start();
    redis = connectRedis(server.url);
    dir = mkdtempSync(join(tmpdir(), "cvy-nodash-")); // where a build would be: empty
    const log = pino({ level: "info" }, { write: (s: string) => void lines.push(JSON.parse(s)) });
    api = await startJobApi({
      redis,
      port: 0,
      host: "127.0.0.1",
      dashboardDir: dir,
      resourceSampleMs: 0,
      log,
    });
    base = `http://127.0.0.1:${(api.address() as AddressInfo).port}`;
  });
  after(async () => {
    await new Promise((resolve) => api?.close(resolve));
    api?.closeAllConnections();
    redis?.disconnect();
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  test("a warning at start names the missing build and how to make it", () => {
    const warning = lines.find((l) => l.level === 40 && /dashboard is not built/.test(l.msg));
    assert.ok(warning, `no warning among ${JSON.stringify(lines)}`);
    assert.match(warning.msg, /npm run build/);
  });

  test("GET / answers an HTML page saying the dashboard is not built and how to build it", async () => {
    for (const path of ["/", "/index.html"]) {
      const res = await fetch(`${base}${path}`);
      assert.equal(res.status, 503, path);
      assert.match(res.headers.get("content-type") ?? "", /^text\/html/);
      const html = await res.text();
      assert.match(html, /The dashboard is not built/);
      assert.match(html, /npm run build/);
    }
    // The API itself answers as usual.
    assert.equal((await fetch(`${base}/healthz`)).status, 200);
    const missing = await fetch(`${base}/assets/index.js`);
    assert.equal(missing.status, 404);
  });

  test("with the dashboard turned off, / is the API's own 404 and nothing is logged about a build", async () => {
    const logged: string[] = [];
    const off = await startJobApi({
      redis,
      port: 0,
      host: "127.0.0.1",
      dashboardDir: null,
      resourceSampleMs: 0,
      log: pino({ level: "info" }, { write: (s: string) => void logged.push(s) }),
    });
    try {
      const res = await fetch(`http://127.0.0.1:${(off.address() as AddressInfo).port}/`);
      assert.equal(res.status, 404);
      assert.match(res.headers.get("content-type") ?? "", /json/);
      await res.text();
      assert.ok(!logged.some((l) => /not built/.test(l)), logged.join(""));
    } finally {
      await new Promise((resolve) => off.close(resolve));
      off.closeAllConnections();
    }
  });
});

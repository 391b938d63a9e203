// Settings through the real `conveyor` process: one boolean parser for every flag and variable
// (issue 27: CONVEYOR_API_READ_ONLY=on once left the API writable), `conveyor api` configured
// from the environment alone, and former variable names read with a warning.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { freePort } from "../support/ports.ts";
import { startApi } from "../support/dashboard.ts";
import { startProcess, stopProcess, waitFor } from "../support/processes.ts";
import { RedisServer } from "../support/redis.ts";
import { CONVEYOR, NODE } from "../support/workers.ts";

const TOKEN = "settings-test-token-0123456789";

describe("conveyor settings", () => {
  let server: RedisServer;
  let dir: string;
  before(async () => {
    server = await RedisServer.start();
    dir = mkdtempSync(join(tmpdir(), "cvy-settings-"));
  });
  after(async () => {
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  });
  const run = (env: Record<string, string>, ...args: string[]) =>
    spawnSync(NODE, [CONVEYOR, ...args], {
      env: { ...process.env, REDIS_URL: server.url, KUBECONFIG: "", ...env },
      encoding: "utf8",
      timeout: 30_000,
    });

  test("CONVEYOR_API_READ_ONLY=on makes the API read-only: a write is refused with 403", async () => {
    const api = await startApi(dir, "api-on", {
      REDIS_URL: server.url,
      CONVEYOR_API_TOKEN: TOKEN,
      CONVEYOR_API_READ_ONLY: "on",
    });
    try {
      const r = await fetch(`${api.base}/queues/q/jobs`, {
        method: "POST",
        headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
        body: JSON.stringify({ data: 1 }),
      });
      assert.equal(r.status, 403);
      assert.match(((await r.json()) as { error: string }).error, /read-only/);
    } finally {
      await stopProcess(api);
    }
  });

  test("a boolean value the parser does not know exits 2 naming the variable or flag", () => {
    const bad = run({ CONVEYOR_API_TOKEN: TOKEN, CONVEYOR_API_READ_ONLY: "maybe" }, "api", "--port", "0");
    assert.equal(bad.status, 2, bad.stderr);
    assert.match(bad.stderr, /--read-only \/ CONVEYOR_API_READ_ONLY: expected true or false.*"maybe"/);
    const flag = run({ CONVEYOR_API_TOKEN: TOKEN }, "api", "--port", "0", "--insecure-no-auth=sometimes");
    assert.equal(flag.status, 2, flag.stderr);
    assert.match(flag.stderr, /--insecure-no-auth \/ CONVEYOR_API_INSECURE_NO_AUTH: expected true or false/);
    const json = run({}, "stats", "q", "--json=perhaps");
    assert.equal(json.status, 2, json.stderr);
    assert.match(json.stderr, /--json: expected true or false/);
    const worker = run(
      {
        CONVEYOR_QUEUE: "q",
        CONVEYOR_HANDLER: "http://127.0.0.1:1/run",
        CONVEYOR_HANDLER_CREDENTIALS: "yep",
      },
      "worker",
    );
    assert.equal(worker.status, 2, worker.stderr);
    assert.match(worker.stderr, /CONVEYOR_HANDLER_CREDENTIALS: expected true or false/);
  });

  test("conveyor api takes every flag from the environment (CONVEYOR_API_HOST, _PORT, _DASHBOARD…)", async () => {
    const port = await freePort();
    const p = spawnSync(NODE, [CONVEYOR, "api", "--help"], { encoding: "utf8" });
    for (const v of ["CONVEYOR_API_HOST", "CONVEYOR_API_PORT", "CONVEYOR_API_MAX_BODY", "CONVEYOR_API_TOKEN"])
      assert.match(p.stdout, new RegExp(v), `api --help lists ${v}`);
    const api = startProcess(NODE, [CONVEYOR, "api"], {
      logFile: join(dir, "api-env.log"),
      env: {
        ...process.env,
        KUBECONFIG: "",
        REDIS_URL: server.url,
        CONVEYOR_API_TOKEN: TOKEN,
        CONVEYOR_API_HOST: "127.0.0.1",
        CONVEYOR_API_PORT: String(port),
        CONVEYOR_API_MAX_BODY: "64",
        CONVEYOR_API_DASHBOARD: "off",
      },
    });
    try {
      await waitFor("api up from the environment", async () => {
        if (api.child.exitCode !== null) throw new Error(`api exited with ${api.child.exitCode}`);
        return (await fetch(`http://127.0.0.1:${port}/healthz`).catch(() => null))?.ok;
      });
      const big = await fetch(`http://127.0.0.1:${port}/queues/q/jobs`, {
        method: "POST",
        headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
        body: JSON.stringify({ data: "x".repeat(200) }),
      });
      assert.equal(big.status, 413, "CONVEYOR_API_MAX_BODY=64 applies");
    } finally {
      await stopProcess(api);
    }
  });

  test("a former variable name still works, with a warning naming both", () => {
    const r = run({ CONVEYOR_RELIST_SECONDS: "soon" }, "operator", "--kubeconfig", "/nonexistent");
    assert.equal(r.status, 2, r.stderr);
    assert.match(r.stderr, /CONVEYOR_RELIST_SECONDS is deprecated: use CONVEYOR_RELIST/);
    assert.match(r.stderr, /invalid --relist \/ CONVEYOR_RELIST_SECONDS "soon"/);
  });
});

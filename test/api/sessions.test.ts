// Dashboard sign-in against real `conveyor api` processes on one Redis: a session cookie from one
// replica works on another and after a restart, a changed token ends it; failed sign-ins are
// throttled per client; short tokens are refused at start; the allow-list is not shown to callers
// who are not signed in.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { startApi, type ApiProcess } from "../support/dashboard.ts";
import { startProcess, stopProcess } from "../support/processes.ts";
import { RedisServer } from "../support/redis.ts";
import { CONVEYOR, NODE } from "../support/workers.ts";

const TOKEN = "sessions-test-token-0123";

describe("dashboard sessions and sign-in", () => {
  let redis: RedisServer;
  let dir: string;
  const started: ApiProcess[] = [];
  const api = async (name: string, env: Record<string, string> = {}, args: string[] = []) => {
    const p = await startApi(dir, name, { REDIS_URL: redis.url, CONVEYOR_API_TOKEN: TOKEN, ...env }, args);
    started.push(p);
    return p;
  };
  const signIn = (base: string, token: string) =>
    fetch(`${base}/auth/session`, {
      method: "POST",
      headers: { "content-type": "application/json", origin: base },
      body: JSON.stringify({ token }),
    });
  const withCookie = async (base: string, cookie: string) =>
    (await fetch(`${base}/queues`, { headers: { cookie } })).status;

  before(async () => {
    redis = await RedisServer.start();
    dir = mkdtempSync(join(tmpdir(), "cvy-sessions-"));
  });
  after(async () => {
    for (const p of started) await stopProcess(p, 2000);
    await redis.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  test("a session from one replica works on another and after a restart; a new token ends it", async () => {
    const a = await api("replica-a");
    const b = await api("replica-b");
    const res = await signIn(a.base, TOKEN);
    assert.equal(res.status, 200);
    const cookie = res.headers.get("set-cookie")!.split(";")[0]!;
    assert.equal(await withCookie(a.base, cookie), 200);
    assert.equal(await withCookie(b.base, cookie), 200, "the other replica accepts the session");
    await stopProcess(a, 2000);
    const restarted = await api("replica-a-restarted");
    assert.equal(await withCookie(restarted.base, cookie), 200, "a restart keeps the session");
    const rotated = await api("replica-rotated", { CONVEYOR_API_TOKEN: `${TOKEN}-rotated` });
    assert.equal(await withCookie(rotated.base, cookie), 401, "a changed token ends the session");
  });

  test("failed sign-ins from one client: 401 five times, then 429 with Retry-After, even for the right token", async () => {
    const p = await api("throttled");
    for (let i = 0; i < 5; i++) assert.equal((await signIn(p.base, "wrong-token")).status, 401);
    const refused = await signIn(p.base, TOKEN);
    assert.equal(refused.status, 429);
    assert.match(refused.headers.get("retry-after") ?? "", /^\d+$/);
    assert.match(((await refused.json()) as { error: string }).error, /too many failed sign-ins/);
    // API clients with the bearer token are not affected.
    const bearer = await fetch(`${p.base}/queues`, { headers: { authorization: `Bearer ${TOKEN}` } });
    assert.equal(bearer.status, 200);
  });

  test("GET /auth/session names the allow-list only to callers who are signed in", async () => {
    const p = await api("allow-list", {}, ["--queues", "billing/invoices,secret/payroll"]);
    const anonymous = (await (await fetch(`${p.base}/auth/session`)).json()) as Record<string, unknown>;
    assert.deepEqual([anonymous.authenticated, anonymous.queues], [false, null]);
    const signedIn = (await (
      await fetch(`${p.base}/auth/session`, { headers: { authorization: `Bearer ${TOKEN}` } })
    ).json()) as Record<string, unknown>;
    assert.deepEqual(signedIn.queues, ["billing/invoices", "secret/payroll"]);
  });

  test("a token shorter than 16 bytes is refused at start, naming CONVEYOR_API_TOKEN", async () => {
    const p = startProcess(NODE, [CONVEYOR, "api", "--port", "0", "--host", "127.0.0.1"], {
      env: { ...process.env, REDIS_URL: redis.url, CONVEYOR_API_TOKEN: "short-token" },
    });
    let out = "";
    p.child.stderr?.on("data", (d: Buffer) => (out += d.toString()));
    assert.equal(await p.exited, 2);
    assert.match(out, /CONVEYOR_API_TOKEN is 11 bytes; use at least 16/);
  });
});

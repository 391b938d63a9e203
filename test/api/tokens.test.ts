// Scoped tokens against a real job API on real Redis and PostgreSQL: a token for group `acme`
// walks every OpenAPI operation and learns nothing of group `globex` (its jobs are absent: 404
// like a job that never existed), each verb is refused without its scope, and the tokens file
// is read again while sessions are open (a revoked token's session ends at its next request).
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test, type TestContext } from "node:test";
import type pg from "pg";
import { pino } from "pino";
import { ROUTES } from "../../api/definitions.ts";
import { startJobApi, type JobApi } from "../../api/server.ts";
import { hashToken, readTokensFile, writeTokensFile, type TokenEntry } from "../../api/tokens.ts";
import { connectRedis, Consumer, Producer, QueueAdmin, type RedisClient } from "../../queue/index.ts";
import { createPool, startRecorder, type JobRecorder } from "../../records/index.ts";
import { startApi } from "../support/dashboard.ts";
import { stopProcess, waitFor } from "../support/processes.ts";
import { PostgresServer } from "../support/postgres.ts";
import { RedisServer } from "../support/redis.ts";
import { CONVEYOR, NODE } from "../support/workers.ts";

const QUEUE = "docs/ocr";
const ACME_TOKEN = "acme-token-0123456789abcdef";
const READER_TOKEN = "reader-token-0123456789abcdef";
const OPS_TOKEN = "ops-token-0123456789abcdef";
const LIMITED_TOKEN = "limited-token-0123456789abcdef";
const GLOBEX_ID = "gx-7f3a9";
const GLOBEX_SECRET = "GLOBEX-SECRET";

describe("scoped API tokens", () => {
  let redisServer: RedisServer;
  let pgServer: PostgresServer;
  let redis: RedisClient;
  let recorder: JobRecorder | null;
  let api: JobApi;
  let base: string;
  let dir: string;
  let file: string;
  let db: pg.Pool;
  let dbUrl: string;
  const entry = (name: string, token: string, scopes: Partial<TokenEntry["scopes"]>): TokenEntry => ({
    name,
    hash: hashToken(token),
    scopes: { pipelines: null, queues: null, groups: null, verbs: [], ...scopes },
  });

  before(async () => {
    [redisServer, pgServer] = await Promise.all([RedisServer.start(), PostgresServer.start()]);
    redis = connectRedis(redisServer.url);
    dbUrl = await pgServer.createDatabase("tokens");
    dir = mkdtempSync(join(tmpdir(), "cvy-tokens-"));
    file = join(dir, "tokens.yaml");
    writeTokensFile(file, [
      entry("acme", ACME_TOKEN, {
        pipelines: ["docs"],
        groups: ["acme"],
        verbs: ["read", "enqueue", "operate", "admin"],
      }),
      entry("reader", READER_TOKEN, { verbs: ["read"] }),
      entry("ops", OPS_TOKEN, { verbs: ["read", "operate", "admin"] }),
      { ...entry("limited", LIMITED_TOKEN, { verbs: ["read"] }), rate: { max: 4, perMs: 60_000 } },
    ]);
    recorder = await startRecorder({
      databaseUrl: dbUrl,
      redis,
      redisUrl: redisServer.url,
      pipelines: ["docs"],
      logger: pino({ level: "silent" }),
    });
    const producer = new Producer(redis);
    await producer.enqueue(QUEUE, { who: "ACME-DATA" }, { id: "ac-1", group: "acme" });
    await producer.enqueue(QUEUE, { who: GLOBEX_SECRET }, { id: GLOBEX_ID, group: "globex" });
    api = await startJobApi({
      redis,
      port: 0,
      host: "127.0.0.1",
      tokensFile: file,
      database: createPool(dbUrl),
      dashboardDir: null,
      resourceSampleMs: 0,
      log: pino({ level: "silent" }),
    });
    base = `http://127.0.0.1:${(api.address() as AddressInfo).port}`;
    db = createPool(dbUrl);
    // Both jobs recorded, so the PostgreSQL searches have something to leak.
    const pool = createPool(dbUrl);
    await waitFor(
      "both jobs recorded",
      async () => (await pool.query("SELECT count(*)::int AS n FROM conveyor_jobs")).rows[0].n === 2,
      60_000,
    );
    await pool.end();
  });
  after(async () => {
    await new Promise((resolve) => api?.close(resolve));
    api?.closeAllConnections();
    await recorder?.stop();
    await db?.end();
    redis?.disconnect();
    await Promise.all([redisServer?.stop(), pgServer?.stop()]);
    rmSync(dir, { recursive: true, force: true });
  });

  const call = async (token: string, method: string, path: string, body?: unknown) => {
    const res = await fetch(`${base}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${token}`,
        ...(body === undefined ? {} : { "content-type": "application/json" }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: res.status, text: await res.text() };
  };

  /** A request for every operation: the globex job or group where the route names one. */
  function requests(): {
    name: string;
    method: string;
    path: string;
    body?: unknown;
    namesGlobex: boolean;
  }[] {
    const bodies: Record<string, unknown> = {
      enqueue: { data: 1, group: "acme" },
      enqueueBatch: { jobs: [{ data: 1, group: "acme" }] },
      putContract: {},
      setRateLimit: { limit: null },
      setGroupLimit: { concurrency: 5 },
      setDefaultGroupLimit: { concurrency: 5 },
      putSchedule: { every: "5m" },
      retryDead: { ids: [GLOBEX_ID] },
      bulkCancel: { ids: [GLOBEX_ID] },
      bulkDelete: { ids: [GLOBEX_ID] },
    };
    return ROUTES.filter((r) => !r.public && r.name !== "events").map((r) => {
      const namesGlobex =
        /\{id\}|\{group\}/.test(r.path) ||
        ["retryDead", "bulkCancel", "bulkDelete", "search"].includes(r.name);
      let path = r.path
        .replace("{queue}", encodeURIComponent(QUEUE))
        .replace("{id}", GLOBEX_ID)
        .replace("{group}", "globex")
        .replace("{schedule}", "nightly")
        .replace("{namespace}", "default")
        .replace("{name}", "pool");
      if (r.name === "retryJob") path += `?queue=${encodeURIComponent(QUEUE)}`;
      if (r.name === "search") path += `?q=${GLOBEX_ID}`;
      return { name: r.name, method: r.method, path, body: r.body ? bodies[r.name] : undefined, namesGlobex };
    });
  }

  test("a token for group acme learns nothing of globex through any operation", async () => {
    const searches = ["/search?q=" + GLOBEX_ID, "/search?q=who=" + GLOBEX_SECRET, "/search?q=who=ACME-DATA"];
    for (const path of searches) {
      const r = await call(ACME_TOKEN, "GET", path);
      assert.equal(r.status, 200, `${path}: ${r.text}`);
      const items = (JSON.parse(r.text) as { items: unknown[] }).items;
      assert.doesNotMatch(JSON.stringify(items), /globex|gx-7f3a9/i, `${path} leaks: ${r.text}`);
    }
    assert.match(
      (await call(ACME_TOKEN, "GET", "/search?q=who=ACME-DATA")).text,
      /ac-1/,
      "its own job is found",
    );
    const absent = await call(ACME_TOKEN, "GET", "/jobs/never-was");
    const before = await new QueueAdmin(redis).job(GLOBEX_ID);
    for (const r of requests()) {
      const got = await call(ACME_TOKEN, r.method, r.path, r.body);
      assert.doesNotMatch(got.text, new RegExp(GLOBEX_SECRET), `${r.name} leaks globex's data: ${got.text}`);
      if (!r.namesGlobex)
        assert.doesNotMatch(
          got.text,
          /globex|gx-7f3a9/i,
          `${r.name} (${got.status}) names globex: ${got.text}`,
        );
      assert.ok(
        (got.status !== 500 && got.status < 500) || r.name === "listPools" || r.name === "poolDetail",
        `${r.name}: ${got.status} ${got.text}`,
      );
      if (ROUTES.find((x) => x.name === r.name)!.access?.target === "job")
        assert.deepEqual(
          [got.status, got.text.replace(GLOBEX_ID, "X")],
          [absent.status, absent.text.replace("never-was", "X")],
          `${r.name}: another tenant's job reads as one that never existed`,
        );
    }
    // Its own jobs by id: a bulk cancel of them works, one of globex's among them is absent.
    await new Producer(redis).enqueue(QUEUE, { n: 2 }, { id: "ac-2", group: "acme" });
    const cancelPath = `/queues/${encodeURIComponent(QUEUE)}/cancel`;
    const mixed = await call(ACME_TOKEN, "POST", cancelPath, { ids: ["ac-2", GLOBEX_ID] });
    assert.equal(mixed.status, 404, mixed.text);
    assert.equal((await new QueueAdmin(redis).job("ac-2"))?.state, "ready", "nothing cancelled");
    const own = await call(ACME_TOKEN, "POST", cancelPath, { ids: ["ac-2"] });
    assert.equal(own.status, 200, own.text);
    assert.equal((JSON.parse(own.text) as { cancelled: number }).cancelled, 1);
    const info = await new QueueAdmin(redis).job(GLOBEX_ID);
    assert.equal(info?.state, before?.state, "globex's job untouched by the walk");
    assert.equal(info?.state, "ready");
  });

  test("records-only jobs keep their group: acme's is found, globex's is absent", async () => {
    // Completed with retention 0: Redis lets both go at once; only the records keep them.
    const q = "docs/archive";
    const producer = new Producer(redis);
    await producer.enqueue(q, { who: "ACME-OLD" }, { id: "ac-old", group: "acme" });
    await producer.enqueue(q, { who: "GLOBEX-OLD" }, { id: "gx-old", group: "globex" });
    const c = new Consumer(redis, q, { workerId: "w", leaseMs: 30_000, retentionSeconds: 0 });
    for (const job of (await c.claim(2)).jobs) await c.complete(job, { ok: true });
    await waitFor(
      "both recorded as completed",
      async () =>
        (
          await db.query(
            "SELECT count(*)::int AS n FROM conveyor_jobs WHERE id IN ('ac-old', 'gx-old') AND state = 'completed'",
          )
        ).rows[0].n === 2,
      60_000,
    );
    const admin = new QueueAdmin(redis);
    assert.equal(await admin.job("ac-old", q), null, "Redis let it go");
    assert.equal(await admin.job("gx-old", q), null);
    const own = await call(ACME_TOKEN, "GET", "/jobs/ac-old/detail");
    assert.equal(own.status, 200, own.text);
    assert.match(own.text, /ACME-OLD/);
    const absent = await call(ACME_TOKEN, "GET", "/jobs/never-was/detail");
    const other = await call(ACME_TOKEN, "GET", "/jobs/gx-old/detail");
    assert.deepEqual(
      [other.status, other.text.replace("gx-old", "X")],
      [absent.status, absent.text.replace("never-was", "X")],
      "another tenant's records-only job reads as one that never existed",
    );
    for (const [path, mine] of [
      ["/search?q=ac-old", true],
      ["/search?q=gx-old", false],
      ["/search?q=who=ACME-OLD", true],
      ["/search?q=who=GLOBEX-OLD", false],
    ] as const) {
      const r = await call(ACME_TOKEN, "GET", path);
      assert.equal(r.status, 200, `${path}: ${r.text}`);
      const ids = (JSON.parse(r.text) as { items: { id: string }[] }).items.map((i) => i.id);
      assert.deepEqual(ids, mine ? ["ac-old"] : [], `${path}: ${r.text}`);
    }
    // A full-access reader still finds globex's.
    assert.equal((await call(READER_TOKEN, "GET", "/jobs/gx-old/detail")).status, 200);
  });

  test("SSE: the acme token's stream carries acme's events and none of globex's", async () => {
    const ac = new AbortController();
    const res = await fetch(`${base}/events`, {
      headers: { authorization: `Bearer ${ACME_TOKEN}`, "last-event-id": "0-0" },
      signal: ac.signal,
    });
    assert.equal(res.status, 200);
    const producer = new Producer(redis);
    await producer.enqueue(QUEUE, { n: 1 }, { id: "gx-late", group: "globex" });
    await producer.enqueue(QUEUE, { n: 2 }, { id: "ac-marker", group: "acme" });
    let seen = "";
    const decoder = new TextDecoder();
    for await (const chunk of res.body!) {
      seen += decoder.decode(chunk as Uint8Array);
      if (seen.includes("ac-marker")) break;
    }
    ac.abort();
    assert.match(seen, /"id":"ac-1"/, "the replay has acme's job");
    assert.doesNotMatch(seen, /gx-/, "no globex event");
  });

  test("each verb is refused without its scope: 403 naming the verb", async () => {
    for (const [method, path, body, verb] of [
      ["POST", `/queues/${encodeURIComponent(QUEUE)}/jobs`, { data: 1 }, "enqueue"],
      ["POST", `/queues/${encodeURIComponent(QUEUE)}/pause`, undefined, "operate"],
      ["DELETE", `/queues/${encodeURIComponent(QUEUE)}/dead`, undefined, "admin"],
    ] as const) {
      const r = await call(READER_TOKEN, method, path, body);
      assert.equal(r.status, 403, `${path}: ${r.text}`);
      assert.match(r.text, new RegExp(`may not ${verb}`));
    }
    assert.equal((await call(READER_TOKEN, "GET", "/queues")).status, 200);
    const other = await call(ACME_TOKEN, "POST", `/queues/${encodeURIComponent(QUEUE)}/jobs`, {
      data: 1,
      group: "globex",
    });
    assert.equal(other.status, 403, "acme may not enqueue into globex");
    assert.match(other.text, /body\.group/);
  });

  /** A second replica of the job API on the same Redis and tokens file, closed after the test. */
  async function secondReplica(t: TestContext) {
    const replica = await startJobApi({
      redis,
      port: 0,
      host: "127.0.0.1",
      tokensFile: file,
      dashboardDir: null,
      resourceSampleMs: 0,
      log: pino({ level: "silent" }),
    });
    t.after(async () => {
      await new Promise((resolve) => replica.close(resolve));
      replica.closeAllConnections();
    });
    return { url: `http://127.0.0.1:${(replica.address() as AddressInfo).port}`, replica };
  }

  test("a token's rate limit holds across both replicas: 429 with Retry-After naming the token and the limit", async (t) => {
    const { url: other } = await secondReplica(t);
    const get = (at: string, token: string) =>
      fetch(`${at}/queues/${encodeURIComponent(QUEUE)}/groups`, {
        headers: { authorization: `Bearer ${token}` },
      });
    const statuses = [];
    for (const at of [base, other, base, other]) statuses.push((await get(at, LIMITED_TOKEN)).status);
    assert.deepEqual(statuses, [200, 200, 200, 200], "4 a minute, on either replica");
    const over = await get(other, LIMITED_TOKEN);
    assert.equal(over.status, 429);
    const wait = Number(over.headers.get("retry-after"));
    assert.ok(wait >= 1 && wait <= 15, `Retry-After ${wait}: one more fits a quarter minute after the burst`);
    const body = (await over.json()) as { error: string; code: string };
    assert.equal(body.code, "rate_limited");
    assert.match(body.error, /token limited is over its rate limit of 4\/m/);
    assert.equal((await get(base, LIMITED_TOKEN)).status, 429, "the other replica too");
    assert.equal((await get(base, ACME_TOKEN)).status, 200, "another token is not held back");
  });

  test("the tokens file is read again by both replicas: a revoked token's session ends at its next request", async (t) => {
    // A second replica on the same file: a session from one is good on the other, and both
    // drop it when the token is revoked.
    const { url: other, replica } = await secondReplica(t);
    const signIn = await fetch(`${base}/auth/session`, {
      method: "POST",
      headers: { "content-type": "application/json", origin: base },
      body: JSON.stringify({ token: READER_TOKEN }),
    });
    assert.equal(signIn.status, 200);
    const cookie = signIn.headers.get("set-cookie")!.split(";")[0]!;
    const session = await (await fetch(`${base}/auth/session`, { headers: { cookie } })).json();
    assert.equal((session as { token: string }).token, "reader");
    assert.deepEqual((session as { scopes: { verbs: string[] } }).scopes.verbs, ["read"]);
    assert.equal((await fetch(`${base}/queues`, { headers: { cookie } })).status, 200);
    assert.equal((await fetch(`${other}/queues`, { headers: { cookie } })).status, 200, "the other replica");
    const stores = [api, replica].map((a) => a.context.auth.tokens!);
    const generations = stores.map((s) => s.generation);
    writeTokensFile(
      file,
      readTokensFile(file).filter((e) => e.name !== "reader"),
    );
    await waitFor(
      "file reloaded by both",
      async () => stores.every((s, i) => s.generation > generations[i]!),
      30_000,
    );
    assert.equal((await fetch(`${base}/queues`, { headers: { cookie } })).status, 401, "session ended");
    assert.equal((await fetch(`${other}/queues`, { headers: { cookie } })).status, 401, "on both replicas");
    assert.equal((await call(READER_TOKEN, "GET", "/queues")).status, 401, "bearer refused");
    assert.equal((await call(ACME_TOKEN, "GET", "/jobs/ac-1")).status, 200, "the others stay");
  });

  test("every state change through the API is audited with the token's name; a failed audit write fails the change", async () => {
    const rows = async (operation: string) =>
      (
        await db.query<{
          token: string;
          target: string;
          status: number | null;
          client: string;
          params: unknown;
        }>(
          "SELECT token, target, status, client, params FROM conveyor_audit WHERE operation = $1 AND token = 'ops' ORDER BY id",
          [operation],
        )
      ).rows;
    const writes = requests().filter((r) => {
      const verb = ROUTES.find((x) => x.name === r.name)!.access!.verb;
      return r.method !== "GET" && (verb === "operate" || verb === "admin");
    });
    assert.ok(writes.length >= 19, `${writes.length} write routes`);
    for (const r of writes) {
      const before = (await rows(r.name)).length;
      const got = await call(OPS_TOKEN, r.method, r.path, r.body);
      assert.ok(got.status < 500, `${r.name}: ${got.status} ${got.text}`);
      const after = await rows(r.name);
      assert.equal(after.length, before + 1, `${r.name}: one audit row`);
      const row = after.at(-1)!;
      assert.equal(row.status, got.status, `${r.name}: its outcome`);
      assert.match(row.client, /127\.0\.0\.1/);
    }
    const since = Date.now() - 60_000;
    const listed = await call(OPS_TOKEN, "GET", `/audit?token=ops&verb=admin&since=${since}`);
    assert.equal(listed.status, 200);
    const items = (JSON.parse(listed.text) as { items: { operation: string; token: string }[] }).items;
    assert.ok(items.some((i) => i.operation === "purgeDead") && items.every((i) => i.token === "ops"));
    assert.equal((await call(READER_TOKEN, "GET", "/audit")).status, 401, "(revoked above)");
    // The CLI's export: one JSON line per row.
    const out = execFileSync(
      NODE,
      [
        CONVEYOR,
        "audit",
        "--database",
        dbUrl,
        "--token",
        "ops",
        "--since",
        "1h",
        "--limit",
        "1000",
        "--json",
      ],
      { encoding: "utf8" },
    );
    const lines = out
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { token: string; operation: string });
    assert.equal(lines.length, writes.length);
    assert.deepEqual(new Set(lines.map((l) => l.operation)), new Set(writes.map((w) => w.name)));
    // The CLI's token changes go to the same trail.
    const cliFile = join(dir, "cli-tokens.yaml");
    const conveyor = (...args: string[]) => execFileSync(NODE, [CONVEYOR, ...args], { encoding: "utf8" });
    conveyor("token", "create", "cli-made", "--scope", "verbs=read", "--file", cliFile, "--database", dbUrl);
    conveyor("token", "revoke", "cli-made", "--file", cliFile, "--database", dbUrl);
    const cliRows = await db.query<{ operation: string; token: string; status: number }>(
      "SELECT operation, token, status FROM conveyor_audit WHERE target = 'token:cli-made' ORDER BY id",
    );
    assert.deepEqual(
      cliRows.rows.map((r) => [r.operation, r.status]),
      [
        ["tokenCreate", 200],
        ["tokenRevoke", 200],
      ],
    );
    assert.match(cliRows.rows[0]!.token, /^cli:/);
    // Retention: rows older than it go.
    await db.query(
      "INSERT INTO conveyor_audit (at, token, verb, operation, target, params) VALUES (now() - interval '100 days', 'old', 'admin', 'purgeDead', 'x', '{}')",
    );
    assert.equal(await api.context.audit.expire(90 * 24 * 3600_000), 1);
    assert.equal((await db.query("SELECT 1 FROM conveyor_audit WHERE token = 'old'")).rowCount, 0);
    // No audit table: the change is refused and not made.
    await db.query("ALTER TABLE conveyor_audit RENAME TO conveyor_audit_away");
    try {
      const refused = await call(OPS_TOKEN, "POST", `/queues/${encodeURIComponent(QUEUE)}/pause`);
      assert.equal(refused.status, 503, refused.text);
      assert.match(refused.text, /nothing changed: the audit trail could not be written/);
      assert.equal((await new QueueAdmin(redis).stats(QUEUE)).paused, false, "not paused");
    } finally {
      await db.query("ALTER TABLE conveyor_audit_away RENAME TO conveyor_audit");
    }
  });

  test("without PostgreSQL: a warning at start, and each change as JSON lines on stdout", async () => {
    const p = await startApi(dir, "api-no-pg", { REDIS_URL: redisServer.url }, ["--tokens-file", file]);
    try {
      const res = await fetch(`${p.base}/queues/${encodeURIComponent(QUEUE)}/groups/acme/pause`, {
        method: "POST",
        headers: { authorization: `Bearer ${OPS_TOKEN}` },
      });
      assert.equal(res.status, 200);
      const lines = await waitFor(
        "the audit lines on stdout",
        async () => {
          const text = readFileSync(p.logFile, "utf8");
          const audit = text
            .split("\n")
            .filter((l) => l.startsWith('{"audit"'))
            .map((l) => (JSON.parse(l) as { audit: Record<string, unknown> }).audit);
          return audit.length >= 2 && { text, audit };
        },
        30_000,
      );
      assert.match(lines.text, /audit trail: no PostgreSQL/);
      assert.equal(lines.audit[0]!.token, "ops");
      assert.equal(lines.audit[0]!.operation, "pauseGroup");
      assert.equal(lines.audit[0]!.target, `${QUEUE} group:acme`);
      assert.deepEqual(lines.audit[1], { id: lines.audit[0]!.id, status: 200, jobs: null });
    } finally {
      await stopProcess(p, 2000);
    }
  });
});

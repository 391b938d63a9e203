// The live view's event stream against real `conveyor api` processes: a subscriber after every
// listener left starts from now; Last-Event-ID beyond the kept history gets a `gap` event; and the
// API, its live view, search and queue directory on a real 3-node Redis Cluster with pipelines in
// different slots.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import type { Cluster } from "ioredis";
import { pollUntil } from "../support/poll.ts";
import { connectRedis, Producer, QUEUES_KEY, QueueKeys, type RedisClient } from "../../queue/index.ts";
import { startApi, type ApiProcess } from "../support/dashboard.ts";
import { logLine, stopProcess } from "../support/processes.ts";
import { RedisClusterServer, RedisServer } from "../support/redis.ts";
import { openEvents } from "../support/sse.ts";

const TOKEN = "events-test-token-0123";
const auth = { authorization: `Bearer ${TOKEN}` };
const LATER = { delayMs: 3_600_000 }; // no worker: the job stays delayed, one event per enqueue

async function metric(base: string, name: string): Promise<number> {
  const text = await (await fetch(`${base}/metrics`, { headers: auth })).text();
  const m = new RegExp(`^${name} (\\S+)$`, "m").exec(text);
  return m ? Number(m[1]) : 0;
}

describe("SSE positions and gaps (one Redis)", () => {
  let server: RedisServer;
  let redis: RedisClient;
  let producer: Producer;
  let api: ApiProcess;
  let dir: string;
  const Q = "live/orders";

  before(async () => {
    server = await RedisServer.start();
    redis = connectRedis(server.url);
    producer = new Producer(redis);
    dir = mkdtempSync(join(tmpdir(), "cvy-events-"));
    await producer.enqueue(Q, {}, { id: "seed", ...LATER });
    api = await startApi(dir, "api", { REDIS_URL: server.url, CONVEYOR_API_TOKEN: TOKEN });
  });
  after(async () => {
    await stopProcess(api, 2000);
    redis.disconnect();
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  test("a subscriber after the last one left gets events from now, not those in between", async () => {
    const first = await openEvents(`${api.base}/events`, auth);
    await producer.enqueue(Q, {}, { id: "seen-1", ...LATER });
    await first.next("seen-1", (f) => f.data?.id === "seen-1");
    first.close();
    // The server noticed, and its hub stopped reading (no XREAD blocked): what follows is missed.
    await pollUntil(
      "the stream closed and the hub stopped",
      async () =>
        (await metric(api.base, "conveyor_api_event_streams")) === 0 &&
        /^blocked_clients:0\r?$/m.test(await redis.info("clients")),
    );
    await producer.enqueue(Q, {}, { id: "between-1", ...LATER });
    const second = await openEvents(`${api.base}/events`, auth);
    await producer.enqueue(Q, {}, { id: "after-1", ...LATER });
    await second.next("after-1", (f) => f.data?.id === "after-1");
    second.close();
    assert.deepEqual(
      second.frames.filter((f) => f.event === "job").map((f) => f.data?.id),
      ["after-1"],
      "nothing from before this subscriber arrived",
    );
  });

  test("Last-Event-ID: the rest when the stream still holds it, a gap event first when it was trimmed", async () => {
    const events = new QueueKeys(Q).events;
    for (const id of ["g-1", "g-2", "g-3"]) await producer.enqueue(Q, {}, { id, ...LATER });
    const entries = await redis.xrange(events, "-", "+");
    const idOf = (job: string) => entries.find(([, f]) => f[f.indexOf("id") + 1] === job)![0];
    const resume = async () => {
      const s = await openEvents(`${api.base}/events`, { ...auth, "last-event-id": idOf("g-1") });
      await s.next("g-3", (f) => f.data?.id === "g-3");
      s.close();
      return s.frames
        .filter((f) => f.event === "job" || f.event === "gap")
        .map((f) => (f.event === "gap" ? f.data : f.data?.id));
    };
    // Trimming entries before g-1 loses nothing after it: no gap.
    await redis.xtrim(events, "MAXLEN", 3);
    assert.deepEqual(await resume(), ["g-2", "g-3"]);
    await redis.xtrim(events, "MAXLEN", 1);
    assert.deepEqual(await resume(), [{ queue: Q, after: idOf("g-1"), reason: "trimmed" }, "g-3"]);
  });

  test("a read error in the hub is logged and counted, and the stream carries on once it is gone", async () => {
    const s = await openEvents(`${api.base}/events`, auth);
    // A queue whose event stream key holds a string: XREAD answers WRONGTYPE.
    const broken = new QueueKeys("broken/stage").events;
    await redis.set(broken, "not a stream");
    await redis.sadd(QUEUES_KEY, "broken/stage");
    await pollUntil(
      "the event hub's error counted",
      async () => (await metric(api.base, 'conveyor_api_errors_total{site="event_hub"}')) > 0,
    );
    await logLine(api.logFile, /"site":"event_hub".*WRONGTYPE.*"job API error"/);
    await redis.del(broken);
    await producer.enqueue(Q, {}, { id: "back-1", ...LATER });
    await s.next("back-1", (f) => f.data?.id === "back-1");
    s.close();
  });

  test("a read a page is served without is logged and counted; a job key that is not a hash is shown as malformed", async () => {
    const q = "odd/stage";
    const enqueuedAt = Date.now();
    for (const id of ["odd-1", "odd-2"]) await producer.enqueue(q, {}, { id });
    const k = new QueueKeys(q);
    // odd-1's log and odd-2's record are strings: LRANGE and HMGET answer WRONGTYPE.
    await redis.set(k.logs("odd-1"), "not a list");
    await redis.del(k.job("odd-2"));
    await redis.set(k.job("odd-2"), "not a hash");
    const partial = 'conveyor_api_errors_total{site="partial_read"}';
    const before = await metric(api.base, partial);
    const get = async (path: string) => {
      const res = await fetch(`${api.base}${path}`, { headers: auth });
      assert.equal(res.status, 200, path);
      return (await res.json()) as Record<string, unknown>;
    };
    const logs = await get(`/jobs/odd-1/logs?queue=${encodeURIComponent(q)}`);
    assert.deepEqual(logs.logs, []);
    assert.equal(await metric(api.base, partial), before + 1, "the failed read counted");
    await logLine(api.logFile, /"site":"partial_read".*WRONGTYPE.*"read":"logs"/);
    const live = await get(`/queues/${encodeURIComponent(q)}/jobs?state=ready`);
    assert.deepEqual(
      (live.items as { id: string; state: string }[]).map((j) => [j.id, j.state]),
      [
        ["odd-1", "ready"],
        ["odd-2", "malformed"],
      ],
    );
    // The head of the line's age comes from the counts' own read of it.
    const summary = await get(`/queues/${encodeURIComponent(q)}`);
    const waited = summary.oldestWaitingMs as number;
    assert.ok(waited >= 0 && waited <= Date.now() - enqueuedAt + 1000, `oldest waiting ${waited} ms`);
  });
});

describe("the job API on a real 3-node Redis Cluster", () => {
  let cluster: RedisClusterServer;
  let redis: RedisClient;
  let api: ApiProcess;
  let dir: string;
  let queues: [string, string];

  before(async () => {
    cluster = await RedisClusterServer.start(3);
    redis = connectRedis(cluster.url);
    dir = mkdtempSync(join(tmpdir(), "cvy-events-cluster-"));
    // Two pipelines on two different masters (slot ranges of a 3-node `--cluster create`).
    const slotOf = (p: string) => (redis as Cluster).cluster("KEYSLOT", `cvy:{${p}}:x`) as Promise<number>;
    let low: string | undefined;
    let high: string | undefined;
    for (let i = 0; !(low && high); i++) {
      const slot = await slotOf(`p${i}`);
      if (slot < 5000) low ??= `p${i}`;
      if (slot > 11000) high ??= `p${i}`;
    }
    queues = [`${low}/stage`, `${high}/stage`];
    const producer = new Producer(redis);
    for (const q of queues)
      await producer.enqueue(
        q,
        { q },
        { id: `first-${q.split("/")[0]}`, idempotencyKey: `key-${q}`, ...LATER },
      );
    // Known only by their keys (fed by a previous stage, say): the directory must SCAN every master.
    await redis.del(QUEUES_KEY);
    api = await startApi(dir, "api", { REDIS_URL: cluster.url, CONVEYOR_API_TOKEN: TOKEN });
  });
  after(async () => {
    if (api) await stopProcess(api, 2000);
    redis?.disconnect();
    await cluster?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  test("the queue list finds queues on every node", async () => {
    const body = (await (await fetch(`${api.base}/queues`, { headers: auth })).json()) as {
      queues: { queue: string; delayed: number }[];
    };
    assert.deepEqual(
      body.queues.map((q) => [q.queue, q.delayed]),
      queues.map((q) => [q, 1]).sort(),
    );
  });

  test("the live view gets events of both pipelines, and no error is counted", async () => {
    const s = await openEvents(`${api.base}/events`, auth);
    const producer = new Producer(redis);
    for (const q of queues) await producer.enqueue(q, {}, { id: `live-${q.split("/")[0]}`, ...LATER });
    for (const q of queues)
      await s.next(`live event of ${q}`, (f) => f.data?.queue === q && String(f.data.id).startsWith("live-"));
    s.close();
    assert.equal(await metric(api.base, 'conveyor_api_errors_total{site="event_hub"}'), 0);
  });

  test("search finds a job by id and by idempotency key in either pipeline", async () => {
    for (const q of queues) {
      const p = q.split("/")[0]!;
      for (const [term, matched] of [
        [`first-${p}`, "id"],
        [`key-${q}`, "idempotencyKey"],
      ]) {
        const res = await fetch(`${api.base}/search?q=${encodeURIComponent(term!)}`, { headers: auth });
        assert.equal(res.status, 200, term);
        const { items } = (await res.json()) as { items: { id: string; queue: string; matched: string }[] };
        assert.deepEqual(
          items.map((h) => [h.id, h.queue, h.matched]),
          [[`first-${p}`, q, matched]],
          term,
        );
      }
    }
  });
});

// GET /jobs/{id}?wait= against a real Redis and `conveyor api`: the answer comes when the job
// ends (not at the deadline), at the deadline with the current state when it does not, at once
// for an ended job; a bad or too long wait is a 400 naming it.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { connectRedis, Consumer, Producer, type RedisClient } from "../../queue/index.ts";
import { stopProcess } from "../support/processes.ts";
import { startApi, type ApiProcess } from "../support/dashboard.ts";
import { RedisServer } from "../support/redis.ts";

describe("GET /jobs/{id}?wait= (long poll)", () => {
  let server: RedisServer;
  let redis: RedisClient;
  let api: ApiProcess;
  let dir: string;
  const TOKEN = "long-poll-test-token";
  const get = async (path: string) => {
    const res = await fetch(`${api.base}${path}`, { headers: { authorization: `Bearer ${TOKEN}` } });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  };
  before(async () => {
    server = await RedisServer.start();
    redis = connectRedis(server.url);
    dir = mkdtempSync(join(tmpdir(), "cvy-longpoll-"));
    api = await startApi(dir, "api", { REDIS_URL: server.url, CONVEYOR_API_TOKEN: TOKEN });
  });
  after(async () => {
    await stopProcess(api, 2000);
    redis.disconnect();
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  test("answers when the job completes, well before the deadline; at once once it has", async () => {
    const { id } = await new Producer(redis).enqueue("lp/a", { n: 1 });
    const c = new Consumer(redis, "lp/a", { workerId: "w", leaseMs: 30_000, retentionSeconds: 60 });
    const t0 = Date.now();
    const polled = get(`/jobs/${id}?wait=60s`);
    // (the poll is waiting: it has not answered while the job runs)
    const [job] = (await c.claim(1)).jobs;
    const settled = await Promise.race([
      polled.then(() => "answered"),
      c.complete(job!, { ok: true }).then(() => "completed"),
    ]);
    assert.equal(settled, "completed");
    const r = await polled;
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.deepEqual([r.body.state, r.body.result], ["completed", { ok: true }]);
    assert.ok(Date.now() - t0 < 30_000, "answered at the job's end, not at the deadline");

    const again = await get(`/jobs/${id}?wait=60s`);
    assert.deepEqual([again.status, again.body.state], [200, "completed"]);
  });

  test("a job still running at the deadline: its current state at the deadline", async () => {
    const { id } = await new Producer(redis).enqueue("lp/b", 1);
    const t0 = Date.now();
    const r = await get(`/jobs/${id}?wait=300ms`);
    assert.ok(Date.now() - t0 >= 290);
    assert.deepEqual([r.status, r.body.state], [200, "ready"]);
  });

  test("a wait that is not a duration, or longer than 60s, is a 400 naming it", async () => {
    const { id } = await new Producer(redis).enqueue("lp/c", 1);
    for (const bad of ["soon", "61s", "2m"]) {
      const r = await get(`/jobs/${id}?wait=${bad}`);
      assert.equal(r.status, 400, `${bad}: ${JSON.stringify(r.body)}`);
      assert.equal(r.body.field, "query.wait");
      assert.match(String(r.body.error), /wait/);
    }
  });
});

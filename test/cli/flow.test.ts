// `conveyor flow` as a user runs it, against a real Redis: a flow's view (text and --json), cancel
// and repair (test/upgrade/mixedVersions.test.ts has what repair is for: a previous release's worker).
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { after, before, describe, test } from "node:test";
import { connectRedis, Producer, type RedisClient } from "../../queue/index.ts";
import { RedisServer } from "../support/redis.ts";
import { CONVEYOR, NODE } from "../support/workers.ts";

describe("conveyor flow", () => {
  let server: RedisServer;
  let redis: RedisClient;
  before(async () => {
    server = await RedisServer.start();
    redis = connectRedis(server.url);
  });
  after(async () => {
    redis.disconnect();
    await server.stop();
  });
  const run = (...args: string[]) =>
    spawnSync(NODE, [CONVEYOR, ...args], {
      env: { ...process.env, REDIS_URL: server.url },
      encoding: "utf8",
    });

  test("shows counts by state and each job's key, state and parents; cancel cancels the unfinished ones", async () => {
    const { flowId, ids } = await new Producer(redis).enqueueFlow("cf", [
      { key: "a", queue: "cf/one", data: 1 },
      { key: "b", queue: "cf/two", data: 2, parents: ["a"] },
    ]);
    const json = run("flow", flowId, "--json");
    assert.equal(json.status, 0, json.stderr);
    const view = JSON.parse(json.stdout);
    assert.deepEqual(view.counts, { ready: 1, "waiting-children": 1 });
    assert.deepEqual(
      view.jobs.map((j: { key: string; state: string; parents: string[]; id: string }) => [
        j.key,
        j.state,
        j.parents,
        j.id,
      ]),
      [
        ["a", "ready", [], ids.a],
        ["b", "waiting-children", ["a"], ids.b],
      ],
    );
    const text = run("flow", flowId);
    assert.equal(text.status, 0, text.stderr);
    assert.match(text.stdout, /ready: 1, waiting-children: 1/);
    assert.match(text.stdout, /b {2}waiting-children \(waiting for 1\) {2}cf\/two {2}\S+ ← a/);

    const cancel = run("flow", "cancel", flowId, "--json");
    assert.equal(cancel.status, 0, cancel.stderr);
    assert.deepEqual(JSON.parse(cancel.stdout), {
      id: flowId,
      outcome: "cancelled",
      jobsCancelled: 2,
      total: 2,
    });
    assert.deepEqual(JSON.parse(run("flow", flowId, "--json").stdout).counts, { cancelled: 2 });
    const missing = run("flow", "nope");
    assert.equal(missing.status, 1);
    assert.match(missing.stdout, /flow nope not found/);
    const bad = run("flow", "no such id!");
    assert.equal(bad.status, 2);
    assert.match(bad.stderr, /invalid job id/);
  });

  test("repair tells nothing while no job ended; a flow that does not exist is exit 1", async () => {
    const { flowId } = await new Producer(redis).enqueueFlow("rf", [
      { key: "a", queue: "rf/one", data: 1 },
      { key: "b", queue: "rf/two", data: 2, parents: ["a"] },
    ]);
    const json = run("flow", "repair", flowId, "--json");
    assert.equal(json.status, 0, json.stderr);
    assert.deepEqual(JSON.parse(json.stdout), {
      id: flowId,
      outcome: "repaired",
      jobsTold: 0,
      jobsGone: 0,
      total: 2,
    });
    const text = run("flow", "repair", flowId);
    assert.match(
      text.stdout,
      new RegExp(`told the dependents of 0 ended job\\(s\\) of flow ${flowId} \\(2 in all\\)`),
    );
    const missing = run("flow", "repair", "nope");
    assert.equal(missing.status, 1);
    assert.match(missing.stdout, /flow nope not found/);
  });

  test("a --json answer larger than a pipe's buffer reaches the reader whole (the process exits once stdout is out)", async () => {
    const jobs = [
      { key: "root", queue: "big/a", data: 1 },
      ...Array.from({ length: 3000 }, (_, i) => ({
        key: `m${i}`,
        queue: "big/b",
        data: i,
        parents: ["root"],
      })),
    ];
    const { flowId } = await new Producer(redis).enqueueFlow("big", jobs);
    const r = run("flow", flowId, "--json");
    assert.equal(r.status, 0, r.stderr);
    assert.ok(r.stdout.length > 4 * 65_536, `${r.stdout.length} bytes`);
    assert.equal((JSON.parse(r.stdout) as { jobs: unknown[] }).jobs.length, 3001);
  });
});

// The layout in force per pipeline (docs/protocol.md, "Layout versions") against a real Redis:
// workers report the layouts they read, `conveyor layout status|finalize`, finalize refused while
// a reader is behind (a worker of the previous release among them), and a worker that meets a
// layout newer than it reads refusing to work. This release reads layouts 1..2; CONVEYOR_LAYOUTS
// makes a process of it stand for an older one (`1..1`). Layout 2 fences every queue against the
// previous release (`paused:<q>` = '1'; this release's pause is `hold:<q>`): after finalize a
// 0.1.0 worker claims nothing, and this release's pause still holds and lifts its own workers.
// The tests run in order on one Redis: later ones use the pipelines earlier ones set up (`fresh`,
// `mix`).
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";
import { startJobApi } from "../../api/server.ts";
import { freePort } from "../support/ports.ts";
import {
  connectRedis,
  Consumer,
  LayoutRefusedError,
  PipelineKeys,
  Producer,
  QueueKeys,
  QueueAdmin,
  READERS_KEY,
  type LayoutStatus,
  type RedisClient,
  writeLayoutInForce,
} from "../../queue/index.ts";
import { stopProcess, waitFor } from "../support/processes.ts";
import { RedisClusterServer, RedisServer } from "../support/redis.ts";
import { previousRelease } from "../support/releases.ts";
import {
  CONVEYOR,
  countBy,
  metricValue,
  NODE,
  readExecutions,
  RECORDING_HANDLER,
  startWorker,
  type Release,
  type WorkerProcess,
} from "../support/workers.ts";

/** A process of this release standing for a reader of layout 1 only. */
const OLDER = { CONVEYOR_LAYOUTS: "1..1" };

/** Runs `fn` with this process standing for a reader of layout 1 only. */
async function asOlder<T>(fn: () => Promise<T>): Promise<T> {
  process.env.CONVEYOR_LAYOUTS = "1..1";
  try {
    return await fn();
  } finally {
    delete process.env.CONVEYOR_LAYOUTS;
  }
}

describe("the layout in force", () => {
  let server: RedisServer;
  let redis: RedisClient;
  let dir: string;
  const workers: WorkerProcess[] = [];
  before(async () => {
    server = await RedisServer.start();
    redis = connectRedis(server.url);
    dir = mkdtempSync(join(tmpdir(), "cvy-layout-"));
  });
  after(async () => {
    await Promise.all(workers.map((w) => stopProcess(w, 2000)));
    redis.disconnect();
    await server.stop();
    if (!process.env.KEEP) rmSync(dir, { recursive: true, force: true });
  });

  const cli = (env: Record<string, string>, ...args: string[]) =>
    spawnSync(NODE, [CONVEYOR, "layout", ...args], {
      env: { ...process.env, REDIS_URL: server.url, ...env },
      encoding: "utf8",
    });
  const status = (pipeline: string) => {
    const r = cli({}, "status", pipeline, "--json");
    assert.equal(r.status, 0, r.stderr);
    return JSON.parse(r.stdout) as LayoutStatus;
  };
  const worker = async (
    name: string,
    queue: string,
    env: Record<string, string> = {},
    opts: { release?: Release; waitReady?: boolean } = {},
  ) => {
    const w = await startWorker({
      dir,
      name,
      ...opts,
      env: {
        REDIS_URL: server.url,
        CONVEYOR_QUEUE: queue,
        CONVEYOR_HANDLER: RECORDING_HANDLER,
        CONVEYOR_LEASE: "3s",
        ...env,
      },
    });
    workers.push(w);
    return w;
  };
  // (`exited` resolves once the worker's last lines are in its log: the refusal is read next)
  const exitCode = (w: WorkerProcess) => w.exited;
  /** Until the pipeline's live readers are exactly these ids. */
  const readersAre = (pipeline: string, ids: string[]) =>
    waitFor(`readers of ${pipeline}: ${ids.join(", ")}`, async () => {
      const s = status(pipeline);
      return JSON.stringify(s.readers.map((r) => r.id).sort()) === JSON.stringify([...ids].sort()) ? s : null;
    });

  test("a pipeline nobody finalized is on layout 1; every worker reports its version and layouts", async () => {
    const s0 = status("fresh");
    assert.equal(s0.inForce, 1);
    assert.deepEqual(s0.readers, []);
    await worker("w-fresh", "fresh/a");
    const s = await readersAre("fresh", ["w-fresh"]);
    assert.equal(s.newestReadable, 2);
    assert.equal(s.readers[0]!.kind, "worker");
    assert.equal(s.readers[0]!.queue, "fresh/a");
    assert.deepEqual(s.readers[0]!.layouts, { min: 1, max: 2 });
    assert.match(s.readers[0]!.version!, /^\d+\.\d+\.\d+/);
    const text = cli({}, "status", "fresh");
    assert.equal(text.status, 0, text.stderr);
    assert.match(text.stdout, /pipeline fresh: layout 1 in force; the newest every live reader reads: 2/);
    assert.match(text.stdout, /worker +w-fresh \(fresh\/a\) +\S+ +reads 1\.\.2/);
    // What a reader of layout 1 writes is in force already: nothing to move.
    const fin = cli(OLDER, "finalize", "fresh");
    assert.equal(fin.status, 0, fin.stderr);
    assert.match(fin.stdout, /layout 1 already in force/);
  });

  test("bad input: a clear error, exit 2", () => {
    const r = cli({}, "status", "no/such");
    assert.equal(r.status, 2);
    assert.match(r.stderr, /invalid pipeline name "no\/such"/);
    const u = cli({}, "frobnicate", "p");
    assert.equal(u.status, 2);
    assert.match(u.stderr, /unknown action "frobnicate"/);
  });

  test("finalize is refused naming a previous-release worker; once it is gone finalize moves on", async () => {
    const previous = previousRelease();
    await worker("w-new", "mix/a");
    const old = await worker("w-old", "mix/b", {}, { release: previous });
    // A pause set at layout 1 (by the previous release's CLI, which writes `paused:` alone) holds on.
    const paused = spawnSync(previous.node, [previous.conveyor, "pause", "mix/b"], {
      env: { ...process.env, REDIS_URL: server.url },
      encoding: "utf8",
    });
    assert.equal(paused.status, 0, paused.stderr);
    const s = await readersAre("mix", ["w-new", "w-old"]);
    const oldReader = s.readers.find((r) => r.id === "w-old")!;
    assert.equal(oldReader.version, undefined, "the previous release reports no layouts");
    assert.deepEqual(oldReader.layouts, { min: 1, max: 1 });
    assert.equal(s.newestReadable, 1);

    const refused = cli({}, "finalize", "mix");
    assert.equal(refused.status, 1, refused.stdout);
    assert.match(
      refused.stderr,
      /cannot finalize layout 2 for pipeline mix: 1 live reader\(s\) do not read it: worker w-old \(mix\/b\) \(a release before layouts\) reads 1/,
    );
    assert.doesNotMatch(refused.stderr, /w-new/);
    assert.equal(status("mix").inForce, 1);

    await stopProcess(old);
    await readersAre("mix", ["w-new"]);
    const fin = cli({}, "finalize", "mix", "--json");
    assert.equal(fin.status, 0, fin.stderr);
    assert.deepEqual(JSON.parse(fin.stdout), { pipeline: "mix", from: 1, to: 2, moved: true });
    const after = status("mix");
    assert.equal(after.inForce, 2);
    assert.equal(after.firstVersion, "the release after 0.1.0 (acb913e)");
    assert.equal(typeof after.finalizedAt, "number");
    // Every queue fenced; the pause set at layout 1 is this release's `hold:` now.
    const meta = await redis.hgetall(new PipelineKeys("mix").meta);
    assert.equal(meta["paused:mix/a"], "1");
    assert.equal(meta["paused:mix/b"], "1");
    assert.equal(meta["hold:mix/a"], undefined);
    assert.equal(meta["hold:mix/b"], "1");
    const admin = new QueueAdmin(redis);
    assert.equal((await admin.control("mix/a")).paused, false, "the fence is not this release's pause");
    assert.equal((await admin.control("mix/b")).paused, true, "the pause set at layout 1 survives finalize");
    await admin.resume("mix/b");
    assert.equal((await admin.control("mix/b")).paused, false);
    assert.equal(await redis.hget(new PipelineKeys("mix").meta, "paused:mix/b"), "1", "the fence stays");

    // A producer that reads layout 1 only refuses to write into it, naming the layout.
    await assert.rejects(
      asOlder(() => new Producer(redis).enqueue("mix/a", 1)),
      (err: unknown) =>
        err instanceof LayoutRefusedError &&
        /pipeline mix is on layout 2; .* reads layouts 1: upgrade to the release after 0\.1\.0 \(acb913e\) or later, which reads layout 2/.test(
          err.message,
        ),
    );
  });

  test("pause and resume at layout 2: this release's hold stops and lifts its own claims, the fence stays; a previous-release resume lifts the fence only until this release's next worker check or enqueue", async () => {
    const previous = previousRelease();
    const meta = new PipelineKeys("mix").meta;
    const admin = new QueueAdmin(redis);
    const w = workers.find((x) => x.logFile.endsWith("w-new.log"))!;
    const polls = async () =>
      metricValue(await w.metrics(), "conveyor_claim_polls_total", { queue: "mix/a" });
    /** Until the worker has sent `n` more claims (woken each round: no waiting on its idle timer). */
    const morePolls = async (n: number) => {
      const from = await polls();
      await waitFor(`${n} more claims by w-new`, async () => {
        await redis.lpush(new QueueKeys("mix/a").wake, "1");
        return (await polls()) >= from + n ? true : null;
      });
    };
    const pause = spawnSync(NODE, [CONVEYOR, "pause", "mix/a"], {
      env: { ...process.env, REDIS_URL: server.url },
      encoding: "utf8",
    });
    assert.equal(pause.status, 0, pause.stderr);
    assert.equal(await redis.hget(meta, "hold:mix/a"), "1");
    assert.equal((await admin.control("mix/a")).paused, true);
    await new Producer(redis).enqueue("mix/a", { i: "held" });
    await morePolls(2);
    assert.equal((await admin.counts("mix/a")).ready, 1, "held: no claim of this release takes it");

    await admin.resume("mix/a");
    assert.equal(await redis.hget(meta, "hold:mix/a"), null);
    assert.equal(await redis.hget(meta, "paused:mix/a"), "1", "the fence stays");
    await waitFor("the held job done", async () =>
      (await admin.counts("mix/a")).completed >= 1 ? true : null,
    );

    // The previous release's resume deletes the fence; this release's worker puts it back at its
    // next layout check (every lease / 3), an enqueue of this release at once.
    const lift = () => {
      const r = spawnSync(previous.node, [previous.conveyor, "resume", "mix/a"], {
        env: { ...process.env, REDIS_URL: server.url },
        encoding: "utf8",
      });
      assert.equal(r.status, 0, r.stderr);
    };
    lift();
    await waitFor("the fence back", async () =>
      (await redis.hget(meta, "paused:mix/a")) === "1" ? true : null,
    );
    await stopProcess(w);
    lift();
    assert.equal(await redis.hget(meta, "paused:mix/a"), null);
    await new Producer(redis).enqueue("mix/a", { i: "fenced" });
    assert.equal(await redis.hget(meta, "paused:mix/a"), "1", "an enqueue puts the fence back");
    assert.equal((await admin.control("mix/a")).paused, false);
  });

  test("rollback after finalize: previous-release workers claim nothing of a layout-2 pipeline (plain, delayed and grouped jobs wait; its CLI shows the queue paused); a worker of this release then runs every job once, none dead", async () => {
    const previous = previousRelease();
    const fin = cli({}, "finalize", "roll", "--json");
    assert.equal(fin.status, 0, fin.stderr);
    assert.equal((JSON.parse(fin.stdout) as { to: number }).to, 2);
    const producer = new Producer(redis);
    const plain = await producer.enqueueMany(
      "roll/a",
      Array.from({ length: 5 }, (_, i) => ({ data: { i } })),
    );
    const due = Date.now() + 300;
    const delayed = await producer.enqueueMany(
      "roll/a",
      Array.from({ length: 3 }, (_, i) => ({ data: { d: i }, delayMs: 300 })),
    );
    const grouped = await producer.enqueueMany(
      "roll/a",
      Array.from({ length: 4 }, (_, i) => ({ data: { g: i }, group: `t${i % 2}` })),
    );
    const ids = [...plain, ...delayed, ...grouped].map((r) => r.id);
    const log = join(dir, "roll-exec.log");
    const olds = [
      await worker("w-roll-old-1", "roll/a", { EXEC_LOG: log }, { release: previous }),
      await worker("w-roll-old-2", "roll/a", { EXEC_LOG: log }, { release: previous }),
    ];
    await waitFor("the delayed jobs due", async () => (Date.now() > due ? true : null));
    // Each previous-release worker sends three claims after the delayed jobs came due.
    const polls = async (w: WorkerProcess) => metricValue(await w.metrics(), "conveyor_claim_polls_total");
    const from = await Promise.all(olds.map(polls));
    await waitFor("three more claims by each previous-release worker", async () => {
      await redis.lpush(new QueueKeys("roll/a").wake, "1", "1");
      const now = await Promise.all(olds.map(polls));
      return now.every((n, i) => n >= from[i]! + 3) ? true : null;
    });
    assert.deepEqual(readExecutions(log), [], "no job ran on the previous release");
    const c = await new QueueAdmin(redis).counts("roll/a");
    assert.equal(c.inflight, 0);
    assert.equal(c.completed, 0);
    assert.equal(c.dead, 0);
    const stats = spawnSync(previous.node, [previous.conveyor, "stats", "roll/a", "--json"], {
      env: { ...process.env, REDIS_URL: server.url },
      encoding: "utf8",
    });
    assert.equal(stats.status, 0, stats.stderr);
    assert.equal(
      (JSON.parse(stats.stdout) as { paused: boolean }).paused,
      true,
      "0.1.0 sees the queue paused",
    );
    assert.equal((await new QueueAdmin(redis).control("roll/a")).paused, false, "this release does not");
    for (const w of olds) await stopProcess(w);

    await worker("w-roll-new", "roll/a", { EXEC_LOG: log });
    await waitFor("every job done", async () =>
      (await new QueueAdmin(redis).counts("roll/a")).completed === ids.length ? true : null,
    );
    const runs = countBy(readExecutions(log), (e) => e.id);
    assert.deepEqual([...runs.keys()].sort(), [...ids].sort());
    assert.ok(
      [...runs.values()].every((n) => n === 1),
      "each job ran once",
    );
    assert.equal((await new QueueAdmin(redis).counts("roll/a")).dead, 0);
  });

  test("a worker that does not read the layout in force refuses at start: exit 1 naming layout, pipeline and version; no job claimed", async () => {
    await redis.hset(new PipelineKeys("ahead").layout, { inForce: "2", firstVersion: "9.9.0" });
    await new Producer(redis).enqueue("ahead/a", { i: 1 });
    const w = await worker("w-behind", "ahead/a", OLDER, { waitReady: false });
    assert.equal(await exitCode(w), 1);
    assert.match(
      w.logs(),
      /conveyor worker: pipeline ahead is on layout 2; this Conveyor \S+ reads layouts 1: upgrade to 9\.9\.0 or later, which reads layout 2/,
    );
    const c = await new QueueAdmin(redis).counts("ahead/a");
    assert.equal(c.ready, 1, "the job waits for a worker that reads it");
    assert.equal(c.dead, 0);
    assert.equal(c.inflight, 0);
  });

  test("a running worker that meets a newer layout stops claiming, turns unready with the reason, drains and exits 1", async () => {
    const flag = join(dir, "release-held");
    const producer = new Producer(redis);
    await producer.enqueue("later/a", { untilFile: flag });
    const w = await worker("w-running", "later/a", OLDER);
    await waitFor(
      "the held job running",
      async () => (await new QueueAdmin(redis).counts("later/a")).inflight === 1,
      15_000,
    );
    // (the layout moves past this worker without it: a finalize that missed its report)
    await redis.hset(new PipelineKeys("later").layout, { inForce: "2", firstVersion: "9.9.0" });
    const reason = await waitFor("the worker unready", async () => {
      const r = await fetch(`http://127.0.0.1:${w.port}/readyz`);
      return r.status === 503 ? r.text() : null;
    });
    assert.match(reason, /pipeline later is on layout 2; .* upgrade to 9\.9\.0 or later/);
    assert.equal(metricValue(await w.metrics(), "conveyor_worker_layout_refused", { queue: "later/a" }), 2);
    writeFileSync(flag, "");
    assert.equal(await exitCode(w), 1);
    const c = await new QueueAdmin(redis).counts("later/a");
    assert.equal(c.completed, 1, "the job it held finished");
    assert.equal(c.dead, 0);
  });

  test("a worker that missed a finalize (its own check not yet due) claims nothing: its claim meets the layout in force, it refuses and exits 1", async () => {
    // (a 60 s lease: the worker's own check of the layout comes every 20 s)
    const w = await worker("w-missed", "missed/a", { ...OLDER, CONVEYOR_LEASE: "60s" });
    await writeLayoutInForce(redis, "missed", 2, { firstVersion: "9.9.0", by: "test" });
    await new Producer(redis).enqueue("missed/a", { i: 1 });
    assert.equal(await exitCode(w), 1);
    assert.match(w.logs(), /pipeline missed is on layout 2; .* upgrade to 9\.9\.0 or later/);
    const c = await new QueueAdmin(redis).counts("missed/a");
    assert.equal(c.ready, 1, "the job waits for a worker that reads it");
    assert.equal(c.completed, 0);
    assert.equal(c.inflight, 0);
    assert.equal(c.dead, 0);

    // The claim's answer itself: nothing for a reader of layout 1, the job for a reader of 2.
    const behind = new Consumer(redis, "missed/a", { workerId: "c-behind", leaseMs: 30_000, readsLayout: 1 });
    const refused = await behind.claim(5);
    assert.deepEqual(refused.jobs, []);
    assert.equal(refused.refusedLayout, 2);
    // (the claim of a settle, complete-and-claim, refuses the same way)
    const settledRefused = await behind.settleMany([], 5);
    assert.deepEqual(settledRefused.jobs, []);
    assert.equal(settledRefused.refusedLayout, 2);
    const ahead = new Consumer(redis, "missed/a", { workerId: "c-ahead", leaseMs: 30_000, readsLayout: 2 });
    const got = await ahead.claim(5);
    assert.equal(got.jobs.length, 1);
    assert.equal(got.refusedLayout, undefined);
  });

  test("GET /pipelines/{p}/layout: the layout in force and every live reader, the API among them; bad input is a 400, an unserved pipeline a 404", async () => {
    // A reader killed two days ago (its report left behind) and one gone two minutes ago.
    const now = Date.now();
    await redis.hset(READERS_KEY, {
      "api:gone:1": JSON.stringify({
        kind: "api",
        version: "0.1.0",
        layouts: [1, 1],
        seen: now - 2 * 86_400_000,
      }),
      "api:gone:2": JSON.stringify({ kind: "api", version: "0.1.0", layouts: [1, 1], seen: now - 120_000 }),
    });
    const api = await startJobApi({
      redis,
      port: await freePort(),
      host: "127.0.0.1",
      dashboardDir: null,
      resourceSampleMs: 0,
    });
    const port = (api.address() as AddressInfo).port;
    const get = (path: string, init?: RequestInit) => fetch(`http://127.0.0.1:${port}${path}`, init);
    try {
      const body = await waitFor("the API among the readers", async () => {
        const r = await get("/pipelines/fresh/layout");
        assert.equal(r.status, 200);
        const b = (await r.json()) as LayoutStatus;
        return b.readers.some((x) => x.kind === "api") ? b : null;
      });
      assert.deepEqual(
        body.readers.filter((x) => x.id.startsWith("api:gone")),
        [],
        "a reader whose report is over a minute old has gone",
      );
      assert.deepEqual(
        (await redis.hkeys(READERS_KEY)).filter((id) => id.startsWith("api:gone")),
        ["api:gone:2"],
        "a report a day old is deleted when a reader starts",
      );
      assert.equal(body.pipeline, "fresh");
      assert.equal(body.inForce, 1);
      assert.deepEqual(body.readers.find((x) => x.kind === "api")!.layouts, { min: 1, max: 2 });
      assert.ok(body.readers.some((x) => x.id === "w-fresh" && x.kind === "worker"));
      const bad = await get("/pipelines/a.b%2Fc/layout");
      assert.equal(bad.status, 400);
      assert.match(((await bad.json()) as { field: string }).field, /path\.pipeline/);
      // The layout moved past this server: its enqueue is refused with the reason, not a 500.
      await redis.hset(new PipelineKeys("beyond").layout, { inForce: "3", firstVersion: "9.9.0" });
      const refused = await get("/queues/beyond%2Fa/jobs", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ data: 1 }),
      });
      const e = (await refused.json()) as { code: string; error: string };
      assert.equal(refused.status, 409, JSON.stringify(e));
      assert.equal(e.code, "layout_refused");
      assert.match(e.error, /pipeline beyond is on layout 3/);
    } finally {
      await new Promise((resolve) => api.close(resolve));
    }
    const limited = await startJobApi({
      redis,
      port: await freePort(),
      host: "127.0.0.1",
      dashboardDir: null,
      resourceSampleMs: 0,
      queues: ["fresh/a"],
    });
    try {
      const r = await fetch(
        `http://127.0.0.1:${(limited.address() as AddressInfo).port}/pipelines/mix/layout`,
      );
      assert.equal(r.status, 404);
    } finally {
      await new Promise((resolve) => limited.close(resolve));
    }
  });
});

describe("the layout in force on a Redis Cluster", () => {
  let server: RedisClusterServer;
  let dir: string;
  let w: WorkerProcess | undefined;
  before(async () => {
    server = await RedisClusterServer.start(3);
    dir = mkdtempSync(join(tmpdir(), "cvy-layout-cluster-"));
  });
  after(async () => {
    if (w) await stopProcess(w, 2000);
    await server.stop();
    if (!process.env.KEEP) rmSync(dir, { recursive: true, force: true });
  });

  test("status finds the pipeline's workers on whichever master holds its slot; finalize and refusal as on one Redis", async () => {
    const cli = (env: Record<string, string>, ...args: string[]) =>
      spawnSync(NODE, [CONVEYOR, "layout", ...args], {
        env: { ...process.env, REDIS_URL: server.url, ...env },
        encoding: "utf8",
      });
    w = await startWorker({
      dir,
      name: "w-cl",
      env: { REDIS_URL: server.url, CONVEYOR_QUEUE: "cl/a", CONVEYOR_HANDLER: RECORDING_HANDLER, ...OLDER },
    });
    const s = await waitFor("the worker listed", async () => {
      const r = cli({}, "status", "cl", "--json");
      assert.equal(r.status, 0, r.stderr);
      const st = JSON.parse(r.stdout) as LayoutStatus;
      return st.readers.some((x) => x.id === "w-cl") ? st : null;
    });
    assert.equal(s.inForce, 1);
    const refused = cli({}, "finalize", "cl");
    assert.equal(refused.status, 1);
    assert.match(refused.stderr, /worker w-cl \(cl\/a\) \S+ reads 1/);
    await stopProcess(w);
    w = undefined;
    const redis = connectRedis(server.url);
    try {
      // (a job waiting: finalize finds the queue by its keys, on whichever master holds them)
      await new Producer(redis).enqueue("cl/a", { i: 1 });
      await waitFor("finalized", async () => cli({}, "finalize", "cl").status === 0);
      assert.equal(await redis.hget(new PipelineKeys("cl").meta, "paused:cl/a"), "1", "the queue fenced");
    } finally {
      redis.disconnect();
    }
    const late = await startWorker({
      dir,
      name: "w-cl-late",
      waitReady: false,
      env: { REDIS_URL: server.url, CONVEYOR_QUEUE: "cl/a", CONVEYOR_HANDLER: RECORDING_HANDLER, ...OLDER },
    });
    assert.equal(await late.exited, 1);
    assert.match(late.logs(), /pipeline cl is on layout 2/);
  });

  test("rollback after finalize on a Cluster: a previous-release worker claims nothing; this release's then runs the job once", async () => {
    const redis = connectRedis(server.url);
    const log = join(dir, "cl-exec.log");
    const env = {
      REDIS_URL: server.url,
      CONVEYOR_QUEUE: "cl/a",
      CONVEYOR_HANDLER: RECORDING_HANDLER,
      EXEC_LOG: log,
    };
    try {
      const old = await startWorker({ dir, name: "w-cl-old", release: previousRelease(), env });
      w = old;
      const polls = async () => metricValue(await old.metrics(), "conveyor_claim_polls_total");
      const from = await polls();
      await waitFor("three more claims by the previous-release worker", async () => {
        await redis.lpush(new QueueKeys("cl/a").wake, "1");
        return (await polls()) >= from + 3 ? true : null;
      });
      assert.deepEqual(readExecutions(log), [], "no job ran on the previous release");
      assert.equal((await new QueueAdmin(redis).counts("cl/a")).ready, 1);
      await stopProcess(old);
      w = await startWorker({ dir, name: "w-cl-new", env });
      await waitFor("the job done", async () =>
        (await new QueueAdmin(redis).counts("cl/a")).completed === 1 ? true : null,
      );
      assert.equal(readExecutions(log).length, 1);
    } finally {
      redis.disconnect();
    }
  });
});

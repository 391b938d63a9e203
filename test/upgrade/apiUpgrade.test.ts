// The job API across two releases on one Redis and one PostgreSQL: the previous release's
// `conveyor api` serving while this release's workers run a two-stage pipeline, this release's
// API in front of the previous release's workers, and the API replaced (previous → this one,
// same port, token and data) while jobs flow. Every job runs once per stage, the counts read
// right, and the job records hold every job once (docs/install.md, "Upgrading").
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, unlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { connectRedis, QueueAdmin, type RedisClient } from "../../queue/index.ts";
import { freePort } from "../support/ports.ts";
import { PostgresServer } from "../support/postgres.ts";
import { startProcess, stopProcess, waitFor, type Started } from "../support/processes.ts";
import { RedisServer } from "../support/redis.ts";
import { previousRelease, THIS_RELEASE } from "../support/releases.ts";
import {
  countBy,
  readExecutions,
  RECORDING_HANDLER,
  startWorker,
  type Release,
  type WorkerProcess,
} from "../support/workers.ts";

const PREVIOUS = previousRelease();
const TOKEN = "api-upgrade-token";
const N = 200;

interface Api extends Started {
  base: string;
  port: number;
  logFile: string;
}

describe("the job API across releases on one Redis + PostgreSQL", () => {
  let redisServer: RedisServer;
  let pg: PostgresServer;
  let redis: RedisClient;
  let admin: QueueAdmin;
  let dir: string;
  const started: Started[] = [];
  let pipelines = 0;

  before(async () => {
    redisServer = await RedisServer.start();
    pg = await PostgresServer.start();
    redis = connectRedis(redisServer.url);
    admin = new QueueAdmin(redis);
    dir = mkdtempSync(join(tmpdir(), "cvy-api-upgrade-"));
  });
  after(async () => {
    for (const p of started) await stopProcess(p, 3000);
    redis?.disconnect();
    await redisServer?.stop();
    await pg?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const env = () => ({ REDIS_URL: redisServer.url, DATABASE_URL: pg.url, CONVEYOR_API_TOKEN: TOKEN });

  /** `release`'s `conveyor api` (on `port`: a restart on the same address). */
  const startApi = async (release: Release, name: string, port?: number): Promise<Api> => {
    port ??= await freePort();
    const base = `http://127.0.0.1:${port}`;
    const logFile = join(dir, `${name}.log`);
    const p = startProcess(
      release.node,
      [release.conveyor, "api", "--port", String(port), "--host", "127.0.0.1"],
      { logFile, env: { ...process.env, KUBECONFIG: "", ...env() } },
    );
    started.push(p);
    await waitFor(`${name} up`, async () => {
      if (p.child.exitCode !== null) throw new Error(`${name} exited with ${p.child.exitCode}`);
      return (await fetch(`${base}/healthz`).catch(() => null))?.ok;
    });
    return { ...p, base, port, logFile };
  };

  /** The recording handler, but a job whose `failWhile` file exists fails for good before it is recorded. */
  const handler = () => {
    const file = join(dir, "failWhile.mjs");
    writeFileSync(
      file,
      `import { existsSync } from "node:fs";
import record from ${JSON.stringify(RECORDING_HANDLER.slice("module:".length))};
export default async function (job, ctx) {
  if (job.data?.failWhile && existsSync(job.data.failWhile))
    throw Object.assign(new Error("planned failure"), { retryable: false });
  return record(job, ctx);
}
`,
    );
    return `module:${file}`;
  };

  const worker = async (release: Release, queue: string, next?: string): Promise<WorkerProcess> => {
    const w = await startWorker({
      dir,
      name: `${queue.replace("/", "-")}-${started.length}`,
      release,
      env: {
        ...env(),
        CONVEYOR_QUEUE: queue,
        CONVEYOR_HANDLER: handler(),
        CONVEYOR_CONCURRENCY: "4",
        EXEC_LOG: join(dir, `${queue.replace("/", "_")}.exec`),
        ...(next ? { CONVEYOR_NEXT_QUEUE: next } : {}),
      },
    });
    started.push(w);
    return w;
  };

  const call = async (api: Api, method: string, path: string, body?: unknown) => {
    const res = await fetch(`${api.base}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${TOKEN}`,
        ...(body === undefined ? {} : { "content-type": "application/json" }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, body: text ? (JSON.parse(text) as Record<string, unknown>) : null, text };
  };
  const ok = async (api: Api, method: string, path: string, body?: unknown) => {
    const r = await call(api, method, path, body);
    assert.ok(r.status < 300, `${method} ${path}: ${r.status} ${r.text}`);
    return r.body!;
  };
  const enqueue = async (api: Api, queue: string, job: Record<string, unknown>) => {
    const body = await ok(api, "POST", `/queues/${encodeURIComponent(queue)}/jobs`, job);
    assert.equal(body.id, job.id);
    assert.equal(body.created, true);
    return body;
  };
  const status = (api: Api, id: string, queue: string) =>
    ok(api, "GET", `/jobs/${encodeURIComponent(id)}?queue=${encodeURIComponent(queue)}`);
  const counts = (api: Api, queue: string) => ok(api, "GET", `/queues/${encodeURIComponent(queue)}`);

  /** Every job of `ids` ran once on each of `queues`; nothing dead or waiting. */
  const auditRuns = async (queues: Record<string, string[]>) => {
    for (const [q, ids] of Object.entries(queues)) {
      await waitFor(
        `${ids.length} jobs completed on ${q}`,
        async () => {
          const c = await admin.counts(q);
          return c.completed + c.dead >= ids.length && c.backlog === 0 ? c : null;
        },
        180_000,
        200,
      );
      const c = await admin.counts(q);
      assert.equal(c.dead, 0, `${q}: dead-lettered by the mix`);
      assert.equal(c.completed, ids.length, `${q}: completed`);
      const runs = countBy(
        readExecutions(join(dir, `${q.replace("/", "_")}.exec`)).filter((e) => e.q === q),
        (e) => e.id,
      );
      assert.deepEqual([...runs.keys()].sort(), [...ids].sort(), `${q}: the jobs that ran`);
      assert.deepEqual(
        [...runs].filter(([, n]) => n !== 1),
        [],
        `${q}: jobs that ran more than once`,
      );
    }
  };

  /** The job records: every job of `ids` once, completed, one completed attempt on each stage. */
  const auditRecords = async (pipeline: string, ids: string[], stages: string[]) => {
    await waitFor(
      `${ids.length} completed records of ${pipeline}`,
      async () =>
        (
          await pg.query<{ n: number }>(
            "SELECT count(*)::int AS n FROM conveyor_jobs WHERE pipeline = $1 AND id = ANY($2) AND state = 'completed'",
            [pipeline, ids],
          )
        )[0]!.n >= ids.length,
      120_000,
      200,
    );
    const rows = await pg.query<{ id: string; state: string }>(
      "SELECT id, state FROM conveyor_jobs WHERE pipeline = $1 AND id = ANY($2)",
      [pipeline, ids],
    );
    assert.deepEqual(
      rows.map((r) => `${r.id}:${r.state}`).sort(),
      ids.map((id) => `${id}:completed`).sort(),
      `${pipeline}: the records`,
    );
    const attempts = await pg.query<{ job_id: string; queue: string; n: number }>(
      `SELECT job_id, queue, count(*)::int AS n FROM conveyor_attempts
        WHERE pipeline = $1 AND job_id = ANY($2) AND outcome = 'completed' GROUP BY job_id, queue`,
      [pipeline, ids],
    );
    for (const q of stages) {
      const onStage = attempts.filter((a) => a.queue === q);
      assert.equal(onStage.length, ids.length, `${q}: jobs with a completed attempt recorded`);
      assert.deepEqual(
        onStage.filter((a) => a.n !== 1),
        [],
        `${q}: more than one completed attempt recorded`,
      );
    }
  };

  for (const [apiRelease, workerRelease, label] of [
    [PREVIOUS, THIS_RELEASE, "the previous release's API, this release's workers"],
    [THIS_RELEASE, PREVIOUS, "this release's API, the previous release's workers"],
  ] as const) {
    test(`${label}: enqueue, read, cancel, retry a dead letter through the API; each job once per stage`, async () => {
      const p = `au${++pipelines}`;
      const [a, b] = [`${p}/a`, `${p}/b`];
      const api = await startApi(apiRelease, `api-${p}`);
      const ids = Array.from({ length: N }, (_, i) => `j${i}`);
      for (const id of ids.slice(0, N / 2)) await enqueue(api, a, { id, data: { i: Number(id.slice(1)) } });
      const batch = await ok(api, "POST", `/queues/${encodeURIComponent(a)}/jobs/batch`, {
        jobs: ids.slice(N / 2).map((id) => ({ id, data: { i: Number(id.slice(1)) } })),
      });
      assert.equal((batch.jobs as unknown[]).length, N / 2, JSON.stringify(batch));
      // (a job delayed far beyond the test, cancelled; one failing its only attempt, retried)
      await enqueue(api, a, { id: "later", data: { i: -1 }, delayMs: 3_600_000 });
      const flag = join(dir, `${p}.fail`);
      writeFileSync(flag, "");
      await enqueue(api, a, { id: "once", data: { i: -2, failWhile: flag } });
      const before = await counts(api, a);
      assert.equal(before.ready, N + 1, JSON.stringify(before));
      assert.equal(before.delayed, 1, JSON.stringify(before));
      assert.equal((await status(api, "j0", a)).state, "ready");
      assert.equal((await status(api, "later", a)).state, "delayed");

      await worker(workerRelease, a, b);
      await worker(workerRelease, b);
      await ok(api, "POST", `/jobs/later/cancel?queue=${encodeURIComponent(a)}`);
      assert.equal((await status(api, "later", a)).state, "cancelled");
      await waitFor("once dead", async () => (await status(api, "once", a)).state === "dead");
      const dead = await ok(api, "GET", `/queues/${encodeURIComponent(a)}/dead`);
      assert.deepEqual(
        (dead.dead as { id: string }[]).map((j) => j.id),
        ["once"],
        JSON.stringify(dead),
      );
      unlinkSync(flag);
      await ok(api, "POST", `/queues/${encodeURIComponent(a)}/dead/retry`, { ids: ["once"] });

      const all = [...ids, "once"];
      await auditRuns({ [a]: all, [b]: all });
      const done = (await status(api, "j7", b)) as { state: string };
      assert.equal(done.state, "completed");
      for (const q of [a, b]) {
        const c = await counts(api, q);
        assert.deepEqual(
          [c.ready, c.delayed, c.inflight, c.dead, c.completed],
          [0, 0, 0, 0, all.length],
          `${q} as the API counts it: ${JSON.stringify(c)}`,
        );
      }
      await auditRecords(p, all, [a, b]);
      // What the API reads from the records the other release's recorders wrote.
      const listed = await ok(api, "GET", `/queues/${encodeURIComponent(b)}/jobs?state=completed&limit=200`);
      const items = listed.items as { state: string; queue: string }[];
      assert.equal(items.length, 200);
      assert.deepEqual(new Set(items.map((j) => `${j.queue} ${j.state}`)), new Set([`${b} completed`]));
      const stats = await ok(api, "GET", `/queues/${encodeURIComponent(a)}/stats`);
      assert.equal(
        (stats.minutes as { completed: number }[]).reduce((n, m) => n + m.completed, 0),
        all.length,
        "jobs/min from the records",
      );
      const created = await pg.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM conveyor_jobs WHERE pipeline = $1 AND id = ANY($2) AND created_at IS NOT NULL",
        [p, all],
      );
      // This release's API switches records on before its first enqueue; 0.1.0's does not, so jobs
      // it accepts before a worker with a database starts miss their enqueue record (docs/install.md).
      assert.equal(created[0]!.n, apiRelease === THIS_RELEASE ? all.length : 0, "records with their enqueue");
      await stopProcess(api, 3000);
    });
  }

  test("the API replaced mid-run, previous → this release → this release again, same port, token and data: only the restart windows fail, records hold every job once", async (t) => {
    const p = `au${++pipelines}`;
    const [a, b] = [`${p}/a`, `${p}/b`];
    // Workers and recorders of both releases on both stages: each drains the outbox it finds.
    await worker(PREVIOUS, a, b);
    await worker(THIS_RELEASE, a, b);
    await worker(PREVIOUS, b);
    await worker(THIS_RELEASE, b);
    let api = await startApi(PREVIOUS, "api-old");
    const { port, base } = api;
    const failures: { t: number; id: string; what: string }[] = [];
    const accepted: string[] = [];
    let stop = false;
    const producer = (async () => {
      for (let i = 0; !stop; i++) {
        const id = `r${i}`;
        const t = Date.now();
        // (a failure counts when it happens: a request in flight when an API stops fails in its window)
        const failed = (what: string) => failures.push({ t: Date.now(), id, what: `${what} (sent at ${t})` });
        try {
          const res = await fetch(`${base}/queues/${encodeURIComponent(a)}/jobs`, {
            method: "POST",
            headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
            body: JSON.stringify({ id, data: { i, sleepMs: 2 } }),
          });
          const text = await res.text();
          if (res.status === 202) accepted.push(id);
          else failed(`${res.status} ${text}`);
          const read = await fetch(`${base}/jobs/${id}?queue=${encodeURIComponent(a)}`, {
            headers: { authorization: `Bearer ${TOKEN}` },
          });
          if (res.status === 202 && read.status !== 200) failed(`GET: ${read.status} ${await read.text()}`);
          else await read.arrayBuffer();
        } catch (err) {
          failed(`${(err as Error).message}: ${((err as Error).cause as Error)?.message}`);
        }
      }
    })();
    /** The API replaced by `release`'s on the same port once 100 more jobs were accepted; the window. */
    const replace = async (release: Release, name: string) => {
      const mark = accepted.length;
      await waitFor(
        `100 more accepted before ${name}`,
        async () => accepted.length >= mark + 100,
        60_000,
        20,
      );
      const from = Date.now();
      await stopProcess(api, 15_000);
      api = await startApi(release, name, port);
      return { from, to: Date.now() };
    };
    const windows = [await replace(THIS_RELEASE, "api-new"), await replace(THIS_RELEASE, "api-new-again")];
    const mark = accepted.length;
    await waitFor("100 more accepted after", async () => accepted.length >= mark + 100, 60_000, 20);
    stop = true;
    await producer;
    const inWindow = (w: { from: number; to: number }) =>
      failures.filter((f) => f.t >= w.from && f.t <= w.to);
    assert.deepEqual(
      failures.filter((f) => !windows.some((w) => f.t >= w.from && f.t <= w.to)),
      [],
      "requests that failed outside the restart windows",
    );
    // A request cut in a window may have been applied all the same (its answer lost): its job runs like the rest.
    const answerLost = async (w: { from: number; to: number }) => {
      const ids = new Set(
        inWindow(w)
          .map((f) => f.id)
          .filter((id) => !accepted.includes(id)),
      );
      const out: string[] = [];
      for (const id of ids) if (await admin.job(id, a)) out.push(id);
      return out;
    };
    const lost = [await answerLost(windows[0]!), await answerLost(windows[1]!)];
    windows.forEach((w, k) =>
      t.diagnostic(
        `${k === 0 ? "0.1.0 → this release" : "this release → this release"}: window ${w.to - w.from} ms, ` +
          `${inWindow(w).length} requests failed in it, ${lost[k]!.length} applied with the answer lost`,
      ),
    );
    assert.deepEqual(
      lost[1],
      [],
      "this release's API stopped with an enqueue in flight: applied, answer lost",
    );
    const applied = [...accepted, ...lost[0]!];
    t.diagnostic(`${accepted.length} accepted`);
    await auditRuns({ [a]: applied, [b]: applied });
    await auditRecords(p, applied, [a, b]);
  });
});

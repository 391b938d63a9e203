// Two releases of Conveyor side by side on one Redis and on a Redis Cluster: the previous
// release (scripts/previous-release.sh) and this one. Producers of either (TypeScript and Python)
// feed workers of the other; a pool's workers roll from one release to the other mid-run with
// warm shutdown; this release's job fields (task, attempt error kinds, contracts) meet the
// previous release. Every job runs once per stage, nothing is dead-lettered or stuck, and both
// releases count the backlog alike (docs/install.md, "Upgrading").
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import {
  connectRedis,
  ContractViolationError,
  parseAttemptErrors,
  PipelineKeys,
  Producer,
  QueueAdmin,
  resourceState,
  setContract,
  type RedisClient,
} from "../../queue/index.ts";
import { stopProcess, waitFor } from "../support/processes.ts";
import { RedisClusterServer, RedisServer } from "../support/redis.ts";
import { previousRelease, releaseClient, releasePyClient, THIS_RELEASE } from "../support/releases.ts";
import {
  countBy,
  readExecutions,
  RECORDING_HANDLER,
  startWorker,
  type Release,
  type WorkerProcess,
} from "../support/workers.ts";

const PREVIOUS = previousRelease();
const RELEASES: Record<string, Release> = { previous: PREVIOUS, new: THIS_RELEASE };

// The load: LOAD jobs through two stages (CONVEYOR_LOAD_JOBS overrides it).
const LOAD = Number(process.env.CONVEYOR_LOAD_JOBS ?? 2000);
const FAN_OUT = 20;
/** The resource every load job of a pipeline with `uses` spends (one key, a budget that binds at full speed). */
const BUDGET = "api";
const BUDGET_LIMITS = "requests=400/1s";

/**
 * Jobs of every shape the previous release could write: priorities, delays, groups, a resource's
 * budget (`uses`), and every 1000th a fan-out of FAN_OUT children into the next stage joined on
 * `join`.
 */
function mixedJobs(n: number, extra: Record<string, unknown> = {}, join?: string) {
  return Array.from({ length: n }, (_, i) => {
    const grouped = i % 3 === 0;
    return {
      id: `m${i}`,
      data: join && i % 1000 === 2 ? { fanOut: FAN_OUT, join, ...extra } : { i, ...extra },
      ...(i % 10 === 0 ? { priority: 5 } : {}),
      ...(i % 7 === 0 ? { delayMs: 300 } : {}),
      ...(grouped ? { group: `g${i % 4}` } : {}),
      ...(!grouped && i % 5 === 1 ? { uses: { [BUDGET]: {} } } : {}),
    };
  });
}
/** How many jobs each queue of a load's pipeline runs: the fan-out parents complete on the first stage, their children run on the second, one join each. */
function expected(jobs: { data: unknown }[], a: string, b: string, j: string): Record<string, number> {
  const parents = jobs.filter((job) => "fanOut" in (job.data as object)).length;
  return { [a]: jobs.length, [b]: jobs.length - parents + parents * FAN_OUT, [j]: parents };
}

for (const where of ["one Redis", "a 3-node Redis Cluster"] as const) {
  describe(`two releases side by side on ${where}`, () => {
    let server: RedisServer | RedisClusterServer;
    let redis: RedisClient;
    let admin: QueueAdmin;
    let dir: string;
    const workers: WorkerProcess[] = [];
    let pipelines = 0;
    before(async () => {
      server = where === "one Redis" ? await RedisServer.start() : await RedisClusterServer.start(3);
      redis = connectRedis(server.url);
      admin = new QueueAdmin(redis);
      dir = mkdtempSync(join(tmpdir(), "cvy-upgrade-"));
    });
    after(async () => {
      await Promise.all(workers.map((w) => stopProcess(w, 2000)));
      redis.disconnect();
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    });

    const execLog = (queue: string) => join(dir, `${queue.replace("/", "_")}.exec`);
    const worker = async (
      release: Release,
      queue: string,
      next?: string,
      env: Record<string, string> = {},
    ) => {
      const w = await startWorker({
        dir,
        name: `${queue.replace("/", "-")}-${workers.length}`,
        release,
        env: {
          REDIS_URL: server.url,
          CONVEYOR_QUEUE: queue,
          CONVEYOR_HANDLER: RECORDING_HANDLER,
          CONVEYOR_CONCURRENCY: "8",
          EXEC_LOG: execLog(queue),
          ...(next ? { CONVEYOR_NEXT_QUEUE: next } : {}),
          ...env,
        },
      });
      workers.push(w);
      return w;
    };
    const enqueue = (release: Release, queue: string, jobs: unknown[]) => {
      const file = join(dir, `jobs-${queue.replace("/", "_")}.json`);
      writeFileSync(file, JSON.stringify(jobs));
      return releaseClient(release, server.url, ["enqueue", queue, file]) as string[];
    };
    const countsBy = (release: Release, queues: string[]) =>
      releaseClient(release, server.url, ["counts", ...queues]) as Record<
        string,
        { ready: number; delayed: number; inflight: number; dead: number }
      >;
    /** Every job once per stage, none dead, nothing left. */
    const audit = async (stages: string[] | Record<string, number>, all = 0) => {
      const totals = Array.isArray(stages) ? Object.fromEntries(stages.map((q) => [q, all])) : stages;
      for (const [q, total] of Object.entries(totals))
        await waitFor(
          `${total} jobs completed on ${q}`,
          async () => {
            const c = await admin.counts(q);
            return c.completed + c.dead >= total && c.backlog === 0 ? c : null;
          },
          240_000,
          200,
        );
      for (const [q, total] of Object.entries(totals)) {
        const c = await admin.counts(q);
        assert.equal(c.dead, 0, `${q}: dead-lettered by the upgrade`);
        assert.equal(c.completed, total, `${q}: completed`);
        const perJob = countBy(readExecutions(execLog(q)), (e) => e.id);
        assert.equal(perJob.size, total, `${q}: jobs that ran`);
        assert.deepEqual(
          [...perJob].filter(([, n]) => n !== 1),
          [],
          `${q}: jobs that ran more than once`,
        );
      }
      const queues = Object.keys(totals);
      const alike = (release: Release) =>
        Object.values(countsBy(release, queues)).map(({ ready, delayed, inflight, dead }) => ({
          ready,
          delayed,
          inflight,
          dead,
        }));
      assert.deepEqual(alike(PREVIOUS), alike(THIS_RELEASE), "both releases count the ended pipeline alike");
    };
    /** The resource's key admitted at least every job of the first stage that uses it. */
    const budgetSpent = async (a: string, jobs: object[]) => {
      const state = await resourceState(redis, a, BUDGET);
      const using = jobs.filter((job) => "uses" in job).length;
      assert.ok(
        using > 0 && state!.keys[0]!.admitted >= using,
        `${state!.keys[0]!.admitted} admitted, ${using} use it`,
      );
    };

    /** A load's three queues, the budget set by `release`'s own library, and workers of `release` on each. */
    const loadPipeline = async (release: Release | null, concurrency = "8") => {
      const p = `up${++pipelines}`;
      const [a, b, j] = [`${p}/a`, `${p}/b`, `${p}/j`];
      const started: WorkerProcess[] = [];
      if (release) {
        const env = { CONVEYOR_CONCURRENCY: concurrency };
        started.push(await worker(release, a, b, env), await worker(release, b, undefined, env));
        started.push(await worker(release, j, undefined, env));
      }
      return { p, a, b, j, started };
    };
    /** What waits (ready + delayed: a delay falling due moves jobs between the two) as each client reads it. */
    const waiting = (counts: { ready: number; delayed: number; inflight: number; dead: number }) => ({
      waiting: counts.ready + counts.delayed,
      inflight: counts.inflight,
      dead: counts.dead,
    });

    for (const [from, to] of [
      ["previous", "new"],
      ["new", "previous"],
    ] as const) {
      test(`${from} producers → ${to} workers: ${LOAD} jobs through two stages with a fan-out and a budget, each once, both count the backlog alike`, async () => {
        const { a, b, j } = await loadPipeline(null);
        releaseClient(RELEASES[from]!, server.url, ["resource", a, BUDGET, BUDGET_LIMITS]);
        const jobs = mixedJobs(LOAD, {}, j);
        const ids = enqueue(RELEASES[from]!, a, jobs);
        assert.equal(ids.length, LOAD);
        const read = (release: Release) => waiting(countsBy(release, [a])[a]!);
        assert.deepEqual(read(THIS_RELEASE), { waiting: LOAD, inflight: 0, dead: 0 });
        assert.deepEqual(read(PREVIOUS), read(THIS_RELEASE), "both releases read the same backlog");
        await worker(RELEASES[to]!, a, b);
        await worker(RELEASES[to]!, b);
        await worker(RELEASES[to]!, j);
        await audit(expected(jobs, a, b, j));
        await budgetSpent(a, jobs);
      });

      test(`the ${from} Python client → ${to} workers: 500 jobs through two stages, each once, both clients count the backlog alike`, async () => {
        const { a, b, j } = await loadPipeline(null);
        releaseClient(RELEASES[from]!, server.url, ["resource", a, BUDGET, BUDGET_LIMITS]);
        const jobs = mixedJobs(500, {}, j).map((job) => ({ ...job, id: `py${job.id}` }));
        const file = join(dir, `py-${a.replace("/", "_")}.json`);
        writeFileSync(file, JSON.stringify(jobs));
        const ids = releasePyClient(RELEASES[from]!, server.url, ["enqueue", a, file]) as string[];
        assert.deepEqual(
          ids,
          jobs.map((job) => job.id),
        );
        const py = (release: Release) =>
          waiting((releasePyClient(release, server.url, ["stats", a]) as Record<string, never>)[a]!);
        assert.deepEqual(py(PREVIOUS), { waiting: 500, inflight: 0, dead: 0 });
        assert.deepEqual(py(THIS_RELEASE), py(PREVIOUS), "both Python clients read the same backlog");
        assert.deepEqual(waiting(countsBy(THIS_RELEASE, [a])[a]!), py(PREVIOUS), "and the TypeScript admin");
        await worker(RELEASES[to]!, a, b);
        await worker(RELEASES[to]!, b);
        await worker(RELEASES[to]!, j);
        await audit(expected(jobs, a, b, j));
        await budgetSpent(a, jobs);
      });
    }

    test(`a rolling restart from the previous release to the new one while ${LOAD} jobs run: each once per stage, every old worker exits 0`, async () => {
      const { a, b, j, started: old } = await loadPipeline(PREVIOUS, "4");
      old.push(await worker(PREVIOUS, a, b, { CONVEYOR_CONCURRENCY: "4" }));
      old.push(await worker(PREVIOUS, b, undefined, { CONVEYOR_CONCURRENCY: "4" }));
      releaseClient(PREVIOUS, server.url, ["resource", a, BUDGET, BUDGET_LIMITS]);
      const half = LOAD / 2;
      const jobs = [
        ...mixedJobs(half, { sleepMs: 5 }, j),
        ...mixedJobs(half, { sleepMs: 5 }, j).map((job) => ({ ...job, id: `n${job.id}` })),
      ];
      enqueue(PREVIOUS, a, jobs.slice(0, half));
      enqueue(THIS_RELEASE, a, jobs.slice(half));
      await waitFor(
        `${half / 2} done on the first stage`,
        async () => (await admin.counts(a)).completed >= half / 2,
        120_000,
        50,
      );
      // One pod at a time, as a Deployment's rolling update does: the new one ready, then the old one drained.
      const nextOf: Record<string, string | undefined> = { [a]: b, [b]: undefined, [j]: undefined };
      const queueOf = new Map(old.map((w, k) => [w, [a, b, j, a, b][k]!]));
      for (const w of old) {
        const stage = queueOf.get(w)!;
        await worker(THIS_RELEASE, stage, nextOf[stage], { CONVEYOR_CONCURRENCY: "4" });
        w.signal("SIGTERM");
        assert.equal(await w.exited, 0, w.logs());
      }
      await audit(expected(jobs, a, b, j));
      await budgetSpent(a, jobs);
    });

    test("a job a new producer enqueued with a task, claimed by a previous worker: its default handler runs it once, nothing lost or dead", async () => {
      const a = `up${++pipelines}/a`;
      const jobs = Array.from({ length: 50 }, (_, i) => ({ id: `t${i}`, data: { i }, task: "resize" }));
      await new Producer(redis).enqueueMany(a, jobs);
      assert.equal((await admin.job("t0", a))?.task, "resize");
      await worker(PREVIOUS, a);
      await audit([a], 50);
      const job = await admin.job("t0", a);
      assert.equal(job?.task, "resize", "the record keeps its task");
      assert.deepEqual(JSON.parse(job!.result!), { i: 0 }, "the previous worker's default handler ran it");
    });

    test("attempt errors across releases, attempts alternating: each release reads the other's entries (the previous one's as kind exception), a retry sees them all", async () => {
      const a = `up${++pipelines}/a`;
      // (a handler both releases load, recording what each attempt was told of the ones before it)
      const handler = join(dir, "previousErrors.mjs");
      writeFileSync(
        handler,
        `import { appendFileSync } from "node:fs";
export default async function (job) {
  appendFileSync(process.env.EXEC_LOG, JSON.stringify({ id: job.id, attempt: job.attempt, previous: job.previousErrors ?? null }) + "\\n");
  if (job.attempt <= job.data.failTimes) throw new Error("planned failure " + job.attempt);
  return { ok: true };
}
`,
      );
      // (a long backoff: the test decides which release runs the next attempt, by promoting the job.
      // Retries draw a uniform delay up to the cap — with a 5 m cap one CI run drew under the few
      // seconds a worker takes to start — so the cap is 1000 h: a draw under 10 s is 3 in a million.)
      const env = {
        CONVEYOR_BACKOFF_BASE: "1000h",
        CONVEYOR_BACKOFF_MAX: "1000h",
        CONVEYOR_HANDLER: `module:${handler}`,
      };
      await new Producer(redis).enqueue(a, { failTimes: 3 }, { id: "x", attempts: 4 });
      /** Attempt n of x on a worker of `release`, stopped once x is failed n times (or completed). */
      const ranOn = async (release: Release, n: number) => {
        const w = await worker(release, a, undefined, env);
        if (n > 1) assert.equal((await admin.promote("x", a)).outcome, "promoted");
        const job = await waitFor(`attempt ${n} of x ended`, async () => {
          const job = await admin.job("x", a);
          if (job?.state === "completed") return job;
          return job?.state === "delayed" && parseAttemptErrors(job.errors).length === n ? job : null;
        });
        w.signal("SIGTERM");
        assert.equal(await w.exited, 0, w.logs());
        return parseAttemptErrors(job.errors).map(({ attempt, kind, message }) => ({
          attempt,
          kind,
          message,
        }));
      };
      const failure = (attempt: number) => ({
        attempt,
        kind: "exception",
        message: `planned failure ${attempt}`,
      });

      assert.deepEqual(
        await ranOn(PREVIOUS, 1),
        [failure(1)],
        "the previous release's {attempt, token, at, error} entry",
      );
      assert.deepEqual(await ranOn(THIS_RELEASE, 2), [failure(1), failure(2)]);
      const seen = releaseClient(PREVIOUS, server.url, ["job", "x", a]) as { state: string };
      assert.equal(seen.state, "delayed", "the previous admin reads the record");
      assert.deepEqual(
        await ranOn(PREVIOUS, 3),
        [failure(1), failure(2), failure(3)],
        "the previous release appends after this release's entry",
      );
      await ranOn(THIS_RELEASE, 4);
      assert.equal((await admin.job("x", a))?.state, "completed");
      const runs = readFileSync(execLog(a), "utf8")
        .trim()
        .split("\n")
        .map(
          (line) =>
            JSON.parse(line) as { attempt: number; previous: { kind: string; message: string }[] | null },
        );
      assert.deepEqual(
        runs.map((e) => e.attempt),
        [1, 2, 3, 4],
        "each attempt ran once",
      );
      assert.deepEqual(
        runs[3]!.previous!.map(({ kind, message }) => `${kind}: ${message}`),
        [1, 2, 3].map((n) => `exception: planned failure ${n}`),
        "the last attempt, on this release, is told of all three",
      );
      assert.equal((await admin.counts(a)).dead, 0);
    });

    test("a contract on a stage: previous producers' jobs are not checked (and run), previous workers check no result", async () => {
      const p = `up${++pipelines}`;
      const [a, c] = [`${p}/a`, `${p}/c`];
      const data = { type: "object", required: ["i"], properties: { i: { type: "integer" } } };
      await setContract(redis, a, { data }, "test");
      // (a result contract every result of the recording handler for { n } breaks)
      await setContract(redis, c, { result: { type: "object", required: ["never"] } }, "test");
      assert.deepEqual(
        enqueue(PREVIOUS, a, [
          { id: "bad", data: { name: "x" } },
          { id: "good", data: { i: 1 } },
        ]),
        ["bad", "good"],
        "the previous producer checks no contract",
      );
      await assert.rejects(new Producer(redis).enqueue(a, { name: "x" }), ContractViolationError);
      await worker(THIS_RELEASE, a);
      await audit([a], 2);
      enqueue(PREVIOUS, c, [{ id: "r", data: { n: 1 } }]);
      await worker(PREVIOUS, c);
      await audit([c], 1);
    });

    test("a flow whose parent a previous worker completed: its dependent waits until repairFlow tells it, then runs once", async () => {
      const p = `up${++pipelines}`;
      const [a, b] = [`${p}/a`, `${p}/b`];
      const { flowId, ids } = await new Producer(redis).enqueueFlow(p, [
        { key: "root", queue: a, data: { i: 1 } },
        { key: "leaf", queue: b, data: { i: 2 }, parents: ["root"] },
        { key: "other", queue: b, data: { i: 3 } },
      ]);
      await worker(PREVIOUS, a);
      await worker(PREVIOUS, b);
      await waitFor("root and other completed", async () => {
        const [root, other] = [await admin.job(ids.root!, p), await admin.job(ids.other!, p)];
        return root?.state === "completed" && other?.state === "completed";
      });
      // (the previous release never reads `dependents`: nothing will change this state)
      assert.equal((await admin.job(ids.leaf!, p))?.state, "waiting-children");
      assert.deepEqual(await admin.repairFlow(flowId), {
        id: flowId,
        outcome: "repaired",
        jobsTold: 2,
        jobsGone: 0,
        total: 3,
      });
      await audit({ [a]: 1, [b]: 2 });
      assert.equal(
        (await admin.repairFlow(flowId)).jobsTold,
        1,
        "the leaf, ended since; root and other are not told twice",
      );
      assert.equal((await admin.repairFlow(flowId)).jobsTold, 0);
      assert.ok(
        (await redis.ttl(new PipelineKeys(p).flow(flowId))) > 0,
        "every job told: the flow's hash expires",
      );
    });

    test("a flow whose parent a previous worker dead-lettered: repairFlow cancels its dependent by its policy", async () => {
      const p = `up${++pipelines}`;
      const { flowId, ids } = await new Producer(redis).enqueueFlow(p, [
        { key: "root", queue: `${p}/a`, data: { final: true } },
        { key: "leaf", queue: `${p}/b`, data: { i: 2 }, parents: ["root"] },
      ]);
      await worker(PREVIOUS, `${p}/a`);
      await waitFor("root dead", async () => (await admin.job(ids.root!, p))?.state === "dead");
      assert.equal((await admin.job(ids.leaf!, p))?.state, "waiting-children");
      assert.equal((await admin.repairFlow(flowId)).jobsTold, 1);
      const leaf = await admin.job(ids.leaf!, p);
      assert.equal(leaf?.state, "cancelled");
      assert.match(JSON.stringify(leaf), /parent root \([^)]+\) is dead/);
    });
  });
}

// Two releases of Conveyor side by side on one Redis and on a Redis Cluster: the previous
// release (scripts/previous-release.sh) and this one. Producers of either feed workers of the
// other; a pool's workers roll from one release to the other mid-run with warm shutdown. Every
// job runs once per stage, nothing is dead-lettered or stuck, and both releases count the
// backlog alike.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { connectRedis, QueueAdmin, type RedisClient } from "../../queue/index.ts";
import { stopProcess, waitFor } from "../support/processes.ts";
import { RedisClusterServer, RedisServer } from "../support/redis.ts";
import { previousRelease, releaseClient, THIS_RELEASE } from "../support/releases.ts";
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

/** Jobs of every shape the previous release could write: priorities, delays, groups. */
function mixedJobs(n: number, extra: Record<string, unknown> = {}) {
  return Array.from({ length: n }, (_, i) => ({
    id: `m${i}`,
    data: { i, ...extra },
    ...(i % 10 === 0 ? { priority: 5 } : {}),
    ...(i % 7 === 0 ? { delayMs: 300 } : {}),
    ...(i % 3 === 0 ? { group: `g${i % 4}` } : {}),
  }));
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
    const audit = async (stages: string[], total: number) => {
      for (const q of stages)
        await waitFor(
          `${total} jobs completed on ${q}`,
          async () => {
            const c = await admin.counts(q);
            return c.completed + c.dead >= total && c.backlog === 0 ? c : null;
          },
          240_000,
          200,
        );
      for (const q of stages) {
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
    };

    for (const [from, to] of [
      ["previous", "new"],
      ["new", "previous"],
    ] as const) {
      test(`${from} producers → ${to} workers: 300 jobs through two stages, each once, both count the backlog alike`, async () => {
        const p = `up${++pipelines}`;
        const [a, b] = [`${p}/a`, `${p}/b`];
        const ids = enqueue(RELEASES[from]!, a, mixedJobs(300));
        assert.equal(ids.length, 300);
        // (what a delay makes due moves between the two reads: compare what waits in all)
        const waiting = (release: Release) => {
          const c = countsBy(release, [a])[a]!;
          return { waiting: c.ready + c.delayed, inflight: c.inflight, dead: c.dead };
        };
        assert.deepEqual(waiting(THIS_RELEASE), { waiting: 300, inflight: 0, dead: 0 });
        assert.deepEqual(waiting(PREVIOUS), waiting(THIS_RELEASE), "both releases read the same backlog");
        await worker(RELEASES[to]!, a, b);
        await worker(RELEASES[to]!, b);
        await audit([a, b], 300);
      });
    }

    test("a rolling restart from the previous release to the new one while 800 jobs run: each once per stage, every old worker exits 0", async () => {
      const p = `up${++pipelines}`;
      const [a, b] = [`${p}/a`, `${p}/b`];
      const old = [
        await worker(PREVIOUS, a, b, { CONVEYOR_CONCURRENCY: "4" }),
        await worker(PREVIOUS, a, b, { CONVEYOR_CONCURRENCY: "4" }),
        await worker(PREVIOUS, b, undefined, { CONVEYOR_CONCURRENCY: "4" }),
        await worker(PREVIOUS, b, undefined, { CONVEYOR_CONCURRENCY: "4" }),
      ];
      enqueue(PREVIOUS, a, mixedJobs(400, { sleepMs: 10 }));
      enqueue(
        THIS_RELEASE,
        a,
        mixedJobs(400, { sleepMs: 10 }).map((j) => ({ ...j, id: `n${j.id}` })),
      );
      await waitFor(
        "200 done on the first stage",
        async () => (await admin.counts(a)).completed >= 200,
        120_000,
        50,
      );
      // One pod at a time, as a Deployment's rolling update does: the new one ready, then the old one drained.
      for (const w of old) {
        const stage = w === old[0] || w === old[1] ? a : b;
        await worker(THIS_RELEASE, stage, stage === a ? b : undefined, { CONVEYOR_CONCURRENCY: "4" });
        w.signal("SIGTERM");
        assert.equal(await w.exited, 0, w.logs());
      }
      await audit([a, b], 800);
    });
  });
}

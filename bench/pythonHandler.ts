// One Python stage three ways, a 1 ms handler, one worker process at concurrency 8:
//   node bench/pythonHandler.ts [--jobs N] [--concurrency C] [--reps R]
// python: (the worker's own Python process, frames over stdin/stdout), http (the kit's serve()
// sidecar on loopback) and module (a JS handler, for the floor). Per kind: jobs/s from the first
// start to the last completion, and the p50 of each job's claim → settle time (its record's
// startedAt → finishedAt) less the 1 ms of work: what the kind adds per job. The last stdout
// line is the JSON of the medians over the repetitions.
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connectRedis, Producer } from "../queue/index.ts";
import { freePort } from "../test/support/ports.ts";
import { waitFor, stopProcess } from "../test/support/processes.ts";
import { RedisServer } from "../test/support/redis.ts";
import { REPO, startWorker } from "../test/support/workers.ts";
import { intFlag, cliFlags } from "./lib/util.ts";

const flags = cliFlags(["concurrency", "jobs", "reps"]);
const JOBS = intFlag(flags, "jobs", 2000);
const CONCURRENCY = intFlag(flags, "concurrency", 8);
const REPS = intFlag(flags, "reps", 3);
const HANDLERS = join(REPO, "bench/handlers");
const PYTHONPATH = [HANDLERS, join(REPO, "clients/python")].join(":");
type Kind = "python" | "http" | "module";

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function run(kind: Kind, rep: number, server: RedisServer, dir: string) {
  const redis = connectRedis(server.url);
  const q = `b${rep}${kind}/s`;
  let sidecar;
  let handler = "python:one_ms:handle";
  if (kind === "module") handler = `module:${join(HANDLERS, "oneMs.ts")}`;
  if (kind === "http") {
    const port = await freePort();
    sidecar = spawn(
      "python3",
      ["-c", `from one_ms import handle; from conveyor.handler import serve; serve(handle, port=${port})`],
      {
        env: { ...process.env, PYTHONPATH },
        stdio: "ignore",
        detached: true,
      },
    );
    await waitFor(
      "sidecar",
      async () => (await fetch(`http://127.0.0.1:${port}/healthz`).catch(() => null))?.ok,
    );
    handler = `http://127.0.0.1:${port}/run`;
  }
  const producer = new Producer(redis);
  const ids: string[] = [];
  for (let i = 0; i < JOBS; i += 500) {
    const batch = await producer.enqueueMany(
      q,
      Array.from({ length: Math.min(500, JOBS - i) }, (_, k) => ({ data: { i: i + k } })),
    );
    ids.push(...batch.map((b) => b.id));
  }
  const w = await startWorker({
    dir,
    name: `${kind}${rep}`,
    env: {
      REDIS_URL: server.url,
      CONVEYOR_QUEUE: q,
      CONVEYOR_HANDLER: handler,
      CONVEYOR_CONCURRENCY: String(CONCURRENCY),
      LOG_LEVEL: "warn",
      PYTHONPATH,
    },
  });
  const key = (id: string) => `cvy:{${q.split("/")[0]}}:job:${id}`;
  await waitFor(
    "every record final",
    async () => {
      const p = redis.pipeline();
      for (const id of ids) p.hget(key(id), "state");
      const states = (await p.exec())!.map(([, s]) => s);
      return states.every((s) => s === "completed");
    },
    600_000,
    500,
  );
  const p = redis.pipeline();
  for (const id of ids) p.hmget(key(id), "startedAt", "finishedAt");
  const times = (await p.exec())!.map(([, v]) => (v as string[]).map(Number) as [number, number]);
  const first = Math.min(...times.map((t) => t[0]));
  const last = Math.max(...times.map((t) => t[1]));
  await stopProcess(w, 10_000);
  if (sidecar) process.kill(-sidecar.pid!, "SIGKILL");
  redis.disconnect();
  return {
    kind,
    jobsPerSec: Math.round((JOBS / (last - first)) * 1000),
    p50OverheadMs: median(times.map((t) => t[1] - t[0])) - 1,
  };
}

const server = await RedisServer.start();
const dir = mkdtempSync(join(tmpdir(), "cvy-bench-py-"));
const results: Awaited<ReturnType<typeof run>>[] = [];
try {
  for (let rep = 0; rep < REPS; rep++) {
    const order: Kind[] = (["python", "http", "module"] as Kind[])
      .slice(rep % 3)
      .concat((["python", "http", "module"] as Kind[]).slice(0, rep % 3));
    for (const kind of order) {
      const r = await run(kind, rep, server, dir);
      process.stderr.write(
        `rep ${rep} ${kind}: ${r.jobsPerSec} jobs/s, p50 overhead ${r.p50OverheadMs} ms\n`,
      );
      results.push(r);
    }
  }
} finally {
  await server.stop();
  rmSync(dir, { recursive: true, force: true });
}
const summary = Object.fromEntries(
  (["python", "http", "module"] as Kind[]).map((k) => {
    const rs = results.filter((r) => r.kind === k);
    return [
      k,
      {
        jobsPerSec: median(rs.map((r) => r.jobsPerSec)),
        p50OverheadMs: median(rs.map((r) => r.p50OverheadMs)),
      },
    ];
  }),
);
console.log(
  JSON.stringify({
    jobs: JOBS,
    concurrency: CONCURRENCY,
    reps: REPS,
    load: (await import("node:os")).loadavg()[0],
    ...summary,
  }),
);

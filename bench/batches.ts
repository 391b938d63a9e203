// Batch handlers: jobs/s and handler calls per job at several batch sizes, with a handler whose
// call costs 5 ms + 0.1 ms per job (bench/handlers/batchCost.js, an embedding endpoint's shape).
//   node bench/batches.ts [--jobs 100000] [--sizes 1,10,50,100] [--concurrency 4] [--size1-jobs N] [--json]
// Per size: a fresh queue of N pre-enqueued jobs, one `conveyor worker` (concurrency calls at
// once, --batch-size the size, --batch-min the size, --batch-wait 20ms), timed from its readiness
// to the last completion. Size 1 runs without batches (the handler's default export). --size1-jobs
// runs fewer jobs at size 1, whose ~5 ms per job makes 100,000 jobs take minutes.
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Producer, QueueAdmin, connectRedis } from "../queue/index.ts";
import { freePort } from "../test/support/ports.ts";
import { startProcess, stopProcess } from "../test/support/processes.ts";
import { startBenchRedis } from "./lib/redis.ts";
import {
  intFlag,
  listFlag,
  loadAverage,
  nowMs,
  cliFlags,
  progress,
  REPO,
  round,
  runMain,
  sleep,
} from "./lib/util.ts";

const NODE = join(REPO, "node_modules/.bin/node");
const CONVEYOR_BIN = join(REPO, "bin/conveyor.js");
const HANDLER = `module:${join(REPO, "bench/handlers/batchCost.js")}`;

interface Run {
  size: number;
  jobs: number;
  concurrency: number;
  seconds: number;
  jobsPerSec: number;
  callsPerJob: number;
}

async function main(): Promise<void> {
  const flags = cliFlags(["concurrency", "jobs", "json", "size1-jobs", "sizes"]);
  const jobs = intFlag(flags, "jobs", 100_000);
  const size1Jobs = intFlag(flags, "size1-jobs", jobs);
  const sizes = listFlag(flags, "sizes", [1, 10, 50, 100]);
  const concurrency = intFlag(flags, "concurrency", 4);
  const server = await startBenchRedis();
  const redis = connectRedis(server.url);
  const producer = new Producer(redis);
  const admin = new QueueAdmin(redis);
  const dir = mkdtempSync(join(tmpdir(), "cvy-bench-batches-"));
  const runs: Run[] = [];
  try {
    for (const size of sizes) {
      const n = size === 1 ? size1Jobs : jobs;
      const queue = `batches/s${size}`;
      for (let i = 0; i < n; i += 1000)
        await producer.enqueueMany(
          queue,
          Array.from({ length: Math.min(1000, n - i) }, (_, k) => ({ data: { i: i + k } })),
        );
      const calls = join(dir, `calls-${size}`);
      const port = await freePort();
      const worker = startProcess(NODE, [CONVEYOR_BIN, "worker"], {
        logFile: join(dir, `worker-${size}.log`),
        env: {
          ...process.env,
          REDIS_URL: server.url,
          CONVEYOR_QUEUE: queue,
          CONVEYOR_HANDLER: HANDLER,
          CONVEYOR_CONCURRENCY: String(concurrency),
          ...(size > 1
            ? {
                CONVEYOR_BATCH_SIZE: String(size),
                CONVEYOR_BATCH_MIN: String(size),
                CONVEYOR_BATCH_WAIT: "20ms",
              }
            : {}),
          CONVEYOR_RETENTION: "0",
          CONVEYOR_PORT: String(port),
          LOG_LEVEL: "warn",
          BENCH_CALLS_FILE: calls,
        },
      });
      // Timed from readiness (the worker claims from then on), not from the process start.
      for (;;) {
        if (worker.child.exitCode !== null) break;
        const ready = await fetch(`http://127.0.0.1:${port}/readyz`).then(
          (r) => r.ok,
          () => false,
        );
        if (ready) break;
        await sleep(20);
      }
      const started = nowMs();
      for (;;) {
        const done = (await admin.counters(queue)).completed ?? 0;
        if (done >= n) break;
        if (worker.child.exitCode !== null)
          throw new Error(`worker exited: ${readFileSync(join(dir, `worker-${size}.log`), "utf8")}`);
        progress(`size ${size}: ${done}/${n}`);
        await sleep(1000);
      }
      const seconds = (nowMs() - started) / 1000;
      await stopProcess(worker);
      const lines = readFileSync(calls, "utf8").split("\n").filter(Boolean);
      const run = {
        size,
        jobs: n,
        concurrency,
        seconds: round(seconds, 2),
        jobsPerSec: round(n / seconds),
        callsPerJob: round(lines.length / n, 4),
      };
      runs.push(run);
      progress(`size ${size}: ${run.jobsPerSec} jobs/s, ${run.callsPerJob} calls per job (${run.seconds} s)`);
    }
  } finally {
    redis.disconnect();
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  }
  const table = [
    "| batch size | jobs | jobs/s | handler calls per job | seconds |",
    "|---:|---:|---:|---:|---:|",
    ...runs.map((r) => `| ${r.size} | ${r.jobs} | ${r.jobsPerSec} | ${r.callsPerJob} | ${r.seconds} |`),
  ].join("\n");
  process.stdout.write(`${table}\n(concurrency ${concurrency} calls, load ${loadAverage()})\n`);
  if (flags.has("json")) process.stdout.write(`${JSON.stringify({ concurrency, runs })}\n`);
}

runMain("bench/batches", main);

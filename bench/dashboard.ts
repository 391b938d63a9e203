// The dashboard at scale (issue 14): with 1,000,000 job records in PostgreSQL and 100,000
// waiting jobs in Redis, the p95 of every page's API call (target ≤ 200 ms), and the API
// process's RSS with 20 browsers connected over SSE while events flow (target < 200 MiB), and
// the queues page's first paint in headless Chromium (target ≤ 1 s; bench/firstPaint.ts).
// Part of `make bench`; alone: node bench/dashboard.ts [--records 1000000] [--waiting 100000]
import { join } from "node:path";
import { freePort } from "../test/support/ports.ts";
import { connectRedis, Producer, type RedisClient } from "../queue/index.ts";
import { PostgresServer } from "../test/support/postgres.ts";
import { startProcess, stopProcess, waitFor } from "../test/support/processes.ts";
import { createPool, migrate } from "../records/index.ts";
import { buildDashboard, measureFirstPaint, type PaintFigures } from "./firstPaint.ts";
import { startBenchRedis } from "./lib/redis.ts";
import { CONVEYOR_BIN, NODE } from "./lib/systems.ts";
import { intFlag, cliFlags, percentile, procSample, progress, round } from "./lib/util.ts";

export interface DashboardCall {
  name: string;
  path: string;
  n: number;
  p50Ms: number;
  p95Ms: number;
  maxMs: number;
}

export type DashboardBench =
  | { skipped: string }
  | {
      records: number;
      waiting: number;
      sseClients: number;
      seedSeconds: number;
      calls: DashboardCall[];
      rssIdleMiB: number;
      rssWithSseMiB: number;
      eventsDelivered: number;
      /** Absent in results written before it was measured. */
      firstPaint?: PaintFigures | { skipped: string };
    };

const QUEUES = 10;
const TOKEN = "bench-dashboard-token";

/** 1M rows in a few INSERT … SELECT generate_series statements: 90 % completed, 5 % dead, 5 % queued. */
async function seedRecords(pg: PostgresServer, url: string, records: number): Promise<void> {
  const pool = createPool(url, { maxConnections: 2, queryTimeoutMs: 30 * 60_000 });
  try {
    await migrate(pool);
    const chunk = 100_000;
    for (let from = 0; from < records; from += chunk) {
      const to = Math.min(records, from + chunk) - 1;
      await pool.query(
        `INSERT INTO conveyor_jobs (pipeline, id, queue, state, data, result, attempts, max_attempts, created_at,
           started_at, finished_at, updated_at, last_event, v_event)
         SELECT 'bench', 'job-' || i, 'bench/q' || (i % ${QUEUES}),
           CASE WHEN i % 20 = 0 THEN 'dead' WHEN i % 20 = 1 THEN 'queued' ELSE 'completed' END,
           '{"customer":{"id":' || (i % 10000) || '},"n":' || i || ',"kind":"invoice"}',
           CASE WHEN i % 20 > 1 THEN '{"total":' || (i % 977) || ',"ok":true}' END,
           1, 3, now() - (i || ' ms')::interval - interval '1 s', now() - (i || ' ms')::interval - interval '500 ms',
           now() - (i || ' ms')::interval, now() - (i || ' ms')::interval, 'completed', i
         FROM generate_series($1::int, $2::int) AS i`,
        [from, to],
      );
      progress(`  records: ${to + 1}/${records}`);
    }
    // An hour of executions for the stats chart (one queue's worth, 60,000 rows).
    await pool.query(
      `INSERT INTO conveyor_attempts (pipeline, job_id, execution, queue, worker, attempt, started_at, finished_at, outcome, v_end)
       SELECT 'bench', 'job-' || i, 'x-' || i, 'bench/q' || (i % ${QUEUES}), 'w', 1,
         now() - (i * 60 || ' ms')::interval - interval '40 ms', now() - (i * 60 || ' ms')::interval, 'completed', i
       FROM generate_series(0, 59999) AS i`,
    );
    await pool.query("ANALYZE conveyor_jobs; ANALYZE conveyor_attempts");
  } finally {
    await pool.end();
  }
  void pg;
}

async function seedWaiting(redis: RedisClient, waiting: number): Promise<void> {
  const producer = new Producer(redis);
  for (let from = 0; from < waiting; from += 1000) {
    const jobs = Array.from({ length: Math.min(1000, waiting - from) }, (_, k) => ({
      id: `wait-${from + k}`,
      idempotencyKey: `key-${from + k}`,
      data: { n: from + k },
    }));
    await producer.enqueueMany("bench/q0", jobs);
  }
}

async function time(base: string, path: string): Promise<number> {
  const t = performance.now();
  const res = await fetch(`${base}${path}`, { headers: { authorization: `Bearer ${TOKEN}` } });
  await res.arrayBuffer();
  if (!res.ok) throw new Error(`${path}: HTTP ${res.status}`);
  return performance.now() - t;
}

async function cursorAfter(base: string, path: string, pages: number): Promise<string> {
  let cursor = "";
  for (let i = 0; i < pages; i++) {
    const res = await fetch(`${base}${path}${cursor ? `&cursor=${cursor}` : ""}`, {
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    cursor = ((await res.json()) as { next: string }).next;
  }
  return cursor;
}

export async function runDashboardBench(
  opts: {
    records?: number;
    waiting?: number;
    sseClients?: number;
    samples?: number;
    paintSamples?: number;
  } = {},
): Promise<DashboardBench> {
  const records = opts.records ?? 1_000_000;
  const waiting = opts.waiting ?? 100_000;
  const sseClients = opts.sseClients ?? 20;
  const samples = opts.samples ?? 40;
  const redisServer = await startBenchRedis();
  const pg = await PostgresServer.start();
  const redis = connectRedis(redisServer.url);
  let api: ReturnType<typeof startProcess> | undefined;
  try {
    const seeded = Date.now();
    progress(`dashboard: seeding ${records} job records and ${waiting} waiting jobs`);
    await seedRecords(pg, pg.url, records);
    await seedWaiting(redis, waiting);
    for (let q = 1; q < QUEUES; q++) await redis.sadd("cvy:queues", `bench/q${q}`);
    const seedSeconds = Math.round((Date.now() - seeded) / 1000);
    buildDashboard();

    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    api = startProcess(NODE, [CONVEYOR_BIN, "api", "--port", String(port), "--host", "127.0.0.1"], {
      logFile: join(pg.dir, "api.log"),
      env: {
        ...process.env,
        REDIS_URL: redisServer.url,
        DATABASE_URL: pg.url,
        CONVEYOR_API_TOKEN: TOKEN,
        KUBECONFIG: "",
        LOG_LEVEL: "warn",
        // As the chart's job-API Deployment runs it (charts/conveyor/templates/job-api-deployment.yaml).
        NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ""} --max-semi-space-size=2`.trim(),
      },
    });
    await waitFor("api up", async () => (await fetch(`${base}/healthz`).catch(() => null))?.ok, 120_000);

    const q0 = encodeURIComponent("bench/q0");
    const q3 = encodeURIComponent("bench/q3");
    const deepRecords = await cursorAfter(base, `/queues/${q3}/jobs?state=completed&limit=50`, 50);
    const deepReady = await cursorAfter(base, `/queues/${q0}/jobs?state=ready&limit=50`, 50);
    const detailId = Math.floor(records * 0.6);
    const pages: [string, string][] = [
      ["queues", "/queues"],
      ["queue counts", `/queues/${q0}`],
      ["queue stats (1 h)", `/queues/${q3}/stats`],
      ["jobs, all, first page", `/queues/${q3}/jobs?state=all&limit=50`],
      ["jobs, completed, page 51", `/queues/${q3}/jobs?state=completed&limit=50&cursor=${deepRecords}`],
      ["jobs, dead, last hour", `/queues/${q3}/jobs?state=dead&limit=50&from=${Date.now() - 3600_000}`],
      ["jobs, ready (Redis), first page", `/queues/${q0}/jobs?state=ready&limit=50`],
      ["jobs, ready (Redis), page 51", `/queues/${q0}/jobs?state=ready&limit=50&cursor=${deepReady}`],
      ["search by id", `/search?q=job-${detailId + 1}`],
      ["search by idempotency key", "/search?q=key-99999"],
      ["search payload field", `/search?q=${encodeURIComponent("customer.id=4242")}&limit=50`],
      ["search result field", `/search?q=${encodeURIComponent("result:total=976")}&limit=50`],
      [
        "job detail",
        `/jobs/job-${detailId}/detail?queue=${encodeURIComponent(`bench/q${detailId % QUEUES}`)}`,
      ],
    ];
    const calls: DashboardCall[] = [];
    for (const [name, path] of pages) {
      for (let i = 0; i < 3; i++) await time(base, path); // warm-up
      const ms: number[] = [];
      for (let i = 0; i < samples; i++) ms.push(await time(base, path));
      const call = {
        name,
        path,
        n: samples,
        p50Ms: round(percentile(ms, 50), 1),
        p95Ms: round(percentile(ms, 95), 1),
        maxMs: round(Math.max(...ms), 1),
      };
      progress(`  ${name}: p50 ${call.p50Ms} ms, p95 ${call.p95Ms} ms`);
      calls.push(call);
    }

    const pid = api.child.pid!;
    const rssIdleMiB = round(procSample(pid).rssKb / 1024, 1);
    progress("  first paint of the queues page in headless Chromium, cold and warm");
    const firstPaint = await measureFirstPaint(base, TOKEN, opts.paintSamples ?? 5);
    if (!("skipped" in firstPaint))
      progress(
        `  first paint: cold FCP ${firstPaint.cold.fcpMs} ms, rows ${firstPaint.cold.rowsMs} ms; ` +
          `warm FCP ${firstPaint.warm.fcpMs} ms, rows ${firstPaint.warm.rowsMs} ms`,
      );
    progress(`  ${sseClients} SSE clients while 20,000 jobs are enqueued`);
    const ctl = new AbortController();
    let eventsDelivered = 0;
    const streams = await Promise.all(
      Array.from({ length: sseClients }, async () => {
        const res = await fetch(`${base}/events`, {
          headers: { authorization: `Bearer ${TOKEN}` },
          signal: ctl.signal,
        });
        const reader = res.body!.getReader();
        // Wrapped: an async function returning the loop's promise would wait for the loop.
        const loop = (async () => {
          try {
            for (;;) {
              const { value, done } = await reader.read();
              if (done) return;
              eventsDelivered += Buffer.from(value).toString("utf8").split("\nevent: job\n").length - 1;
            }
          } catch {
            // aborted at the end
          }
        })();
        return { loop };
      }),
    );
    progress("  SSE connected");
    // Events flowing to all 20: 20,000 enqueues over ~10 s.
    const producer = new Producer(redis);
    let peak = 0;
    for (let k = 0; k < 20; k++) {
      await producer.enqueueMany(
        "bench/q1",
        Array.from({ length: 1000 }, (_, j) => ({ data: { k, j } })),
      );
      await new Promise((r) => setTimeout(r, 500));
      peak = Math.max(peak, procSample(pid).rssKb);
    }
    await new Promise((r) => setTimeout(r, 2000));
    peak = Math.max(peak, procSample(pid).rssKb);
    ctl.abort();
    await Promise.all(streams.map((s) => s.loop));
    return {
      records,
      waiting,
      sseClients,
      seedSeconds,
      calls,
      rssIdleMiB,
      rssWithSseMiB: round(peak / 1024, 1),
      eventsDelivered,
      firstPaint,
    };
  } finally {
    if (api) await stopProcess(api, 3000);
    redis.disconnect();
    await redisServer.stop();
    await pg.stop();
  }
}

export function renderDashboard(d: DashboardBench | undefined): string[] {
  if (!d) return [];
  if ("skipped" in d) return ["## Dashboard", "", `Skipped: ${d.skipped}`, ""];
  return [
    "## Dashboard",
    "",
    `${d.records.toLocaleString("en")} job records in PostgreSQL, ${d.waiting.toLocaleString("en")} waiting jobs in Redis; ` +
      `each call ${d.calls[0]?.n ?? 0} times after warm-up, one at a time (target p95 ≤ 200 ms).`,
    "",
    "| page API call | p50 ms | p95 ms | max ms |",
    "|---|---:|---:|---:|",
    ...d.calls.map((c) => `| ${c.name} | ${c.p50Ms} | ${c.p95Ms} | ${c.maxMs} |`),
    "",
    `API RSS: ${d.rssIdleMiB} MiB idle, ${d.rssWithSseMiB} MiB peak with ${d.sseClients} SSE clients while ` +
      `20,000 jobs were enqueued (${d.eventsDelivered.toLocaleString("en")} events delivered; target < 200 MiB).`,
    "",
    ...renderFirstPaint(d.firstPaint),
  ];
}

function renderFirstPaint(p: PaintFigures | { skipped: string } | undefined): string[] {
  if (!p) return [];
  if ("skipped" in p) return [`Queues page first paint: skipped (${p.skipped}).`, ""];
  return [
    `Queues page in headless Chromium (${p.queues} queues; median of ${p.n} loads, ms from navigation start; ` +
      `target ≤ 1,000 ms; the cold load transferred ${(p.coldBytes / 1024).toFixed(1)} kB):`,
    "",
    "| load | first contentful paint | queue rows shown | rows, slowest |",
    "|---|---:|---:|---:|",
    `| cold (fresh profile) | ${p.cold.fcpMs} | ${p.cold.rowsMs} | ${p.cold.rowsMaxMs} |`,
    `| warm (cached assets) | ${p.warm.fcpMs} | ${p.warm.rowsMs} | ${p.warm.rowsMaxMs} |`,
    "",
  ];
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const flags = cliFlags(["paint-samples", "records", "samples", "waiting"]);
  runDashboardBench({
    records: intFlag(flags, "records", 1_000_000),
    waiting: intFlag(flags, "waiting", 100_000),
    samples: intFlag(flags, "samples", 40),
    paintSamples: intFlag(flags, "paint-samples", 5),
  }).then(
    (r) => {
      process.stdout.write(`${renderDashboard(r).join("\n")}\n${JSON.stringify(r)}\n`);
      process.exit(0);
    },
    (err: Error) => {
      process.stderr.write(`dashboard bench failed: ${err.stack}\n`);
      process.exit(1);
    },
  );
}

// OpenTelemetry traces across stages, exported by real worker processes over OTLP/HTTP to a
// real OpenTelemetry Collector (built by test/observability/install.sh), which forwards them
// as OTLP JSON to a receiver in this test. A pipeline ingest → split (fan-out) → pages (HTTP sidecar) →
// merge (join, a command) must give per document ONE trace: the producer's `send` span, each
// stage's `process` spans with their links and attributes, the hand-over and fan-out `send`
// spans, every child and the join linking them all; a redelivered job shows its cause. The
// worker's default sampler follows a job's context and samples a job without one by ratio. With
// the OTEL variables unset no span is made and neither the SDK nor an exporter is loaded.
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { Redis } from "ioredis";
import { startTracing, type TracingHandle } from "../../lib/telemetry.ts";
import { Producer, QueueAdmin } from "../../queue/index.ts";
import { startProcess, stopProcess, waitFor } from "../support/processes.ts";
import { RedisServer } from "../support/redis.ts";
import {
  CONVEYOR,
  NODE,
  REPO,
  RECORDING_HANDLER,
  startWorker,
  type WorkerProcess,
} from "../support/workers.ts";
import { attr, Collector, otelEnv, SPAN_KIND, type ExportedSpan } from "./programs.ts";

const TRACED_HANDLER = `module:${join(REPO, "test/fixtures/tracedHandler.js")}`;
const TRACE_ENV_COMMAND = `command:${JSON.stringify([NODE, join(REPO, "test/fixtures/traceEnvCommand.mjs")])}`;
const LOADED_MODULES = join(REPO, "test/fixtures/loadedModules.mjs");
const SDK_PACKAGES = [
  "@opentelemetry/sdk-trace",
  "@opentelemetry/exporter-trace-otlp-proto",
  "@opentelemetry/context-async-hooks",
];

/** W3C traceparent → its span id. */
const spanIdOf = (traceparent: string) => traceparent.split("-")[2];

describe("OpenTelemetry traces through a real collector", () => {
  let redisServer: RedisServer;
  let redis: Redis;
  let collector: Collector;
  let dir: string;
  let sidecar: Server;
  let tracing: TracingHandle | null;
  const sidecarTraceparents = new Map<string, string>(); // child job id → traceparent header
  const workers: WorkerProcess[] = [];
  const P = `tr${process.pid}`;
  const Q = { ingest: `${P}/ingest`, split: `${P}/split`, pages: `${P}/pages`, merge: `${P}/merge` };

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "cvy-trace-"));
    redisServer = await RedisServer.start();
    redis = new Redis(redisServer.url);
    collector = await Collector.start(dir);
    // The HTTP sidecar of the pages stage: records the trace context it was called in.
    sidecar = createServer((req, res) => {
      let body = "";
      req.on("data", (c) => (body += c));
      req.on("end", () => {
        sidecarTraceparents.set(String(req.headers["conveyor-job-id"]), String(req.headers.traceparent));
        res.setHeader("content-type", "application/json");
        res.end(JSON.stringify({ page: (JSON.parse(body) as { page: number }).page }));
      });
    });
    await new Promise<void>((resolve) => sidecar.listen(0, "127.0.0.1", resolve));
    const sidecarPort = (sidecar.address() as { port: number }).port;
    // The producer is this process: its `send` spans go to the same collector.
    tracing = await startTracing({ serviceName: "test-producer", env: otelEnv(collector, "test-producer") });
    assert.ok(tracing, "tracing starts in the test process");

    const stage = (name: string, queue: string, handler: string, next?: string) =>
      startWorker({
        dir,
        name,
        env: {
          REDIS_URL: redisServer.url,
          CONVEYOR_QUEUE: queue,
          CONVEYOR_HANDLER: handler,
          ...(next && { CONVEYOR_NEXT_QUEUE: next }),
          CONVEYOR_BACKOFF_BASE: "50ms",
          CONVEYOR_BACKOFF_MAX: "100ms",
          CONVEYOR_CONCURRENCY: "4",
          NODE_OPTIONS: `--import=${LOADED_MODULES}`,
          LOADED_MODULES_FILE: join(dir, `${name}.modules`),
          ...otelEnv(collector, `worker-${name}`),
        },
      });
    workers.push(
      ...(await Promise.all([
        stage("ingest", Q.ingest, TRACED_HANDLER, Q.split),
        stage("split", Q.split, TRACED_HANDLER, Q.pages),
        stage("pages", Q.pages, `http://127.0.0.1:${sidecarPort}/run`),
        stage("merge", Q.merge, TRACE_ENV_COMMAND),
      ])),
    );
  });

  after(async () => {
    await Promise.all(workers.map((w) => stopProcess(w, 5000)));
    await tracing?.shutdown();
    await collector?.stop();
    sidecar?.close();
    redis?.disconnect();
    await redisServer?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  test("each document is one trace: send, every stage's process spans, the children and the join, with links, attributes and the redelivery's cause", async () => {
    const producer = new Producer(redis);
    const admin = new QueueAdmin(redis);
    const docs = [
      { id: `${P}-a`, pages: 3, failFirst: false },
      { id: `${P}-b`, pages: 2, failFirst: true },
      { id: `${P}-c`, pages: 1, failFirst: false },
    ];
    for (const d of docs)
      await producer.enqueue(Q.ingest, { doc: d.id, pages: d.pages, failFirst: d.failFirst }, { id: d.id });

    // The join of each document has run (its command's result holds its TRACEPARENT).
    const joinResults = new Map<string, { traceparent: string | null; joined: number }>();
    await waitFor(
      "every join completed",
      async () => {
        for (const d of docs) {
          const j = await admin.job(`${d.id}:join`, Q.merge);
          if (j?.state !== "completed") return false;
          joinResults.set(d.id, JSON.parse(j.result!) as { traceparent: string | null; joined: number });
        }
        return true;
      },
      120_000,
      200,
    );

    // Every span of every document has reached the collector's file.
    const expected = (d: (typeof docs)[number]) =>
      1 + (d.failFirst ? 2 : 1) + 1 + d.pages + 1 + d.pages + 1 + 1;
    const spansOf = (all: ExportedSpan[], traceId: string) => all.filter((s) => s.traceId === traceId);
    const roots = new Map<string, ExportedSpan>();
    let all: ExportedSpan[] = [];
    await waitFor(
      "all spans exported",
      async () => {
        all = collector.spans();
        for (const d of docs) {
          const root = all.find(
            (s) => s.name === `send ${Q.ingest}` && attr(s, "messaging.message.id") === d.id,
          );
          if (!root) return false;
          roots.set(d.id, root);
          // send + process ingest (+ retry) + send split + process split + send pages × n +
          // process pages × n + process merge, + the handler's own spans (ingest × tries, split)
          const handlerSpans = (d.failFirst ? 2 : 1) + 1;
          if (spansOf(all, root.traceId).length < expected(d) + handlerSpans - 1) return false;
        }
        return true;
      },
      60_000,
      200,
    ).catch((err: Error) => {
      // Which spans did arrive, per trace: names and counts.
      const byTrace = new Map<string, string[]>();
      for (const s of collector.spans()) byTrace.set(s.traceId, [...(byTrace.get(s.traceId) ?? []), s.name]);
      const summary = [...byTrace].map(([t, names]) => `${t}: ${names.sort().join(", ")}`).join("\n");
      throw new Error(`${err.message}\nspans by trace:\n${summary}`);
    });

    const traceIds = new Set<string>();
    for (const d of docs) {
      const root = roots.get(d.id)!;
      traceIds.add(root.traceId);
      const spans = spansOf(all, root.traceId);
      const named = (name: string) => spans.filter((s) => s.name === name);
      const one = (name: string) => {
        const found = named(name);
        assert.equal(found.length, 1, `${d.id}: one '${name}' span, got ${found.length}`);
        return found[0]!;
      };
      const linksTo = (s: ExportedSpan, target: ExportedSpan) =>
        (s.links ?? []).some((l) => l.spanId === target.spanId && l.traceId === target.traceId);

      // the producer
      assert.equal(root.kind, SPAN_KIND.PRODUCER);
      assert.equal(root.parentSpanId ?? "", "", "the enqueue starts the trace");
      assert.equal(root.service, "test-producer");
      assert.equal(attr(root, "messaging.system"), "conveyor");
      assert.equal(attr(root, "messaging.operation.type"), "send");
      assert.equal(attr(root, "messaging.destination.name"), Q.ingest);

      // stage 1: one process span per execution, child of and linked to the creation context
      const ingest = named(`process ${Q.ingest}`).sort(
        (a, b) => Number(attr(a, "conveyor.job.attempt")) - Number(attr(b, "conveyor.job.attempt")),
      );
      assert.equal(ingest.length, d.failFirst ? 2 : 1, `${d.id}: ingest executions`);
      for (const [i, p] of ingest.entries()) {
        assert.equal(p.kind, SPAN_KIND.CONSUMER);
        assert.equal(p.parentSpanId, root.spanId);
        assert.ok(linksTo(p, root), "process span links the creation context");
        assert.equal(p.service, "worker-ingest");
        assert.equal(attr(p, "messaging.system"), "conveyor");
        assert.equal(attr(p, "messaging.operation.type"), "process");
        assert.equal(attr(p, "messaging.operation.name"), "process");
        assert.equal(attr(p, "messaging.destination.name"), Q.ingest);
        assert.equal(attr(p, "messaging.message.id"), d.id);
        assert.equal(String(attr(p, "conveyor.job.attempt")), String(i + 1));
        assert.ok(attr(p, "conveyor.execution.id"), "execution id");
        // the handler ran inside the process span
        const handler = spans.filter((s) => s.name === `handler ${Q.ingest}` && s.parentSpanId === p.spanId);
        assert.equal(handler.length, 1, "the handler's own span nests under the process span");
      }
      const lastIngest = ingest.at(-1)!;
      assert.equal(attr(lastIngest, "conveyor.job.outcome"), "advanced");
      if (d.failFirst) {
        assert.equal(attr(ingest[0], "conveyor.job.outcome"), "retried");
        assert.equal(ingest[0]!.status?.code, 2, "the failed execution is an error span");
        const redelivered = (ingest[1]!.events ?? []).find((e) => e.name === "redelivered");
        assert.ok(redelivered, "the second execution has a 'redelivered' event");
        assert.equal(attr(redelivered, "conveyor.redelivery.cause"), "failed");
        assert.match(String(attr(redelivered, "conveyor.redelivery.reason")), /planned failure/);
      } else {
        assert.ok(!(lastIngest.events ?? []).some((e) => e.name === "redelivered"));
      }

      // the hand-over to stage 2
      const sendSplit = one(`send ${Q.split}`);
      assert.equal(sendSplit.kind, SPAN_KIND.PRODUCER);
      assert.equal(sendSplit.parentSpanId, lastIngest.spanId);
      const split = one(`process ${Q.split}`);
      assert.equal(split.parentSpanId, sendSplit.spanId);
      assert.ok(linksTo(split, sendSplit));
      assert.equal(attr(split, "conveyor.job.outcome"), "fannedOut");

      // the fan-out: a send span per child, each child's process span under it
      const sendPages = named(`send ${Q.pages}`);
      assert.equal(sendPages.length, d.pages);
      const pages = named(`process ${Q.pages}`);
      assert.equal(pages.length, d.pages);
      for (let i = 1; i <= d.pages; i++) {
        const childId = `${d.id}:${i}`;
        const send = sendPages.find((s) => attr(s, "messaging.message.id") === childId);
        assert.ok(send, `send span of child ${childId}`);
        assert.equal(send.parentSpanId, split.spanId);
        const child = pages.find((s) => attr(s, "messaging.message.id") === childId);
        assert.ok(child, `process span of child ${childId}`);
        assert.equal(child.parentSpanId, send.spanId);
        assert.ok(linksTo(child, send));
        assert.equal(attr(child, "conveyor.job.outcome"), "completed");
        // the HTTP sidecar was called inside the child's process span
        assert.equal(spanIdOf(sidecarTraceparents.get(childId) ?? ""), child.spanId, "sidecar traceparent");
      }

      // the join: created in the fan-out's context, linking every child
      const merge = one(`process ${Q.merge}`);
      assert.equal(attr(merge, "messaging.message.id"), `${d.id}:join`);
      assert.equal(merge.parentSpanId, split.spanId);
      for (const send of sendPages)
        assert.ok(linksTo(merge, send), `the join links child ${attr(send, "messaging.message.id")}`);
      assert.equal((merge.links ?? []).length, d.pages + 1, "creation context + one link per child");
      // the command got TRACEPARENT of the join's process span
      const jr = joinResults.get(d.id)!;
      assert.equal(jr.joined, d.pages);
      assert.equal(spanIdOf(jr.traceparent ?? ""), merge.spanId, "command TRACEPARENT");
    }
    assert.equal(traceIds.size, docs.length, "one trace per document");
  });

  test("a job handed back at the drain deadline shows the hand-back, and its next execution the cause", async () => {
    const q = `${P}/slow`;
    const producer = new Producer(redis);
    const admin = new QueueAdmin(redis);
    const env = {
      REDIS_URL: redisServer.url,
      CONVEYOR_QUEUE: q,
      CONVEYOR_HANDLER: RECORDING_HANDLER,
      CONVEYOR_DRAIN_SECONDS: "1",
      ...otelEnv(collector, "worker-slow"),
    };
    const first = await startWorker({ dir, name: "slow-1", env });
    const id = `${P}-slow`;
    await producer.enqueue(q, { sleepMs: 60_000 }, { id });
    await waitFor("the job runs", async () => (await admin.job(id, q))?.state === "active");
    await stopProcess(first, 10_000); // SIGTERM: drains 1 s, then hands the job back
    // The next worker claims it (its span opens with the redelivery's cause) and is stopped the
    // same way, which ends that span too.
    const second = await startWorker({ dir, name: "slow-2", env });
    await waitFor("the job runs again", async () => (await admin.job(id, q))?.state === "active");
    await stopProcess(second, 10_000);
    const all = await waitFor(
      "both executions exported",
      async () => {
        const s = collector.spans().filter((x) => x.name === `process ${q}`);
        return s.length >= 2 ? s : null;
      },
      60_000,
      200,
    );
    const handedBack = all.find((s) => attr(s, "conveyor.job.outcome") === "handedBack");
    assert.ok(handedBack, `a handed-back execution (got ${all.length} spans)`);
    const event = (handedBack.events ?? []).find((e) => e.name === "handed back");
    assert.ok(event, "the hand-back is a span event");
    assert.match(String(attr(event, "conveyor.reason")), /drain deadline/);
    const redelivered = all.find((s) => (s.events ?? []).some((e) => e.name === "redelivered"));
    assert.ok(redelivered, "the next execution has a 'redelivered' event");
    const cause = redelivered.events!.find((e) => e.name === "redelivered")!;
    assert.equal(attr(cause, "conveyor.redelivery.cause"), "handedBack");
    assert.equal(
      redelivered.parentSpanId,
      handedBack.parentSpanId,
      "both executions share the creation context",
    );
  });

  test("OTEL_EXPORTER_OTLP_PROTOCOL=http/json exports the same spans as JSON", async () => {
    const q = `${P}-json/work`;
    const w = await startWorker({
      dir,
      name: "json",
      env: {
        REDIS_URL: redisServer.url,
        CONVEYOR_QUEUE: q,
        CONVEYOR_HANDLER: RECORDING_HANDLER,
        ...otelEnv(collector, "worker-json"),
        OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
      },
    });
    try {
      const id = `${P}-json`;
      await new Producer(redis).enqueue(q, { n: 1 }, { id });
      const span = await waitFor(
        "the process span exported as JSON",
        async () => collector.spans().find((s) => s.name === `process ${q}`) ?? null,
        60_000,
        200,
      );
      assert.equal(span.service, "worker-json");
      assert.equal(span.kind, SPAN_KIND.CONSUMER);
      assert.equal(attr(span, "messaging.message.id"), id);
      assert.equal(attr(span, "messaging.destination.name"), q);
      assert.equal(String(attr(span, "conveyor.job.attempt")), "1");
      assert.equal(attr(span, "conveyor.job.outcome"), "completed");
    } finally {
      await stopProcess(w, 10_000);
    }
  });

  test("the worker's default sampler follows the job's context and samples jobs without one by OTEL_TRACES_SAMPLER_ARG", async () => {
    const q = `${P}-sampled/work`;
    const w = await startWorker({
      dir,
      name: "sampled",
      env: {
        REDIS_URL: redisServer.url,
        CONVEYOR_QUEUE: q,
        CONVEYOR_HANDLER: RECORDING_HANDLER,
        ...otelEnv(collector, "worker-sampled"),
        // The default (parentbased_traceidratio) with a ratio of 0: no root is sampled.
        OTEL_TRACES_SAMPLER_ARG: "0",
      },
    });
    const admin = new QueueAdmin(redis);
    try {
      // First a job without a context (`conveyor enqueue` without the variables), then one the
      // traced producer sent: its process span arriving means the first one's would have too.
      const rootless = `${P}-rootless`;
      const cli = startProcess(NODE, [CONVEYOR, "enqueue", q, '{"n":1}', "--id", rootless], {
        logFile: join(dir, "sampled-cli.log"),
        env: { ...process.env, REDIS_URL: redisServer.url },
      });
      assert.equal(await cli.exited, 0, readFileSync(join(dir, "sampled-cli.log"), "utf8"));
      await waitFor(
        "the job without a context completed",
        async () => (await admin.job(rootless, q))?.state === "completed",
      );
      const traced = `${P}-traced`;
      await new Producer(redis).enqueue(q, { n: 2 }, { id: traced });
      const spans = await waitFor(
        "the traced job's process span exported",
        async () => {
          const s = collector.spans().filter((x) => x.name === `process ${q}`);
          return s.some((x) => attr(x, "messaging.message.id") === traced) ? s : null;
        },
        60_000,
        200,
      );
      assert.deepEqual(
        spans.map((x) => attr(x, "messaging.message.id")),
        [traced],
        "the job without a context made no exported span",
      );
    } finally {
      await stopProcess(w, 10_000);
    }
  });

  test("with the OTEL variables unset no span is made and neither the SDK nor an exporter is loaded", async () => {
    const q = `${P}-plain/work`;
    const modules = join(dir, "plain.modules");
    const w = await startWorker({
      dir,
      name: "plain",
      env: {
        REDIS_URL: redisServer.url,
        CONVEYOR_QUEUE: q,
        CONVEYOR_HANDLER: RECORDING_HANDLER,
        NODE_OPTIONS: `--import=${LOADED_MODULES}`,
        LOADED_MODULES_FILE: modules,
      },
    });
    // The producer is a `conveyor enqueue` process without the variables.
    const cliModules = join(dir, "cli.modules");
    const cli = startProcess(NODE, [CONVEYOR, "enqueue", q, '{"n":1}', "--id", `${P}-plain`], {
      logFile: join(dir, "cli.log"),
      env: {
        ...process.env,
        REDIS_URL: redisServer.url,
        NODE_OPTIONS: `--import=${LOADED_MODULES}`,
        LOADED_MODULES_FILE: cliModules,
      },
    });
    assert.equal(await cli.exited, 0, readFileSync(join(dir, "cli.log"), "utf8"));
    const admin = new QueueAdmin(redis);
    await waitFor("job completed", async () => (await admin.job(`${P}-plain`, q))?.state === "completed");
    assert.equal(await redis.hget(`cvy:{${P}-plain}:job:${P}-plain`, "trace"), null, "no trace field");
    await stopProcess(w, 10_000);
    // Nothing of this queue has arrived, and nothing could: no exporter was loaded (below).
    assert.deepEqual(
      collector
        .spans()
        .filter((s) => String(attr(s, "messaging.destination.name") ?? "").startsWith(`${P}-plain/`)),
      [],
    );
    for (const file of [modules, cliModules]) {
      const loaded = readFileSync(file, "utf8");
      assert.match(loaded, /queue\/producer\.ts/, `${file} lists the modules`);
      for (const pkg of SDK_PACKAGES) assert.ok(!loaded.includes(pkg), `${pkg} not loaded (${file})`);
    }
    // The control: the traced workers did load them.
    await stopProcess(workers[0]!, 10_000);
    const traced = readFileSync(join(dir, "ingest.modules"), "utf8");
    for (const pkg of SDK_PACKAGES) assert.ok(traced.includes(pkg), `${pkg} loaded by the traced worker`);
  });
});

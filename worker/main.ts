// `conveyor worker`: wire config, logs, metrics, the handler, job records and signals together.
import { QueueWorker } from "./worker.ts";
import { OptionError } from "../lib/options.ts";
import { loadWorkerConfig } from "./config.ts";
import { createHandler } from "./handlers/index.ts";
import { HandlerCallbacks } from "./handlerCallback.ts";
import { startHealthServer } from "./health.ts";
import { createLogger } from "../lib/logger.ts";
import { routeStdoutLines } from "./stdoutLines.ts";
import { pino } from "pino";
import { createWorkerMetrics } from "./metrics.ts";
import { startRecorder } from "../records/index.ts";
import { pipelineOf } from "../queue/index.ts";
import { JOB_SAMPLER, startTracing } from "../lib/telemetry.ts";
import { Notifier } from "./notify.ts";
import { takeHeldSignals } from "../lib/heldSignals.ts";

export async function runWorker(argv: string[]): Promise<number> {
  let config;
  try {
    config = loadWorkerConfig(argv);
  } catch (err) {
    if (err instanceof OptionError) {
      process.stderr.write(`conveyor worker: ${err.message}\n`);
      return 2;
    }
    throw err;
  }
  // Before the handler loads: its writes to stdout go out as whole lines between the log's own.
  const stdout = pino.destination({ dest: 1, sync: false });
  routeStdoutLines(stdout);
  const log = createLogger(config.logLevel, { queue: config.queue, worker: config.workerId }, stdout);
  // Signals are ours from the start: a pod scaled down while its worker still starts (loading the
  // handler, connecting) stops cleanly with exit 0 instead of dying by Node's default SIGTERM (143).
  // Until the worker starts a signal is only noted: the recorder and the health server still being
  // set up must not find the worker's Redis connection closed under them.
  let signals = 0;
  let worker: QueueWorker | undefined;
  let started = false;
  let stopped = false;
  const onSignal = (sig: NodeJS.Signals) => {
    signals++;
    if (stopped) return;
    if (started) void worker!.shutdown(signals === 1 ? `${sig}` : `second ${sig}`);
    else log.info({ signal: sig }, "stop requested while starting: no job will be claimed");
  };
  process.on("SIGTERM", onSignal);
  process.on("SIGINT", onSignal);
  for (const sig of takeHeldSignals()) onSignal(sig);
  // Spans only when the OTEL_* variables ask for export: the SDK is not even loaded otherwise.
  const tracing = await startTracing({
    serviceName: "conveyor-worker",
    resource: { "service.instance.id": config.workerId, "conveyor.queue": config.queue },
    defaultSampler: JOB_SAMPLER,
    warn: (m) => log.warn(m),
  });
  if (tracing) log.info("tracing: exporting spans (OTEL_* variables)");
  const metrics = createWorkerMetrics();
  let handler;
  try {
    handler = await createHandler(config.handler, { ...config, log });
  } catch (err) {
    log.fatal({ err: (err as Error).message }, "cannot create the handler");
    return 2;
  }
  if (config.batch && !handler.batch) {
    log.fatal(
      { handler: handler.kind, batchSize: config.batch.size },
      handler.kind === "module"
        ? "--batch-size above 1 needs a handler module that exports batch(jobs, ctx) (docs/batches.md)"
        : `--batch-size above 1: the ${handler.kind} handler does not take batches (docs/batches.md says which kinds do)`,
    );
    await handler.close?.().catch(() => {});
    return 2;
  }
  // http, command and python handlers report progress and log lines through a loopback callback.
  const callbacks = handler.kind === "module" ? undefined : await HandlerCallbacks.start();
  worker = new QueueWorker(config, { log, metrics, handler, callbacks });
  const server = await startHealthServer(config.port, worker, metrics.registry);
  const address = server.address();
  log.info(
    { port: typeof address === "object" && address ? address.port : config.port },
    "serving /healthz /readyz /metrics",
  );
  worker.onStop({ stop: () => new Promise<void>((resolve) => server.close(() => resolve())) });
  if (!config.databaseUrl) log.info("DATABASE_URL not set: job records in PostgreSQL are off");
  // Before the first claim, so the first jobs' transitions are recorded too.
  const recorder = await startRecorder({
    databaseUrl: config.databaseUrl,
    redis: worker.redisClient,
    redisUrl: config.redisUrl,
    pipelines: [pipelineOf(config.queue)],
    logger: log,
    registry: metrics.registry,
    consumer: config.workerId,
    outboxMaxBytes: config.outboxMaxBytes,
  });
  if (recorder) worker.onStop(recorder);
  if (config.notify) {
    const notifier = new Notifier(config.notify, {
      queue: config.queue,
      redis: worker.redisClient,
      redisUrl: config.redisUrl,
      consumer: config.workerId,
      log,
      registry: metrics.registry,
    });
    try {
      await notifier.start();
    } catch (err) {
      log.fatal({ err: (err as Error).message }, "notifications: cannot start");
      await notifier.stop();
      return 2;
    }
    worker.onStop(notifier);
    log.info({ url: config.notify.url, events: config.notify.events }, "notifications: sending");
  }

  // A stop requested while starting ends here: shutdown before start() claims nothing and closes all.
  started = true;
  if (signals > 0) void worker.shutdown("stop requested while starting");
  else worker.start();
  await worker.done;
  // The listeners stay to the end (they hold no process open): a SIGTERM that arrives while a
  // worker that drained by itself (--max-jobs, --max-memory-mb) flushes its last logs must not turn
  // its exit 0 into Node's default 143.
  stopped = true;
  await tracing?.shutdown();
  // 1: a job running at the drain deadline could not be handed back (Redis unreachable), or the
  // pipeline's layout in force is one this worker does not read.
  if (worker.refusal) process.stderr.write(`conveyor worker: ${worker.refusal}\n`);
  return worker.leftToLease > 0 || worker.refusal ? 1 : 0;
}

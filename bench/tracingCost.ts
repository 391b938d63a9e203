// The worker's cost of tracing per execution, without Redis or a handler: executions of a job
// through worker/tracing.ts exactly as the worker makes them (traceExecution → run → end, C at
// a time), in a fresh process per configuration of OTEL_* variables, exporting over OTLP/HTTP
// to a discarding sink in the parent process (bench/lib/otlpSink.ts). Reports CPU per
// execution of the whole process (all threads) and of the main thread alone, medians of the
// repetitions, and the difference to tracing off. The export of every span is included: the
// child measures until the SDK's shutdown has flushed.
// Executions are paced at --rate per second (default 10,000: twice what one worker process does
// at c=32 here), as a worker is paced by Redis: unpaced, spans outrun any exporter and the batch
// processor drops them (its queue holds 2,048), which would flatter the exporters.
//   node bench/tracingCost.ts [--executions 50000] [--rate 10000] [--concurrency 32] [--reps 3] [--only name,name]
import { spawn } from "node:child_process";
import { setTimeout as sleep } from "node:timers/promises";
import { startOtlpSink } from "./lib/otlpSink.ts";
import { intFlag, cliFlags, progress, round, runMain, summarize } from "./lib/util.ts";

/**
 * The configurations compared: name → OTEL_* variables (the sink's endpoint is added) and
 * BENCH_PARENT, the context the jobs were created in: none (an untraced producer), or a traced
 * producer's sampled (01) or unsampled (00) one. The sampler is the worker's default
 * (JOB_SAMPLER), spelled out so that older code is measured with the same one.
 */
const ratio = (arg: string) => ({
  OTEL_TRACES_SAMPLER: "parentbased_traceidratio",
  OTEL_TRACES_SAMPLER_ARG: arg,
});
const CONFIGS: Record<string, Record<string, string>> = {
  off: {},
  "unsampled root": ratio("0"),
  "unsampled parent": { ...ratio("0.1"), BENCH_PARENT: "00" },
  "default (0.1)": ratio("0.1"),
  exported: { ...ratio("0.1"), BENCH_PARENT: "01" },
  "exported json": { ...ratio("0.1"), BENCH_PARENT: "01", OTEL_EXPORTER_OTLP_PROTOCOL: "http/json" },
  // The pipeline in parts (BENCH_PIPELINE, see sdkOnly): spans recorded and ended, then
  // dropped; and batched by the BatchSpanProcessor for an exporter that discards unserialized.
  "spans-only": { BENCH_PIPELINE: "record" },
  "spans+BSP": { BENCH_PIPELINE: "batch" },
};

interface ChildResult {
  cpuUs: number;
  mainUs: number;
  wallUs: number;
  /** Set by the parent: what the sink received per execution. */
  exportedBytes?: number;
}

async function child(): Promise<void> {
  const n = Number(process.env.BENCH_EXECUTIONS);
  const c = Number(process.env.BENCH_CONCURRENCY);
  // Imported here: the parent must not load the worker's modules.
  const { JOB_SAMPLER, startTracing } = await import("../lib/telemetry.ts");
  const { traceExecution } = await import("../worker/tracing.ts");
  const tracing = process.env.BENCH_PIPELINE
    ? await sdkOnly(process.env.BENCH_PIPELINE)
    : await startTracing({
        serviceName: "bench-tracing",
        resource: { "service.instance.id": "bench", "conveyor.queue": "bench" },
        defaultSampler: JOB_SAMPLER,
      });
  const parent = process.env.BENCH_PARENT;
  const trace = parent ? `00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-${parent}` : "";
  const job = (i: number) => ({
    id: `job-${i}`,
    queue: "bench",
    token: `token-${i}`,
    rawData: "{}",
    attempt: 1,
    maxAttempts: 3,
    timeoutMs: 30_000,
    stalls: 0,
    createdAt: 0,
    contentHash: "",
    trace,
    requeued: "",
    previousErrors: [],
    claimedAt: 0,
  });
  const handler = async () => {};
  // The worker waits for Redis between jobs: yield to the event loop as that I/O does, so the
  // span processor's timer and the exporter's HTTP calls get their turn.
  const io = () => new Promise<void>((resolve) => setImmediate(resolve));
  const perMs = Number(process.env.BENCH_RATE) / 1000;
  const run = async (count: number) => {
    let next = 0;
    const start = performance.now();
    await Promise.all(
      Array.from({ length: c }, async () => {
        while (next < count) {
          while (next >= (performance.now() - start) * perMs) await sleep(1);
          const t = traceExecution(job(next++));
          await t.run(handler);
          await io();
          t.end("completed");
        }
      }),
    );
  };
  await run(Math.min(5000, n)); // warm up the JIT
  const cpu0 = process.cpuUsage();
  const main0 = process.threadCpuUsage();
  const t0 = performance.now();
  await run(n);
  await tracing?.shutdown();
  const cpu = process.cpuUsage(cpu0);
  const main = process.threadCpuUsage(main0);
  const result: ChildResult = {
    cpuUs: (cpu.user + cpu.system) / n,
    mainUs: (main.user + main.system) / n,
    wallUs: ((performance.now() - t0) * 1000) / n,
  };
  process.stdout.write(`${JSON.stringify(result)}\n`);
}

/**
 * The SDK as startTracing installs it, every span sampled, but without the OTLP exporter:
 * `record` drops each span when it ends, `batch` hands it to a BatchSpanProcessor (default
 * settings) whose exporter discards the batch without serializing it.
 */
async function sdkOnly(pipeline: string): Promise<{ shutdown(): Promise<void> }> {
  const { context, trace } = await import("@opentelemetry/api");
  const sdk = await import("@opentelemetry/sdk-trace");
  const { AsyncLocalStorageContextManager } = await import("@opentelemetry/context-async-hooks");
  const { enableTracing } = await import("../queue/index.ts");
  const discard = {
    export: (_s: unknown, done: (r: { code: 0 }) => void) => done({ code: 0 }),
    shutdown: async () => {},
  };
  const provider = new sdk.TracerProvider({
    sampler: new sdk.AlwaysOnSampler(),
    spanProcessors: pipeline === "batch" ? [new sdk.BatchSpanProcessor({ exporter: discard })] : [],
  });
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  trace.setGlobalTracerProvider(provider);
  enableTracing();
  return { shutdown: () => provider.shutdown() };
}

function runChild(env: Record<string, string>): Promise<ChildResult> {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, [new URL(import.meta.url).pathname, "--child"], {
      env: { ...process.env, ...env },
      stdio: ["ignore", "pipe", "inherit"],
    });
    let out = "";
    p.stdout.on("data", (b: Buffer) => (out += b.toString()));
    p.on("error", reject);
    p.on("exit", (code) => {
      if (code !== 0) return reject(new Error(`child exited ${code}: ${out}`));
      resolve(JSON.parse(out.trim().split("\n").at(-1)!) as ChildResult);
    });
  });
}

async function main(): Promise<void> {
  const flags = cliFlags(["child", "concurrency", "executions", "only", "rate", "reps"]);
  if (flags.has("child")) return child();
  const executions = intFlag(flags, "executions", 50_000);
  const rate = intFlag(flags, "rate", 10_000);
  const concurrency = intFlag(flags, "concurrency", 32);
  const reps = intFlag(flags, "reps", 3);
  const only = flags.get("only")?.split(",");
  const names = Object.keys(CONFIGS).filter((n) => n === "off" || !only || only.includes(n));
  const sink = await startOtlpSink();
  const results = new Map<string, ChildResult[]>(names.map((n) => [n, []]));
  try {
    for (let rep = 0; rep < reps; rep++) {
      for (const name of rep % 2 === 0 ? names : [...names].reverse()) {
        const tracingEnv: Record<string, string> =
          name === "off" ? {} : { OTEL_EXPORTER_OTLP_ENDPOINT: sink.endpoint };
        const bytes = sink.bytes;
        const r = await runChild({
          ...CONFIGS[name],
          ...tracingEnv,
          OTEL_SERVICE_NAME: "bench-tracing",
          BENCH_EXECUTIONS: String(executions),
          BENCH_CONCURRENCY: String(concurrency),
          BENCH_RATE: String(rate),
        });
        r.exportedBytes = (sink.bytes - bytes) / (executions + Math.min(5000, executions));
        progress(
          `${name} rep ${rep}: ${round(r.cpuUs, 2)} µs/execution (main ${round(r.mainUs, 2)}), exported ${round(r.exportedBytes)} B/execution`,
        );
        results.get(name)!.push(r);
      }
    }
  } finally {
    await sink.stop();
  }
  const med = (name: string, pick: (r: ChildResult) => number) =>
    summarize(results.get(name)!.map(pick)).median;
  const base = { cpu: med("off", (r) => r.cpuUs), main: med("off", (r) => r.mainUs) };
  process.stdout.write(
    `executions ${executions} at ${rate}/s, concurrency ${concurrency}, ${reps} rep(s), medians; OTLP sink got ${sink.requests} requests, ${sink.bytes} bytes\n`,
  );
  process.stdout.write(
    "configuration    µs/execution  main thread  +µs vs off  +main µs  exported B/execution\n",
  );
  for (const name of names) {
    const cpu = med(name, (r) => r.cpuUs);
    const main = med(name, (r) => r.mainUs);
    process.stdout.write(
      `${name.padEnd(16)} ${String(round(cpu, 2)).padStart(12)} ${String(round(main, 2)).padStart(12)} ${String(round(cpu - base.cpu, 2)).padStart(11)} ${String(round(main - base.main, 2)).padStart(9)} ${String(round(med(name, (r) => r.exportedBytes ?? 0))).padStart(21)}\n`,
    );
  }
}

if (import.meta.main) runMain("tracingCost", main);

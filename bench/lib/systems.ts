// The two systems under test behind one interface: enqueue, look at the queue, and start one
// worker process. Conveyor's worker is the real `conveyor worker` (lease heartbeat thread and
// sweeper included) with a module handler; BullMQ's is a `Worker` in a process of its own.
//
// Retention: Conveyor runs with CONVEYOR_RETENTION=0 (a completed job's record is
// deleted at once) and BullMQ jobs are added with `removeOnComplete: true` (the same); failed
// jobs are kept by both (Conveyor's dead letters, BullMQ's default removeOnFail: false). The
// no-op jobs never fail, so only the completion path is measured.
import type { Redis } from "ioredis";
import { join } from "node:path";
import { Queue } from "bullmq";
import {
  connectRedis,
  Producer,
  QueueKeys,
  setContract,
  type Contract,
  type RedisClient,
} from "../../queue/index.ts";
import { freePort } from "../../test/support/ports.ts";
import { WORKER_NODE_OPTIONS } from "../../operator/controllers/deployment.ts";
import { startProcess, stopProcess, waitFor, type Started } from "../../test/support/processes.ts";
import type { ProtoMode } from "../proto/combined.ts";
import { REPO, procSample, type ProcSample } from "./util.ts";

export type SystemName = "conveyor" | "bullmq";
export const SYSTEMS: SystemName[] = ["conveyor", "bullmq"];
export const QUEUE = "bench";

export const NODE = join(REPO, "node_modules/.bin/node");
export const CONVEYOR_BIN = join(REPO, "bin/conveyor.js");
export const NOOP_HANDLER = join(REPO, "bench/handlers/noop.ts");
export const LATENCY_HANDLER = join(REPO, "bench/handlers/latency.ts");
export const ECHO_HANDLER = join(REPO, "bench/handlers/echo.ts");
const BULLMQ_WORKER = join(REPO, "bench/bullmq/worker.ts");
const PROTO_WORKER = join(REPO, "bench/proto/worker.ts");

/** Jobs per bulk call: Conveyor's Producer chunks by 500 inside enqueueMany; BullMQ gets the same chunks. */
export const BULK_CHUNK = 500;

export interface WorkerOptions {
  concurrency: number;
  /** Run the latency handler/processor and write its samples here on stop. */
  latencyFile?: string;
  /** Write a V8 CPU profile of the worker process into this directory. */
  cpuProfDir?: string;
  /** Where the worker's output goes. */
  logFile: string;
}

export interface WorkerHandle {
  pid: number;
  proc: Started;
  sample(): ProcSample;
  /** Graceful stop (SIGTERM: warm shutdown / worker.close()). */
  stop(): Promise<void>;
  /** Resolves once the worker is up and waiting for jobs. */
  ready(): Promise<void>;
  /** Set when the process exited on its own (a crash). */
  exited(): boolean;
  output(): string;
}

export interface QueueState {
  waiting: number;
  active: number;
}

export interface System {
  /** `conveyor`, `bullmq`, or a bench-only variant such as `proto-combined`. */
  readonly name: string;
  /** The commands one `state()` call costs Redis, taken out of the command counts. */
  readonly stateCommands: Record<string, number>;
  enqueueBulk(items: unknown[]): Promise<void>;
  enqueueOne(data: unknown): Promise<void>;
  state(): Promise<QueueState>;
  /** Called on the emptied Redis before each run's enqueue (e.g. to set a contract). */
  prepare?(): Promise<void>;
  startWorker(opts: WorkerOptions): Promise<WorkerHandle>;
  close(): Promise<void>;
}

function handle(proc: Started, readOutput: () => string, ready: () => Promise<unknown>): WorkerHandle {
  const pid = proc.child.pid!;
  return {
    pid,
    proc,
    ready: async () => {
      await waitFor(
        "worker ready",
        async () => {
          if (proc.child.exitCode !== null) throw new Error(`worker exited: ${readOutput()}`);
          return ready();
        },
        60_000,
        20,
      );
    },
    sample: () => procSample(pid),
    stop: () => stopProcess(proc, 60_000),
    exited: () => proc.child.exitCode !== null || proc.child.signalCode !== null,
    output: readOutput,
  };
}

function nodeOptions(opts: WorkerOptions, base = ""): Record<string, string> {
  const options = [base, opts.cpuProfDir ? `--cpu-prof --cpu-prof-dir=${opts.cpuProfDir}` : ""].filter(
    Boolean,
  );
  return options.length ? { NODE_OPTIONS: options.join(" ") } : {};
}

function captured(proc: Started, logFile: string): () => string {
  // startProcess pipes the output into logFile; keep the last part in memory for error reports.
  let tail = "";
  const keep = (b: Buffer) => (tail = (tail + b.toString()).slice(-4000));
  proc.child.stdout?.on("data", keep);
  proc.child.stderr?.on("data", keep);
  return () => {
    const how =
      proc.child.exitCode !== null
        ? `exit code ${proc.child.exitCode}`
        : proc.child.signalCode
          ? `signal ${proc.child.signalCode}`
          : "running";
    return `${tail}\n(${how}; full output: ${logFile})`;
  };
}

export interface ConveyorSystemOptions {
  /** The name runs are reported under (default `conveyor`). */
  name?: string;
  /** More environment for the worker process (e.g. OTEL_* variables), over the bench's own. */
  env?: Record<string, string>;
  /** The worker's module handler (default: the no-op one). */
  handler?: string;
  /** A contract set on the queue before each run: every enqueue and settle checks against it. */
  contract?: Contract;
}

export class ConveyorSystem implements System {
  readonly name: string;
  readonly stateCommands = { multi: 1, zcard: 2, llen: 1, exec: 1 };
  private readonly redisUrl: string;
  private readonly redis: RedisClient;
  private readonly producer: Producer;
  private readonly keys = new QueueKeys(QUEUE);
  private readonly env: Record<string, string>;
  private readonly handler: string;
  private readonly contract?: Contract;

  constructor(redisUrl: string, opts: ConveyorSystemOptions = {}) {
    this.name = opts.name ?? "conveyor";
    this.env = opts.env ?? {};
    this.handler = opts.handler ?? NOOP_HANDLER;
    this.contract = opts.contract;
    this.redisUrl = redisUrl;
    this.redis = connectRedis(redisUrl, { name: "bench-conveyor-producer" });
    this.producer = new Producer(this.redis);
  }

  async enqueueBulk(items: unknown[]): Promise<void> {
    await this.producer.enqueueMany(
      QUEUE,
      items.map((data) => ({ data })),
    );
  }

  async enqueueOne(data: unknown): Promise<void> {
    await this.producer.enqueue(QUEUE, data);
  }

  async state(): Promise<QueueState> {
    // (waiting: the prioritised set and the line of priority-0 jobs; the bench cancels nothing,
    // so the line holds no stale entries)
    const r = await this.redis
      .multi()
      .zcard(this.keys.ready)
      .llen(this.keys.line)
      .zcard(this.keys.inflight)
      .exec();
    return {
      waiting: Number(r?.[0]?.[1] ?? 0) + Number(r?.[1]?.[1] ?? 0),
      active: Number(r?.[2]?.[1] ?? 0),
    };
  }

  async prepare(): Promise<void> {
    if (this.contract) await setContract(this.redis, QUEUE, this.contract, "bench");
  }

  async startWorker(opts: WorkerOptions): Promise<WorkerHandle> {
    const port = await freePort();
    const handler = opts.latencyFile ? LATENCY_HANDLER : this.handler;
    const proc = startProcess(NODE, [CONVEYOR_BIN, "worker"], {
      logFile: opts.logFile,
      env: {
        ...process.env,
        // As the operator's worker Deployment starts it.
        ...nodeOptions(opts, WORKER_NODE_OPTIONS),
        REDIS_URL: this.redisUrl,
        CONVEYOR_QUEUE: QUEUE,
        CONVEYOR_HANDLER: `module:${handler}`,
        CONVEYOR_CONCURRENCY: String(opts.concurrency),
        CONVEYOR_RETENTION: "0",
        CONVEYOR_PORT: String(port),
        CONVEYOR_WORKER_ID: `bench-${process.pid}`,
        LOG_LEVEL: "warn",
        BENCH_LATENCY_FILE: opts.latencyFile ?? "",
        ...this.env,
      },
    });
    return handle(
      proc,
      captured(proc, opts.logFile),
      async () => (await fetch(`http://127.0.0.1:${port}/readyz`).catch(() => null))?.ok,
    );
  }

  async close(): Promise<void> {
    await this.redis.quit().catch(() => this.redis.disconnect());
  }
}

/** Conveyor's queue with the lean bench-only consumer of bench/proto/worker.ts. */
export class ProtoSystem extends ConveyorSystem {
  private readonly mode: ProtoMode;
  private readonly url: string;

  constructor(redisUrl: string, mode: ProtoMode) {
    super(redisUrl, { name: `proto-${mode}` });
    this.url = redisUrl;
    this.mode = mode;
  }

  override async startWorker(opts: WorkerOptions): Promise<WorkerHandle> {
    const proc = startProcess(NODE, [PROTO_WORKER], {
      logFile: opts.logFile,
      env: {
        ...process.env,
        ...nodeOptions(opts),
        REDIS_URL: this.url,
        BENCH_QUEUE: QUEUE,
        BENCH_CONCURRENCY: String(opts.concurrency),
        BENCH_MODE: this.mode,
      },
    });
    return handle(proc, captured(proc, opts.logFile), async () => true);
  }
}

export class BullmqSystem implements System {
  readonly name = "bullmq" as const;
  readonly stateCommands = { multi: 1, llen: 2, exec: 1 };
  private readonly redisUrl: string;
  private readonly queue: Queue;
  private readonly driver: Redis;
  private readonly echo: boolean;

  /** `echo`: the processor returns each job's data as its result (the contract bench's counterpart). */
  constructor(redisUrl: string, driver: Redis, opts: { echo?: boolean } = {}) {
    this.redisUrl = redisUrl;
    this.echo = opts.echo ?? false;
    const u = new URL(redisUrl);
    this.queue = new Queue(QUEUE, { connection: { host: u.hostname, port: Number(u.port) } });
    this.queue.on("error", () => {});
    this.driver = driver;
  }

  async enqueueBulk(items: unknown[]): Promise<void> {
    for (let start = 0; start < items.length; start += BULK_CHUNK) {
      const chunk = items.slice(start, start + BULK_CHUNK);
      await this.queue.addBulk(
        chunk.map((data) => ({ name: "noop", data, opts: { removeOnComplete: true } })),
      );
    }
  }

  async enqueueOne(data: unknown): Promise<void> {
    await this.queue.add("noop", data, { removeOnComplete: true });
  }

  async state(): Promise<QueueState> {
    const r = await this.driver.multi().llen(`bull:${QUEUE}:wait`).llen(`bull:${QUEUE}:active`).exec();
    return { waiting: Number(r?.[0]?.[1] ?? 0), active: Number(r?.[1]?.[1] ?? 0) };
  }

  async startWorker(opts: WorkerOptions): Promise<WorkerHandle> {
    const proc = startProcess(NODE, [BULLMQ_WORKER], {
      logFile: opts.logFile,
      env: {
        ...process.env,
        ...nodeOptions(opts),
        REDIS_URL: this.redisUrl,
        BENCH_QUEUE: QUEUE,
        BENCH_CONCURRENCY: String(opts.concurrency),
        BENCH_LATENCY_FILE: opts.latencyFile ?? "",
        BENCH_ECHO: this.echo ? "1" : "",
      },
    });
    let up = false;
    proc.child.stdout?.on("data", (b: Buffer) => (up ||= b.toString().includes("ready")));
    return handle(proc, captured(proc, opts.logFile), async () => up);
  }

  async close(): Promise<void> {
    await this.queue.close();
  }
}

export function makeSystem(name: SystemName, redisUrl: string, driver: Redis): System {
  return name === "conveyor" ? new ConveyorSystem(redisUrl) : new BullmqSystem(redisUrl, driver);
}

/** Alternate which system goes first, repetition by repetition. */
export function orderFor(rep: number): SystemName[] {
  return rep % 2 === 0 ? ["conveyor", "bullmq"] : ["bullmq", "conveyor"];
}

// `python:` handlers: one long-lived Python process per worker running the handler kit
// (`python3 -m conveyor.handler --stdio module.path:function`), started with spawn (fork+exec,
// never a fork of this worker) and supervised here. Jobs go to it as newline-delimited JSON frames
// on its stdin and come back on its stdout (the kit sends the handler's own prints to stderr), so
// there is no port to pick. A process that dies is restarted; the jobs it was running stall.
import { spawn, type ChildProcessByStdio } from "node:child_process";
import { existsSync } from "node:fs";
import { delimiter, join } from "node:path";
import type { Readable, Writable } from "node:stream";
import type { Logger } from "pino";
import { assertCallable } from "../../lib/pythonCallable.ts";
import { WORKER_SECRETS } from "./command.ts";
import {
  dependencyFailure,
  foreignError,
  HandlerError,
  HandlerStalledError,
  type BatchContext,
  type Handler,
  type HandlerContext,
  type JobView,
} from "./types.ts";

/**
 * The kit of this checkout (clients/python), put last on the PYTHONPATH when it exists, so
 * `python:` works from a clone without installing it; an installed kit is used otherwise.
 */
const CHECKOUT_KIT = join(import.meta.dirname, "../../clients/python");
/** How long a process must have run for its next restart to be immediate (else backoff). */
const STABLE_MS = 10_000;
const MAX_RESTART_DELAY_MS = 5000;

export interface PythonOptions {
  /** Jobs the process runs at once: the worker's slots. */
  slots: number;
  /** How long a cancelled job may keep running before the process is killed and restarted. */
  killGraceMs: number;
  /** Keep REDIS_URL, REDIS_PASSWORD and DATABASE_URL in the process's environment. */
  passCredentials?: boolean;
  log?: Logger;
  /** The interpreter: CONVEYOR_PYTHON, else python3 on PATH. */
  python?: string;
  /** The worker sends batch calls (--batch-size above 1): the callable must be a @batch handler. */
  batch?: boolean;
}

/** A Python error as the kit reports it: {name, message, stack} and how to treat it. */
export interface PythonErrorBody {
  name?: unknown;
  message?: unknown;
  stack?: unknown;
  retryable?: unknown;
  dependencyFailure?: unknown;
  rateLimited?: unknown;
}

/** The worker's HandlerError for a Python exception, keeping its type name and traceback. */
export function pythonError(body: PythonErrorBody): HandlerError {
  const err =
    foreignError(body, "Python process", { retryable: body.retryable !== false }) ??
    new HandlerError(`the Python process sent a malformed error: ${JSON.stringify(body).slice(0, 500)}`, {
      retryable: body.retryable !== false,
    });
  if (body.dependencyFailure === true) return dependencyFailure(err);
  if (typeof body.rateLimited === "object" && body.rateLimited !== null)
    return Object.assign(err, { rateLimited: body.rateLimited });
  return err;
}

export async function pythonHandler(callable: string, opts: PythonOptions): Promise<Handler> {
  assertCallable(callable);
  const supervisor = new Supervisor(callable, opts);
  await supervisor.start();
  return {
    kind: "python",
    run: (job, ctx) => supervisor.run(job, ctx),
    ...(opts.batch ? { batch: (jobs: JobView[], ctx: BatchContext) => supervisor.runBatch(jobs, ctx) } : {}),
    close: () => supervisor.close(),
  };
}

interface Pending {
  resolve(value: unknown): void;
  reject(err: unknown): void;
  done(): void;
}

type Child = ChildProcessByStdio<Writable, Readable, Readable>;

/** A job as a frame to the kit. */
function jobFrame(job: JobView, ctx: HandlerContext): Record<string, unknown> {
  const resources = Object.fromEntries(Object.entries(ctx.resources).map(([n, r]) => [n, r.key]));
  return {
    id: job.id,
    queue: job.queue,
    data: job.data,
    attempt: job.attempt,
    maxAttempts: job.maxAttempts,
    executionId: job.executionId,
    createdAt: job.createdAt,
    ...(job.task ? { task: job.task } : {}),
    previousErrors: job.previousErrors,
    ...(job.parents ? { parents: job.parents } : {}),
    ...(ctx.callback ? { callback: ctx.callback } : {}),
    ...(Object.keys(resources).length > 0 ? { resources } : {}),
  };
}

/** The kit's batch answer: a result or a job's error per outcome (the count is checked by the worker). */
function batchOutcomesOf(outcomes: unknown): unknown {
  if (!Array.isArray(outcomes)) return outcomes;
  return outcomes.map((o: unknown) => {
    const { result, error } = (o ?? {}) as { result?: unknown; error?: PythonErrorBody };
    return error !== undefined ? pythonError(error) : (result ?? null);
  });
}

/** One Python process: frames in and out, its jobs in flight, how it ended. */
class PythonProcess {
  readonly child: Child;
  readonly startedAt = Date.now();
  readonly ready: Promise<void>;
  /** Resolves once the process has exited (and its pipes closed). */
  readonly exited: Promise<string>;
  readonly pending = new Map<number, Pending>();
  private seq = 0;
  private buffer = "";
  private stderrTail = "";
  alive = true;
  private readonly onDeath: (proc: PythonProcess, how: string) => void;

  constructor(argv: string[], env: NodeJS.ProcessEnv, onDeath: (proc: PythonProcess, how: string) => void) {
    this.onDeath = onDeath;
    const [file, ...args] = argv;
    this.child = spawn(file!, args, {
      shell: false,
      cwd: process.cwd(),
      env,
      // Its own process group: a terminal's Ctrl-C reaches the worker only, which drains first;
      // and a kill reaches whatever the handler started too.
      detached: true,
      stdio: ["pipe", "pipe", "pipe"],
    });
    this.child.stdin.on("error", () => {}); // a dead process's pipe: its exit says what happened
    this.child.stderr.on("data", (b: Buffer) => {
      process.stderr.write(b);
      this.stderrTail = (this.stderrTail + b.toString("utf8")).slice(-2000);
    });
    let becomeReady!: () => void;
    let failStart!: (err: Error) => void;
    this.ready = new Promise<void>((resolve, reject) => {
      becomeReady = resolve;
      failStart = reject;
    });
    let isReady = false;
    let fatal = "";
    this.child.stdout.setEncoding("utf8");
    this.child.stdout.on("data", (text: string) => {
      this.buffer += text;
      let nl;
      while ((nl = this.buffer.indexOf("\n")) >= 0) {
        const line = this.buffer.slice(0, nl);
        this.buffer = this.buffer.slice(nl + 1);
        let frame: {
          id?: number;
          result?: unknown;
          outcomes?: unknown;
          error?: PythonErrorBody;
          ready?: boolean;
          fatal?: PythonErrorBody;
        };
        try {
          frame = JSON.parse(line) as typeof frame;
        } catch {
          continue; // not a frame (the kit writes nothing else here)
        }
        if (frame.ready) {
          isReady = true;
          becomeReady();
        } else if (frame.fatal) {
          const f = frame.fatal;
          fatal = `${String(f.name ?? "Error")}: ${String(f.message ?? "")}`;
        } else if (typeof frame.id === "number") {
          const p = this.pending.get(frame.id);
          if (!p) continue; // a job already given up on
          this.pending.delete(frame.id);
          p.done();
          if (frame.error) p.reject(pythonError(frame.error));
          else if (frame.outcomes !== undefined) p.resolve(batchOutcomesOf(frame.outcomes));
          else p.resolve(frame.result ?? null);
        }
      }
    });
    this.exited = new Promise<string>((resolve) => {
      const ended = (how: string) => {
        if (!this.alive) return;
        this.alive = false;
        if (!isReady)
          failStart(
            new Error(
              fatal ||
                `the Python process ${how} before it was ready${this.stderrTail ? `: ${this.stderrTail.trim()}` : ""}`,
            ),
          );
        this.onDeath(this, how);
        resolve(how);
      };
      this.child.on("error", (err) => ended(`could not start (${argv[0]}: ${err.message})`));
      this.child.on("close", (code, signal) =>
        ended(signal ? `was killed by ${signal}` : `exited with code ${code}`),
      );
    });
  }

  run(job: JobView, ctx: HandlerContext, killGraceMs: number, kill: (why: string) => void): Promise<unknown> {
    return this.call({ job: jobFrame(job, ctx) }, ctx.signal, `job ${job.id}`, killGraceMs, kill);
  }

  /** A batch call: one frame with every job; the answer's outcomes, one per job. */
  runBatch(
    jobs: JobView[],
    ctx: BatchContext,
    killGraceMs: number,
    kill: (why: string) => void,
  ): Promise<unknown> {
    const frames = jobs.map((job, i) => jobFrame(job, ctx.contexts[i]!));
    return this.call(
      { batch: frames },
      ctx.signal,
      `a batch call of ${jobs.length} job(s)`,
      killGraceMs,
      kill,
    );
  }

  private call(
    body: Record<string, unknown>,
    signal: AbortSignal,
    what: string,
    killGraceMs: number,
    kill: (why: string) => void,
  ): Promise<unknown> {
    const id = ++this.seq;
    return new Promise((resolve, reject) => {
      let killTimer: NodeJS.Timeout | undefined;
      const onAbort = () => {
        this.send({ id, cancel: true });
        // The kit cannot stop a thread: a handler that ignores ctx.cancelled() past the kill grace
        // would hold a thread of the process forever, so the process goes.
        killTimer = setTimeout(() => kill(`${what} ignored its cancel for ${killGraceMs} ms`), killGraceMs);
        killTimer.unref();
      };
      this.pending.set(id, {
        resolve,
        reject,
        done: () => {
          signal.removeEventListener("abort", onAbort);
          clearTimeout(killTimer);
        },
      });
      this.send({ id, ...body });
      if (signal.aborted) onAbort();
      else signal.addEventListener("abort", onAbort, { once: true });
    });
  }

  private send(frame: unknown): void {
    if (this.alive) this.child.stdin.write(`${JSON.stringify(frame)}\n`);
  }

  kill(): void {
    try {
      process.kill(-this.child.pid!, "SIGKILL");
    } catch {
      // already gone
    }
  }

  /** Fail every job in flight: the process that ran them is gone. */
  failPending(how: string): void {
    for (const [id, p] of this.pending) {
      this.pending.delete(id);
      p.done();
      p.reject(
        new HandlerStalledError(
          `the Python handler process ${how} while the job ran: it is redelivered as a stall once its lease lapses`,
        ),
      );
    }
  }
}

/** Starts the process, restarts it when it dies (with backoff if it keeps dying), stops it at close. */
class Supervisor {
  private current: PythonProcess | undefined;
  private starting: Promise<PythonProcess> | undefined;
  private closed = false;
  private failures = 0;
  private readonly argv: string[];
  private readonly env: NodeJS.ProcessEnv;
  private readonly callable: string;
  private readonly opts: PythonOptions;

  constructor(callable: string, opts: PythonOptions) {
    this.callable = callable;
    this.opts = opts;
    const python = opts.python ?? (process.env.CONVEYOR_PYTHON || "python3");
    this.argv = [
      python,
      "-m",
      "conveyor.handler",
      "--stdio",
      "--threads",
      String(opts.slots),
      ...(opts.batch ? ["--batch"] : []),
      callable,
    ];
    const path = [process.cwd(), ...(process.env.PYTHONPATH ? [process.env.PYTHONPATH] : [])];
    if (existsSync(join(CHECKOUT_KIT, "conveyor/handler.py"))) path.push(CHECKOUT_KIT);
    this.env = { ...process.env, PYTHONPATH: path.join(delimiter), PYTHONUNBUFFERED: "1" };
    if (!opts.passCredentials) for (const name of WORKER_SECRETS) delete this.env[name];
  }

  /** The first start: a failure is the worker's (it refuses to start, saying why). */
  async start(): Promise<void> {
    const proc = this.spawn();
    try {
      await proc.ready;
    } catch (err) {
      throw new Error(`cannot start the python handler ${this.callable}: ${(err as Error).message}`, {
        cause: err,
      });
    }
    this.current = proc;
    this.opts.log?.info({ pid: proc.child.pid, callable: this.callable }, "python handler process started");
  }

  private spawn(): PythonProcess {
    return new PythonProcess(this.argv, this.env, (proc, how) => this.died(proc, how));
  }

  private died(proc: PythonProcess, how: string): void {
    proc.failPending(how);
    if (this.current !== proc || this.closed) return;
    this.current = undefined;
    const ranMs = Date.now() - proc.startedAt;
    this.failures = ranMs >= STABLE_MS ? 0 : this.failures + 1;
    this.opts.log?.warn({ pid: proc.child.pid, how }, "python handler process ended: restarting it");
    void this.restart();
  }

  private restart(): Promise<PythonProcess> {
    this.starting ??= (async () => {
      for (;;) {
        const delay = this.failures <= 1 ? 0 : Math.min(MAX_RESTART_DELAY_MS, 100 * 2 ** this.failures);
        if (delay > 0) await new Promise((r) => setTimeout(r, delay));
        if (this.closed) throw new HandlerError("the worker is stopping", { retryable: true });
        const proc = this.spawn();
        try {
          await proc.ready;
          this.current = proc;
          this.opts.log?.info({ pid: proc.child.pid }, "python handler process restarted");
          return proc;
        } catch (err) {
          this.failures++;
          this.opts.log?.error(
            { err: (err as Error).message },
            "python handler process cannot start; retrying",
          );
        }
      }
    })().finally(() => (this.starting = undefined));
    return this.starting;
  }

  async run(job: JobView, ctx: HandlerContext): Promise<unknown> {
    const proc = this.current?.alive ? this.current : await this.restart();
    return proc.run(job, ctx, this.opts.killGraceMs, this.killer(proc));
  }

  async runBatch(jobs: JobView[], ctx: BatchContext): Promise<unknown[]> {
    const proc = this.current?.alive ? this.current : await this.restart();
    return (await proc.runBatch(jobs, ctx, this.opts.killGraceMs, this.killer(proc))) as unknown[];
  }

  private killer(proc: PythonProcess): (why: string) => void {
    return (why) => {
      if (!proc.alive) return;
      this.opts.log?.warn({ pid: proc.child.pid, why }, "killing the python handler process");
      proc.kill();
    };
  }

  /** Close its input (the kit lets running jobs finish, then exits); killed after the kill grace. */
  async close(): Promise<void> {
    this.closed = true;
    const proc = this.current;
    if (!proc?.alive) return;
    proc.child.stdin.end();
    const timer = setTimeout(() => proc.kill(), Math.max(1000, this.opts.killGraceMs));
    const how = await proc.exited;
    clearTimeout(timer);
    this.opts.log?.info({ pid: proc.child.pid, how }, "python handler process stopped");
  }
}

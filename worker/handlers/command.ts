// `command:` handlers: run argv directly (spawn = fork+exec of the command, never of this
// worker, and never through a shell, so job data is inert), job data as JSON on stdin, the
// result as JSON on stdout. Exit 65 (EX_DATAERR) marks the input bad: no retry; exit 75
// (EX_TEMPFAIL) a dependency failure (deferred without an attempt, feeds the circuit breaker).
import { spawn } from "node:child_process";
import { activeTraceHeaders } from "../../queue/tracing.ts";
import { HANDLER_ENV } from "../../lib/workerContract.ts";
import { batchJobs, batchOutcomes } from "./http.ts";
import { dependencyFailure, foreignError, HandlerError, resourceEnvName, type Handler } from "./types.ts";

const MAX_OUTPUT_BYTES = 16 * 1024 * 1024;
const EX_DATAERR = 65;
const EX_TEMPFAIL = 75;

/**
 * The worker's own connection secrets (its Redis and PostgreSQL): not in a command's environment
 * unless the pool opts in (--handler-credentials), so a handler cannot write to the queues or
 * the records behind the worker's back.
 */
export const WORKER_SECRETS = ["REDIS_URL", "REDIS_PASSWORD", "DATABASE_URL"] as const;

function resourceEnv(resources: Readonly<Record<string, { key: string }>>): Record<string, string> {
  const entries = Object.entries(resources);
  if (entries.length === 0) return {};
  const env: Record<string, string> = {
    [HANDLER_ENV.resources]: JSON.stringify(Object.fromEntries(entries.map(([n, r]) => [n, r.key]))),
  };
  for (const [name, r] of entries) env[resourceEnvName(name)] = r.key;
  return env;
}

export function commandHandler(argv: string[], killGraceMs: number, passCredentials = false): Handler {
  const exec = (jobEnv: Record<string, string>, input: string, signal: AbortSignal) =>
    runCommand(argv, { killGraceMs, passCredentials }, jobEnv, input, signal);
  return {
    kind: "command",
    run: async (job, ctx) => {
      const text = await exec(
        {
          [HANDLER_ENV.jobId]: job.id,
          [HANDLER_ENV.queue]: job.queue,
          [HANDLER_ENV.attempt]: String(job.attempt),
          [HANDLER_ENV.executionId]: job.executionId,
          ...(job.task ? { [HANDLER_ENV.task]: job.task } : {}),
          // the earlier failed attempts' errors (JSON; [] on a first attempt)
          [HANDLER_ENV.previousErrors]: JSON.stringify(job.previousErrors),
          // a flow job's parents' outcomes by key (JSON; absent for a job without parents)
          ...(job.parents ? { [HANDLER_ENV.parents]: JSON.stringify(job.parents) } : {}),
          // the key granted per resource: CONVEYOR_RESOURCE_OPENAI_KEY=k2, and all of them as
          // CONVEYOR_RESOURCES={"openai":"k2"} (names as written): docs/budgets.md
          ...resourceEnv(ctx.resources),
          ...(ctx.callback
            ? { [HANDLER_ENV.callbackUrl]: ctx.callback.url, [HANDLER_ENV.callbackToken]: ctx.callback.token }
            : {}),
        },
        JSON.stringify(job.data),
        ctx.signal,
      );
      if (text === "") return null;
      try {
        return JSON.parse(text) as unknown;
      } catch {
        throw new HandlerError(
          `handler command wrote output that is not JSON: ${JSON.stringify(text.slice(0, 200))}`,
          { retryable: true },
        );
      }
    },
    // A batch call (docs/batches.md): `{"jobs": [...]}` on stdin (each job with its id, data,
    // attempt, task, previous errors, callback and resources), `{"outcomes": [...]}` on stdout.
    batch: async (jobs, ctx) => {
      const input = {
        jobs: batchJobs(jobs, ctx.contexts),
      };
      const text = await exec(
        { [HANDLER_ENV.batch]: String(jobs.length), [HANDLER_ENV.queue]: jobs[0]?.queue ?? "" },
        JSON.stringify(input),
        ctx.signal,
      );
      return batchOutcomes(text, jobs.length, "handler command");
    },
  };
}

/** Run the command with `input` on stdin: its stdout (trimmed), or the failure its exit calls for. */
function runCommand(
  argv: string[],
  opts: { killGraceMs: number; passCredentials: boolean },
  jobEnv: Record<string, string>,
  input: string,
  abort: AbortSignal,
): Promise<string> {
  const [file, ...args] = argv;
  const { killGraceMs, passCredentials } = opts;
  return new Promise((resolve, reject) => {
    // The process span's context as TRACEPARENT/TRACESTATE (the environment-carrier convention).
    const traced = activeTraceHeaders();
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      ...jobEnv,
      ...(traced && { TRACEPARENT: traced.traceparent }),
      ...(traced?.tracestate && { TRACESTATE: traced.tracestate }),
    };
    if (!passCredentials) for (const name of WORKER_SECRETS) delete env[name];
    const child = spawn(file!, args, {
      shell: false,
      detached: true, // its own process group, so a timeout kills grandchildren too
      stdio: ["pipe", "pipe", "pipe"],
      env,
    });
    const out: Buffer[] = [];
    let outBytes = 0;
    let errTail = "";
    let overflow = false;
    child.stdout.on("data", (b: Buffer) => {
      outBytes += b.length;
      if (outBytes > MAX_OUTPUT_BYTES) {
        overflow = true;
        killGroup("SIGKILL");
      } else out.push(b);
    });
    child.stderr.on("data", (b: Buffer) => {
      errTail = (errTail + b.toString("utf8")).slice(-2000);
    });
    child.stdin.on("error", () => {}); // the command may exit without reading its input
    child.stdin.end(input);

    let killTimer: NodeJS.Timeout | undefined;
    function killGroup(sig: NodeJS.Signals) {
      try {
        process.kill(-child.pid!, sig);
      } catch {
        // already gone
      }
    }
    const onAbort = () => {
      killGroup("SIGTERM");
      killTimer = setTimeout(() => killGroup("SIGKILL"), killGraceMs);
      killTimer.unref();
    };
    abort.addEventListener("abort", onAbort, { once: true });

    child.on("error", (err) => {
      abort.removeEventListener("abort", onAbort);
      reject(
        new HandlerError(`cannot start handler command ${file}: ${err.message}`, {
          retryable: false,
          cause: err,
        }),
      );
    });
    child.on("close", (code, signal) => {
      abort.removeEventListener("abort", onAbort);
      clearTimeout(killTimer);
      if (abort.aborted) return reject(abort.reason);
      if (overflow)
        return reject(
          new HandlerError(`handler command wrote more than ${MAX_OUTPUT_BYTES} bytes to stdout`, {
            retryable: false,
          }),
        );
      if (code !== 0) {
        const how = signal ? `was killed by ${signal}` : `exited with ${code}`;
        const retryable = code !== EX_DATAERR;
        // A failing command may write the error envelope on stdout (conveyor.handler does):
        // the job's error is then its own exception type, message and traceback.
        const err =
          (signal
            ? null
            : foreignError(Buffer.concat(out).toString("utf8"), "handler command", { retryable })) ??
          new HandlerError(`handler command ${how}${errTail ? `: ${errTail.trim()}` : ""}`, {
            retryable,
          });
        return reject(code === EX_TEMPFAIL ? dependencyFailure(err) : err);
      }
      resolve(Buffer.concat(out).toString("utf8").trim());
    });
  });
}

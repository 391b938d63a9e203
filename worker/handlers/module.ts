// `module:` handlers: an ES module whose default export is `async (job, ctx) => result`, loaded
// once in this process (no fork: native and gRPC clients the module creates stay valid). A module
// may also export named tasks, `export const tasks = {summarize, classify}`, each
// `(job, ctx) => result` like the default export, or `{run(job, ctx)}`: a job naming a task runs
// that one, a job naming none runs the default export. A module may export
// `batch(jobs, ctx) => outcomes` too: with --batch-size above 1 the worker calls it with several
// jobs at once, one outcome per job in order (a result, or an Error for that job alone).
import { isAbsolute, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { TASK_NAME_PATTERN } from "../../queue/contracts.ts";
import { HandlerError, type BatchContext, type Handler, type HandlerContext, type JobView } from "./types.ts";

type HandlerFn = (job: JobView, ctx: HandlerContext) => unknown;
type BatchFn = (jobs: JobView[], ctx: BatchContext) => unknown;

export async function loadModuleHandler(path: string): Promise<Handler> {
  const url = pathToFileURL(isAbsolute(path) ? path : resolve(path)).href;
  let mod: { default?: unknown; close?: unknown; tasks?: unknown; batch?: unknown };
  try {
    mod = (await import(url)) as typeof mod;
  } catch (err) {
    throw new Error(`cannot load handler module ${path}: ${(err as Error).message}`, { cause: err });
  }
  const fn = mod.default;
  const tasks = moduleTasks(path, mod.tasks);
  if (fn !== undefined && typeof fn !== "function")
    throw new Error(`handler module ${path}: its default export must be a function (job, ctx) => result`);
  const batch = mod.batch;
  if (batch !== undefined && typeof batch !== "function")
    throw new Error(`handler module ${path}: its batch export must be a function (jobs, ctx) => outcomes`);
  if (typeof fn !== "function" && tasks.size === 0 && batch === undefined)
    throw new Error(
      `handler module ${path} must export a default function (job, ctx) => result, tasks: export const tasks = {name: (job, ctx) => result}, or batch: export async function batch(jobs, ctx)`,
    );
  const names = [...tasks.keys()].sort();
  const list = names.length > 0 ? names.join(", ") : "none";
  const close = typeof mod.close === "function" ? (mod.close as () => Promise<void>) : undefined;
  return {
    kind: "module",
    tasks: names,
    run: async (job, ctx) => {
      if (job.task === undefined) {
        if (typeof fn === "function") return (fn as HandlerFn)(job, ctx);
        // (a batch-only module on a worker without batches: a batch of one)
        if (typeof batch === "function") {
          const out = (await (batch as BatchFn)([job], {
            signal: ctx.signal,
            log: ctx.log,
            contexts: [ctx],
          })) as unknown;
          if (!Array.isArray(out) || out.length !== 1)
            throw new HandlerError(
              `batch handler answered ${Array.isArray(out) ? `${out.length} outcome(s)` : typeof out} for 1 job(s): it must return an array with one outcome per job, in order`,
              { retryable: true },
            );
          if (out[0] instanceof Error) throw out[0];
          return out[0] as unknown;
        }
        throw new HandlerError(
          `job names no task, and handler module ${path} has no default export (this worker's tasks: ${list})`,
          { retryable: false },
        );
      }
      const task = tasks.get(job.task);
      // (not retryable: another attempt on this worker cannot find the task either)
      if (!task)
        throw new HandlerError(`unknown task '${job.task}' (this worker's tasks: ${list})`, {
          retryable: false,
        });
      return task(job, ctx);
    },
    ...(typeof batch === "function"
      ? {
          batch: async (jobs: JobView[], ctx: BatchContext) =>
            (await (batch as BatchFn)(jobs, ctx)) as unknown[],
        }
      : {}),
    close,
  };
}

/** The module's `tasks` export by name; a malformed one is refused when the worker starts. */
function moduleTasks(path: string, exported: unknown): Map<string, HandlerFn> {
  const tasks = new Map<string, HandlerFn>();
  if (exported === undefined) return tasks;
  if (typeof exported !== "object" || exported === null || Array.isArray(exported))
    throw new Error(`handler module ${path}: tasks must be an object {name: (job, ctx) => result}`);
  for (const [name, t] of Object.entries(exported)) {
    if (!TASK_NAME_PATTERN.test(name))
      throw new Error(`handler module ${path}: task name '${name}' must match ${TASK_NAME_PATTERN.source}`);
    if (typeof t === "function") tasks.set(name, t as HandlerFn);
    else if (typeof t === "object" && t !== null && typeof (t as { run?: unknown }).run === "function") {
      const run = (t as { run: HandlerFn }).run;
      tasks.set(name, (job, ctx) => run.call(t, job, ctx));
    } else
      throw new Error(
        `handler module ${path}: tasks.${name} must be a function (job, ctx) => result or {run}`,
      );
  }
  return tasks;
}

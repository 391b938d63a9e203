// `module:` handlers: an ES module whose default export is `async (job, ctx) => result`, loaded
// once in this process (no fork: native and gRPC clients the module creates stay valid). A module
// may also export named tasks, `export const tasks = {summarize, classify}`, each
// `(job, ctx) => result` like the default export, or `{run(job, ctx)}`: a job naming a task runs
// that one, a job naming none runs the default export.
import { isAbsolute, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { TASK_NAME_PATTERN } from "../../queue/contracts.ts";
import { HandlerError, type Handler, type HandlerContext, type JobView } from "./types.ts";

type HandlerFn = (job: JobView, ctx: HandlerContext) => unknown;

export async function loadModuleHandler(path: string): Promise<Handler> {
  const url = pathToFileURL(isAbsolute(path) ? path : resolve(path)).href;
  let mod: { default?: unknown; close?: unknown; tasks?: unknown };
  try {
    mod = (await import(url)) as typeof mod;
  } catch (err) {
    throw new Error(`cannot load handler module ${path}: ${(err as Error).message}`, { cause: err });
  }
  const fn = mod.default;
  const tasks = moduleTasks(path, mod.tasks);
  if (fn !== undefined && typeof fn !== "function")
    throw new Error(`handler module ${path}: its default export must be a function (job, ctx) => result`);
  if (typeof fn !== "function" && tasks.size === 0)
    throw new Error(
      `handler module ${path} must export a default function (job, ctx) => result, or tasks: export const tasks = {name: (job, ctx) => result}`,
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

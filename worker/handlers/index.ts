// The factory that turns a handler spec (lib/workerContract.ts: `module:…`, `http://…`,
// `command:[…]`, `python:…`) into a handler.
import type { Logger } from "pino";
import { commandHandler } from "./command.ts";
import { httpHandler } from "./http.ts";
import { loadModuleHandler } from "./module.ts";
import { pythonHandler } from "./python.ts";
import type { Handler, HandlerSpec } from "./types.ts";

export * from "./types.ts";

export async function createHandler(
  spec: HandlerSpec,
  opts: {
    killGraceMs: number;
    handlerCredentials?: boolean;
    concurrency?: number;
    log?: Logger;
    /** Batch calls (--batch-size above 1): a python handler is started for them. */
    batch?: unknown;
  },
): Promise<Handler> {
  switch (spec.kind) {
    case "module":
      return loadModuleHandler(spec.path);
    case "http":
      return httpHandler(spec.url);
    case "command":
      return commandHandler(spec.argv, opts.killGraceMs, opts.handlerCredentials);
    case "python":
      return pythonHandler(spec.callable, {
        slots: opts.concurrency ?? 1,
        killGraceMs: opts.killGraceMs,
        passCredentials: opts.handlerCredentials,
        log: opts.log,
        batch: opts.batch !== undefined,
      });
  }
}

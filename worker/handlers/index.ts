// Handler specs (`module:…`, `http://…`, `command:[…]`, `python:…`) and the factory that turns one into a handler.
import type { Logger } from "pino";
import { commandHandler } from "./command.ts";
import { httpHandler } from "./http.ts";
import { loadModuleHandler } from "./module.ts";
import { assertCallable, pythonHandler } from "./python.ts";
import type { Handler, HandlerSpec } from "./types.ts";

export * from "./types.ts";

export function parseHandlerSpec(text: string): HandlerSpec {
  if (text.startsWith("module:")) {
    const path = text.slice("module:".length);
    if (!path) throw new Error("module: needs a path, e.g. module:/app/handler.js");
    return { kind: "module", path };
  }
  if (text.startsWith("http://") || text.startsWith("https://")) {
    try {
      new URL(text);
    } catch {
      throw new Error(`invalid handler URL ${JSON.stringify(text)}`);
    }
    return { kind: "http", url: text };
  }
  if (text.startsWith("command:")) {
    const rest = text.slice("command:".length).trim();
    let argv: unknown;
    try {
      argv = JSON.parse(rest);
    } catch {
      throw new Error(
        `command: takes a JSON array of arguments (no shell), e.g. command:["/usr/bin/convert","-"], got ${JSON.stringify(rest)}`,
      );
    }
    if (!Array.isArray(argv) || argv.length === 0 || !argv.every((a) => typeof a === "string")) {
      throw new Error("command: takes a non-empty JSON array of strings");
    }
    return { kind: "command", argv };
  }
  if (text.startsWith("python:")) {
    const callable = text.slice("python:".length).trim();
    assertCallable(callable);
    return { kind: "python", callable };
  }
  throw new Error(
    `unknown handler ${JSON.stringify(text)}: expected module:/path.js, http://host:port/path, command:["prog","arg"] or python:module.path:function`,
  );
}

export async function createHandler(
  spec: HandlerSpec,
  opts: { killGraceMs: number; handlerCredentials?: boolean; concurrency?: number; log?: Logger },
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
      });
  }
}

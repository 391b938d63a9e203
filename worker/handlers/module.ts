// `module:` handlers: an ES module whose default export is `async (job, ctx) => result`, loaded
// once in this process (no fork: native and gRPC clients the module creates stay valid).
import { isAbsolute, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import type { Handler, HandlerContext, JobView } from "./types.ts";

type HandlerFn = (job: JobView, ctx: HandlerContext) => unknown;

export async function loadModuleHandler(path: string): Promise<Handler> {
  const url = pathToFileURL(isAbsolute(path) ? path : resolve(path)).href;
  let mod: { default?: unknown; close?: unknown };
  try {
    mod = (await import(url)) as typeof mod;
  } catch (err) {
    throw new Error(`cannot load handler module ${path}: ${(err as Error).message}`, { cause: err });
  }
  const fn = mod.default;
  if (typeof fn !== "function")
    throw new Error(`handler module ${path} must export a default function (job, ctx) => result`);
  const close = typeof mod.close === "function" ? (mod.close as () => Promise<void>) : undefined;
  return {
    kind: "module",
    run: async (job, ctx) => (fn as HandlerFn)(job, ctx),
    close,
  };
}

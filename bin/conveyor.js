#!/usr/bin/env node
// The `conveyor` command. In a checkout it runs the TypeScript sources (Node 24 strips types): a
// dist/ left there by an earlier `make build` would be stale code. Images and the npm package ship
// dist/ without the sources, and run that.
import { existsSync } from "node:fs";
import { enableCompileCache } from "node:module";
// V8's compiled code (and the type-stripped sources) kept on disk between runs, in the temp
// directory or NODE_COMPILE_CACHE: a second `conveyor` start compiles nothing; where it cannot be
// written the CLI runs as it would without it. Not for the daemons: they start once per pod, whose
// /tmp is a size-limited emptyDir that would only fill up.
if (!["worker", "operator", "api"].includes(process.argv[2] ?? "")) enableCompileCache();
// A worker's stop signals are noted from here on and taken by worker/main.ts (lib/heldSignals.ts):
// a pod deleted while the worker's modules load stops cleanly instead of dying by the default action.
if (process.argv[2] === "worker") {
  const signals = [];
  const hold = (sig) => signals.push(sig);
  process.on("SIGTERM", hold);
  process.on("SIGINT", hold);
  globalThis[Symbol.for("conveyor.heldSignals")] = {
    signals,
    release: () => {
      process.off("SIGTERM", hold);
      process.off("SIGINT", hold);
    },
  };
}
const source = new URL("../cli/main.ts", import.meta.url);
const { main } = await import(
  existsSync(source) ? source.href : new URL("../dist/cli/main.js", import.meta.url).href
);
const code = await main(process.argv.slice(2));
// A pipe whose reader is slower than us still holds queued writes (only a file is written at
// once): exit when an empty write after them has gone out, or failed (a reader gone).
for (const s of [process.stdout, process.stderr]) s.on("error", () => {}); // (EPIPE: nobody to tell)
await Promise.all(
  [process.stdout, process.stderr].map((s) => new Promise((done) => s.write("", () => done()))),
);
process.exit(code);

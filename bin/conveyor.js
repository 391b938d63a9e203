#!/usr/bin/env node
// The `conveyor` command. Runs the compiled CLI when `make build` has produced dist/, else the
// TypeScript sources directly (Node 24 strips types).
import { existsSync } from "node:fs";
import { enableCompileCache } from "node:module";
// V8's compiled code (and the type-stripped sources) kept on disk between runs, in the temp
// directory or NODE_COMPILE_CACHE: a second `conveyor` start compiles nothing; where it cannot be
// written the CLI runs as it would without it. Not for the daemons: they start once per pod, whose
// /tmp is a size-limited emptyDir that would only fill up.
if (!["worker", "operator", "api"].includes(process.argv[2] ?? "")) enableCompileCache();
const compiled = new URL("../dist/cli/main.js", import.meta.url);
const { main } = await import(
  existsSync(compiled) ? compiled.href : new URL("../cli/main.ts", import.meta.url).href
);
// stdout is synchronous for files and pipes on Linux, so exiting here loses no output.
process.exit(await main(process.argv.slice(2)));

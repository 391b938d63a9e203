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
const source = new URL("../cli/main.ts", import.meta.url);
const { main } = await import(
  existsSync(source) ? source.href : new URL("../dist/cli/main.js", import.meta.url).href
);
// stdout is synchronous for files and pipes on Linux, so exiting here loses no output.
process.exit(await main(process.argv.slice(2)));

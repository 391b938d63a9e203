// Copies the published scripts (each with what it includes, resolved exactly as queue/scripts.ts
// loads it) into the Python client's package data, or with --check fails when a copy differs:
//   node scripts/python-scripts.ts [--check]
// The Python test suite runs --check, so the client can never run a script the worker does not.
import { existsSync, readdirSync, readFileSync, unlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { SCRIPT_NAMES, scriptSource } from "../queue/scripts.ts";

const dir = new URL("../clients/python/conveyor/scripts/", import.meta.url).pathname;
const check = process.argv.includes("--check");
const differ: string[] = [];
for (const name of SCRIPT_NAMES) {
  const file = join(dir, `${name}.lua`);
  const source = scriptSource(name);
  if (!check) writeFileSync(file, source);
  else if (!existsSync(file) || readFileSync(file, "utf8") !== source) differ.push(name);
}
const names = new Set<string>(SCRIPT_NAMES);
const stale = readdirSync(dir).filter((f) => f.endsWith(".lua") && !names.has(f.slice(0, -4)));
if (!check) for (const f of stale) unlinkSync(join(dir, f));
if (check && (differ.length > 0 || stale.length > 0)) {
  process.stderr.write(
    `clients/python/conveyor/scripts is out of date (differ: ${differ.join(", ") || "none"}; ` +
      `not published: ${stale.join(", ") || "none"}): run node scripts/python-scripts.ts\n`,
  );
  process.exit(1);
}
if (!check) process.stdout.write(`wrote ${SCRIPT_NAMES.length} scripts to ${dir}\n`);

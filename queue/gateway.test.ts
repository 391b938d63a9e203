// One gateway: every script call of the TypeScript clients goes through queue/gateway.ts, so no
// other module builds a script's KEYS or ARGV (tests of the scripts themselves may call them raw).
import { test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { SCRIPT_NAMES } from "./scripts.ts";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const DIRS = ["queue", "api", "cli", "operator", "worker", "records", "lib", "bin"];
/** The gateway and the runners it calls. */
const ALLOWED = new Set(["queue/gateway.ts", "queue/scripts.ts", "queue/durability.ts"]);

function sources(dir: string): string[] {
  let entries;
  try {
    entries = readdirSync(dir, { withFileTypes: true });
  } catch {
    return [];
  }
  return entries.flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return e.name === "node_modules" ? [] : sources(path);
    return e.name.endsWith(".ts") && !e.name.endsWith(".test.ts") ? [path] : [];
  });
}

test("no module but queue/gateway.ts runs a script", () => {
  const offenders: string[] = [];
  for (const file of DIRS.flatMap((d) => sources(join(ROOT, d)))) {
    const rel = relative(ROOT, file);
    if (ALLOWED.has(rel)) continue;
    const text = readFileSync(file, "utf8");
    if (/\brun(Durable)?Script\s*[<(]/.test(text)) offenders.push(rel);
  }
  assert.deepEqual(offenders, [], "these build KEYS/ARGV themselves: call a gateway function instead");
});

test("the gateway calls every script the clients run", () => {
  const text = readFileSync(new URL("./gateway.ts", import.meta.url), "utf8");
  // (complete_job and advance_job are the one-job forms other-language clients use; the worker settles through settle_jobs)
  const unused = SCRIPT_NAMES.filter((n) => !text.includes(`"${n}"`));
  assert.deepEqual(unused, ["complete_job", "advance_job"]);
});

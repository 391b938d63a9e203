// Every command in the table refuses positional arguments it does not take: `conveyor <command>`
// run as a process with one argument more than its fullest form, exit 2 naming that argument.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { test } from "node:test";
import { promisify } from "node:util";
import { COMMANDS } from "./commands/index.ts";

const CONVEYOR = new URL("../bin/conveyor.js", import.meta.url).pathname;
const EXTRA = "surplus-arg";

async function conveyor(args: string[]): Promise<{ status: number; stderr: string }> {
  try {
    await promisify(execFile)(process.execPath, [CONVEYOR, ...args], {
      // nothing listens there: a command that connected before checking its arguments fails with 1
      env: { PATH: process.env.PATH!, REDIS_URL: "redis://127.0.0.1:1" },
    });
    return { status: 0, stderr: "" };
  } catch (err) {
    const { code, stderr } = err as { code: number; stderr: string };
    return { status: code, stderr };
  }
}

/** The fullest argv of each form (each action of `a|b` on its own), or none when a form takes any number. */
function fullForms(form: string): string[][] {
  const words = form.split(" ");
  if (words.some((w) => w.includes("…"))) return [];
  const actions = /^[a-z]/.test(words[0]!) ? words.shift()!.split("|") : [undefined];
  const rest = words.map((w) => (w.startsWith("[") ? "opt-1" : "arg-1"));
  return actions.map((a) => (a === undefined ? rest : [a, ...rest]));
}

test("every command refuses a positional argument it does not take: exit 2, naming it", async () => {
  const cases: string[][] = [];
  for (const entry of COMMANDS) {
    const { args } = await entry.load();
    const before = cases.length;
    for (const argv of args.flatMap(fullForms)) cases.push([entry.name, ...argv, EXTRA]);
    // no arguments at all, or an unknown action
    if (args.length === 0 || args.every((f) => /^[a-z]/.test(f))) cases.push([entry.name, EXTRA]);
    const anyNumber = args.length > 0 && args.every((f) => f.includes("…"));
    assert.ok(
      cases.length > before || anyNumber,
      `${entry.name}: no form to check (args ${JSON.stringify(args)})`,
    );
  }
  const failures: string[] = [];
  // a few at a time: each is a Node process
  for (let i = 0; i < cases.length; i += 4) {
    const batch = cases.slice(i, i + 4);
    const results = await Promise.all(batch.map(conveyor));
    results.forEach((r, j) => {
      if (r.status !== 2 || !r.stderr.includes(EXTRA))
        failures.push(`conveyor ${batch[j]!.join(" ")}: exit ${r.status}, ${r.stderr.split("\n")[0]}`);
    });
  }
  assert.deepEqual(failures, []);
});

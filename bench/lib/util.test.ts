import assert from "node:assert/strict";
import { test } from "node:test";
import { FlagError, parseFlags } from "./util.ts";

test("parseFlags: known flags in each form; an unknown flag or stray argument is refused by name", () => {
  const known = ["jobs", "json", "concurrency"];
  assert.deepEqual(
    [...parseFlags(["--jobs", "10", "--concurrency=32,128", "--json"], known)],
    [
      ["jobs", "10"],
      ["concurrency", "32,128"],
      ["json", "true"],
    ],
  );
  assert.throws(
    () => parseFlags(["--job", "10"], known),
    (e: Error) =>
      e instanceof FlagError && /unknown flag --job \(known: --jobs, --json, --concurrency/.test(e.message),
  );
  assert.throws(() => parseFlags(["10"], known), /unexpected argument "10"/);
});

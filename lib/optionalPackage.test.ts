// Unit tests of lib/optionalPackage.ts (the library's optional peers) and lib/tracingSwitch.ts
// (one switch however many copies of lib/ a process loads).
import assert from "node:assert/strict";
import { test } from "node:test";
import { MissingPackageError, requireOptional } from "./optionalPackage.ts";
import { packageVersion } from "./packageVersion.ts";
import { readFileSync } from "node:fs";

test("an installed optional package loads; a missing one is an error naming it and the feature", () => {
  const croner = requireOptional<typeof import("croner")>("croner", "A cron schedule");
  assert.equal(typeof croner.Cron, "function");
  assert.throws(
    () => requireOptional("conveyor-no-such-package", "A test feature"),
    (err: unknown) =>
      err instanceof MissingPackageError &&
      err.message ===
        "A test feature needs the conveyor-no-such-package package: npm install conveyor-no-such-package",
  );
});

test("the tracing switch is one per process: a second copy of lib/ sees the first's", async () => {
  type Switch = typeof import("./tracingSwitch.ts");
  const copy = (n: string) => import(`./tracingSwitch.ts?copy=${n}`) as Promise<Switch>;
  const [a, b] = [await copy("a"), await copy("b")];
  assert.notEqual(a, b, "two module instances");
  const key = Symbol.for("conveyor.tracing.enabled");
  const flags = globalThis as { [key]?: boolean };
  const saved = flags[key];
  try {
    delete flags[key];
    assert.equal(b.tracingActive(), false);
    a.enableTracing();
    assert.equal(b.tracingActive(), true);
  } finally {
    // other unit tests of this process expect tracing off
    if (saved === undefined) delete flags[key];
    else flags[key] = saved;
  }
});

test("the package version is the nearest package.json's (the repository's here)", () => {
  const root = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")) as {
    version: string;
  };
  assert.equal(packageVersion(), root.version);
});

import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { readOptions } from "./options.ts";

const SOURCES = {
  drain: "X_DRAIN_SECONDS",
  retention: "X_RETENTION_SECONDS",
  verbose: "X_VERBOSE",
  name: "X_NAME",
};
const read = (argv: string[], env: NodeJS.ProcessEnv = {}) =>
  readOptions(argv, env, SOURCES, "usage: x", ["verbose"]);

describe("readOptions", () => {
  it("durations take 250ms/30s/5m/1h from flags and variables; a bare number is seconds", () => {
    assert.equal(read(["--drain", "5m"]).duration("drain", 1), 300_000);
    assert.equal(read(["--drain=250ms"]).duration("drain", 1), 250);
    assert.equal(read([], { X_DRAIN_SECONDS: "90s" }).duration("drain", 1), 90_000);
    assert.equal(read([], { X_DRAIN_SECONDS: "25" }).duration("drain", 1), 25_000);
    assert.equal(read([]).duration("drain", 1234), 1234);
    assert.equal(read(["--retention", "2h"]).seconds("retention", 1), 7200);
    assert.equal(read(["--retention", "250ms"]).seconds("retention", 9), 1, "rounded up to whole seconds");
    assert.equal(read([], { X_RETENTION_SECONDS: "3600" }).seconds("retention", 1), 3600);
  });

  it("a bad or out-of-range duration names the flag and its variable", () => {
    assert.throws(
      () => read(["--drain", "soon"]).duration("drain", 1),
      /--drain \/ X_DRAIN_SECONDS: invalid duration "soon"/,
    );
    assert.throws(
      () => read(["--drain", "10ms"]).duration("drain", 1, 100),
      /--drain \/ X_DRAIN_SECONDS: expected at least 100ms, got 10ms/,
    );
  });

  it("boolean options work bare, with =value or with a separate value", () => {
    assert.equal(read(["--verbose"]).bool("verbose", false), true);
    assert.equal(read(["--verbose", "--name", "n"]).bool("verbose", false), true);
    assert.equal(read(["--verbose=false"]).bool("verbose", true), false);
    assert.equal(read(["--verbose", "false"]).bool("verbose", true), false);
    assert.equal(read([], { X_VERBOSE: "yes" }).bool("verbose", false), true);
    assert.throws(() => read(["--name"]), /argument missing/, "a string option still needs its value");
  });
});

import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { duration, int, parseBoolean, readOptions, settingsHelp, type Settings } from "./options.ts";

const SETTINGS = {
  drain: {
    env: "X_DRAIN",
    deprecatedEnv: "X_DRAIN_SECONDS",
    kind: "duration",
    default: "1s",
    help: "",
  },
  retention: { env: "X_RETENTION", kind: "duration", default: "1s", help: "" },
  floor: { env: "X_FLOOR", kind: "duration", default: "1s", min: "100ms", help: "" },
  verbose: { short: "v", env: "X_VERBOSE", kind: "bool", default: false, help: "" },
  name: { env: "X_NAME", kind: "string", help: "" },
  count: { kind: "int", default: 3, min: 1, max: 9, help: "" },
} as const satisfies Settings<string>;
const SET: Settings = SETTINGS;
const read = (argv: string[], env: NodeJS.ProcessEnv = {}, warnings: string[] = []) =>
  readOptions(argv, env, SET, { usage: "usage: x", warn: (m) => warnings.push(m) });

describe("readOptions", () => {
  it("durations take 250ms/30s/5m/1h from flags and variables; a bare number is seconds", () => {
    assert.equal(read(["--drain", "5m"]).duration("drain"), 300_000);
    assert.equal(read(["--drain=250ms"]).duration("drain"), 250);
    assert.equal(read([], { X_DRAIN: "90s" }).duration("drain"), 90_000);
    assert.equal(read([], { X_DRAIN: "25" }).duration("drain"), 25_000);
    assert.equal(read([]).duration("drain"), 1000, "the declared default");
    assert.equal(read(["--retention", "2h"]).seconds("retention"), 7200);
    assert.equal(read(["--retention", "250ms"]).seconds("retention"), 1, "rounded up to whole seconds");
  });

  it("a bad or out-of-range duration names the flag and its variable", () => {
    assert.throws(() => read(["--drain", "soon"]).duration("drain"), /invalid --drain \/ X_DRAIN "soon"/);
    assert.throws(
      () => read(["--floor", "10ms"]).duration("floor"),
      /--floor \/ X_FLOOR: expected at least 100ms, got 10ms/,
    );
    assert.throws(
      () => read(["--count", "10"]).int("count"),
      /--count expects a whole number 1\.\.9, got "10"/,
    );
  });

  it("a former variable name is still read, with one warning naming both; the new name wins", () => {
    const warnings: string[] = [];
    const o = read([], { X_DRAIN_SECONDS: "7" }, warnings);
    assert.equal(o.duration("drain"), 7000);
    assert.equal(o.duration("drain"), 7000);
    assert.deepEqual(warnings, [
      "X_DRAIN_SECONDS is deprecated: use X_DRAIN (the old name is read until the next release)",
    ]);
    assert.throws(
      () => read([], { X_DRAIN_SECONDS: "soon" }).duration("drain"),
      /--drain \/ X_DRAIN_SECONDS/,
    );
    assert.equal(read([], { X_DRAIN: "2", X_DRAIN_SECONDS: "7" }).duration("drain"), 2000);
  });

  it("boolean options work bare, with =value, a separate value or a short alias", () => {
    assert.equal(read(["--verbose"]).bool("verbose"), true);
    assert.equal(read(["-v"]).bool("verbose"), true);
    assert.equal(read(["--verbose", "--name", "n"]).bool("verbose"), true);
    assert.equal(read(["--verbose=false"]).bool("verbose"), false);
    assert.equal(read(["--verbose", "off"]).bool("verbose"), false);
    assert.equal(read([], { X_VERBOSE: "on" }).bool("verbose"), true);
    assert.equal(read([], { X_VERBOSE: "No" }).bool("verbose"), false);
    assert.throws(() => read(["--name"]), /argument missing/, "a string option still needs its value");
  });

  it("a boolean value the parser does not know is an error naming the flag and variable", () => {
    assert.throws(
      () => read([], { X_VERBOSE: "maybe" }).bool("verbose"),
      /--verbose \/ X_VERBOSE: expected true or false/,
    );
    assert.throws(
      () => read(["--verbose=maybe"]).bool("verbose"),
      /--verbose \/ X_VERBOSE: expected true or false/,
    );
    assert.throws(() => parseBoolean("enabled", "FOO"), /^OptionError: FOO: expected true or false/);
    for (const t of ["true", "1", "yes", "on", "TRUE", "On"]) assert.equal(parseBoolean(t, "x"), true, t);
    for (const f of ["false", "0", "no", "off", "OFF"]) assert.equal(parseBoolean(f, "x"), false, f);
  });

  it("with positionals a bare boolean never takes the next word", () => {
    const o = readOptions(["q", "--verbose", "1"], {}, SET, { positionals: true });
    assert.equal(o.bool("verbose"), true);
    assert.deepEqual(o.positionals, ["q", "1"]);
  });

  it("help lists each flag with its variable and default", () => {
    assert.match(settingsHelp(SET), /--drain D +X_DRAIN +\(default 1s\)/);
  });

  it("a table entry built by a kind's constructor is the same setting, its fields checked at compile time", () => {
    assert.deepEqual(int("X_COUNT", { default: 3, min: 1, max: 9 }, "slots"), {
      env: "X_COUNT",
      kind: "int",
      default: 3,
      min: 1,
      max: 9,
      help: "slots",
    });
    // The variable and the help swapped, or a bound of the wrong kind, do not compile (npm run typecheck).
    // @ts-expect-error a help text is no variable name
    int("slots", {}, "X_COUNT");
    // @ts-expect-error an int's bounds are numbers
    int("X_COUNT", { min: "1s" }, "slots");
    // @ts-expect-error a duration's default is text ("30s")
    duration("X_DRAIN", { default: 30 }, "drain");
  });
});

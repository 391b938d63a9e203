// Unit tier: the Lua include resolution other-language clients depend on (no Redis needed).
import assert from "node:assert/strict";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { describe, test } from "node:test";
import {
  dumpScripts,
  functionLibrary,
  functionLibraryIn,
  LIBRARY_FILE,
  resolveIncludes,
  SCRIPT_NAMES,
  scriptSource,
} from "./scripts.ts";

const includesDir = new URL("./scripts/includes/", import.meta.url);
const helperFiles = readdirSync(includesDir).filter((f) => f.endsWith(".lua"));
/** Every function a helper file defines. */
const helpers = new Set(
  helperFiles.flatMap((f) =>
    [...readFileSync(new URL(f, includesDir), "utf8").matchAll(/^local function (\w+)/gm)].map((m) => m[1]!),
  ),
);

describe("Lua script includes", () => {
  test("every script resolves with each helper defined once, before its first use, and no include left", () => {
    for (const name of SCRIPT_NAMES) {
      const src = scriptSource(name);
      assert.doesNotMatch(src, /@include/, name);
      const defined = [...src.matchAll(/^local function (\w+)/gm)].map((m) => [m[1]!, m.index] as const);
      const names = defined.map(([n]) => n);
      assert.deepEqual(names, [...new Set(names)], `${name}: a helper is defined twice`);
      const at = new Map(defined);
      for (const call of src.matchAll(/\b(\w+)\(/g)) {
        const fn = call[1]!;
        if (!helpers.has(fn)) continue;
        const def = at.get(fn);
        assert.ok(def !== undefined, `${name} calls ${fn} but does not include it`);
        assert.ok(def <= call.index, `${name} calls ${fn} before defining it`);
      }
    }
  });

  test("the resolution is deterministic and a fixed point: resolving the published text again changes nothing", () => {
    for (const name of SCRIPT_NAMES) {
      const file = new URL(`./scripts/${name}.lua`, import.meta.url);
      const raw = readFileSync(file, "utf8");
      const once = resolveIncludes(raw, file);
      assert.equal(once, scriptSource(name));
      assert.equal(resolveIncludes(raw, file), once, `${name} resolves the same every time`);
      assert.equal(resolveIncludes(once, file), once, `${name}: resolved text has nothing left to resolve`);
      // The script's own body follows its helpers unchanged.
      const body = raw.split("\n").filter((l) => !l.startsWith("--- @include"));
      assert.ok(once.endsWith(body.slice(body.findIndex((l) => !l.startsWith("--"))).join("\n")), name);
    }
  });

  test("dumpScripts writes every published script, byte for byte", () => {
    const dir = mkdtempSync(join(tmpdir(), "cvy-scripts-"));
    try {
      const written = dumpScripts(dir);
      assert.equal(written.length, SCRIPT_NAMES.length + 1);
      for (const name of SCRIPT_NAMES)
        assert.equal(readFileSync(join(dir, `${name}.lua`), "utf8"), scriptSource(name));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("a build (resolved scripts, no includes) loads the same Function library from the library.lua it wrote", () => {
    const dir = mkdtempSync(join(tmpdir(), "cvy-built-"));
    try {
      dumpScripts(dir);
      const built = functionLibraryIn(pathToFileURL(`${dir}/`));
      const checkout = functionLibrary();
      assert.equal(built.name, checkout.name);
      assert.equal(built.code, checkout.code);
      for (const name of SCRIPT_NAMES) assert.equal(built.functionName(name), checkout.functionName(name));
      // (without it: an error naming the file, which the caller turns into the EVALSHA fallback)
      rmSync(join(dir, LIBRARY_FILE));
      assert.throws(() => functionLibraryIn(pathToFileURL(`${dir}/`)), /library\.lua/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("an include cycle or a missing helper is a clear error", () => {
    const dir = mkdtempSync(join(tmpdir(), "cvy-include-"));
    try {
      writeFileSync(join(dir, "a.lua"), '--- @include "b"\nlocal function a() end\n');
      writeFileSync(join(dir, "b.lua"), '--- @include "a"\nlocal function b() end\n');
      const base = pathToFileURL(join(dir, "main.lua"));
      assert.throws(() => resolveIncludes('--- @include "a"\n', base), /include cycle/);
      assert.throws(() => resolveIncludes('--- @include "missing"\n', base), /ENOENT/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("no Lua function or script body is over 100 code lines", () => {
    // (the count itself: keywords in strings and comments are not blocks, blank lines not code)
    const sample =
      "local function f(x)\n  if x then -- end\n\n    return 'end'\n  end\nend\nlocal y = 1\nreturn f(y)\n";
    assert.deepEqual(luaBodyLengths(sample), [
      ["f", 5],
      ["(top level)", 2],
    ]);
    const scriptsDir = new URL("./scripts/", import.meta.url);
    const files = [
      ...SCRIPT_NAMES.map((n) => new URL(`${n}.lua`, scriptsDir)),
      ...helperFiles.map((f) => new URL(f, includesDir)),
    ];
    const lengths = files.flatMap((file) =>
      luaBodyLengths(readFileSync(file, "utf8")).map(
        ([fn, n]) => [`${file.pathname.slice(scriptsDir.pathname.length)}: ${fn}`, n] as const,
      ),
    );
    const long = lengths.filter(([, n]) => n > MAX_LUA_BODY_LINES);
    assert.deepEqual(long, [], "split these into named local functions (issue 43)");
  });
});

const MAX_LUA_BODY_LINES = 100;

/**
 * The code lines (neither blank nor only a comment) of each function of a Lua file, nested ones
 * included, and of its top level outside every function. Blocks are counted by their keywords
 * (`function`, `if`, `do`, `repeat` open; `end`, `until` close), strings and comments dropped.
 */
function luaBodyLengths(source: string): [string, number][] {
  const out: [string, number][] = [];
  const open: { name: string; lines: number; depth: number }[] = [];
  let top = 0;
  let depth = 0;
  for (const raw of source.split("\n")) {
    const code = raw
      .replace(/'(?:\\.|[^'\\])*'|"(?:\\.|[^"\\])*"/g, "''")
      .replace(/--.*$/, "")
      .trim();
    if (code === "") continue;
    const opens = code.match(/\b(?:function|if|do|repeat)\b/g)?.length ?? 0;
    const closes = code.match(/\b(?:end|until)\b/g)?.length ?? 0;
    const fn = /\bfunction\s*([\w.:]*)\s*\(/.exec(code);
    const starts = fn !== null && opens > closes;
    if (open.length === 0 && !starts) top++;
    for (const f of open) f.lines++;
    if (starts) open.push({ name: fn[1] || "(anonymous)", lines: 1, depth });
    depth += opens - closes;
    while (open.length > 0 && depth <= open.at(-1)!.depth) {
      const f = open.pop()!;
      out.push([f.name, f.lines]);
    }
  }
  out.push(["(top level)", top]);
  return out;
}

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { bareImports, libraryEntries, libraryImport, LIBRARY, rewriteSpecifiers } from "./packages.ts";

const DIST = "/pkg/dist";

describe("building the npm packages", () => {
  const INDEX = 'export * from "./keys.ts";\nexport { scriptSource } from "./scripts.ts";\n';
  const EXPORTS = {
    ".": { types: "./dist/queue/index.d.ts", default: "./dist/queue/index.js" },
    "./tracing": { types: "./dist/queue/tracing.d.ts", default: "./dist/queue/tracing.js" },
    "./scripts/*": "./dist/queue/scripts/*",
    "./package.json": "./package.json",
  };
  const entries = libraryEntries(INDEX, EXPORTS);

  it("reads the library's entry points: its exports and what queue/index.ts re-exports whole", () => {
    assert.deepEqual(Object.fromEntries(entries), {
      keys: LIBRARY,
      index: LIBRARY,
      tracing: `${LIBRARY}/tracing`,
    });
  });

  it("swaps the queue code for the library package, from any depth", () => {
    const swap = (file: string, spec: string) => libraryImport(DIST, `${DIST}/${file}`, spec, entries);
    assert.equal(swap("worker/worker.js", "../queue/index.js"), LIBRARY);
    assert.equal(swap("operator/kube/client.js", "../../queue/index.js"), LIBRARY);
    assert.equal(swap("worker/worker.js", "../queue/keys.js"), LIBRARY);
    assert.equal(swap("worker/handlers/http.js", "../../queue/tracing.js"), `${LIBRARY}/tracing`);
    assert.equal(swap("worker/worker.js", "../lib/backoff.js"), "../lib/backoff.js");
    assert.equal(swap("worker/worker.js", "pino"), "pino");
  });

  it("refuses an import of a queue module that is no entry point, naming the file", () => {
    assert.throws(
      () => libraryImport(DIST, `${DIST}/worker/worker.js`, "../queue/scripts.js", entries),
      /worker\/worker\.js imports \.\.\/queue\/scripts\.js: the library exports @conveyor-dev\/queue, @conveyor-dev\/queue\/tracing only/,
    );
  });

  it("finds the npm packages compiled code imports: static, dynamic, re-exports, declarations", () => {
    const dir = mkdtempSync(join(tmpdir(), "conveyor-packages-"));
    try {
      const js = join(dir, "a.js");
      writeFileSync(
        js,
        [
          'import { Redis } from "ioredis";',
          'import "side-effect";',
          'export * from "./b.js";',
          'import { readFileSync } from "node:fs";',
          'import { join } from "path";',
          'const sdk = await import("@opentelemetry/sdk-trace");',
          'import pino from "pino/file";',
          '/** Reads from "0" (a comment, not an import). */',
          "const text = \"import('not-an-import')\";",
        ].join("\n"),
      );
      const dts = join(dir, "a.d.ts");
      writeFileSync(dts, 'export * from "./b.ts";\nexport type C = import("@types-only/pkg").C;\n');
      assert.deepEqual(bareImports([js, dts]), [
        "@opentelemetry/sdk-trace",
        "@types-only/pkg",
        "ioredis",
        "pino",
        "side-effect",
      ]);
      rewriteSpecifiers(dts, (spec) => spec.replace(/\.ts$/, ".js"));
      assert.match(readFileSync(dts, "utf8"), /^export \* from "\.\/b\.js";/);
      rewriteSpecifiers(js, (spec) => (spec === "ioredis" ? "@scope/ioredis" : spec));
      const rewritten = readFileSync(js, "utf8");
      assert.match(rewritten, /^import \{ Redis \} from "@scope\/ioredis";$/m);
      assert.match(rewritten, /Reads from "0"/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("the shipped sources", () => {
  it("import queue/ only through the library's entry points (checked here, long before an image build)", () => {
    const root = join(import.meta.dirname, "..", "..");
    const entries = libraryEntries(
      readFileSync(join(root, "queue", "index.ts"), "utf8"),
      (
        JSON.parse(readFileSync(join(root, "packages", "queue", "package.json"), "utf8")) as {
          exports: Record<string, unknown>;
        }
      ).exports,
    );
    const refused: string[] = [];
    for (const dir of ["cli", "worker", "operator", "api", "records", "lib"])
      for (const rel of readdirSync(join(root, dir), { recursive: true }) as string[]) {
        if (!rel.endsWith(".ts") || rel.endsWith(".test.ts")) continue;
        const file = join(root, dir, rel);
        const text = readFileSync(file, "utf8");
        // (type-only imports are erased by tsc)
        for (const m of text.matchAll(
          /(?:^(?:import|export)(?!\s+type\b)[^;]*?\sfrom\s*|import\()\s*"(\.[^"]+\.ts)"/gm,
        )) {
          const spec = m[1]!.replace(/\.ts$/, ".js");
          try {
            libraryImport(root, file, spec, entries);
          } catch {
            refused.push(`${dir}/${rel} imports ${m[1]}`);
          }
        }
      }
    assert.deepEqual(refused, []);
  });
});

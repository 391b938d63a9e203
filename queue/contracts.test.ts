import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { compileContract, ContractError, contractHash, describeViolation } from "./contracts.ts";

const person = {
  type: "object",
  required: ["name", "email"],
  properties: {
    name: { type: "string" },
    email: { type: "string", format: "email" },
    site: { type: "string", format: "uri" },
  },
};

describe("contracts", () => {
  it("names the pointer, the rule and the value of each violation (2020-12 by default, formats on)", () => {
    const c = compileContract({ data: person });
    assert.deepEqual(c.checkData({ name: "a", email: "a@b.co" }), []);
    assert.deepEqual(c.checkData({ name: 1, site: "not a uri" }).map(describeViolation), [
      "/email: is required (required)",
      "/name: must be string (type, value 1)",
      '/site: must match format "uri" (format, value "not a uri")',
    ]);
  });

  it("takes draft-07 by its $schema, and cuts long values", () => {
    const c = compileContract({
      result: { $schema: "http://json-schema.org/draft-07/schema#", type: "object", maxProperties: 0 },
    });
    const [v] = c.checkResult({ text: "x".repeat(500) });
    assert.equal(v!.rule, "maxProperties");
    assert.ok(v!.value!.length <= 80 && v!.value!.endsWith("…"));
  });

  it("checks a named task's schemas and refuses an unknown task where the contract lists them", () => {
    const c = compileContract({ tasks: { summarize: { data: person }, classify: {} } });
    assert.deepEqual(c.tasks, ["summarize", "classify"]);
    assert.equal(c.checkData({}, "summarize")[0]!.pointer, "/name");
    assert.deepEqual(c.checkData({}, "classify"), []);
    assert.equal(c.checkData({}, "translate")[0]!.rule, "task");
    assert.deepEqual(c.checkData({ any: 1 }), [], "an untasked job meets the stage's (absent) data schema");
  });

  it("hashes by content, not key order; refuses a malformed contract with a message naming it", () => {
    assert.equal(
      contractHash({ data: { type: "object", required: ["a"] } }),
      contractHash({ data: { required: ["a"], type: "object" } }),
    );
    assert.notEqual(contractHash({ data: { type: "object" } }), contractHash({ data: { type: "array" } }));
    assert.throws(() => compileContract({ input: {} }), /unknown contract member 'input'/);
    assert.throws(
      () => compileContract({ data: { type: "objekt" } }),
      (e: Error) => e instanceof ContractError && /^data: not a valid JSON Schema/.test(e.message),
    );
    assert.throws(() => compileContract({ tasks: { "bad name": {} } }), /task name 'bad name'/);
  });

  it("compiles a schema with an $id again (an updated contract, a second cache in the process)", () => {
    const org = (required: string[]) => ({
      data: {
        $id: "https://example.com/org.json",
        type: "object",
        required,
        properties: { phone: { $ref: "#/$defs/phone" } },
        $defs: { phone: { type: "string", pattern: "^[0-9+ ]+$" } },
      },
    });
    const first = compileContract(org(["name"]));
    const second = compileContract(org(["name", "phone"]));
    assert.deepEqual(first.checkData({ name: "a" }), []);
    assert.equal(second.checkData({ name: "a" })[0]!.pointer, "/phone");
    assert.equal(second.checkData({ name: "a", phone: "x" })[0]!.rule, "pattern");
  });
});

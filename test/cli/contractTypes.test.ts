// `conveyor contract types`: the TypeScript it writes compiles under tsc --strict against values
// the contract accepts (and refuses ones it does not); the Python imports under /usr/bin/python3
// with each TypedDict's required and optional keys as the schema says.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { connectRedis, type RedisClient } from "../../queue/index.ts";
import { setContract } from "../../queue/contracts.ts";
import { RedisServer } from "../support/redis.ts";
import { CONVEYOR, NODE, REPO } from "../support/workers.ts";

const PYTHON = "/usr/bin/python3";

const ORG = {
  type: "object",
  required: ["name", "services"],
  properties: {
    name: { type: "string", minLength: 1 },
    description: { type: "string" },
    services: {
      type: "array",
      items: {
        type: "object",
        required: ["name"],
        properties: {
          name: { type: "string" },
          schedule: { type: "array", items: { $ref: "#/$defs/Opening" } },
        },
        additionalProperties: false,
      },
    },
    phones: { type: "array", items: { type: "string", pattern: "^[0-9+ ()-]+$" } },
    kind: { enum: ["charity", "company", null] },
    version: { const: 1 },
    labels: { type: "object", additionalProperties: { type: "integer" } },
    "x-source": { type: ["string", "null"] },
  },
  $defs: {
    Opening: {
      type: "object",
      required: ["day", "opens"],
      properties: {
        day: { enum: ["mon", "tue", "wed", "thu", "fri", "sat", "sun"] },
        opens: { type: "string" },
        closes: { type: "string" },
      },
    },
  },
};

const CONTRACT = {
  data: { type: "object", required: ["text"], properties: { text: { type: "string" } } },
  tasks: {
    extract: {
      data: {
        $schema: "http://json-schema.org/draft-07/schema#",
        type: "object",
        required: ["text"],
        properties: { text: { type: "string" }, hint: { anyOf: [{ type: "string" }, { type: "integer" }] } },
      },
      result: ORG,
    },
    "score-v2": { result: { type: "number" } },
  },
};

// The shapes beyond plain objects: keys that are not identifiers, recursion, allOf, boolean
// schemas, tuples, enums a Literal cannot hold, and two schemas defining the same name.
const EDGES = {
  tasks: {
    a: {
      data: {
        type: "object",
        required: ["from", "x-y"],
        properties: {
          from: { type: "string" },
          "x-y": { type: "integer" },
          node: { $ref: "#/$defs/Node" },
          both: {
            allOf: [
              { $ref: "#/$defs/Base" },
              { type: "object", required: ["extra"], properties: { extra: { type: "boolean" } } },
            ],
          },
          anything: true,
          nothing: false,
          tuple: { type: "array", prefixItems: [{ type: "string" }] },
          mixed: { enum: [1.5, "x"] },
          phone: { $ref: "#/$defs/Phone" },
        },
        $defs: {
          Node: {
            type: "object",
            required: ["value"],
            properties: {
              value: { type: "number" },
              children: { type: "array", items: { $ref: "#/$defs/Node" } },
            },
          },
          Base: { type: "object", required: ["id"], properties: { id: { type: "string" } } },
          Phone: { type: "string" },
        },
      },
    },
    b: {
      data: {
        type: "object",
        properties: { phone: { $ref: "#/$defs/Phone" } },
        $defs: { Phone: { type: "integer" } },
      },
      result: true,
    },
  },
};

describe("conveyor contract types", () => {
  let server: RedisServer;
  let redis: RedisClient;
  let dir: string;
  before(async () => {
    server = await RedisServer.start();
    redis = connectRedis(server.url);
    dir = mkdtempSync(join(tmpdir(), "cvy-ctypes-"));
    writeFileSync(join(dir, "contract.json"), JSON.stringify(CONTRACT, null, 2));
  });
  after(async () => {
    redis.disconnect();
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  });
  const run = (...args: string[]) =>
    spawnSync(NODE, [CONVEYOR, "contract", "types", ...args], {
      env: { ...process.env, REDIS_URL: server.url },
      encoding: "utf8",
    });

  test("TypeScript: compiles with tsc --strict; sample values fit, broken ones do not", () => {
    const r = run("--file", join(dir, "contract.json"), "--lang", "ts", "--out", join(dir, "types.ts"));
    assert.equal(r.status, 0, r.stderr);
    const types = readFileSync(join(dir, "types.ts"), "utf8");
    for (const name of ["Data", "ExtractData", "ExtractResult", "ScoreV2Result", "ExtractResultOpening"])
      assert.match(types, new RegExp(`^export (interface|type) ${name}\\b`, "m"), name);
    writeFileSync(
      join(dir, "sample.ts"),
      `import type { Data, ExtractData, ExtractResult, ScoreV2Result } from "./types.ts";
export const data: Data = { text: "hello" };
export const extract: ExtractData = { text: "x", hint: 3 };
export const score: ScoreV2Result = 0.5;
export const org: ExtractResult = {
  name: "Food bank",
  services: [{ name: "meals", schedule: [{ day: "mon", opens: "09:00" }] }],
  phones: ["+44 20 1234"],
  kind: null,
  version: 1,
  labels: { a: 1 },
  "x-source": null,
};
// @ts-expect-error name is required
export const noName: ExtractResult = { services: [] };
// @ts-expect-error day is one of the enum
export const badDay: ExtractResult = { name: "n", services: [{ name: "s", schedule: [{ day: "someday", opens: "9" }] }] };
// @ts-expect-error services' items take no other keys
export const extraKey: ExtractResult = { name: "n", services: [{ name: "s", other: 1 }] };
// @ts-expect-error a number
export const badScore: ScoreV2Result = "high";
`,
    );
    const tsc = spawnSync(
      join(REPO, "node_modules/.bin/tsc"),
      [
        "--strict",
        "--noEmit",
        "--allowImportingTsExtensions",
        "--module",
        "nodenext",
        "--target",
        "es2022",
        join(dir, "sample.ts"),
      ],
      { encoding: "utf8" },
    );
    assert.equal(tsc.status, 0, `tsc:\n${tsc.stdout}${tsc.stderr}\n${types}`);
  });

  test("Python: imports under /usr/bin/python3; required and optional keys as the schema says", () => {
    const r = run(
      "--file",
      join(dir, "contract.json"),
      "--lang",
      "python",
      "--out",
      join(dir, "contract_types.py"),
    );
    assert.equal(r.status, 0, r.stderr);
    const probe = spawnSync(
      PYTHON,
      [
        "-c",
        `import json, typing, contract_types as m
def keys(t):
    return {"required": sorted(t.__required_keys__), "optional": sorted(t.__optional_keys__)}
out = {n: keys(getattr(m, n)) for n in ["Data", "ExtractData", "ExtractResult", "ExtractResultServicesItem", "ExtractResultOpening"]}
hints = typing.get_type_hints(m.ExtractResult)
out["hints"] = {k: repr(v) for k, v in hints.items()}
out["day"] = list(typing.get_args(typing.get_type_hints(m.ExtractResultOpening)["day"]))
out["score"] = repr(m.ScoreV2Result)
out["hint"] = repr(typing.get_type_hints(m.ExtractData)["hint"])
print(json.dumps(out))`,
      ],
      { cwd: dir, encoding: "utf8" },
    );
    assert.equal(probe.status, 0, `${probe.stderr}\n${readFileSync(join(dir, "contract_types.py"), "utf8")}`);
    const out = JSON.parse(probe.stdout) as Record<string, unknown>;
    assert.deepEqual(out.Data, { required: ["text"], optional: [] });
    assert.deepEqual(out.ExtractData, { required: ["text"], optional: ["hint"] });
    assert.deepEqual(out.ExtractResult, {
      required: ["name", "services"],
      optional: ["description", "kind", "labels", "phones", "version", "x-source"],
    });
    assert.deepEqual(out.ExtractResultServicesItem, { required: ["name"], optional: ["schedule"] });
    assert.deepEqual(out.ExtractResultOpening, { required: ["day", "opens"], optional: ["closes"] });
    const hints = out.hints as Record<string, string>;
    assert.equal(hints.services, "list[contract_types.ExtractResultServicesItem]");
    assert.equal(hints.kind, "typing.Literal['charity', 'company', None]");
    assert.equal(hints.labels, "dict[str, int]");
    assert.equal(hints["x-source"], "str | None");
    assert.equal(hints.version, "typing.Literal[1]");
    assert.deepEqual(out.day, ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]);
    assert.equal(out.score, "<class 'float'>");
    assert.equal(out.hint, "str | int");
  });

  test("the shapes beyond plain objects, in both languages", () => {
    writeFileSync(join(dir, "edges.json"), JSON.stringify(EDGES));
    const py = run(
      "--file",
      join(dir, "edges.json"),
      "--lang",
      "python",
      "--out",
      join(dir, "edge_types.py"),
    );
    assert.equal(py.status, 0, py.stderr);
    const text = readFileSync(join(dir, "edge_types.py"), "utf8");
    for (const why of ["no value is valid here", "tuple items", "enum of values a Literal cannot hold"])
      assert.ok(text.includes(`# ${why}`), `${why}:\n${text}`);
    const probe = spawnSync(
      PYTHON,
      [
        "-c",
        `import json, typing, edge_types as m
keys = lambda t: [sorted(t.__required_keys__), sorted(t.__optional_keys__)]
node = typing.get_type_hints(m.ADataNode)
print(json.dumps({
  "a": keys(m.AData), "both": keys(m.ADataBoth), "node": repr(node["children"]),
  "phones": [repr(m.ADataPhone), repr(m.BDataPhone)], "b": repr(m.BResult),
}))`,
      ],
      { cwd: dir, encoding: "utf8" },
    );
    assert.equal(probe.status, 0, `${probe.stderr}\n${text}`);
    assert.deepEqual(JSON.parse(probe.stdout), {
      a: [
        ["from", "x-y"],
        ["anything", "both", "mixed", "node", "nothing", "phone", "tuple"],
      ],
      both: [["extra", "id"], []],
      node: "list[edge_types.ADataNode]",
      phones: ["<class 'str'>", "<class 'int'>"],
      b: "typing.Any",
    });

    const ts = run("--file", join(dir, "edges.json"), "--lang", "ts", "--out", join(dir, "edges.ts"));
    assert.equal(ts.status, 0, ts.stderr);
    writeFileSync(
      join(dir, "edges-sample.ts"),
      `import type { AData, ADataPhone, BData, BDataPhone, BResult } from "./edges.ts";
export const a: AData = { from: "x", "x-y": 1, node: { value: 1, children: [{ value: 2 }] }, both: { id: "i", extra: true } };
export const phones: [ADataPhone, BDataPhone] = ["+1 555", 5];
export const b: BData = { phone: 3 };
export const r: BResult = { anything: [1] };
// @ts-expect-error x-y is required
export const noXY: AData = { from: "x" };
`,
    );
    const tsc = spawnSync(
      join(REPO, "node_modules/.bin/tsc"),
      [
        "--strict",
        "--noEmit",
        "--allowImportingTsExtensions",
        "--module",
        "nodenext",
        "--target",
        "es2022",
        join(dir, "edges-sample.ts"),
      ],
      { encoding: "utf8" },
    );
    assert.equal(
      tsc.status,
      0,
      `tsc:\n${tsc.stdout}${tsc.stderr}\n${readFileSync(join(dir, "edges.ts"), "utf8")}`,
    );
  });

  test("from a queue: the contract in force, the same types as from its file", async () => {
    await setContract(redis, "orgs", CONTRACT, "test");
    const fromQueue = run("orgs", "--lang", "python");
    assert.equal(fromQueue.status, 0, fromQueue.stderr);
    const fromFile = run("--file", join(dir, "contract.json"), "--lang", "python");
    const body = (s: string) => s.slice(s.indexOf("\n"));
    assert.match(fromQueue.stdout, /from queue orgs, contract [0-9a-f]{16}/);
    assert.equal(body(fromQueue.stdout), body(fromFile.stdout));

    const none = run("no-contract", "--lang", "ts");
    assert.equal(none.status, 1);
    assert.match(none.stderr, /queue no-contract has no contract/);
  });

  test("YAML contracts; bad input is named, not a crash", () => {
    writeFileSync(
      join(dir, "c.yaml"),
      "result:\n  type: object\n  required: [a]\n  properties:\n    a: {type: string}\n",
    );
    const y = run("--file", join(dir, "c.yaml"), "--lang", "ts");
    assert.equal(y.status, 0, y.stderr);
    assert.match(y.stdout, /export interface Result \{\n {2}a: string;/);

    const usage = (args: string[], pattern: RegExp) => {
      const r = run(...args);
      assert.equal(r.status, 2, `${args.join(" ")}: ${r.stderr}`);
      assert.match(r.stderr, pattern);
    };
    usage(["orgs"], /--lang ts\|python is required/);
    usage(["orgs", "--lang", "go"], /--lang/);
    usage(["orgs", "--file", join(dir, "c.yaml"), "--lang", "ts"], /a queue or --file, not both/);
    usage(["--lang", "ts"], /a queue or --file/);

    const bad = (text: string, file: string, pattern: RegExp) => {
      writeFileSync(join(dir, file), text);
      const r = run("--file", join(dir, file), "--lang", "python");
      assert.equal(r.status, 1, r.stderr);
      assert.match(r.stderr, pattern);
      assert.doesNotMatch(r.stderr, /\n\s+at /);
    };
    bad("{not json", "bad.json", /bad\.json: not valid JSON/);
    bad("a: [", "bad.yaml", /bad\.yaml: not valid YAML/);
    bad('{"data": {"type": 3}}', "bad-schema.json", /data: not a valid JSON Schema/);
    bad('{"input": {}}', "bad-member.json", /unknown contract member 'input'/);
    bad('{"tasks": {"a-b": {"data": {}}, "a_b": {"data": {}}}}', "clash.json", /would both be named ABData/);
  });
});

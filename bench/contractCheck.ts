// What checking a result against the stage's contract costs the worker per settle (worker CPU,
// no Redis): a 30-field schema (strings with formats, numbers with ranges, an enum, an array of
// objects) and a ~1 KiB result, checked as the settle does (worker/contractCheck.ts) — a valid
// result, one with 3 violations (their messages and the cut refused text built), and no contract.
//   node bench/contractCheck.ts [--n 20000] [--reps 5] [--json]
import { compileContract, ContractCache, encodeResult, type Contract } from "../queue/index.ts";
import { cachedContract, resultProblem } from "../worker/contractCheck.ts";
import { intFlag, cliFlags, progress, round, summarize } from "./lib/util.ts";

function schemaAndResult(): { contract: Contract; result: Record<string, unknown> } {
  const properties: Record<string, unknown> = {};
  const result: Record<string, unknown> = {};
  for (let i = 0; i < 30; i++) {
    const name = `field${i}`;
    switch (i % 6) {
      case 0:
        properties[name] = { type: "string", minLength: 1, maxLength: 200 };
        result[name] = `value of field ${i}, some words of text`;
        break;
      case 1:
        properties[name] = { type: "string", format: "email" };
        result[name] = `contact${i}@example.org`;
        break;
      case 2:
        properties[name] = { type: "number", minimum: 0, maximum: 1e6 };
        result[name] = i * 1000.5;
        break;
      case 3:
        properties[name] = { type: "string", format: "uri" };
        result[name] = `https://example.org/org/${i}/page`;
        break;
      case 4:
        properties[name] = { enum: ["low", "medium", "high"] };
        result[name] = "medium";
        break;
      default:
        properties[name] = {
          type: "array",
          items: {
            type: "object",
            required: ["day", "opens"],
            properties: { day: { type: "string" }, opens: { type: "string", format: "time" } },
          },
        };
        result[name] = [
          { day: "monday", opens: "09:00:00Z" },
          { day: "tuesday", opens: "09:30:00Z" },
        ];
    }
  }
  const contract: Contract = {
    result: { type: "object", required: Object.keys(properties), properties, additionalProperties: false },
  };
  return { contract, result };
}

const flags = cliFlags(["json", "n", "reps"]);
const n = intFlag(flags, "n", 20_000);
const reps = intFlag(flags, "reps", 5);
const { contract, result } = schemaAndResult();
const invalid = { ...result, field1: "not an email", field2: -5, field4: "urgent" };
const compiled = compileContract(contract);
// A cache that already holds the contract, as a worker's does after its first claim (read once
// from a stand-in for `<Q>contract`: the settle itself reads nothing).
const stored = [compiled.hash, JSON.stringify(contract), "bench", "0"];
const cache = new ContractCache({ hmget: async () => stored } as never);
await cache.refresh("bench");
const bytes = Buffer.byteLength(encodeResult(result));

function perSettle(value: unknown, hash: string): number {
  const t0 = performance.now();
  let refused = 0;
  for (let i = 0; i < n; i++) {
    // As the settle does: the result encoded once, then checked against the claim's hash.
    const encoded = encodeResult(value);
    const c = cachedContract(cache, "bench", hash);
    if (c === undefined) throw new Error("the cached contract was not used");
    if (resultProblem(c, value, encoded, undefined)) refused++;
  }
  const us = ((performance.now() - t0) * 1000) / n;
  if (hash && value === invalid && refused !== n) throw new Error("an invalid result passed");
  return us;
}

const runs = { none: [] as number[], valid: [] as number[], invalid: [] as number[] };
for (let rep = 0; rep < reps; rep++) {
  runs.none.push(perSettle(result, ""));
  runs.valid.push(perSettle(result, compiled.hash));
  runs.invalid.push(perSettle(invalid, compiled.hash));
  progress(
    `rep ${rep + 1}/${reps}: ${JSON.stringify(Object.fromEntries(Object.entries(runs).map(([k, v]) => [k, round(v.at(-1)!, 2)])))}`,
  );
}
const out = {
  n,
  reps,
  resultBytes: bytes,
  fields: 30,
  // µs per settle, medians; each includes encoding the result (the settle does that anyway)
  noContractUs: round(summarize(runs.none).median, 2),
  validUs: round(summarize(runs.valid).median, 2),
  invalidUs: round(summarize(runs.invalid).median, 2),
};
console.log(flags.has("json") ? JSON.stringify(out) : JSON.stringify(out, null, 2));

// examples/org-extract stays one piece: its ConfigMaps hold its contract files, its typed modules
// are what `conveyor contract types` writes from them, the contracts accept the example's shapes
// and refuse the careless first answer, and its WorkerPools apply against the CRD. (The pipeline
// itself runs end to end in clients/python/tests/test_org_extract_example.py.)
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { parseAllDocuments } from "yaml";
import { compileContract } from "../../queue/contracts.ts";
import { ControlPlane } from "../support/controlplane.ts";
import { CONVEYOR, NODE, REPO } from "../support/workers.ts";

const EXAMPLE = join(REPO, "examples/org-extract");
const STAGES = ["extract", "enrich"] as const;
const contractOf = (stage: string) => JSON.parse(readFileSync(join(EXAMPLE, stage, "contract.json"), "utf8"));
const manifests = () =>
  parseAllDocuments(readFileSync(join(EXAMPLE, "workerpools.yaml"), "utf8")).map(
    (d) =>
      d.toJS() as { kind: string; metadata: { name: string }; data?: Record<string, string>; spec?: any },
  );

test("the ConfigMaps hold the stages' contract files; the pools name them", () => {
  const docs = manifests();
  for (const stage of STAGES) {
    const map = docs.find((d) => d.kind === "ConfigMap" && d.metadata.name === `org-${stage}-contract`)!;
    assert.deepEqual(
      JSON.parse(map.data!["contract.json"]!),
      contractOf(stage),
      `${stage}: ConfigMap ≠ contract.json`,
    );
    const pool = docs.find((d) => d.kind === "WorkerPool" && d.metadata.name === `org-${stage}`)!;
    assert.equal(pool.spec.queue, `orgs/${stage}`);
    assert.deepEqual(pool.spec.contract, { configMapRef: { name: `org-${stage}-contract` } });
    assert.deepEqual(pool.spec.handler, { python: { callable: `handlers:${stage}` } });
  }
  assert.equal(docs.find((d) => d.metadata.name === "org-extract")!.spec.nextQueue, "orgs/enrich");
});

test("the typed modules are what `conveyor contract types` writes from the contracts", () => {
  for (const stage of STAGES) {
    const r = spawnSync(
      NODE,
      [CONVEYOR, "contract", "types", "--file", `${stage}/contract.json`, "--lang", "python"],
      {
        cwd: EXAMPLE,
        encoding: "utf8",
      },
    );
    assert.equal(r.status, 0, r.stderr);
    assert.equal(
      readFileSync(join(EXAMPLE, `${stage}_types.py`), "utf8"),
      r.stdout,
      `examples/org-extract/${stage}_types.py is stale: conveyor contract types --file ${stage}/contract.json --lang python --out ${stage}_types.py`,
    );
  }
});

test("the contracts refuse the careless first answer and accept the repaired one downstream", () => {
  const extract = compileContract(contractOf("extract"));
  const enrich = compileContract(contractOf("enrich"));
  const org = {
    name: "Riverside Food Bank",
    description: "Free groceries.",
    services: [{ name: "Food parcels", schedule: [{ day: "mon", opens: "09:00", closes: "12:00" }] }],
    phones: ["+44 20 7946 0018"],
  };
  assert.deepEqual(extract.checkResult(org), [
    { pointer: "/contacts", rule: "required", message: "is required" },
  ]);
  const repaired = { ...org, contacts: [{ name: "Ana Silva", email: "ana@riverside-food.example" }] };
  assert.deepEqual(extract.checkResult(repaired), []);
  assert.deepEqual(enrich.checkData(repaired), []);
  assert.equal(extract.checkResult({ ...repaired, contacts: [] })[0]?.rule, "minItems");
  assert.equal(extract.checkData({ text: "" })[0]?.pointer, "/text");
});

describe("the WorkerPools against the CRD", () => {
  let cp: ControlPlane;
  before(async () => {
    cp = await ControlPlane.start();
    await cp.kubectl("create", "namespace", "examples");
    await cp.kubectl("apply", "--server-side", "-f", join(REPO, "crds"));
    await cp.waitForCrd("workerpools.conveyor.dev", 60_000);
  });
  after(async () => {
    await cp?.stop();
  });

  test("workerpools.yaml applies with --dry-run=server --validate=strict", async () => {
    const out = await cp.kubectl(
      "apply",
      "--dry-run=server",
      "--validate=strict",
      "--namespace",
      "examples",
      "-f",
      join(EXAMPLE, "workerpools.yaml"),
    );
    for (const name of ["org-extract", "org-enrich"])
      assert.match(out, new RegExp(`workerpool\\.conveyor\\.dev/${name} created \\(server dry run\\)`));
  });
});

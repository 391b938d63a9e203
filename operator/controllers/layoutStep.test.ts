// The operator's auto-finalize decision (decideAutoFinalize): finalize only once every pod of
// every pool of the pipeline reports reading the newer layout and no live reader is behind.
import assert from "node:assert/strict";
import { test } from "node:test";
import type { LayoutReader } from "../../queue/index.ts";
import { decideAutoFinalize, type AutoFinalizeInput } from "./layoutStep.ts";

const worker = (id: string, pod: string, max: number, version?: string): LayoutReader => ({
  kind: "worker",
  id,
  pod,
  queue: "p/a",
  layouts: { min: 1, max },
  ...(version ? { version } : {}),
  seen: 0,
});
const base: AutoFinalizeInput = {
  autoFinalize: [
    { pool: "ns/a", on: true },
    { pool: "ns/b", on: true },
  ],
  inForce: 1,
  target: 2,
  pods: [
    { pool: "ns/a", name: "a-1" },
    { pool: "ns/b", name: "b-1" },
  ],
  readers: [
    worker("w-a1", "a-1", 2, "0.2.0"),
    worker("w-b1", "b-1", 2, "0.2.0"),
    { kind: "operator", id: "operator:x", version: "0.2.0", layouts: { min: 1, max: 2 }, seen: 0 },
  ],
};

test("every pod of every pool reads the newer layout and no reader is behind: finalize", () => {
  assert.deepEqual(decideAutoFinalize(base), { finalize: true, to: 2 });
});

test("the layout in force is already the newest: nothing to do", () => {
  assert.deepEqual(decideAutoFinalize({ ...base, inForce: 2 }), {
    finalize: false,
    why: "layout 2 is in force",
  });
});

test("a pool of the pipeline with spec.upgrade.autoFinalize off holds it", () => {
  const d = decideAutoFinalize({
    ...base,
    autoFinalize: [
      { pool: "ns/a", on: true },
      { pool: "ns/b", on: false },
    ],
  });
  assert.deepEqual(d, { finalize: false, why: "spec.upgrade.autoFinalize is off for ns/b" });
});

test("a worker of the previous release (no layouts reported: layout 1 only) holds it, named", () => {
  const d = decideAutoFinalize({ ...base, readers: [...base.readers.slice(0, 1), worker("w-b1", "b-1", 1)] });
  assert.deepEqual(d, { finalize: false, why: "waiting for worker w-b1 (reads 1)" });
});

test("a job API or operator that does not read it holds it too", () => {
  const d = decideAutoFinalize({
    ...base,
    readers: [...base.readers, { kind: "api", id: "api:h:1", layouts: { min: 1, max: 1 }, seen: 0 }],
  });
  assert.deepEqual(d, { finalize: false, why: "waiting for api api:h:1 (reads 1)" });
});

test("a pod that has not reported yet (starting, or its reports lapsed) holds it", () => {
  const d = decideAutoFinalize({ ...base, pods: [...base.pods, { pool: "ns/b", name: "b-2" }] });
  assert.deepEqual(d, {
    finalize: false,
    why: "waiting for pod(s) ns/b/b-2 to report the layouts they read",
  });
});

test("a pool at zero holds it: its next pods' version is unknown (a person finalizes then)", () => {
  const d = decideAutoFinalize({ ...base, pods: base.pods.slice(0, 1), readers: base.readers.slice(0, 1) });
  assert.deepEqual(d, { finalize: false, why: "no pods of ns/b to tell which version they run" });
});

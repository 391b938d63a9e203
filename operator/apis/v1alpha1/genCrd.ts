// `npm run gen:crds`: writes crds/conveyor.dev_workerpools.yaml, the chart's copy of it
// (charts/conveyor/crds/) and the field reference of docs/workerpool.md from the schema.
// `--check` exits 1 when any of them is stale (CI).
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { CHART_CRD_FILE, CRD_FILE, workerPoolCRDYaml } from "./crd.ts";
import { REFERENCE_FILE, withReference } from "./reference.ts";

const root = join(import.meta.dirname, "..", "..", "..");
const read = (f: string) => {
  try {
    return readFileSync(join(root, f), "utf8");
  } catch {
    return "";
  }
};
const outputs: [string, string][] = [
  [CRD_FILE, workerPoolCRDYaml()],
  [CHART_CRD_FILE, workerPoolCRDYaml()],
  [REFERENCE_FILE, withReference(read(REFERENCE_FILE) || "# WorkerPool\n")],
];
if (process.argv.includes("--check")) {
  const stale = outputs.filter(([f, text]) => read(f) !== text).map(([f]) => f);
  if (stale.length > 0) {
    process.stderr.write(`stale: ${stale.join(", ")}: run \`npm run gen:crds\`\n`);
    process.exit(1);
  }
} else {
  for (const [f, text] of outputs) {
    if (read(f) === text) continue;
    writeFileSync(join(root, f), text);
    process.stdout.write(`wrote ${f}\n`);
  }
}

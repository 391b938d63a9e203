// `npm run gen:crds`: writes crds/conveyor.dev_workerpools.yaml from the schema.
// `--check` exits 1 when the file is stale (CI).
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { CRD_FILE, workerPoolCRDYaml } from "./crd.ts";

const file = join(import.meta.dirname, "..", "..", "..", CRD_FILE);
const text = workerPoolCRDYaml();
if (process.argv.includes("--check")) {
  let current = "";
  try {
    current = readFileSync(file, "utf8");
  } catch {
    // missing counts as stale
  }
  if (current !== text) {
    process.stderr.write(`${CRD_FILE} is stale: run \`npm run gen:crds\`\n`);
    process.exit(1);
  }
} else {
  writeFileSync(file, text);
  process.stdout.write(`wrote ${CRD_FILE}\n`);
}

// `npm run gen:keys`: writes the key layout's TypeScript, Lua and Python forms from
// queue/keyTable.ts. `--check` exits 1 when one is stale.
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { generatedLayouts } from "./keyLayout.ts";

const root = join(import.meta.dirname, "..");
const check = process.argv.includes("--check");
let stale = 0;
for (const [file, text] of generatedLayouts()) {
  let now = "";
  try {
    now = readFileSync(join(root, file), "utf8");
  } catch {
    // not written yet
  }
  if (now === text) continue;
  stale++;
  if (check) console.error(`${file} is stale: run npm run gen:keys`);
  else {
    writeFileSync(join(root, file), text);
    console.log(`wrote ${file}`);
  }
}
process.exit(check && stale ? 1 : 0);

// Re-render a results file's Markdown and chart (after a change to the report):
//   node bench/render.ts bench/results/<date>.json
import { readFileSync } from "node:fs";
import { basename, dirname } from "node:path";
import { writeResults, type BenchResults } from "./lib/report.ts";

for (const file of process.argv.slice(2)) {
  const results = JSON.parse(readFileSync(file, "utf8")) as BenchResults;
  process.stdout.write(`${writeResults(results, dirname(file), basename(file, ".json"))}\n`);
}

// The version of the package this code runs from: the nearest package.json above lib/ — the
// repository's from the sources, @conveyor-dev/conveyor's when installed from npm (its dist/
// has none), /app's in the images. One place, so `conveyor --version` and the OpenAPI document agree.
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";

let cached: string | undefined;

export function packageVersion(): string {
  if (cached !== undefined) return cached;
  for (let dir = import.meta.dirname; ; dir = dirname(dir)) {
    const file = join(dir, "package.json");
    if (existsSync(file))
      return (cached = (JSON.parse(readFileSync(file, "utf8")) as { version: string }).version);
    if (dirname(dir) === dir) return (cached = "unknown");
  }
}

// The one version number: the root package.json's `version`. The packages, the chart's version
// and appVersion, the images' tags and the changelog section all take it from there;
// `make release VERSION=x.y.z` writes it there (and into Chart.yaml, for `helm install` from a
// checkout) before building anything.
import { execFileSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ROOT, rootVersion } from "./packages.ts";

const SEMVER = /^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$/;

export function assertVersion(version: string): string {
  if (!SEMVER.test(version))
    throw new Error(`VERSION ${JSON.stringify(version)} is not a version like 1.2.3 or 1.2.3-rc.1`);
  return version;
}

/** Chart.yaml with `version` and `appVersion` set. */
export function chartWithVersion(chartYaml: string, version: string): string {
  return chartYaml
    .replace(/^version: .*$/m, `version: ${version}`)
    .replace(/^appVersion: .*$/m, `appVersion: "${version}"`);
}

/** Writes `version` into the root package.json (and its lock) and Chart.yaml; no-op when equal. */
export function setVersion(version: string): void {
  assertVersion(version);
  const chart = join(ROOT, "charts", "conveyor", "Chart.yaml");
  const text = readFileSync(chart, "utf8");
  const next = chartWithVersion(text, version);
  if (next !== text) writeFileSync(chart, next);
  if (rootVersion() === version) return;
  execFileSync(
    "npm",
    ["version", version, "--no-git-tag-version", "--allow-same-version", "--ignore-scripts"],
    { cwd: ROOT, stdio: ["ignore", "ignore", "inherit"] },
  );
}

// The chart as a release ships it: `helm package` of charts/conveyor with a version that is not
// Chart.yaml's (so version and appVersion provably come from the release), installed from the
// packaged .tgz — not the folder — into the test control plane; the operator runs the image of
// that version; index.yaml lists every packaged version with its URL.
import { describe, it, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parse } from "yaml";
import { ControlPlane } from "../support/controlplane.ts";
import { rootVersion } from "../../scripts/release/packages.ts";
import { packageChart } from "../../scripts/release/main.ts";

const NS = "conveyor-system";
const REPO = "https://charts.example.com/conveyor";

describe("the packaged chart", { timeout: 20 * 60_000 }, () => {
  let cp: ControlPlane;
  let tmp: string;
  const version = `${rootVersion()}-test.1`;

  before(async () => {
    tmp = mkdtempSync(join(tmpdir(), "conveyor-release-chart-"));
    cp = await ControlPlane.start();
  });

  after(async () => {
    await cp?.stop();
    if (tmp) rmSync(tmp, { recursive: true, force: true });
  });

  it("installs from the packaged .tgz with the release's version, appVersion and image tags", async () => {
    const { chart } = packageChart(version, join(tmp, "charts"), REPO);
    await cp.helm("install", "conveyor", chart, "--namespace", NS, "--create-namespace");
    const [listed] = JSON.parse(await cp.helm("list", "--namespace", NS, "-o", "json")) as {
      chart: string;
      app_version: string;
      status: string;
    }[];
    assert.equal(listed?.chart, `conveyor-${version}`);
    assert.equal(listed?.app_version, version);
    assert.equal(listed?.status, "deployed");
    const deployment = JSON.parse(await cp.kubectl("get", "deployment", "conveyor", "-n", NS, "-o", "json"));
    const operator = deployment.spec.template.spec.containers[0];
    assert.equal(operator.image, `ghcr.io/conveyor-dev/conveyor-operator:${version}`);
    assert.ok(
      JSON.stringify(operator).includes(`ghcr.io/conveyor-dev/conveyor-worker:${version}`),
      `the operator's default worker image is the release's: ${JSON.stringify(operator.env ?? operator.args)}`,
    );
    await cp.kubectl("get", "crd", "workerpools.conveyor.dev");
    await cp.helm("uninstall", "conveyor", "--namespace", NS);
  });

  it("index.yaml keeps every packaged version, each with its URL", () => {
    const next = `${rootVersion()}-test.2`;
    const { index } = packageChart(next, join(tmp, "charts"), REPO);
    const entries = parse(readFileSync(index, "utf8")).entries.conveyor as {
      version: string;
      appVersion: string;
      urls: string[];
    }[];
    assert.deepEqual(entries.map((e) => [e.version, e.appVersion, e.urls]).sort(), [
      [version, version, [`${REPO}/conveyor-${version}.tgz`]],
      [next, next, [`${REPO}/conveyor-${next}.tgz`]],
    ]);
  });
});

// The previous release of Conveyor, built by scripts/previous-release.sh (`make previous-release`)
// into a cache outside the repo, for tests that run two versions side by side.
import { execFile, execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { releaseAt, REPO, THIS_RELEASE, type Release } from "./workers.ts";

export function previousRelease(): Release {
  const dir = execFileSync("bash", [join(REPO, "scripts/previous-release.sh"), "--print-dir"], {
    encoding: "utf8",
  }).trim();
  if (!existsSync(join(dir, ".complete")) && !process.env.CONVEYOR_PREVIOUS_RELEASE)
    throw new Error(`the previous release is not built in ${dir}: run \`make previous-release\``);
  return releaseAt(dir);
}

/** A producer or counter of `release` (test/fixtures/versionedClient.mjs) run once; its JSON answer. */
export function releaseClient(release: Release, redisUrl: string, args: string[]): unknown {
  const out = execFileSync(
    release.node,
    [join(REPO, "test/fixtures/versionedClient.mjs"), release.dir, redisUrl, ...args],
    { encoding: "utf8", maxBuffer: 64 * 1024 * 1024 },
  );
  return JSON.parse(out.trim().split("\n").pop()!);
}

export { THIS_RELEASE };

/** The same through `release`'s Python client (test/fixtures/versionedPyClient.py, Debian's python3). */
export function releasePyClient(release: Release, redisUrl: string, args: string[]): unknown {
  const out = execFileSync(
    "/usr/bin/python3",
    [join(REPO, "test/fixtures/versionedPyClient.py"), redisUrl, ...args],
    {
      encoding: "utf8",
      maxBuffer: 64 * 1024 * 1024,
      // (stderr kept for the error thrown on a failure: redis-py prints the NOSCRIPT it retries)
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, PYTHONPATH: join(release.dir, "clients/python") },
    },
  );
  return JSON.parse(out.trim().split("\n").pop()!);
}

/** The previous release's images and chart, for `helm upgrade` from it (scripts/previous-release-images.sh). */
export interface PreviousImages {
  chartDir: string;
  operatorImage: string;
  workerImage: string;
}

let previousImagesBuilt: Promise<PreviousImages> | undefined;
/** Builds (once; cached in the project's podman storage) the previous release's images; its chart. */
export function previousReleaseImages(): Promise<PreviousImages> {
  previousImagesBuilt ??= (async () => {
    const script = join(REPO, "scripts/previous-release-images.sh");
    const tag = execFileSync("bash", [script, "--print-tag"], { encoding: "utf8" }).trim().split("\n").pop()!;
    await new Promise<void>((resolve, reject) => {
      execFile(
        "bash",
        [script],
        { maxBuffer: 64 * 1024 * 1024, timeout: 30 * 60_000 },
        (err, stdout, stderr) =>
          err ? reject(new Error(`${script} failed: ${err.message}\n${stdout}${stderr}`)) : resolve(),
      );
    });
    return {
      chartDir: join(previousRelease().dir, "charts", "conveyor"),
      operatorImage: `localhost/conveyor-operator:${tag}`,
      workerImage: `localhost/conveyor-worker:${tag}`,
    };
  })();
  return previousImagesBuilt;
}

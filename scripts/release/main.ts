// `make release VERSION=x.y.z`: one version for everything (scripts/release/version.ts), then
//   <out>/npm/      npm pack of @conveyor-dev/queue and @conveyor-dev/conveyor
//   <out>/charts/   helm package of charts/conveyor (version and appVersion = VERSION) and the
//                   Helm repository's index.yaml (merged with the one already there)
//   <out>/images.txt the images `make images` tagged with VERSION (when that target exists)
//   <out>/notes-<VERSION>.md the CHANGELOG.md section, and SHA256SUMS of every artifact.
// docs/install.md ("Releases") says how users consume them and how a release is published.
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join, relative, resolve } from "node:path";
import { readOptions, OptionError } from "../../lib/options.ts";
import { changelogSection, releaseChangelog } from "./changelog.ts";
import { buildPackages, ROOT, rootVersion } from "./packages.ts";
import { assertVersion, setVersion } from "./version.ts";

export const DEFAULT_CHART_REPO_URL = "https://conveyor-dev.github.io/conveyor/charts";

const USAGE = `usage: node scripts/release/main.ts [--version x.y.z] [--out DIR] [--chart-repo-url URL] [--images true|false]
  --version         VERSION          the release version (default: the root package.json's); written there
  --out             RELEASE_DIR      where the artifacts go (default dist/release)
  --chart-repo-url  CHART_REPO_URL   the URL the chart .tgz is served from, for index.yaml (default ${DEFAULT_CHART_REPO_URL})
  --images          RELEASE_IMAGES   build and tag the images with \`make images\` (default true when that target exists)`;

export interface ReleaseOptions {
  version: string;
  out: string;
  chartRepoUrl: string;
  images: boolean;
  /** Date of the changelog section (YYYY-MM-DD), default today. */
  date?: string;
  /** Where the packages are staged before packing (default dist/packages). */
  stageDir?: string;
}

export interface ReleaseArtifacts {
  version: string;
  library: string;
  cli: string;
  chart: string;
  index: string;
  notes: string;
  images: string[];
}

const log = (m: string) => process.stderr.write(`release: ${m}\n`);

export function release(opts: ReleaseOptions): ReleaseArtifacts {
  const version = assertVersion(opts.version);
  const out = resolve(opts.out);
  // The changelog is checked first: a release with nothing to say changes no file.
  const changelogFile = join(ROOT, "CHANGELOG.md");
  const changelog = readFileSync(changelogFile, "utf8");
  const released = releaseChangelog(changelog, version, opts.date ?? new Date().toISOString().slice(0, 10));
  setVersion(version);
  if (released !== changelog) {
    writeFileSync(changelogFile, released);
    log(`CHANGELOG.md: [Unreleased] is now [${version}]`);
  }
  mkdirSync(out, { recursive: true });
  const notes = join(out, `notes-${version}.md`);
  writeFileSync(notes, `# Conveyor ${version}\n\n${changelogSection(released, version)}\n`);

  const npmDir = join(out, "npm");
  const { library, cli } = buildPackages({ version, packDir: npmDir, stageDir: opts.stageDir });

  const { chart, index } = packageChart(version, join(out, "charts"), opts.chartRepoUrl);

  const images = opts.images ? buildImages(version) : [];
  const imagesFile = join(out, "images.txt");
  if (images.length > 0) writeFileSync(imagesFile, images.join("\n") + "\n");
  else rmSync(imagesFile, { force: true });

  const artifacts = [
    library.tarball,
    cli.tarball,
    chart,
    index,
    notes,
    ...(images.length ? [imagesFile] : []),
  ];
  writeFileSync(
    join(out, "SHA256SUMS"),
    artifacts
      .map((f) => `${createHash("sha256").update(readFileSync(f)).digest("hex")}  ${relative(out, f)}\n`)
      .join(""),
  );
  for (const f of artifacts) log(`  ${f.startsWith(ROOT + "/") ? relative(ROOT, f) : f}`);
  return { version, library: library.tarball, cli: cli.tarball, chart, index, notes, images };
}

/**
 * `helm package` of charts/conveyor with version and appVersion = `version` into `dir`, and the
 * Helm repository's index.yaml there (merged with the index already there, which keeps the
 * earlier versions and their dates); `repoUrl` is where the .tgz files will be served from.
 */
export function packageChart(
  version: string,
  dir: string,
  repoUrl: string,
): { chart: string; index: string } {
  mkdirSync(dir, { recursive: true });
  const helm = helmBinary();
  log(`helm package charts/conveyor ${version}`);
  const quiet = { stdio: ["ignore", "ignore", "inherit"] as ("ignore" | "inherit")[] };
  const chartDir = join(ROOT, "charts", "conveyor");
  execFileSync(helm, ["package", chartDir, "--version", version, "--app-version", version, "-d", dir], quiet);
  const index = join(dir, "index.yaml");
  const merge = existsSync(index) ? ["--merge", index] : [];
  execFileSync(helm, ["repo", "index", dir, "--url", repoUrl, ...merge], quiet);
  return { chart: join(dir, `conveyor-${version}.tgz`), index };
}

/** helm: $HELM, else the test control plane's (make controlplane builds it), else PATH. */
export function helmBinary(): string {
  if (process.env["HELM"]) return process.env["HELM"];
  try {
    const env = execFileSync("bash", [join(ROOT, "test", "controlplane", "install.sh"), "--print-env"], {
      encoding: "utf8",
      stdio: ["ignore", "pipe", "ignore"],
    });
    const dir = /^CONVEYOR_K8S_ASSETS=(.+)$/m.exec(env)?.[1];
    if (dir && existsSync(join(dir, "helm"))) return join(dir, "helm");
  } catch {
    // no control plane installer: fall back to PATH
  }
  return "helm";
}

/** `make images` tags conveyor-worker and conveyor-operator with the root package.json's version. */
function buildImages(version: string): string[] {
  const makefile = readFileSync(join(ROOT, "Makefile"), "utf8");
  if (!/^images:/m.test(makefile)) {
    log("no `make images` target: images skipped");
    return [];
  }
  log(`make images (tags ${version})`);
  execFileSync("make", ["-C", ROOT, "images"], { stdio: ["ignore", "inherit", "inherit"] });
  return ["worker", "operator"].map((t) => `ghcr.io/conveyor-dev/conveyor-${t}:${version}`);
}

if (import.meta.main) {
  try {
    const o = readOptions(
      process.argv.slice(2),
      process.env,
      {
        version: { env: "VERSION", kind: "string", help: "the release's version" },
        out: { env: "RELEASE_DIR", kind: "string", help: "where the artefacts go" },
        "chart-repo-url": {
          env: "CHART_REPO_URL",
          kind: "string",
          help: "the chart repository",
        },
        images: {
          env: "RELEASE_IMAGES",
          kind: "bool",
          default: true,
          help: "build the images",
        },
      },
      { usage: USAGE },
    );
    const r = release({
      version: o.raw("version") ?? rootVersion(),
      out: o.raw("out") ?? join(ROOT, "dist", "release"),
      chartRepoUrl: o.raw("chart-repo-url") ?? DEFAULT_CHART_REPO_URL,
      images: o.bool("images"),
    });
    log(`${r.version} done`);
  } catch (err) {
    process.stderr.write(`release: ${err instanceof OptionError ? err.message : (err as Error).message}\n`);
    process.exit(err instanceof OptionError ? 2 : 1);
  }
}

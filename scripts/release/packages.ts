// The two npm packages, built FROM the source folders (nothing moves): @conveyor-dev/queue (the
// library apps install: queue/ and the lib/ files it imports, for Node >= 20, with declarations and
// the resolved Lua scripts) and @conveyor-dev/conveyor (bin `conveyor`: cli, worker, operator, api),
// whose imports of queue/index.ts become imports of @conveyor-dev/queue so both use one copy.
// packages/<name>/ holds each package's template package.json, README and tsconfig; see
// docs/install.md ("Releases"). Used by `make release` (scripts/release/main.ts), the image
// build (Dockerfile) and test/release/.
import { execFileSync } from "node:child_process";
import { copyFileSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { isBuiltin } from "node:module";
import { dirname, join, relative, resolve, sep } from "node:path";
import ts from "typescript";
import { dumpScripts } from "../../queue/scripts.ts";

export const ROOT = resolve(import.meta.dirname, "..", "..");
export const LIBRARY = "@conveyor-dev/queue";
export const CLI = "@conveyor-dev/conveyor";

export interface BuiltPackage {
  name: string;
  version: string;
  /** The staged package directory (what the tarball holds). */
  dir: string;
  /** Absolute path of the `npm pack` tarball. */
  tarball: string;
}

export interface BuildOptions {
  /** Release version (default: the root package.json's). */
  version?: string;
  /** Where packages are staged (default dist/packages). */
  stageDir?: string;
  /** Where tarballs go (default dist/release). */
  packDir?: string;
  /** Progress lines to stderr (default true). */
  verbose?: boolean;
}

type PackageJson = Record<string, unknown> & {
  version?: string;
  dependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
};

export function readJson<T = PackageJson>(file: string): T {
  return JSON.parse(readFileSync(file, "utf8")) as T;
}

/** The one version number: the root package.json's (`make release VERSION=…` writes it there). */
export function rootVersion(): string {
  return readJson(join(ROOT, "package.json")).version!;
}

/** Both packages, built and packed; the CLI's dependency on the library is this exact version. */
export function buildPackages(opts: BuildOptions = {}): { library: BuiltPackage; cli: BuiltPackage } {
  const version = opts.version ?? rootVersion();
  const stageDir = resolve(opts.stageDir ?? join(ROOT, "dist", "packages"));
  const packDir = resolve(opts.packDir ?? join(ROOT, "dist", "release"));
  const log = opts.verbose === false ? () => {} : (m: string) => process.stderr.write(`release: ${m}\n`);
  mkdirSync(packDir, { recursive: true });
  log(`building ${LIBRARY}@${version}`);
  const library = buildLibrary(version, join(stageDir, "queue"), packDir);
  log(`building ${CLI}@${version}`);
  const cli = buildCli(version, join(stageDir, "conveyor"), packDir);
  return { library, cli };
}

function buildLibrary(version: string, dir: string, packDir: string): BuiltPackage {
  const template = readJson(join(ROOT, "packages", "queue", "package.json"));
  rmSync(dir, { recursive: true, force: true });
  tsc(join(ROOT, "packages", "queue", "tsconfig.json"), join(dir, "dist"));
  const files = listFiles(join(dir, "dist"));
  // tsc keeps `./x.ts` in declarations (rewriteRelativeImportExtensions only touches JS); an app
  // compiling against them must see the files that exist.
  for (const file of files.filter((f) => f.endsWith(".d.ts")))
    rewriteSpecifiers(file, (spec) => (spec.startsWith(".") ? spec.replace(/\.ts$/, ".js") : spec));
  // The scripts as the library loads them: includes resolved, one file per script.
  dumpScripts(join(dir, "dist", "queue", "scripts"));
  const declared = Object.keys(template.dependencies ?? {});
  // Optional peers (croner, @opentelemetry/api): required only by the feature that needs them
  // (lib/optionalPackage.ts), so the compiled JavaScript never imports them; declarations may
  // name their types, outside the main entry point. The CLI package depends on them.
  const peers = Object.keys(template.peerDependencies ?? {});
  const undeclared = [
    ...bareImports(files.filter((f) => f.endsWith(".js"))).filter((name) => !declared.includes(name)),
    ...bareImports(files.filter((f) => f.endsWith(".d.ts"))).filter(
      (name) => !declared.includes(name) && !peers.includes(name),
    ),
  ];
  if (undeclared.length > 0)
    throw new Error(
      `${LIBRARY}: queue/ imports ${[...new Set(undeclared)].join(", ")}, which packages/queue/package.json ` +
        `does not declare as a dependency. The library's dependencies are a decision: declare it there, ` +
        `load it with requireOptional() as an optional peer, or keep the import out of queue/.`,
    );
  const pkg: PackageJson = { ...template, version, dependencies: pinned(declared) };
  if (peers.length > 0)
    pkg["peerDependencies"] = Object.fromEntries(Object.entries(pinned(peers)).map(([n, v]) => [n, `^${v}`]));
  return pack(pkg, dir, packDir, "queue");
}

function buildCli(version: string, dir: string, packDir: string): BuiltPackage {
  const template = readJson(join(ROOT, "packages", "conveyor", "package.json"));
  rmSync(dir, { recursive: true, force: true });
  const dist = join(dir, "dist");
  tsc(join(ROOT, "packages", "conveyor", "tsconfig.json"), dist);
  const queueDir = join(dist, "queue") + sep;
  const entries = libraryEntries(
    readFileSync(join(ROOT, "queue", "index.ts"), "utf8"),
    readJson(join(ROOT, "packages", "queue", "package.json"))["exports"] as Record<string, unknown>,
  );
  for (const file of listFiles(dist).filter((f) => f.endsWith(".js") && !f.startsWith(queueDir)))
    rewriteSpecifiers(file, (spec) => libraryImport(dist, file, spec, entries));
  rmSync(join(dist, "queue"), { recursive: true, force: true });
  mkdirSync(join(dir, "bin"), { recursive: true });
  copyFileSync(join(ROOT, "bin", "conveyor.js"), join(dir, "bin", "conveyor.js"));
  buildDashboard(join(dist, "dashboard"));
  const files = listFiles(dist);
  const root = readJson(join(ROOT, "package.json"));
  // The library's optional peers are the command's dependencies: the worker runs cron schedules
  // and exports traces.
  const libraryPeers = Object.keys(
    readJson(join(ROOT, "packages", "queue", "package.json")).peerDependencies ?? {},
  );
  const dependencies: Record<string, string> = { [LIBRARY]: version, ...pinned(libraryPeers) };
  const optionalDependencies: Record<string, string> = {};
  for (const name of bareImports(files).filter((n) => n !== LIBRARY && !libraryPeers.includes(n))) {
    const optional = root.optionalDependencies?.[name];
    if (optional) optionalDependencies[name] = optional;
    else dependencies[name] = pinned([name])[name]!;
  }
  const pkg: PackageJson = { ...template, version, dependencies: sortKeys(dependencies) };
  if (Object.keys(optionalDependencies).length > 0) pkg.optionalDependencies = sortKeys(optionalDependencies);
  return pack(pkg, dir, packDir, "conveyor");
}

/**
 * A compiled file's import specifier with the queue code swapped for the library package: a
 * queue/ module the package exports (`../queue/index.js` from any depth → `@conveyor-dev/queue`,
 * `../queue/tracing.js` → `@conveyor-dev/queue/tracing`) or one queue/index.ts re-exports whole
 * (the same bindings, the same module instance); any other import into queue/ is refused.
 */
export function libraryImport(
  dist: string,
  file: string,
  spec: string,
  entries: ReadonlyMap<string, string>,
): string {
  if (!spec.startsWith(".")) return spec;
  const target = resolve(dirname(file), spec);
  const queueDir = join(dist, "queue") + sep;
  if (!target.startsWith(queueDir)) return spec;
  const entry = entries.get(target.slice(queueDir.length).replace(/\.js$/, ""));
  if (entry) return entry;
  throw new Error(
    `${relative(dist, file)} imports ${spec}: the library exports ${[...new Set(entries.values())].join(", ")} ` +
      `only; export what it needs from queue/index.ts (or add an entry point to packages/queue/package.json)`,
  );
}

/**
 * The library's entry points by queue/ module: the package.json `exports` that name a module of
 * queue/ (`"./tracing": "./dist/queue/tracing.js"`), and every module queue/index.ts re-exports
 * whole, which the main entry point is.
 */
export function libraryEntries(indexSource: string, exports: Record<string, unknown>): Map<string, string> {
  const entries = new Map<string, string>();
  for (const m of indexSource.matchAll(/^export \* from "\.\/([\w/]+)\.ts";$/gm)) entries.set(m[1]!, LIBRARY);
  for (const [key, value] of Object.entries(exports)) {
    const target = typeof value === "string" ? value : (value as { default?: string }).default;
    const module = /^\.\/dist\/queue\/([\w/]+)\.js$/.exec(target ?? "")?.[1];
    if (module) entries.set(module, key === "." ? LIBRARY : `${LIBRARY}/${key.slice(2)}`);
  }
  return entries;
}

/** The exact versions the root package.json pins (the one place dependency versions live). */
function pinned(names: string[]): Record<string, string> {
  const root = readJson(join(ROOT, "package.json"));
  const out: Record<string, string> = {};
  for (const name of names) {
    const v = root.dependencies?.[name] ?? root.optionalDependencies?.[name];
    if (!v) throw new Error(`shipped code imports ${name}, which the root package.json does not depend on`);
    out[name] = v;
  }
  return sortKeys(out);
}

function pack(pkg: PackageJson, dir: string, packDir: string, template: string): BuiltPackage {
  writeFileSync(join(dir, "package.json"), JSON.stringify(pkg, null, 2) + "\n");
  copyFileSync(join(ROOT, "packages", template, "README.md"), join(dir, "README.md"));
  const out = execFileSync("npm", ["pack", "--json", "--pack-destination", packDir], {
    cwd: dir,
    encoding: "utf8",
    stdio: ["ignore", "pipe", "pipe"],
  });
  const [info] = JSON.parse(out) as { filename: string }[];
  return { name: String(pkg.name), version: pkg.version!, dir, tarball: join(packDir, info!.filename) };
}

/** The dashboard's production build (Vite): `conveyor api` serves it from dist/dashboard. */
function buildDashboard(outDir: string): void {
  const vite = join(ROOT, "node_modules", "vite", "bin", "vite.js");
  const config = join(ROOT, "dashboard", "vite.config.ts");
  try {
    execFileSync(
      process.execPath,
      [vite, "build", "--config", config, "--outDir", outDir, "--emptyOutDir", "--logLevel", "warn"],
      { cwd: ROOT, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] },
    );
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string; message: string };
    throw new Error(`vite build of the dashboard failed:\n${e.stderr || e.stdout || e.message}`);
  }
}

function tsc(project: string, outDir: string): void {
  const bin = join(ROOT, "node_modules", "typescript", "bin", "tsc");
  try {
    execFileSync(process.execPath, [bin, "-p", project, "--outDir", outDir], { cwd: ROOT, encoding: "utf8" });
  } catch (err) {
    const e = err as { stdout?: string; message: string };
    throw new Error(`tsc -p ${relative(ROOT, project)} failed:\n${e.stdout || e.message}`);
  }
}

export function listFiles(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((d) => d.isFile())
    .map((d) => join(d.parentPath, d.name))
    .sort();
}

/**
 * The module specifiers of a compiled file (static, literal dynamic and type imports, re-exports),
 * with their offsets, read by TypeScript's own pre-processor: text that only looks like an import
 * (a comment saying `from "0"`, a string) is not one.
 */
function specifiers(text: string): { spec: string; start: number }[] {
  return ts
    .preProcessFile(text, true, true)
    .importedFiles.map((f) => ({ spec: f.fileName, start: f.pos + 1 })); // pos is the opening quote
}

export function rewriteSpecifiers(file: string, map: (spec: string) => string): void {
  const text = readFileSync(file, "utf8");
  let next = "";
  let at = 0;
  for (const { spec, start } of specifiers(text)) {
    next += text.slice(at, start) + map(spec);
    at = start + spec.length;
  }
  next += text.slice(at);
  if (next !== text) writeFileSync(file, next);
}

/** npm packages the files import (node built-ins and relative paths left out), sorted. */
export function bareImports(files: string[]): string[] {
  const names = new Set<string>();
  for (const file of files.filter((f) => /\.(js|d\.ts)$/.test(f)))
    for (const { spec } of specifiers(readFileSync(file, "utf8"))) {
      if (spec.startsWith(".") || spec.startsWith("/") || isBuiltin(spec)) continue;
      const parts = spec.split("/");
      names.add(spec.startsWith("@") ? parts.slice(0, 2).join("/") : parts[0]!);
    }
  return [...names].sort();
}

function sortKeys(o: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(o).sort(([a], [b]) => a.localeCompare(b)));
}

// `node scripts/release/packages.ts [packDir]`: build and pack both packages only (e.g. for an
// image build that installs the very tarballs npm users get).
if (import.meta.main) {
  const { library, cli } = buildPackages(process.argv[2] ? { packDir: process.argv[2] } : {});
  process.stdout.write(`${library.tarball}\n${cli.tarball}\n`);
}

// The project's images as containers in tests: `make images` (images/build.sh, cached) builds
// them; podman runs them rootful with the settings and storage that script keeps under
// ~/.cache/conveyor/containers, so the machine's own container configuration is never used.
import { execFile, spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { startProcess, waitFor, type Started } from "./processes.ts";
import { REPO } from "./workers.ts";

const execFileP = promisify(execFile);

export const CONTAINERS_DIR =
  process.env.CONVEYOR_CONTAINERS ??
  join(process.env.XDG_CACHE_HOME ?? join(homedir(), ".cache"), "conveyor", "containers");

/** The environment podman needs to find the project's storage and settings. */
export const podmanEnv = (): NodeJS.ProcessEnv => ({
  ...process.env,
  CONTAINERS_CONF: join(CONTAINERS_DIR, "containers.conf"),
  CONTAINERS_STORAGE_CONF: join(CONTAINERS_DIR, "storage.conf"),
});

const VERSION = (JSON.parse(readFileSync(join(REPO, "package.json"), "utf8")) as { version: string }).version;
export const WORKER_IMAGE = `localhost/conveyor-worker:${VERSION}`;
export const WORKER_PYTHON_IMAGE = `localhost/conveyor-worker-python:${VERSION}`;
export const OPERATOR_IMAGE = `localhost/conveyor-operator:${VERSION}`;

/**
 * Why containers cannot run here, or undefined when they can. Only a genuine inability counts
 * (not Linux, not root): a missing package is installed by images/build.sh, and a failing
 * build is a test failure, not a skip.
 */
export function containersUnavailable(): string | undefined {
  if (process.platform !== "linux") return "container images are built and run on Linux only";
  if (process.getuid?.() !== 0) return "rootful podman (images/build.sh) needs root";
  return undefined;
}

let built: Promise<void> | undefined;
/** `make images` once per test process: a no-op in seconds when nothing changed. */
export function buildImages(): Promise<void> {
  built ??= execFileP("bash", [join(REPO, "images", "build.sh")], {
    cwd: REPO,
    env: { ...process.env, PATH: `${join(REPO, "node_modules", ".bin")}:${process.env.PATH}` },
    maxBuffer: 64 * 1024 * 1024,
    timeout: 30 * 60_000,
  }).then(
    () => undefined,
    (err: Error & { stdout?: string; stderr?: string }) => {
      throw new Error(`images/build.sh failed: ${err.message}\n${err.stdout ?? ""}${err.stderr ?? ""}`);
    },
  );
  return built;
}

export async function podman(...args: string[]): Promise<string> {
  const { stdout } = await execFileP("podman", args, {
    env: podmanEnv(),
    maxBuffer: 64 * 1024 * 1024,
    timeout: 5 * 60_000,
  });
  return stdout;
}

export function podmanSync(...args: string[]): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync("podman", args, { env: podmanEnv(), encoding: "utf8", timeout: 5 * 60_000 });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

// Containers outlive a killed `podman run` (conmon keeps them): remove this process's on exit.
const live = new Set<string>();
let hooked = false;
function removeOnExit(name: string): void {
  live.add(name);
  if (hooked) return;
  hooked = true;
  process.on("exit", () => {
    if (live.size) spawnSync("podman", ["rm", "-f", "--time", "0", ...live], { env: podmanEnv() });
  });
}

export interface ContainerSpec {
  image: string;
  /** Container name (unique per test run). */
  name: string;
  args?: string[];
  env?: Record<string, string>;
  /** host path → container path (":ro" may follow the container path) */
  volumes?: Record<string, string>;
  /** Overrides the image's ENTRYPOINT (argv[0]; the rest goes in args). */
  entrypoint?: string;
  /** Extra `podman run` flags. */
  flags?: string[];
  /** Read-only root filesystem (default true, as the chart's pods run). */
  readOnlyRoot?: boolean;
  logFile: string;
}

export interface Container extends Started {
  name: string;
  /** Run a command inside the running container (as its user). */
  exec(...argv: string[]): Promise<string>;
  /** Send a signal to the container's PID 1. */
  signal(sig: NodeJS.Signals): Promise<void>;
  /** Stop it: SIGTERM, SIGKILL after `graceSeconds`; resolves with the exit code. */
  stop(graceSeconds: number): Promise<number | string>;
}

/**
 * `podman run` in the foreground as a test child process (its exit code is the container's), on
 * the host network (the tests' Redis, PostgreSQL and control plane listen on loopback), locked
 * down as a pod with the chart's securityContext would be: read-only root, /tmp an emptyDir.
 */
export function runContainer(spec: ContainerSpec): Container {
  const flags = [
    "run",
    "--rm",
    "--name",
    spec.name,
    "--network=host",
    "--pull=never",
    ...(spec.readOnlyRoot === false ? [] : ["--read-only"]),
    "--tmpfs",
    "/tmp:rw,mode=1777",
    "--cap-drop=all",
    "--security-opt=no-new-privileges",
    ...(spec.entrypoint ? ["--entrypoint", spec.entrypoint] : []),
    ...Object.entries(spec.env ?? {}).flatMap(([k, v]) => ["-e", `${k}=${v}`]),
    ...Object.entries(spec.volumes ?? {}).flatMap(([h, c]) => ["-v", `${h}:${c}`]),
    ...(spec.flags ?? []),
    spec.image,
    ...(spec.args ?? []),
  ];
  // Removes a leftover of an earlier, killed run of the same name.
  podmanSync("rm", "-f", "--time", "0", spec.name);
  const started = startProcess("podman", flags, { logFile: spec.logFile, env: podmanEnv() });
  removeOnExit(spec.name);
  void started.exited.then(() => live.delete(spec.name));
  const c: Container = {
    ...started,
    name: spec.name,
    exec: (...argv) => podman("exec", spec.name, ...argv),
    signal: async (sig) => {
      await podman("kill", "--signal", sig.replace(/^SIG/, ""), spec.name);
    },
    stop: async (graceSeconds) => {
      if (started.child.exitCode === null && started.child.signalCode === null)
        await podman("stop", "--time", String(graceSeconds), spec.name).catch(() => "");
      return started.exited;
    },
  };
  return c;
}

/** Waits until podman reports the container running. */
export async function waitRunning(c: Container, timeoutMs = 120_000): Promise<void> {
  await waitFor(
    `container ${c.name} running`,
    async () => {
      if (c.child.exitCode !== null) throw new Error(`container ${c.name} exited with ${c.child.exitCode}`);
      const state = podmanSync("inspect", "--format", "{{.State.Status}}", c.name);
      return state.status === 0 && state.stdout.trim() === "running";
    },
    timeoutMs,
    200,
  );
}

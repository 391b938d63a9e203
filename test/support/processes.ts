// Child processes of a test run: each in its own process group, all killed when the test
// process exits for any reason, so a failing test never leaves servers behind — also when the
// test process is SIGKILLed (a timed-out runner, `kill -9`): each child is started through
// util-linux's `setpriv --pdeathsig KILL`, so the kernel kills it when its parent dies.
import { spawn, type ChildProcess, type SpawnOptions } from "node:child_process";
import { createWriteStream, existsSync, readFileSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";
import { pollUntil } from "./poll.ts";

const live = new Set<ChildProcess>();
let hooked = false;

function killAll(): void {
  for (const child of live) {
    try {
      if (child.pid) process.kill(-child.pid, "SIGKILL");
    } catch {
      // already gone
    }
  }
}

function hookExit(): void {
  if (hooked) return;
  hooked = true;
  process.on("exit", killAll);
  for (const sig of ["SIGINT", "SIGTERM"] as const) {
    process.once(sig, () => {
      killAll();
      process.exit(130);
    });
  }
}

export interface Started {
  child: ChildProcess;
  /** Resolves with the exit code (or signal name) once the process ends and its log is written. */
  exited: Promise<number | string>;
}

const PDEATHSIG =
  process.platform === "linux" && existsSync("/usr/bin/setpriv") ? "/usr/bin/setpriv" : undefined;

/** How long `exited` waits past the exit for the child's output to reach its log file. */
const EXIT_FLUSH_MS = 2000;

/** Spawn a process group leader whose output goes to `logFile` (or is inherited when null). */
export function startProcess(
  cmd: string,
  args: string[],
  opts: SpawnOptions & { logFile?: string | null } = {},
): Started {
  hookExit();
  const { logFile, ...spawnOpts } = opts;
  // setpriv execs the command, so the child's pid (and process group) is the command's own
  const [file, argv] = PDEATHSIG ? [PDEATHSIG, ["--pdeathsig", "KILL", "--", cmd, ...args]] : [cmd, args];
  const child = spawn(file, argv, {
    ...spawnOpts,
    detached: true,
    stdio: logFile === null ? "inherit" : ["ignore", "pipe", "pipe"],
  });
  // Both pipes into one file, ended once both have ended (the first to end would otherwise end
  // the file under the other); `flushed` resolves when the child's last output is in the file.
  let flushed: Promise<void> | undefined;
  if (logFile) {
    const out = createWriteStream(logFile, { flags: "a" });
    child.stdout?.pipe(out, { end: false });
    child.stderr?.pipe(out, { end: false });
    flushed = new Promise((resolve) => child.on("close", () => out.end(() => resolve())));
  }
  live.add(child);
  const exited = new Promise<number | string>((resolve) => {
    child.on("exit", (code, signal) => {
      live.delete(child);
      const status = code ?? signal ?? -1;
      if (!flushed) return resolve(status);
      // A read of the log right after the exit sees its last lines: they pass through this
      // process's pipe and file stream. Bounded, as a grandchild may hold the pipes open.
      const bound = setTimeout(() => resolve(status), EXIT_FLUSH_MS);
      void flushed.then(() => {
        clearTimeout(bound);
        resolve(status);
      });
    });
    child.on("error", () => {
      live.delete(child);
      resolve(-1);
    });
  });
  return { child, exited };
}

/**
 * The first line of `logFile` (from character `from` on) matching `pattern`, waited for: a child's
 * output reaches its log file through this process's pipe, so a line can land after the API
 * call, metric or reply that shows what the child did.
 */
export async function logLine(
  logFile: string,
  pattern: RegExp,
  opts: { from?: number; timeoutMs?: number } = {},
): Promise<string> {
  const text = () => (existsSync(logFile) ? readFileSync(logFile, "utf8").slice(opts.from ?? 0) : "");
  return pollUntil(
    `a line matching ${pattern} in ${logFile}`,
    () =>
      text()
        .split("\n")
        .find((l) => pattern.test(l)),
    { timeoutMs: opts.timeoutMs ?? 30_000, onTimeout: () => `its last lines:\n${text().slice(-3000)}` },
  );
}

/** SIGTERM the group, then SIGKILL after `graceMs`. */
export async function stopProcess(p: Started, graceMs = 5000): Promise<void> {
  if (p.child.exitCode !== null || p.child.signalCode !== null) return;
  try {
    process.kill(-p.child.pid!, "SIGTERM");
  } catch {
    return;
  }
  const done = await Promise.race([p.exited.then(() => true), sleep(graceMs).then(() => false)]);
  if (!done) {
    try {
      process.kill(-p.child.pid!, "SIGKILL");
    } catch {
      // gone
    }
    await p.exited;
  }
}

/** Positional form of poll.ts's pollUntil, kept for the many callers that pass times positionally. */
export function waitFor<T>(
  what: string,
  probe: () => Promise<T | undefined | null | false>,
  timeoutMs = 60_000,
  intervalMs = 100,
): Promise<T> {
  return pollUntil(what, probe, { timeoutMs, intervalMs });
}

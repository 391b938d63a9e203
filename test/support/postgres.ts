// A throwaway PostgreSQL cluster on a free loopback port, in a temporary directory.
// PostgreSQL refuses to run as root, so when the tests run as root the server runs as the
// `postgres` system user (initdb through runuser, the server spawned with its uid/gid).
// `kill()` + `restart()` simulate an outage (a crash, then recovery on the same data);
// everything is killed and removed when the test process exits.
import { execFileSync } from "node:child_process";
import { appendFileSync, chownSync, existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { freePort } from "./ports.ts";
import { startProcess, waitFor, type Started } from "./processes.ts";

const BIN_DIRS = ["/usr/lib/postgresql/15/bin", "/usr/lib/postgresql/16/bin", "/usr/lib/postgresql/17/bin"];

function pgBin(name: string): string {
  for (const dir of BIN_DIRS) {
    const path = join(dir, name);
    if (existsSync(path)) return path;
  }
  return name; // on PATH
}

interface RunAs {
  uid: number;
  gid: number;
}

function postgresUser(): RunAs | null {
  if (process.getuid?.() !== 0) return null;
  const uid = Number(execFileSync("id", ["-u", "postgres"], { encoding: "utf8" }).trim());
  const gid = Number(execFileSync("id", ["-g", "postgres"], { encoding: "utf8" }).trim());
  return { uid, gid };
}

const dirs = new Set<string>();
let exitHooked = false;
function removeOnExit(dir: string): void {
  dirs.add(dir);
  if (exitHooked) return;
  exitHooked = true;
  // processes.ts SIGKILLs the servers in its own exit hook; the order does not matter.
  process.on("exit", () => {
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });
}

export interface PostgresServerOptions {
  /** Server settings (`-c name=value`), over the test defaults (e.g. `{ fsync: "on" }`). */
  settings?: Record<string, string>;
  /**
   * Addresses to listen on besides 127.0.0.1 (a real node's bridge address, for its pods), each
   * trusted for its /24 in pg_hba.conf as loopback is.
   */
  extraListen?: string[];
}

export class PostgresServer {
  readonly port: number;
  readonly dir: string;
  private readonly runAs: RunAs | null;
  private readonly settings: Record<string, string>;
  private listen = ["127.0.0.1"];
  private proc: Started | null = null;

  private constructor(port: number, dir: string, runAs: RunAs | null, settings: Record<string, string>) {
    this.port = port;
    this.dir = dir;
    this.runAs = runAs;
    this.settings = settings;
  }

  static async start(opts: PostgresServerOptions = {}): Promise<PostgresServer> {
    const dir = mkdtempSync(join(tmpdir(), "cvy-pg-"));
    removeOnExit(dir);
    const runAs = postgresUser();
    if (runAs) chownSync(dir, runAs.uid, runAs.gid);
    const initdb = [
      pgBin("initdb"),
      "-D",
      join(dir, "data"),
      "-U",
      "postgres",
      "--auth=trust",
      "-E",
      "UTF8",
      "--locale=C",
      "--no-sync",
    ];
    const [cmd, args] = runAs
      ? ["runuser", ["-u", "postgres", "--", ...initdb]]
      : [initdb[0]!, initdb.slice(1)];
    execFileSync(cmd, args, { stdio: "pipe", cwd: dir });
    const settings = {
      // fsync off is safe for what the tests do (kill the server, never the machine); leave
      // synchronous_commit on: a commit the recorder saw must survive a SIGKILL.
      fsync: "off",
      full_page_writes: "off",
      max_connections: "100",
      shared_buffers: "32MB",
      ...opts.settings,
    };
    const server = new PostgresServer(await freePort(), dir, runAs, settings);
    for (const address of opts.extraListen ?? []) {
      const subnet = address.replace(/\.\d+$/, ".0/24");
      appendFileSync(join(dir, "data", "pg_hba.conf"), `host all all ${subnet} trust\n`);
      server.listen.push(address);
    }
    await server.restart();
    return server;
  }

  get url(): string {
    return this.urlFor("postgres");
  }

  urlFor(database: string): string {
    return `postgres://postgres@127.0.0.1:${this.port}/${database}`;
  }

  /** A fresh, empty database on this server; returns its URL. */
  async createDatabase(name: string): Promise<string> {
    await this.query(`CREATE DATABASE ${JSON.stringify(name)}`);
    return this.urlFor(name);
  }

  /** One statement on a short-lived connection (defaults to the `postgres` database). */
  async query<R extends pg.QueryResultRow = pg.QueryResultRow>(
    sql: string,
    params: unknown[] = [],
    database = "postgres",
  ): Promise<R[]> {
    const client = new pg.Client({ connectionString: this.urlFor(database) });
    await client.connect();
    try {
      return (await client.query<R>(sql, params)).rows;
    } finally {
      await client.end();
    }
  }

  /** (Re)start the server on the same port and data directory; resolves once it accepts queries. */
  async restart(): Promise<void> {
    if (this.proc) return;
    const args = [
      "-D",
      join(this.dir, "data"),
      "-p",
      String(this.port),
      "-h",
      this.listen.join(","),
      "-k",
      this.dir,
      ...Object.entries(this.settings).flatMap(([k, v]) => ["-c", `${k}=${v}`]),
    ];
    this.proc = startProcess(pgBin("postgres"), args, {
      logFile: join(this.dir, "postgres.log"),
      cwd: this.dir,
      ...(this.runAs ?? {}),
    });
    const proc = this.proc;
    await waitFor(
      `postgres on ${this.port}`,
      async () => {
        if (proc.child.exitCode !== null || proc.child.signalCode !== null) {
          throw new Error(
            `postgres exited (${proc.child.exitCode ?? proc.child.signalCode}); see ${join(this.dir, "postgres.log")}`,
          );
        }
        const rows = await this.query<{ ok: number }>("SELECT 1 AS ok");
        return rows[0]?.ok === 1;
      },
      60_000,
      100,
    );
  }

  /** Crash the server (SIGKILL to its process group: postmaster and backends). */
  async kill(): Promise<void> {
    const proc = this.proc;
    if (!proc) return;
    this.proc = null;
    try {
      process.kill(-proc.child.pid!, "SIGKILL");
    } catch {
      // already gone
    }
    await proc.exited;
  }

  /** Stop the server with a fast shutdown (clients are disconnected); the data stays. */
  async shutdown(): Promise<void> {
    const proc = this.proc;
    if (!proc) return;
    this.proc = null;
    try {
      process.kill(proc.child.pid!, "SIGINT");
    } catch {
      return;
    }
    const timer = setTimeout(() => {
      try {
        process.kill(-proc.child.pid!, "SIGKILL");
      } catch {
        /* gone */
      }
    }, 20_000);
    await proc.exited;
    clearTimeout(timer);
  }

  /** Stop the server and remove its directory. */
  async stop(): Promise<void> {
    await this.shutdown();
    rmSync(this.dir, { recursive: true, force: true });
    dirs.delete(this.dir);
  }
}

// A throwaway Sentinel-managed Redis: one primary, replicas, and three sentinels (Debian's
// `redis-server --sentinel`) on free loopback ports, with a fast failover (down after 1 s).
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { freePort } from "./ports.ts";
import { RedisServer } from "./redis.ts";
import { startProcess, stopProcess, waitFor, type Started } from "./processes.ts";

export const SENTINEL_MASTER = "conveyor";

export interface RedisSentinelSetOptions {
  replicas?: number;
  sentinels?: number;
  /** Sentinel's down-after-milliseconds: how long a silent primary takes to be failed over. */
  downAfterMs?: number;
}

export class RedisSentinelSet {
  /** Data nodes: [0] is the first primary; after a failover look at primary(). */
  readonly servers: RedisServer[];
  readonly sentinelPorts: number[];
  private readonly sentinels: Started[];
  private readonly dir: string;

  private constructor(servers: RedisServer[], sentinelPorts: number[], sentinels: Started[], dir: string) {
    this.servers = servers;
    this.sentinelPorts = sentinelPorts;
    this.sentinels = sentinels;
    this.dir = dir;
  }

  static async start(opts: RedisSentinelSetOptions = {}): Promise<RedisSentinelSet> {
    const dir = mkdtempSync(join(tmpdir(), "cvy-sentinel-"));
    // (no 5 s wait before a diskless full sync: a replica is in sync as soon as it starts)
    const sync = ["--repl-diskless-sync-delay", "0"];
    const primary = await RedisServer.start({ args: sync });
    const servers = [primary];
    for (let i = 0; i < (opts.replicas ?? 1); i++)
      servers.push(
        await RedisServer.start({ args: [...sync, "--replicaof", "127.0.0.1", String(primary.port)] }),
      );
    const ports: number[] = [];
    const sentinels: Started[] = [];
    for (let i = 0; i < (opts.sentinels ?? 3); i++) {
      const port = await freePort();
      const conf = join(dir, `sentinel-${port}.conf`);
      // Sentinel rewrites its own config file (known replicas, epochs): one writable file each.
      writeFileSync(
        conf,
        [
          `port ${port}`,
          "bind 127.0.0.1",
          `dir ${dir}`,
          `logfile ${join(dir, `sentinel-${port}.log`)}`,
          `sentinel monitor ${SENTINEL_MASTER} 127.0.0.1 ${primary.port} 2`,
          `sentinel down-after-milliseconds ${SENTINEL_MASTER} ${opts.downAfterMs ?? 1000}`,
          `sentinel failover-timeout ${SENTINEL_MASTER} 10000`,
          `sentinel parallel-syncs ${SENTINEL_MASTER} 1`,
          "",
        ].join("\n"),
      );
      sentinels.push(
        startProcess("redis-server", [conf, "--sentinel", "--daemonize", "no"], {
          logFile: join(dir, `sentinel-${port}.stdout`),
        }),
      );
      ports.push(port);
    }
    const set = new RedisSentinelSet(servers, ports, sentinels, dir);
    // A replica the sentinels know may still wait for its first sync: a failover then would
    // promote an empty node.
    await waitFor(
      "the replicas in sync",
      async () =>
        (
          await Promise.all(
            servers
              .slice(1)
              .map((s) =>
                sentinelCommand(s.port, ["INFO", "replication"]).then((i) =>
                  /master_link_status:up/.test(String(i)),
                ),
              ),
          )
        ).every(Boolean),
      60_000,
      100,
    );
    await waitFor(
      "sentinels to know the replicas and each other",
      async () =>
        (
          await Promise.all(
            ports.map((p) =>
              sentinelCommand(p, ["SENTINEL", "MASTER", SENTINEL_MASTER]).then((reply) => {
                const m = pairs(reply as string[]);
                return (
                  Number(m["num-slaves"]) >= servers.length - 1 &&
                  Number(m["num-other-sentinels"]) >= ports.length - 1
                );
              }),
            ),
          )
        ).every(Boolean),
      60_000,
      200,
    );
    return set;
  }

  get url(): string {
    return `redis-sentinel://${this.sentinelPorts.map((p) => `127.0.0.1:${p}`).join(",")}/${SENTINEL_MASTER}`;
  }

  /** The port of the primary the sentinels name now. */
  async primaryPort(): Promise<number> {
    const reply = (await sentinelCommand(this.sentinelPorts[0]!, [
      "SENTINEL",
      "GET-MASTER-ADDR-BY-NAME",
      SENTINEL_MASTER,
    ])) as string[];
    return Number(reply[1]);
  }

  /** The data node the sentinels name as primary. */
  async primary(): Promise<RedisServer> {
    const port = await this.primaryPort();
    const s = this.servers.find((x) => x.port === port);
    if (!s) throw new Error(`sentinels name an unknown primary on port ${port}`);
    return s;
  }

  /**
   * SIGKILL the primary and wait until every sentinel names another one that answers as a
   * primary. Returns the killed server (bring it back with rejoin()).
   */
  async failover(): Promise<{ killed: RedisServer; promoted: RedisServer }> {
    const killed = await this.primary();
    await killed.kill("SIGKILL");
    let promoted: RedisServer | undefined;
    await waitFor(
      "a replica promoted",
      async () => {
        const ports = await Promise.all(
          this.sentinelPorts.map((p) =>
            sentinelCommand(p, ["SENTINEL", "GET-MASTER-ADDR-BY-NAME", SENTINEL_MASTER]).then(
              (r) => Number((r as string[])[1]),
              () => 0,
            ),
          ),
        );
        if (ports.some((p) => p !== ports[0]) || ports[0] === killed.port) return false;
        promoted = this.servers.find((x) => x.port === ports[0]);
        if (!promoted) return false;
        const role = await sentinelCommand(promoted.port, ["ROLE"]);
        return (role as string[])[0] === "master";
      },
      60_000,
      100,
    );
    return { killed, promoted: promoted! };
  }

  /**
   * Restart a node that died (a killed primary) as a replica of the primary the sentinels name,
   * and wait until it is in sync — as a Sentinel deployment's restarted pod does (it asks the
   * sentinels first). Not as it was started: these nodes keep no data on disk, and an empty node
   * that comes back as a primary is one spurious failover away from being promoted and wiping
   * every replica (seen here: a sentinel marked the new primary down 1 s after the switch and
   * promoted the restarted, empty old primary).
   */
  async rejoin(server: RedisServer): Promise<void> {
    await server.resume(await this.primaryPort());
    await waitFor(
      `the restarted node :${server.port} in sync with the primary`,
      async () =>
        /master_link_status:up/.test(String(await sentinelCommand(server.port, ["INFO", "replication"]))),
      60_000,
      100,
    );
  }

  async stop(): Promise<void> {
    await Promise.all(this.sentinels.map((s) => stopProcess(s)));
    await Promise.all(this.servers.map((s) => s.stop()));
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** One command on a fresh connection that gives up at once (the node may be down). */
async function sentinelCommand(port: number, args: string[]): Promise<unknown> {
  const r = new Redis({
    port,
    host: "127.0.0.1",
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  });
  r.on("error", () => {});
  try {
    await r.connect();
    return await r.call(args[0]!, ...args.slice(1));
  } finally {
    r.disconnect();
  }
}

function pairs(flat: string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (let i = 0; i + 1 < flat.length; i += 2) out[flat[i]!] = flat[i + 1]!;
  return out;
}

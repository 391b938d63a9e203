// A real node for a test control plane: Debian's containerd + runc and a kubelet built from the
// control plane's own Kubernetes module (`make node`, test/node/install.sh), in a mount namespace
// of their own (test/node/ns.sh), on a bridge with a private /24 (no forwarding, no NAT: traffic
// stays on this machine). Pods bound to it run for real: SIGTERM, grace periods, probes, logs.
//
//   const cp = await ControlPlane.start({ scheduler: true });
//   const node = await RealNode.start(cp);
//   await node.importImage(WORKER_IMAGE);    // podman's image into containerd
//   … pods schedule onto node.name; they reach host services on node.address …
//   await node.stop();
//
// Hygiene: everything lives in one run directory under the project's cache; the kubelet's sysctl
// writes land on private copies; the bridge, the cgroups (under /<cgroupRoot>) and the run
// directory go at stop(), when the test process dies (a watchdog), or at the next start (a run
// killed with its watchdog). hostState()/nodeFootprint() let a test check that.
import { execFile, execFileSync, spawn, type ChildProcess } from "node:child_process";
import * as fs from "node:fs";
import * as fsp from "node:fs/promises";
import * as net from "node:net";
import { homedir } from "node:os";
import * as path from "node:path";
import * as tls from "node:tls";
import { promisify } from "node:util";
import { CoreV1Api } from "@kubernetes/client-node";
import { freePort } from "./ports.ts";
import { pollUntil } from "./poll.ts";
import type { ControlPlane } from "./controlplane.ts";
import { podmanEnv } from "./containers.ts";

const execFileP = promisify(execFile);
const NODE_DIR = path.resolve(import.meta.dirname, "..", "node");
const LOG_PREFIX = "node:";
/** The sandbox image test/node/install.sh packs (containerd's sandbox_image). */
const PAUSE_IMAGE = "localhost/conveyor-pause:1";
/** The sysctls the kubelet writes at start (test/node/ns.sh pins them) plus forwarding. */
const WATCHED_SYSCTLS = [
  "vm/overcommit_memory",
  "vm/panic_on_oom",
  "kernel/panic",
  "kernel/panic_on_oops",
  "kernel/keys/root_maxkeys",
  "kernel/keys/root_maxbytes",
  "net/ipv4/ip_forward",
  "net/ipv4/conf/all/forwarding",
  "net/ipv6/conf/all/forwarding",
] as const;

const CACHE_ROOT =
  process.env["CONVEYOR_CACHE_DIR"] ??
  path.join(process.env["XDG_CACHE_HOME"] ?? path.join(homedir(), ".cache"), "conveyor");
/** One directory per node run: configs, containerd's root and state, the kubelet's, logs. */
export const RUNS_DIR = path.join(CACHE_ROOT, "node", "runs");

export interface RealNodeOptions {
  /** How long the node may take to become Ready. Default 120 s (a loaded 2-core box). */
  startTimeoutMs?: number;
  /** Print progress lines to stderr. Default true. */
  verbose?: boolean;
  /**
   * The bridge address (x.y.z.1 of a free /24, from RealNode.freeAddress()), when it must be known
   * before the control plane starts: its API server certificate names it (apiServerIPs) for the
   * pods that reach it through apiServerRelay(). Default: a free /24 picked at start.
   */
  address?: string;
}

/** Capabilities a node needs, by number (linux/capability.h), and what for. */
const NEEDED_CAPS: ReadonlyArray<[number, string, string]> = [
  [12, "CAP_NET_ADMIN", "the bridge and the pods' network namespaces"],
  [21, "CAP_SYS_ADMIN", "the node's mount namespace and the containers' mounts"],
];

/** Why a real node cannot start here (naming what is missing), or undefined when it can. */
export function nodeUnavailable(): string | undefined {
  if (process.platform !== "linux") return "a real node runs on Linux only";
  if (process.getuid?.() !== 0) return "a real node (containerd, kubelet) needs root";
  const eff = /CapEff:\s*([0-9a-f]+)/.exec(fs.readFileSync("/proc/self/status", "utf8"))?.[1] ?? "0";
  const missing = NEEDED_CAPS.filter(([bit]) => ((BigInt(`0x${eff}`) >> BigInt(bit)) & 1n) === 0n);
  if (missing.length > 0) {
    return `a real node needs ${missing.map(([, name, why]) => `${name} (${why})`).join(" and ")}, which this process lacks`;
  }
  return undefined;
}

/** The directory with kubelet, pause and pause.tar; builds them once (test/node/install.sh). */
export function nodeAssets(): string {
  try {
    execFileSync("bash", [path.join(NODE_DIR, "install.sh")], { stdio: ["ignore", "ignore", "inherit"] });
  } catch (err) {
    throw new Error(`${LOG_PREFIX} test/node/install.sh failed (see above): ${(err as Error).message}`);
  }
  return execFileSync("bash", [path.join(NODE_DIR, "install.sh"), "--print-dir"], {
    encoding: "utf8",
  }).trim();
}

function cleanupSync(dir: string): void {
  execFileSync("bash", [path.join(NODE_DIR, "cleanup.sh"), dir], { stdio: "inherit" });
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Cleans up the runs whose owner died with its watchdog (a machine reboot, kill -9 of both). */
function reclaimAbandonedRuns(): void {
  for (const name of fs.existsSync(RUNS_DIR) ? fs.readdirSync(RUNS_DIR) : []) {
    const dir = path.join(RUNS_DIR, name);
    const owner = Number(fs.readFileSync(path.join(dir, "owner"), "utf8").trim() || "0");
    if (!alive(owner)) {
      process.stderr.write(`${LOG_PREFIX} removing ${dir}, left by a run that was killed\n`);
      cleanupSync(dir);
    }
  }
}

/** The controllers of the host's cgroup v1 hierarchies (cpu, memory, …; systemd for name=systemd). */
function cgroupHierarchies(): string[] {
  return fs
    .readdirSync("/sys/fs/cgroup", { withFileTypes: true })
    .filter((d) => d.isDirectory() && fs.existsSync(path.join("/sys/fs/cgroup", d.name, "cgroup.procs")))
    .map((d) => d.name);
}

/** A /24 in 10.213.0.0/16 whose .1 no interface here has yet. */
function pickSubnet(seed: number): string {
  const used = execFileSync("ip", ["-4", "-o", "addr", "show"], { encoding: "utf8" });
  for (let i = 0; i < 256; i++) {
    const third = (seed + i) % 256;
    if (!used.includes(` 10.213.${third}.`)) return `10.213.${third}`;
  }
  throw new Error(`${LOG_PREFIX} no free /24 in 10.213.0.0/16`);
}

let counter = 0;

export interface ApiServerEndpoint {
  /** What a pod sets as KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT. */
  host: string;
  port: number;
}

export class RealNode {
  /** The Node object's name (and the kubelet's hostname). */
  readonly name: string;
  /** The run directory (configs, containerd and kubelet state, logs/). */
  readonly dir: string;
  /** The bridge's address: the node's InternalIP; host services listen here for the pods. */
  readonly address: string;
  readonly bridge: string;
  /** The kubelet's cgroupRoot (in every hierarchy), the pods' cgroups below it. */
  readonly cgroupRoot: string;
  private readonly subnet: string;
  private proc: ChildProcess | undefined;
  private exited = false;
  private watchdog: ChildProcess | undefined;
  private stopping: Promise<void> | undefined;

  private readonly cp: ControlPlane;
  private readonly assets: string;

  private relay: Promise<ApiServerEndpoint> | undefined;
  private relayServer: net.Server | undefined;
  private readonly relaySockets = new Set<net.Socket>();

  private constructor(cp: ControlPlane, assets: string, address: string | undefined) {
    this.cp = cp;
    this.assets = assets;
    const id = `${process.pid}x${counter++}`;
    this.name = `conveyor-node-${id}`;
    this.dir = path.join(RUNS_DIR, this.name);
    this.subnet = address ? address.replace(/\.1$/, "") : pickSubnet(process.pid + counter * 17);
    this.address = `${this.subnet}.1`;
    this.bridge = `cvyn${id}`.slice(0, 15);
    this.cgroupRoot = this.name;
  }

  /** The .1 of a /24 no interface here uses yet: a node's address chosen before its control plane. */
  static freeAddress(): string {
    return `${pickSubnet(process.pid + 7919 * (counter + 1))}.1`;
  }

  /** Starts a node registered with `cp` and waits until it is Ready; cleans up if that fails. */
  static async start(cp: ControlPlane, opts: RealNodeOptions = {}): Promise<RealNode> {
    const why = nodeUnavailable();
    if (why) throw new Error(`${LOG_PREFIX} ${why}`);
    const assets = nodeAssets();
    reclaimAbandonedRuns();
    if (opts.address !== undefined && !/^10\.213\.\d{1,3}\.1$/.test(opts.address)) {
      throw new Error(
        `${LOG_PREFIX} address: expected 10.213.N.1 from RealNode.freeAddress(), got ${opts.address}`,
      );
    }
    const node = new RealNode(cp, assets, opts.address);
    try {
      await node.boot(opts);
    } catch (err) {
      await node.stop();
      throw err;
    }
    return node;
  }

  private progress(opts: RealNodeOptions, msg: string): void {
    if (opts.verbose ?? true) process.stderr.write(`${LOG_PREFIX} ${msg}\n`);
  }

  private async boot(opts: RealNodeOptions): Promise<void> {
    const t0 = performance.now();
    const logs = path.join(this.dir, "logs");
    await fsp.mkdir(logs, { recursive: true });
    await fsp.writeFile(path.join(this.dir, "owner"), `${process.pid}\n`);
    // what cleanup.sh removes, written before any of it exists
    await fsp.writeFile(path.join(this.dir, "state"), `BRIDGE=${this.bridge}\nCGROUP=${this.cgroupRoot}\n`);
    this.startWatchdog();

    const ip = (...args: string[]) => execFileP("ip", args);
    await ip("link", "add", this.bridge, "type", "bridge");
    await ip("addr", "add", `${this.address}/24`, "dev", this.bridge);
    await ip("link", "set", this.bridge, "up");
    for (const h of cgroupHierarchies()) {
      const dir = path.join("/sys/fs/cgroup", h, this.cgroupRoot);
      await fsp.mkdir(dir);
      if (h === "cpuset") {
        // a new v1 cpuset starts empty: give it the parent's CPUs and memory nodes
        for (const f of ["cpuset.cpus", "cpuset.mems"]) {
          await fsp.writeFile(path.join(dir, f), await fsp.readFile(path.join("/sys/fs/cgroup/cpuset", f)));
        }
      }
    }

    const [kubeconfig, serving, kubeletPort, healthzPort] = await Promise.all([
      this.cp.clientKubeconfig(`system:node:${this.name}`, "system:nodes"),
      this.cp.issueServingCert(this.name, { ips: [this.address], dnsNames: [this.name] }),
      freePort(this.address),
      freePort(),
    ]);
    await this.writeConfigs({ kubeconfig, serving, kubeletPort, healthzPort });

    this.proc = spawn(
      "unshare",
      ["--mount", "--propagation", "private", "--fork", "bash", path.join(NODE_DIR, "ns.sh"), this.dir],
      {
        detached: true, // own process group: cleanup.sh signals the group
        stdio: ["ignore", "inherit", "inherit"],
        env: { ...process.env, PATH: `${this.assets}:${process.env["PATH"] ?? ""}:/usr/sbin:/sbin` },
      },
    );
    this.proc.on("exit", () => (this.exited = true));
    await fsp.appendFile(path.join(this.dir, "state"), `PGID=${this.proc.pid}\n`);
    this.progress(
      opts,
      `containerd + kubelet starting in ${this.dir} (bridge ${this.bridge} ${this.address}/24)`,
    );

    const core = this.cp.kubeConfig().makeApiClient(CoreV1Api);
    await pollUntil(
      `node ${this.name} Ready`,
      async () => {
        if (this.exited) {
          throw new Error(`the node's processes exited; last lines of its logs:\n${this.logTail()}`);
        }
        const n = await core.readNode({ name: this.name });
        return n.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True");
      },
      { timeoutMs: opts.startTimeoutMs ?? 120_000, intervalMs: 250, onTimeout: () => this.logTail() },
    );
    this.progress(opts, `${this.name} Ready in ${((performance.now() - t0) / 1000).toFixed(1)}s`);
  }

  private async writeConfigs(o: {
    kubeconfig: string;
    serving: { certFile: string; keyFile: string; caFile: string };
    kubeletPort: number;
    healthzPort: number;
  }): Promise<void> {
    const d = (...p: string[]) => path.join(this.dir, ...p);
    await fsp.mkdir(d("cni"));
    const containerd = `# written by test/support/node.ts
version = 2
root = "${d("containerd", "root")}"
state = "${d("containerd", "state")}"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = "${d("containerd.sock")}"
[ttrpc]
  address = "${d("containerd-ttrpc.sock")}"
[plugins."io.containerd.internal.v1.opt"]
  path = "${d("containerd", "opt")}"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "${PAUSE_IMAGE}"
  # runc cannot lower oom_score_adj without CAP_SYS_RESOURCE (withheld on some machines):
  # keep containers at or above containerd's own
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "/usr/sbin/runc"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "${d("cni")}"
`;
    // no gateway, no masquerade: pods reach this machine's bridge address and nothing beyond
    const cni = {
      cniVersion: "0.4.0",
      name: this.name,
      plugins: [
        {
          type: "bridge",
          bridge: this.bridge,
          isGateway: false,
          ipMasq: false,
          hairpinMode: false,
          ipam: {
            type: "host-local",
            dataDir: d("cni-ipam"),
            ranges: [[{ subnet: `${this.subnet}.0/24`, rangeStart: `${this.subnet}.2` }]],
          },
        },
      ],
    };
    const kubelet = {
      apiVersion: "kubelet.config.k8s.io/v1beta1",
      kind: "KubeletConfiguration",
      address: this.address,
      port: o.kubeletPort,
      readOnlyPort: 0,
      healthzBindAddress: "127.0.0.1",
      healthzPort: o.healthzPort,
      tlsCertFile: o.serving.certFile,
      tlsPrivateKeyFile: o.serving.keyFile,
      authentication: {
        anonymous: { enabled: false },
        webhook: { enabled: true },
        x509: { clientCAFile: o.serving.caFile },
      },
      authorization: { mode: "Webhook" },
      containerRuntimeEndpoint: `unix://${d("containerd.sock")}`,
      cgroupDriver: "cgroupfs",
      cgroupRoot: `/${this.cgroupRoot}`,
      failCgroupV1: false,
      failSwapOn: false,
      podLogsDir: d("pod-logs"),
      resolvConf: d("resolv.conf"),
      makeIPTablesUtilChains: false,
      serializeImagePulls: false,
      // the disk is shared with everything else on the machine: never evict or collect for it
      evictionHard: { "memory.available": "1Mi", "nodefs.available": "0%", "imagefs.available": "0%" },
      imageGCHighThresholdPercent: 100,
      imageGCLowThresholdPercent: 99,
      nodeStatusReportFrequency: "10s",
    };
    const args = [
      `--config=${d("kubelet.yaml")}`,
      `--kubeconfig=${o.kubeconfig}`,
      `--root-dir=${d("kubelet")}`,
      `--cert-dir=${d("kubelet", "pki")}`,
      `--hostname-override=${this.name}`,
      `--node-ip=${this.address}`,
      "--v=1",
    ];
    await Promise.all([
      fsp.writeFile(d("containerd.toml"), containerd),
      fsp.writeFile(d("cni", "10-conveyor.conflist"), JSON.stringify(cni, null, 2)),
      fsp.writeFile(d("kubelet.yaml"), JSON.stringify(kubelet, null, 2)),
      fsp.writeFile(d("kubelet.args"), `${args.join("\n")}\n`),
      fsp.writeFile(d("resolv.conf"), ""), // no DNS: pods address host services by IP
      fsp.symlink(path.join(this.assets, "pause.tar"), d("pause.tar")),
    ]);
  }

  /** The last lines of containerd's and the kubelet's logs. */
  logTail(lines = 30): string {
    return ["containerd", "kubelet"]
      .map((n) => {
        let text = "(no log)";
        try {
          text = fs
            .readFileSync(path.join(this.dir, "logs", `${n}.log`), "utf8")
            .split("\n")
            .slice(-lines)
            .join("\n");
        } catch {
          // not started yet
        }
        return `--- ${n}.log\n${text}`;
      })
      .join("\n");
  }

  /** `ctr -n k8s.io …` against this node's containerd. */
  async ctr(...args: string[]): Promise<string> {
    const { stdout } = await execFileP(
      "ctr",
      ["--address", path.join(this.dir, "containerd.sock"), "-n", "k8s.io", ...args],
      {
        maxBuffer: 64 * 1024 * 1024,
      },
    );
    return stdout;
  }

  /** Copies an image from the project's podman storage (`make images`) into containerd. */
  async importImage(ref: string): Promise<void> {
    const archive = path.join(this.dir, "image.tar");
    await execFileP("podman", ["save", "--format", "docker-archive", "-o", archive, ref], {
      env: podmanEnv(),
    });
    try {
      await this.ctr("images", "import", archive);
    } finally {
      await fsp.rm(archive, { force: true });
    }
  }

  /**
   * The API server as this node's pods reach it: a TCP relay on the bridge address to the control
   * plane's loopback port, TLS passing through unchanged (no kube-proxy: docs/node.md says why).
   * The control plane must have been started with apiServerIPs: [node.address].
   */
  apiServerRelay(): Promise<ApiServerEndpoint> {
    this.relay ??= this.startRelay();
    return this.relay;
  }

  private async startRelay(): Promise<ApiServerEndpoint> {
    const target = new URL(this.cp.apiServerURL);
    const targetPort = Number(target.port);
    const san = await new Promise<string>((resolve, reject) => {
      const probe = tls.connect(
        { host: target.hostname, port: targetPort, rejectUnauthorized: false },
        () => {
          resolve(probe.getPeerCertificate().subjectaltname ?? "");
          probe.end();
        },
      );
      probe.on("error", reject);
    });
    if (!san.split(", ").includes(`IP Address:${this.address}`)) {
      throw new Error(
        `${LOG_PREFIX} the API server's certificate does not name ${this.address} (${san}): start the control plane with apiServerIPs: [address] and the node with { address } (RealNode.freeAddress())`,
      );
    }
    const server = net.createServer((pod) => {
      const api = net.connect(targetPort, target.hostname);
      this.relaySockets.add(pod).add(api);
      const end = () => {
        pod.destroy();
        api.destroy();
        this.relaySockets.delete(pod);
        this.relaySockets.delete(api);
      };
      pod.on("error", end).on("close", end);
      api.on("error", end).on("close", end);
      pod.pipe(api).pipe(pod);
    });
    this.relayServer = server;
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(0, this.address, resolve); // port 0: the kernel picks a free one
    });
    return { host: this.address, port: (server.address() as net.AddressInfo).port };
  }

  /** Resident memory of the kubelet and containerd, in MiB. */
  rssMiB(): { kubelet: number; containerd: number } {
    const rss = (comm: string) => {
      for (const p of fs.readdirSync("/proc").filter((e) => /^\d+$/.test(e))) {
        try {
          const status = fs.readFileSync(`/proc/${p}/status`, "utf8");
          const cmdline = fs.readFileSync(`/proc/${p}/cmdline`, "utf8");
          if (status.startsWith(`Name:\t${comm}\n`) && cmdline.includes(this.dir)) {
            return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0) / 1024;
          }
        } catch {
          // exited meanwhile
        }
      }
      return NaN;
    };
    return { kubelet: rss("kubelet"), containerd: rss("containerd") };
  }

  /** Deletes the pods bound here (so the kubelet stops them), then stops everything; idempotent. */
  stop(): Promise<void> {
    this.stopping ??= this.doStop();
    return this.stopping;
  }

  private async doStop(): Promise<void> {
    if (this.proc && !this.exited) {
      const core = this.cp.kubeConfig().makeApiClient(CoreV1Api);
      const fieldSelector = `spec.nodeName=${this.name}`;
      try {
        const pods = await core.listPodForAllNamespaces({ fieldSelector });
        await Promise.all(
          pods.items.map((p) =>
            core.deleteNamespacedPod({
              name: p.metadata!.name!,
              namespace: p.metadata!.namespace!,
              gracePeriodSeconds: 0,
            }),
          ),
        );
        // the kubelet confirms each deletion once the pod's containers and sandbox are gone
        await pollUntil(
          `pods on ${this.name} gone`,
          async () => (await core.listPodForAllNamespaces({ fieldSelector })).items.length === 0,
          { timeoutMs: 60_000, intervalMs: 250 },
        );
      } catch (err) {
        process.stderr.write(
          `${LOG_PREFIX} stopping the pods failed (cleanup.sh ends them): ${(err as Error).message}\n`,
        );
      }
    }
    // the pods are gone (their last API calls made): nothing uses the relay any more
    this.relayServer?.close();
    for (const s of this.relaySockets) s.destroy();
    // stop the kubelet and containerd here, not in cleanup.sh: this process must reap them (a
    // zombie still counts as a member of the group cleanup.sh waits for)
    if (this.proc?.pid !== undefined && !this.exited) {
      const exit = new Promise((resolve) => this.proc!.once("exit", resolve));
      process.kill(-this.proc.pid, "SIGTERM");
      await Promise.race([exit, new Promise((resolve) => setTimeout(resolve, 30_000).unref())]);
    }
    const kept = process.env["CONVEYOR_KEEP_TMP"] === "1";
    if (kept)
      await fsp.cp(path.join(this.dir, "logs"), `${this.dir}.logs`, { recursive: true }).catch(() => {});
    cleanupSync(this.dir);
    if (kept) process.stderr.write(`${LOG_PREFIX} logs kept in ${this.dir}.logs (CONVEYOR_KEEP_TMP=1)\n`);
    const pid = this.watchdog?.pid;
    if (pid !== undefined) {
      try {
        process.kill(-pid, "SIGKILL");
      } catch {
        // gone
      }
    }
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.stop();
  }

  /** Outside this process: when it dies without stop(), cleanup.sh removes the node. */
  private startWatchdog(): void {
    const script = `while kill -0 "$1" 2>/dev/null; do sleep 1; done; exec bash "$2" "$3"`;
    this.watchdog = spawn(
      "bash",
      ["-c", script, "node-watchdog", String(process.pid), path.join(NODE_DIR, "cleanup.sh"), this.dir],
      { detached: true, stdio: "ignore" },
    );
    this.watchdog.unref();
  }
}

// ---- hygiene --------------------------------------------------------------------------------

export interface HostState {
  sysctls: Record<string, string>;
  iptables: string[];
  mounts: string[];
  links: string[];
  cgroups: string[];
}

/** What a node could change on the host: sysctls, iptables rules, mounts, links, top-level cgroups. */
export async function hostState(): Promise<HostState> {
  const sysctls: Record<string, string> = {};
  for (const k of WATCHED_SYSCTLS) sysctls[k] = fs.readFileSync(`/proc/sys/${k}`, "utf8").trim();
  const lines = (s: string) => s.split("\n").filter((l) => l.trim() !== "");
  const iptables: string[] = [];
  for (const cmd of ["iptables-save", "ip6tables-save"]) {
    const { stdout } = await execFileP(cmd, [], {
      env: { ...process.env, PATH: `${process.env["PATH"]}:/usr/sbin:/sbin` },
    });
    // comments carry timestamps, chain lines packet counters
    iptables.push(
      ...lines(stdout)
        .filter((l) => !l.startsWith("#"))
        .map((l) => `${cmd}: ${l.replace(/ \[\d+:\d+\]$/, "")}`),
    );
  }
  const mounts = lines(fs.readFileSync("/proc/self/mountinfo", "utf8")).map((l) => {
    const f = l.split(" ");
    return `${f[4]} ${f.slice(f.indexOf("-") + 1, f.indexOf("-") + 3).join(" ")}`; // mount point, fs type, source
  });
  const { stdout: ipOut } = await execFileP("ip", ["-o", "link", "show"]);
  // name and bridge: a pod's veth names only its bridge
  const links = lines(ipOut).map(
    (l) => `${l.split(":")[1]!.trim().split("@")[0]!}${/ master (\S+)/.exec(l)?.[0] ?? ""}`,
  );
  const cgroups = cgroupHierarchies().flatMap((h) =>
    fs
      .readdirSync(path.join("/sys/fs/cgroup", h), { withFileTypes: true })
      .filter((d) => d.isDirectory())
      .map((d) => `${h}/${d.name}`),
  );
  return { sysctls, iptables, mounts, links, cgroups };
}

/**
 * The differences between two host states that a node made: every sysctl change, and added or
 * removed iptables rules, mounts, links and cgroups that name the node (its name, bridge, subnet,
 * cgroup root, run directory) or what a kubelet or containerd makes (KUBE- chains, kubepods,
 * cni- namespaces, veths on its bridge). Other tests on the same machine change the rest.
 */
export function nodeFootprint(
  before: HostState,
  after: HostState,
  node: { name: string; bridge: string; address: string; dir: string },
): string[] {
  const subnet = node.address.replace(/\.1$/, ".");
  const ours = (l: string) =>
    [
      node.name,
      node.bridge,
      subnet,
      node.dir,
      "KUBE-",
      "kubepods",
      "/run/netns/cni-",
      "containerd",
      "kubelet",
    ].some((id) => l.includes(id));
  const diff: string[] = [];
  for (const [k, v] of Object.entries(before.sysctls)) {
    if (after.sysctls[k] !== v) diff.push(`sysctl ${k}: ${v} → ${after.sysctls[k]}`);
  }
  for (const key of ["iptables", "mounts", "links", "cgroups"] as const) {
    const was = new Set(before[key]);
    const now = new Set(after[key]);
    for (const l of now) if (!was.has(l) && ours(l)) diff.push(`${key} added: ${l}`);
    for (const l of was) if (!now.has(l) && ours(l)) diff.push(`${key} removed: ${l}`);
  }
  return diff;
}

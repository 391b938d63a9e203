// A real Kubernetes control plane for tests, the way envtest gives one to kubebuilder projects:
// etcd + kube-apiserver (+ kube-controller-manager, kube-scheduler, kwok with fake nodes) started
// from the binaries `make controlplane` builds (test/controlplane/install.sh), on free loopback
// ports, in a temp dir of their own, and stopped without leftovers.
//
//   const cp = await ControlPlane.start({ controllers: true, scheduler: true, kwok: true });
//   const core = cp.kubeConfig().makeApiClient(CoreV1Api);
//   await cp.kubectl('get', 'nodes');
//   await cp.stop();
//
// Aggregation layer: the API server has the front-proxy (requestheader) certificates and routes to
// endpoint IPs (--enable-aggregator-routing). Endpoint IPs may not be loopback, so
// `cp.routableAddress()` creates a veth pair (one end in a network namespace of its own) with
// addresses from 198.18.0.0/15; a process on the host side address is reachable by the API server
// through an APIService (`cp.registerAPIService`).
import { spawn, execFile, execFileSync, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import * as fs from "node:fs";
import * as fsp from "node:fs/promises";
import * as https from "node:https";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { promisify } from "node:util";
import { freePort } from "./ports.ts";
import { pollUntil } from "./poll.ts";
import {
  KubeConfig,
  CoreV1Api,
  DiscoveryV1Api,
  ApiregistrationV1Api,
  type V1Node,
} from "@kubernetes/client-node";

const execFileP = promisify(execFile);
const REPO_ROOT = path.resolve(import.meta.dirname, "..", "..");
const INSTALL_SCRIPT = path.join(REPO_ROOT, "test", "controlplane", "install.sh");
const KWOK_STAGES = path.join(REPO_ROOT, "test", "controlplane", "kwok-stages.yaml");
const LOG_PREFIX = "controlplane:";

/** The controllers kube-controller-manager runs when `controllers: true`. */
export const DEFAULT_CONTROLLERS: readonly string[] = [
  "deployment-controller",
  "replicaset-controller",
  "garbage-collector-controller",
  "horizontal-pod-autoscaler-controller",
  "serviceaccount-token-controller",
  "serviceaccount-controller",
  "namespace-controller",
];

export interface ControlPlaneOptions {
  /** Run kube-controller-manager: true for DEFAULT_CONTROLLERS, or the exact controller names. */
  controllers?: boolean | readonly string[];
  /** HPA controller sync period (kube-controller-manager flag); default '5s' (Kubernetes: 15s). */
  hpaSyncPeriod?: string;
  /** Run kube-scheduler. */
  scheduler?: boolean;
  /**
   * Run kwok with fake nodes (true = one node); pods bound to them become Running and Ready.
   * `stages`: kwok Stage config file (default test/controlplane/kwok-stages.yaml, kwok's "fast" stages).
   */
  kwok?: boolean | { nodes?: number; stages?: string };
  /** Configure the aggregation layer (front-proxy certs, endpoint routing). Default true. */
  aggregation?: boolean;
  /** Extra kube-apiserver flags (`--name=value`), appended last. */
  apiServerArgs?: readonly string[];
  /**
   * More IP addresses in the API server's serving certificate, for clients that reach it
   * through a relay at that address (a real node's pods: test/support/node.ts apiServerRelay).
   */
  apiServerIPs?: readonly string[];
  /**
   * Run the ServiceAccount admission plugin: pods get their ServiceAccount's token (a projected
   * volume) as in a cluster. Off by default (as envtest): pods then need no ServiceAccount.
   */
  serviceAccountTokens?: boolean;
  /** Extra kube-controller-manager flags, appended last. */
  controllerManagerArgs?: readonly string[];
  /** How long each component may take to become healthy. Default 120 s (a loaded 2-core box). */
  startTimeoutMs?: number;
  /** Print progress lines to stderr. Default true. */
  verbose?: boolean;
}

export interface Assets {
  /** Directory with etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, kwok, helm, kubeconform. */
  dir: string;
  /** Pinned versions, e.g. { K8S_VERSION: 'v1.34.4', ETCD_VERSION: 'v3.5.35', ... }. */
  versions: Record<string, string>;
}

export interface RoutableAddress {
  /** Address on the host-namespace end of the veth pair: listen here, the API server reaches it. */
  address: string;
  /** Address of the other end, inside the network namespace. */
  peerAddress: string;
  /** Prefix length of the point-to-point subnet (30). */
  prefixLength: number;
  /** The network namespace holding the peer end (`ip netns exec <netns> ...`). */
  netns: string;
  /** Interface names: host side and namespace side. */
  hostInterface: string;
  peerInterface: string;
}

export interface ServingCert {
  certFile: string;
  keyFile: string;
  caFile: string;
  cert: string;
  key: string;
  /** PEM of the CA that signed it (the harness CA, which the API server trusts). */
  ca: string;
}

export interface AuditEvent {
  kind: "Event";
  level: string;
  auditID: string;
  stage: string;
  requestURI: string;
  verb: string;
  user: { username: string; groups?: string[] };
  userAgent?: string;
  objectRef?: {
    resource?: string;
    namespace?: string;
    name?: string;
    apiGroup?: string;
    apiVersion?: string;
    subresource?: string;
  };
  responseStatus?: { code?: number };
  [key: string]: unknown;
}

export interface RunOptions {
  /** Written to the command's stdin. */
  input?: string;
  /** Extra environment. */
  env?: Record<string, string>;
  /** Reject when the command fails (default true); when false, resolve with the exit code. */
  check?: boolean;
  timeoutMs?: number;
}

export interface RunResult {
  stdout: string;
  stderr: string;
  code: number;
}

// ---------------------------------------------------------------------------------------------
// Assets

let assetsMemo: Assets | undefined;

/** Finds the binaries the same way install.sh does (it is asked, so the logic lives in one place). */
export function findAssets(): Assets {
  if (assetsMemo) return assetsMemo;
  let out: string;
  try {
    out = execFileSync("bash", [INSTALL_SCRIPT, "--print-env"], { encoding: "utf8", env: process.env });
  } catch (err) {
    throw new Error(`${LOG_PREFIX} cannot run ${INSTALL_SCRIPT} --print-env: ${(err as Error).message}`);
  }
  const env: Record<string, string> = {};
  for (const line of out.split("\n")) {
    const eq = line.indexOf("=");
    if (eq > 0) env[line.slice(0, eq)] = line.slice(eq + 1);
  }
  const dir = env["CONVEYOR_K8S_ASSETS"];
  if (!dir) throw new Error(`${LOG_PREFIX} ${INSTALL_SCRIPT} --print-env printed no CONVEYOR_K8S_ASSETS`);
  const needed = [
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kubectl",
    "kwok",
    "helm",
    "kubeconform",
  ];
  const missing = needed.filter((b) => {
    try {
      fs.accessSync(path.join(dir, b), fs.constants.X_OK);
      return false;
    } catch {
      return true;
    }
  });
  if (missing.length > 0) {
    const how = process.env["CONVEYOR_K8S_ASSETS"]
      ? `CONVEYOR_K8S_ASSETS=${dir} lacks them; point it at a complete directory or unset it`
      : "run `make controlplane` (builds them from the Go module proxy once, then caches them)";
    throw new Error(`${LOG_PREFIX} control plane binaries missing in ${dir}: ${missing.join(", ")}; ${how}`);
  }
  const { CONVEYOR_K8S_ASSETS: _dir, ...versions } = env;
  assetsMemo = { dir, versions };
  return assetsMemo;
}

// ---------------------------------------------------------------------------------------------
// Process bookkeeping and the safety nets

interface Proc {
  name: string;
  child: ChildProcess;
  logFile: string;
  exited: boolean;
  exit: Promise<void>;
}

const live = new Set<ControlPlane>();
let netsInstalled = false;

function installSafetyNets(): void {
  if (netsInstalled) return;
  netsInstalled = true;
  // Synchronous last resort: no control plane process outlives the test process.
  process.on("exit", () => {
    for (const cp of live) cp.killSync();
  });
  for (const sig of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
    process.once(sig, () => {
      for (const cp of live) cp.killSync();
      // once() removed this listener: unless the program handles the signal itself, re-raise it
      // so the default action (exit) happens
      if (process.listenerCount(sig) === 0) process.kill(process.pid, sig);
    });
  }
}

function elapsed(t0: number): string {
  return `${((performance.now() - t0) / 1000).toFixed(1)}s`;
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

function tail(file: string, lines = 40): string {
  try {
    const text = fs.readFileSync(file, "utf8");
    return text
      .split("\n")
      .slice(-lines - 1)
      .join("\n");
  } catch {
    return "(no log)";
  }
}

interface HttpResult {
  status: number;
  body: string;
  headers: Record<string, string | string[] | undefined>;
}

function httpsRequest(
  url: string,
  opts: https.RequestOptions & { body?: string; timeoutMs?: number },
): Promise<HttpResult> {
  return new Promise((resolve, reject) => {
    const req = https.request(url, { ...opts, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () =>
        resolve({
          status: res.statusCode ?? 0,
          body: Buffer.concat(chunks).toString("utf8"),
          headers: res.headers,
        }),
      );
      res.on("error", reject);
    });
    req.setTimeout(opts.timeoutMs ?? 10_000, () => req.destroy(new Error(`timeout: ${url}`)));
    req.on("error", reject);
    if (opts.body !== undefined) req.write(opts.body);
    req.end();
  });
}

// ---------------------------------------------------------------------------------------------

let instanceCounter = 0;

export class ControlPlane {
  /** Temp dir holding certs, kubeconfigs, data and logs (kept when CONVEYOR_KEEP_TMP=1). */
  readonly dir: string;
  readonly assets: Assets;
  /** Admin kubeconfig (system:masters client certificate). */
  readonly kubeconfigPath: string;
  /** API server audit log (JSON lines; write verbs at Metadata level). */
  readonly auditLogPath: string;
  /** https://127.0.0.1:<port> */
  apiServerURL = "";
  etcdURL = "";
  /** The pinned Kubernetes version, e.g. 'v1.34.4'. */
  readonly version: string;
  /** Names of the fake kwok nodes. */
  readonly nodeNames: string[] = [];

  private readonly opts: ControlPlaneOptions;
  private readonly id: string;
  private readonly procs: Proc[] = [];
  private readonly pgidFile: string;
  private watchdog: ChildProcess | undefined;
  private routable: RoutableAddress | undefined;
  private routablePromise: Promise<RoutableAddress> | undefined;
  private stopped = false;
  private stopping: Promise<void> | undefined;
  private readonly t0 = performance.now();
  /** kube-apiserver's flags as last started (restartApiServer reuses them: same port, same etcd). */
  private apiServerArgv: string[] = [];

  private constructor(dir: string, assets: Assets, opts: ControlPlaneOptions) {
    this.dir = dir;
    this.assets = assets;
    this.opts = opts;
    this.id = `cvy${process.pid}x${instanceCounter++}`;
    this.kubeconfigPath = path.join(dir, "admin.kubeconfig");
    this.auditLogPath = path.join(dir, "logs", "audit.log");
    this.pgidFile = path.join(dir, "pgids");
    this.version = assets.versions["K8S_VERSION"] ?? "unknown";
  }

  /** Starts a control plane; rejects (after stopping what was started) if any part fails. */
  static async start(opts: ControlPlaneOptions = {}): Promise<ControlPlane> {
    const assets = findAssets();
    const dir = await fsp.mkdtemp(path.join(os.tmpdir(), "conveyor-cp-"));
    await fsp.mkdir(path.join(dir, "logs"));
    const cp = new ControlPlane(dir, assets, opts);
    live.add(cp);
    installSafetyNets();
    try {
      await cp.boot();
    } catch (err) {
      await cp.stop().catch(() => {});
      throw err;
    }
    return cp;
  }

  // ---- public helpers ---------------------------------------------------------------------

  /** A fresh @kubernetes/client-node KubeConfig with admin credentials. */
  kubeConfig(): KubeConfig {
    const kc = new KubeConfig();
    kc.loadFromFile(this.kubeconfigPath);
    return kc;
  }

  /** Environment for child processes: KUBECONFIG and the assets dir first on PATH. */
  env(): Record<string, string> {
    return {
      KUBECONFIG: this.kubeconfigPath,
      PATH: `${this.assets.dir}:${process.env["PATH"] ?? ""}`,
      HELM_CACHE_HOME: path.join(this.dir, "helm", "cache"),
      HELM_CONFIG_HOME: path.join(this.dir, "helm", "config"),
      HELM_DATA_HOME: path.join(this.dir, "helm", "data"),
      KUBECACHEDIR: path.join(this.dir, "kube-cache"), // kubectl's discovery cache, not ~/.kube
    };
  }

  /** Path of one of the built binaries. */
  bin(name: string): string {
    return path.join(this.assets.dir, name);
  }

  /** Runs a built binary (kubectl, helm, kubeconform, ...) with env(); resolves stdout/stderr/code. */
  async run(binary: string, args: readonly string[], opts: RunOptions = {}): Promise<RunResult> {
    const child = spawn(this.bin(binary), args, {
      env: { ...process.env, ...this.env(), ...opts.env },
      stdio: ["pipe", "pipe", "pipe"],
      cwd: REPO_ROOT,
    });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on("data", (c: Buffer) => out.push(c));
    child.stderr.on("data", (c: Buffer) => err.push(c));
    child.stdin.on("error", () => {}); // the command may exit before reading stdin
    child.stdin.end(opts.input ?? "");
    const timer = setTimeout(() => child.kill("SIGKILL"), opts.timeoutMs ?? 120_000);
    const [code, signal] = (await once(child, "close")) as [number | null, NodeJS.Signals | null];
    clearTimeout(timer);
    const res = {
      stdout: Buffer.concat(out).toString("utf8"),
      stderr: Buffer.concat(err).toString("utf8"),
      code: code ?? 128,
    };
    if ((opts.check ?? true) && code !== 0) {
      throw new Error(
        `${binary} ${args.join(" ")} failed (${signal ?? `exit ${code}`}):\n${res.stderr.trim() || res.stdout.trim()}`,
      );
    }
    return res;
  }

  /** `kubectl --kubeconfig=<admin> ...args`; resolves stdout, rejects with stderr on failure. */
  async kubectl(...args: string[]): Promise<string> {
    return (await this.run("kubectl", [`--kubeconfig=${this.kubeconfigPath}`, ...args])).stdout;
  }

  /**
   * Wait until a CRD is Established. (`kubectl wait --for=condition=Established` right after the
   * CRD is created can fail at once with "accessor error: <nil>" while it has no conditions yet.)
   */
  async waitForCrd(name: string, timeoutMs = 120_000): Promise<void> {
    await pollUntil(
      `crd/${name} Established`,
      async () =>
        (
          await this.kubectl(
            "get",
            `crd/${name}`,
            "-o",
            'jsonpath={.status.conditions[?(@.type=="Established")].status}',
          )
        ).trim() === "True",
      { timeoutMs, intervalMs: 200 },
    );
  }

  /** `kubectl apply -f -` of YAML/JSON manifests (plus extra args, e.g. '--server-side'); resolves stdout. */
  async apply(manifests: string, ...args: string[]): Promise<string> {
    return (
      await this.run("kubectl", [`--kubeconfig=${this.kubeconfigPath}`, "apply", "-f", "-", ...args], {
        input: manifests,
      })
    ).stdout;
  }

  /** `helm --kubeconfig=<admin> ...args`; resolves stdout. */
  async helm(...args: string[]): Promise<string> {
    return (await this.run("helm", [`--kubeconfig=${this.kubeconfigPath}`, ...args])).stdout;
  }

  /** A raw request to the API server with admin credentials (e.g. GET /version, aggregated paths). */
  async request(method: string, apiPath: string, body?: unknown): Promise<HttpResult> {
    const creds = this.adminCreds();
    const payload = body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body);
    return httpsRequest(`${this.apiServerURL}${apiPath}`, {
      method,
      ca: creds.ca,
      cert: creds.cert,
      key: creds.key,
      headers:
        payload === undefined
          ? { Accept: "application/json" }
          : { Accept: "application/json", "Content-Type": "application/json" },
      body: payload,
    });
  }

  /** Parsed audit events so far (write verbs at Metadata level, stage ResponseComplete). */
  async auditEvents(filter?: (e: AuditEvent) => boolean): Promise<AuditEvent[]> {
    let text = "";
    try {
      text = await fsp.readFile(this.auditLogPath, "utf8");
    } catch {
      return [];
    }
    const events: AuditEvent[] = [];
    for (const line of text.split("\n")) {
      if (!line.trim()) continue;
      try {
        const e = JSON.parse(line) as AuditEvent;
        if (!filter || filter(e)) events.push(e);
      } catch {
        // a line being written right now
      }
    }
    return events;
  }

  /** A serving certificate signed by the harness CA (which the API server trusts). */
  async issueServingCert(name: string, hosts: { ips?: string[]; dnsNames?: string[] }): Promise<ServingCert> {
    const safe = name.replace(/[^A-Za-z0-9_.-]/g, "_");
    const sans = [
      ...(hosts.ips ?? []).map((ip) => `IP:${ip}`),
      ...(hosts.dnsNames ?? []).map((d) => `DNS:${d}`),
    ];
    const base = path.join(this.dir, "pki", `serving-${safe}`);
    await this.issue(base, { cn: name, ca: "ca", usage: "server", sans });
    const caFile = path.join(this.dir, "pki", "ca.crt");
    return {
      certFile: `${base}.crt`,
      keyFile: `${base}.key`,
      caFile,
      cert: await fsp.readFile(`${base}.crt`, "utf8"),
      key: await fsp.readFile(`${base}.key`, "utf8"),
      ca: await fsp.readFile(caFile, "utf8"),
    };
  }

  /**
   * A kubeconfig for user `name` in group `org` (a client certificate signed by the harness CA),
   * e.g. a kubelet's: `clientKubeconfig('system:node:n1', 'system:nodes')`.
   */
  async clientKubeconfig(name: string, org: string): Promise<string> {
    const user = `client-${name.replace(/[^A-Za-z0-9_.-]/g, "_")}`;
    await this.issue(path.join(this.dir, "pki", user), { cn: name, org, ca: "ca", usage: "client" });
    const file = path.join(this.dir, `${user}.kubeconfig`);
    await this.writeKubeconfig(file, user);
    return file;
  }

  /**
   * An address that is not loopback, on which a host process can listen and the API server can
   * connect: the host end of a veth pair whose other end is in a network namespace created here.
   * Created on first call, removed by stop(). Needs root (CAP_NET_ADMIN) and iproute2.
   */
  routableAddress(): Promise<RoutableAddress> {
    this.routablePromise ??= this.createRoutable();
    return this.routablePromise;
  }

  /**
   * Registers an aggregated API served at https://<address>:<port> (e.g. on routableAddress()):
   * a selectorless Service, an EndpointSlice pointing at the address, and an APIService trusting
   * the harness CA. The API server verifies the backend's certificate against the Service's DNS
   * name, so serve with `issueServingCert(name, { dnsNames: [<serviceName>.<namespace>.svc] })`.
   * Returns once the objects exist; poll for availability (the aggregator checks the backend first).
   */
  async registerAPIService(o: {
    group: string;
    version: string;
    address: string;
    port: number;
    namespace?: string;
    serviceName?: string;
    groupPriorityMinimum?: number;
    versionPriority?: number;
  }): Promise<{ serviceName: string; serviceDNSName: string }> {
    const kc = this.kubeConfig();
    const namespace = o.namespace ?? "default";
    const name = o.serviceName ?? `${o.group.replace(/\./g, "-")}-${o.version}`.slice(0, 63);
    const core = kc.makeApiClient(CoreV1Api);
    const discovery = kc.makeApiClient(DiscoveryV1Api);
    const apireg = kc.makeApiClient(ApiregistrationV1Api);
    await core.createNamespacedService({
      namespace,
      body: {
        metadata: { name },
        spec: { ports: [{ name: "https", port: 443, targetPort: o.port, protocol: "TCP" }] },
      },
    });
    await discovery.createNamespacedEndpointSlice({
      namespace,
      body: {
        metadata: { name, labels: { "kubernetes.io/service-name": name } },
        addressType: net.isIPv6(o.address) ? "IPv6" : "IPv4",
        endpoints: [{ addresses: [o.address], conditions: { ready: true } }],
        ports: [{ name: "https", port: o.port, protocol: "TCP" }],
      },
    });
    const ca = await fsp.readFile(path.join(this.dir, "pki", "ca.crt"));
    await apireg.createAPIService({
      body: {
        metadata: { name: `${o.version}.${o.group}` },
        spec: {
          group: o.group,
          version: o.version,
          service: { namespace, name, port: 443 },
          caBundle: ca.toString("base64"),
          groupPriorityMinimum: o.groupPriorityMinimum ?? 1000,
          versionPriority: o.versionPriority ?? 15,
        },
      },
    });
    return { serviceName: name, serviceDNSName: `${name}.${namespace}.svc` };
  }

  /** Path of a file in the harness PKI dir: ca.crt, front-proxy-ca.crt, admin.crt/.key, sa.key, ... */
  pkiFile(name: string): string {
    return path.join(this.dir, "pki", name);
  }

  /** Log file of a component: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok. */
  logFile(component: string): string {
    return path.join(this.dir, "logs", `${component}.log`);
  }

  /**
   * Stops kube-apiserver alone (SIGTERM, or SIGKILL with `kill: true`), keeps it down for `downMs`,
   * then starts it again with the same flags — same port, certificates and etcd, so every
   * client's kubeconfig stays valid — and waits for /readyz. Clients see refused connections and
   * broken watches meanwhile, as during an API server upgrade.
   */
  async restartApiServer(opts: { downMs?: number; kill?: boolean } = {}): Promise<void> {
    const running = this.procs.filter((p) => p.name === "kube-apiserver" && !p.exited);
    await Promise.all(running.map((p) => this.killProc(p, opts.kill ? 0 : 10_000)));
    this.progress("kube-apiserver stopped");
    if (opts.downMs) await sleep(opts.downMs);
    const proc = this.spawnProc("kube-apiserver", this.apiServerArgv);
    await this.waitFor(proc, "/readyz after a restart", async () => {
      const res = await httpsRequest(`${this.apiServerURL}/readyz`, {
        ...this.adminCreds(),
        timeoutMs: 5000,
      });
      return res.status === 200;
    });
    this.progress("kube-apiserver restarted");
  }

  /** Stops every process (SIGTERM to its process group, SIGKILL after a grace), removes the netns and the temp dir. */
  stop(): Promise<void> {
    this.stopping ??= this.doStop();
    return this.stopping;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.stop();
  }

  // ---- boot -----------------------------------------------------------------------------------

  private progress(msg: string): void {
    if (this.opts.verbose ?? true) process.stderr.write(`${LOG_PREFIX} ${msg} (${elapsed(this.t0)})\n`);
  }

  private get timeout(): number {
    return this.opts.startTimeoutMs ?? 120_000;
  }

  private async boot(): Promise<void> {
    this.startWatchdog();
    await this.writePki();
    await this.writeAuditPolicy();
    this.progress(`certificates in ${this.dir}`);

    await this.startEtcd();
    this.progress(`etcd up at ${this.etcdURL}`);
    await this.startApiServer();
    this.progress(`kube-apiserver ${this.version} ready at ${this.apiServerURL}`);

    const controllers = this.opts.controllers === true ? DEFAULT_CONTROLLERS : this.opts.controllers || [];
    const tasks: Promise<void>[] = [];
    if (controllers.length > 0) {
      tasks.push(
        this.startControllerManager(controllers).then(() => this.progress("kube-controller-manager healthy")),
      );
    }
    if (this.opts.scheduler) {
      tasks.push(this.startScheduler().then(() => this.progress("kube-scheduler healthy")));
    }
    if (this.opts.kwok) {
      const k = typeof this.opts.kwok === "object" ? this.opts.kwok : {};
      const n = k.nodes ?? 1;
      tasks.push(
        this.startKwok(n, k.stages ?? KWOK_STAGES).then(() =>
          this.progress(`kwok up, ${n} fake node(s) Ready`),
        ),
      );
    }
    await Promise.all(tasks);
    this.progress("control plane ready");
  }

  // Certificates: a CA for serving and client certs, a front-proxy CA for the aggregation layer,
  // a service-account key pair. EC P-256 keys: fast to generate on a loaded machine.
  private async writePki(): Promise<void> {
    const pki = path.join(this.dir, "pki");
    await fsp.mkdir(pki);
    await fsp.writeFile(
      path.join(pki, "openssl.cnf"),
      "[req]\ndistinguished_name=dn\nprompt=no\n[dn]\nCN=unused\n",
    );
    await Promise.all([
      this.issue(path.join(pki, "ca"), { cn: "conveyor-test-ca", usage: "ca" }),
      this.issue(path.join(pki, "front-proxy-ca"), { cn: "conveyor-test-front-proxy-ca", usage: "ca" }),
      this.openssl([
        "genpkey",
        "-algorithm",
        "EC",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-out",
        path.join(pki, "sa.key"),
      ]),
    ]);
    await Promise.all([
      this.openssl(["pkey", "-in", path.join(pki, "sa.key"), "-pubout", "-out", path.join(pki, "sa.pub")]),
      this.issue(path.join(pki, "apiserver"), {
        cn: "kube-apiserver",
        ca: "ca",
        usage: "server",
        sans: [
          "IP:127.0.0.1",
          "IP:10.0.0.1",
          ...(this.opts.apiServerIPs ?? []).map((ip) => `IP:${ip}`),
          "DNS:localhost",
          "DNS:kubernetes",
          "DNS:kubernetes.default",
          "DNS:kubernetes.default.svc",
          "DNS:kubernetes.default.svc.cluster.local",
        ],
      }),
      this.issue(path.join(pki, "front-proxy-client"), {
        cn: "front-proxy-client",
        ca: "front-proxy-ca",
        usage: "client",
      }),
      this.issue(path.join(pki, "admin"), {
        cn: "conveyor-admin",
        org: "system:masters",
        ca: "ca",
        usage: "client",
      }),
      this.issue(path.join(pki, "kube-controller-manager"), {
        cn: "system:kube-controller-manager",
        org: "system:masters",
        ca: "ca",
        usage: "client",
      }),
      this.issue(path.join(pki, "kube-scheduler"), {
        cn: "system:kube-scheduler",
        org: "system:masters",
        ca: "ca",
        usage: "client",
      }),
      this.issue(path.join(pki, "kwok"), { cn: "kwok", org: "system:masters", ca: "ca", usage: "client" }),
      // what the API server shows a kubelet (logs, exec, port-forward), as kubeadm does
      this.issue(path.join(pki, "apiserver-kubelet-client"), {
        cn: "kube-apiserver-kubelet-client",
        org: "system:masters",
        ca: "ca",
        usage: "client",
      }),
    ]);
  }

  private async issue(
    base: string,
    o: {
      cn: string;
      org?: string;
      ca?: "ca" | "front-proxy-ca";
      usage: "ca" | "server" | "client";
      sans?: string[];
    },
  ): Promise<void> {
    const pki = path.join(this.dir, "pki");
    const subj = `${o.org ? `/O=${o.org}` : ""}/CN=${o.cn}`;
    const args = [
      "req",
      "-x509",
      "-config",
      path.join(pki, "openssl.cnf"),
      "-newkey",
      "ec",
      "-pkeyopt",
      "ec_paramgen_curve:prime256v1",
    ];
    args.push("-nodes", "-keyout", `${base}.key`, "-out", `${base}.crt`, "-days", "3650", "-subj", subj);
    if (o.usage === "ca") {
      args.push(
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign,digitalSignature",
      );
    } else {
      args.push(
        "-CA",
        path.join(pki, `${o.ca ?? "ca"}.crt`),
        "-CAkey",
        path.join(pki, `${o.ca ?? "ca"}.key`),
      );
      args.push(
        "-addext",
        "basicConstraints=critical,CA:FALSE",
        "-addext",
        "keyUsage=critical,digitalSignature",
      );
      args.push("-addext", `extendedKeyUsage=${o.usage === "server" ? "serverAuth" : "clientAuth"}`);
      if (o.sans && o.sans.length > 0) args.push("-addext", `subjectAltName=${o.sans.join(",")}`);
    }
    await this.openssl(args);
  }

  private async openssl(args: string[]): Promise<void> {
    try {
      await execFileP("openssl", args);
    } catch (err) {
      const e = err as Error & { stderr?: string };
      throw new Error(`${LOG_PREFIX} openssl ${args.slice(0, 2).join(" ")} failed: ${e.stderr ?? e.message}`);
    }
  }

  private async writeAuditPolicy(): Promise<void> {
    await fsp.writeFile(
      path.join(this.dir, "audit-policy.yaml"),
      [
        "apiVersion: audit.k8s.io/v1",
        "kind: Policy",
        'omitStages: ["RequestReceived"]',
        "rules:",
        "  - level: Metadata",
        '    verbs: ["create", "update", "patch", "delete", "deletecollection"]',
        "  - level: None",
        "",
      ].join("\n"),
    );
  }

  private adminCredsMemo: { ca: Buffer; cert: Buffer; key: Buffer } | undefined;
  private adminCreds(): { ca: Buffer; cert: Buffer; key: Buffer } {
    const pki = path.join(this.dir, "pki");
    this.adminCredsMemo ??= {
      ca: fs.readFileSync(path.join(pki, "ca.crt")),
      cert: fs.readFileSync(path.join(pki, "admin.crt")),
      key: fs.readFileSync(path.join(pki, "admin.key")),
    };
    return this.adminCredsMemo;
  }

  private writeKubeconfig(file: string, user: string): Promise<void> {
    const pki = path.join(this.dir, "pki");
    const b64 = (f: string) => fs.readFileSync(path.join(pki, f)).toString("base64");
    const text = [
      "apiVersion: v1",
      "kind: Config",
      "clusters:",
      "  - name: conveyor-test",
      "    cluster:",
      `      server: ${this.apiServerURL}`,
      `      certificate-authority-data: ${b64("ca.crt")}`,
      "users:",
      `  - name: ${user}`,
      "    user:",
      `      client-certificate-data: ${b64(`${user}.crt`)}`,
      `      client-key-data: ${b64(`${user}.key`)}`,
      "contexts:",
      "  - name: conveyor-test",
      "    context:",
      "      cluster: conveyor-test",
      `      user: ${user}`,
      "      namespace: default",
      "current-context: conveyor-test",
      "",
    ].join("\n");
    return fsp.writeFile(file, text, { mode: 0o600 });
  }

  /** Spawns a component in its own process group, output to logs/<name>.log. */
  private spawnProc(name: string, args: string[]): Proc {
    const logFile = this.logFile(name);
    const fd = fs.openSync(logFile, "a");
    fs.writeSync(fd, `# ${this.bin(name)} ${args.join(" ")}\n`);
    const child = spawn(this.bin(name), args, {
      cwd: this.dir,
      detached: true, // own process group: stop() kills the whole group
      stdio: ["ignore", fd, fd],
      env: { ...process.env, ...this.env() },
    });
    fs.closeSync(fd);
    const proc: Proc = { name, child, logFile, exited: false, exit: Promise.resolve() };
    proc.exit = new Promise((resolve) => {
      child.on("exit", () => {
        proc.exited = true;
        resolve();
      });
      child.on("error", () => {
        proc.exited = true;
        resolve();
      });
    });
    this.procs.push(proc);
    if (child.pid) fs.appendFileSync(this.pgidFile, `${child.pid}\n`);
    return proc;
  }

  /** Polls `check` until it returns true; fails early if the process exits; error carries the log tail. */
  private async waitFor(
    proc: Proc,
    what: string,
    check: () => Promise<boolean>,
    timeoutMs = this.timeout,
  ): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    let lastErr = "";
    for (let delay = 100; ; delay = Math.min(delay * 1.5, 1000)) {
      if (proc.exited) {
        throw new Error(
          `${LOG_PREFIX} ${proc.name} exited (code ${proc.child.exitCode}, signal ${proc.child.signalCode}) before ${what}; ` +
            `last lines of ${proc.logFile}:\n${tail(proc.logFile)}`,
        );
      }
      try {
        if (await check()) return;
      } catch (err) {
        lastErr = (err as Error).message;
      }
      if (Date.now() > deadline) {
        throw new Error(
          `${LOG_PREFIX} ${proc.name}: ${what} not reached within ${timeoutMs / 1000}s` +
            `${lastErr ? ` (last error: ${lastErr})` : ""}; last lines of ${proc.logFile}:\n${tail(proc.logFile)}`,
        );
      }
      await sleep(delay);
    }
  }

  /** Starts a component on fresh free ports; retries when a port was taken in between. */
  private async startWithPorts(
    name: string,
    nPorts: number,
    launch: (ports: number[]) => Promise<{ proc: Proc; ready: () => Promise<void> }>,
  ): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      const ports: number[] = [];
      while (ports.length < nPorts) {
        const p = await freePort();
        if (!ports.includes(p)) ports.push(p);
      }
      const { proc, ready } = await launch(ports);
      try {
        await ready();
        return;
      } catch (err) {
        const portClash = /address already in use/i.test(tail(proc.logFile, 200));
        if (!portClash || attempt >= 3) throw err;
        this.progress(`${name}: a port was taken, retrying on other ports`);
        await this.killProc(proc);
      }
    }
  }

  private async startEtcd(): Promise<void> {
    await this.startWithPorts("etcd", 2, async ([clientPort, peerPort]) => {
      this.etcdURL = `http://127.0.0.1:${clientPort}`;
      const dataDir = path.join(this.dir, `etcd-data-${clientPort}`);
      const proc = this.spawnProc("etcd", [
        `--name=conveyor-test`,
        `--data-dir=${dataDir}`,
        `--listen-client-urls=${this.etcdURL}`,
        `--advertise-client-urls=${this.etcdURL}`,
        `--listen-peer-urls=http://127.0.0.1:${peerPort}`,
        `--initial-advertise-peer-urls=http://127.0.0.1:${peerPort}`,
        `--initial-cluster=conveyor-test=http://127.0.0.1:${peerPort}`,
        "--unsafe-no-fsync=true",
        "--quota-backend-bytes=8589934592",
        "--log-level=warn",
      ]);
      const ready = () =>
        this.waitFor(proc, "health", async () => {
          const res = await fetch(`${this.etcdURL}/health`, { signal: AbortSignal.timeout(5000) });
          return res.ok && ((await res.json()) as { health?: string }).health === "true";
        });
      return { proc, ready };
    });
  }

  private async startApiServer(): Promise<void> {
    const pki = path.join(this.dir, "pki");
    const p = (f: string) => path.join(pki, f);
    await this.startWithPorts("kube-apiserver", 1, async ([port]) => {
      this.apiServerURL = `https://127.0.0.1:${port}`;
      const args = [
        "--advertise-address=127.0.0.1",
        "--bind-address=127.0.0.1",
        `--secure-port=${port}`,
        `--etcd-servers=${this.etcdURL}`,
        `--cert-dir=${path.join(this.dir, "apiserver-certs")}`,
        `--tls-cert-file=${p("apiserver.crt")}`,
        `--tls-private-key-file=${p("apiserver.key")}`,
        `--client-ca-file=${p("ca.crt")}`,
        "--service-cluster-ip-range=10.0.0.0/24",
        "--allow-privileged=true",
        // ServiceAccount: as envtest, pods need no default ServiceAccount to exist.
        // TaintNodesByCondition: would taint new (kwok) nodes not-ready until a node-lifecycle
        // controller, which is not run here, removes the taint.
        `--disable-admission-plugins=${this.opts.serviceAccountTokens ? "" : "ServiceAccount,"}TaintNodesByCondition`,
        "--authorization-mode=Node,RBAC",
        `--service-account-issuer=${this.apiServerURL}/`,
        `--service-account-key-file=${p("sa.pub")}`,
        `--service-account-signing-key-file=${p("sa.key")}`,
        `--audit-policy-file=${path.join(this.dir, "audit-policy.yaml")}`,
        `--audit-log-path=${this.auditLogPath}`,
        "--audit-log-format=json",
        "--audit-log-maxbackup=0",
        "--audit-log-maxsize=0",
        `--kubelet-client-certificate=${p("apiserver-kubelet-client.crt")}`,
        `--kubelet-client-key=${p("apiserver-kubelet-client.key")}`,
        "--kubelet-preferred-address-types=InternalIP", // a node's name is not in DNS here
      ];
      if (this.opts.aggregation ?? true) {
        args.push(
          "--enable-aggregator-routing=true",
          `--requestheader-client-ca-file=${p("front-proxy-ca.crt")}`,
          "--requestheader-allowed-names=front-proxy-client",
          "--requestheader-extra-headers-prefix=X-Remote-Extra-",
          "--requestheader-group-headers=X-Remote-Group",
          "--requestheader-username-headers=X-Remote-User",
          `--proxy-client-cert-file=${p("front-proxy-client.crt")}`,
          `--proxy-client-key-file=${p("front-proxy-client.key")}`,
        );
      }
      args.push(...(this.opts.apiServerArgs ?? []));
      this.apiServerArgv = args;
      const proc = this.spawnProc("kube-apiserver", args);
      const ready = () =>
        this.waitFor(proc, "/readyz", async () => {
          const creds = this.adminCreds();
          const res = await httpsRequest(`${this.apiServerURL}/readyz`, { ...creds, timeoutMs: 5000 });
          return res.status === 200;
        });
      return { proc, ready };
    });
    await Promise.all([
      this.writeKubeconfig(this.kubeconfigPath, "admin"),
      this.writeKubeconfig(
        path.join(this.dir, "kube-controller-manager.kubeconfig"),
        "kube-controller-manager",
      ),
      this.writeKubeconfig(path.join(this.dir, "kube-scheduler.kubeconfig"), "kube-scheduler"),
      this.writeKubeconfig(path.join(this.dir, "kwok.kubeconfig"), "kwok"),
    ]);
  }

  private async waitHealthz(proc: Proc, port: number): Promise<void> {
    await this.waitFor(proc, "/healthz", async () => {
      const res = await httpsRequest(`https://127.0.0.1:${port}/healthz`, {
        rejectUnauthorized: false,
        timeoutMs: 5000,
      });
      return res.status === 200;
    });
  }

  private async startControllerManager(controllers: readonly string[]): Promise<void> {
    const kubeconfig = path.join(this.dir, "kube-controller-manager.kubeconfig");
    const pki = path.join(this.dir, "pki");
    await this.startWithPorts("kube-controller-manager", 1, async ([port]) => {
      const proc = this.spawnProc("kube-controller-manager", [
        `--kubeconfig=${kubeconfig}`,
        `--authentication-kubeconfig=${kubeconfig}`,
        `--authorization-kubeconfig=${kubeconfig}`,
        "--bind-address=127.0.0.1",
        `--secure-port=${port}`,
        `--cert-dir=${path.join(this.dir, "kcm-certs")}`,
        "--leader-elect=false",
        `--controllers=${controllers.join(",")}`,
        `--service-account-private-key-file=${path.join(pki, "sa.key")}`,
        `--root-ca-file=${path.join(pki, "ca.crt")}`,
        "--use-service-account-credentials=false",
        `--horizontal-pod-autoscaler-sync-period=${this.opts.hpaSyncPeriod ?? "5s"}`,
        ...(this.opts.controllerManagerArgs ?? []),
      ]);
      return { proc, ready: () => this.waitHealthz(proc, port!) };
    });
  }

  private async startScheduler(): Promise<void> {
    const kubeconfig = path.join(this.dir, "kube-scheduler.kubeconfig");
    await this.startWithPorts("kube-scheduler", 1, async ([port]) => {
      const proc = this.spawnProc("kube-scheduler", [
        `--kubeconfig=${kubeconfig}`,
        `--authentication-kubeconfig=${kubeconfig}`,
        `--authorization-kubeconfig=${kubeconfig}`,
        "--bind-address=127.0.0.1",
        `--secure-port=${port}`,
        `--cert-dir=${path.join(this.dir, "scheduler-certs")}`,
        "--leader-elect=false",
      ]);
      return { proc, ready: () => this.waitHealthz(proc, port!) };
    });
  }

  private async startKwok(nodes: number, stages: string): Promise<void> {
    const proc = this.spawnProc("kwok", [
      `--kubeconfig=${path.join(this.dir, "kwok.kubeconfig")}`,
      `--config=${stages}`, // also keeps ~/.kwok/kwok.yaml out
      "--manage-all-nodes=false",
      "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
      "--cidr=10.244.0.0/16",
      "--node-ip=10.243.0.1",
    ]);
    const core = this.kubeConfig().makeApiClient(CoreV1Api);
    for (let i = 0; i < nodes; i++) {
      const name = `kwok-node-${i}`;
      const resources = { cpu: "1000", memory: "1Ti", pods: "1000" };
      const node: V1Node = {
        metadata: {
          name,
          annotations: { "kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0" },
          labels: {
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            type: "kwok",
          },
        },
        status: { allocatable: resources, capacity: resources },
      };
      await core.createNode({ body: node });
      this.nodeNames.push(name);
    }
    await this.waitFor(proc, `${nodes} node(s) Ready`, async () => {
      for (const name of this.nodeNames) {
        const n = await core.readNode({ name });
        if (!n.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True")) return false;
      }
      return true;
    });
  }

  // ---- network namespace ----------------------------------------------------------------------

  private async createRoutable(): Promise<RoutableAddress> {
    const ip = async (...args: string[]) => {
      try {
        return (await execFileP("ip", args)).stdout;
      } catch (err) {
        const e = err as Error & { stderr?: string };
        throw new Error(
          `${LOG_PREFIX} ip ${args.join(" ")} failed: ${(e.stderr ?? e.message).trim()} (needs root and iproute2)`,
        );
      }
    };
    const netns = this.id;
    const hostInterface = `${this.id}h`.slice(-15);
    const peerInterface = `${this.id}n`.slice(-15);
    this.routable = { address: "", peerAddress: "", prefixLength: 30, netns, hostInterface, peerInterface };
    fs.appendFileSync(path.join(this.dir, "netns"), `${netns} ${hostInterface}\n`);
    await ip("netns", "add", netns);
    await ip("link", "add", hostInterface, "type", "veth", "peer", "name", peerInterface, "netns", netns);
    // A /30 of 198.18.0.0/15 (benchmark range) that no interface on this machine uses yet.
    const used = await ip("-4", "-o", "addr", "show");
    let block = (process.pid * 7 + instanceCounter * 131) % 32768;
    const blockAddr = (b: number, host: number) => {
      const n = (198 << 24) + (18 << 16) + b * 4 + host;
      return [(n >>> 24) & 255, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join(".");
    };
    for (let i = 0; i < 32768 && used.includes(` ${blockAddr(block, 1)}/`); i++) block = (block + 1) % 32768;
    const address = blockAddr(block, 1);
    const peerAddress = blockAddr(block, 2);
    await ip("addr", "add", `${address}/30`, "dev", hostInterface);
    await ip("link", "set", hostInterface, "up");
    await ip("-n", netns, "addr", "add", `${peerAddress}/30`, "dev", peerInterface);
    await ip("-n", netns, "link", "set", peerInterface, "up");
    await ip("-n", netns, "link", "set", "lo", "up");
    this.routable = { address, peerAddress, prefixLength: 30, netns, hostInterface, peerInterface };
    this.progress(`routable address ${address} (veth ${hostInterface} <-> ${peerAddress} in netns ${netns})`);
    return this.routable;
  }

  private removeRoutableSync(): void {
    if (!this.routable) return;
    const { netns, hostInterface } = this.routable;
    this.routable = undefined;
    try {
      execFileSync("ip", ["link", "del", hostInterface], { stdio: "ignore" });
    } catch {
      // gone already, or never created
    }
    try {
      execFileSync("ip", ["netns", "del", netns], { stdio: "ignore" });
    } catch {
      // gone already
    }
  }

  // ---- stop -------------------------------------------------------------------------------------

  /**
   * A watchdog outside this process: if the test process dies without stop() (SIGKILL, crash),
   * it kills every process group listed in <dir>/pgids, removes the netns and the temp dir.
   */
  private startWatchdog(): void {
    const script = `
      parent=$1; dir=$2; keep=$3
      while kill -0 "$parent" 2>/dev/null; do sleep 1; done
      if [ -f "$dir/pgids" ]; then
        while read -r p; do kill -TERM -- "-$p" 2>/dev/null; done < "$dir/pgids"
        sleep 2
        while read -r p; do kill -KILL -- "-$p" 2>/dev/null; done < "$dir/pgids"
      fi
      if [ -f "$dir/netns" ]; then
        while read -r ns ifc; do ip link del "$ifc" 2>/dev/null; ip netns del "$ns" 2>/dev/null; done < "$dir/netns"
      fi
      [ "$keep" = 1 ] || rm -rf "$dir"
    `;
    const keep = process.env["CONVEYOR_KEEP_TMP"] === "1" ? "1" : "0";
    this.watchdog = spawn(
      "bash",
      ["-c", script, "controlplane-watchdog", String(process.pid), this.dir, keep],
      {
        detached: true,
        stdio: "ignore",
      },
    );
    this.watchdog.unref();
  }

  private async killProc(proc: Proc, graceMs = 10_000): Promise<void> {
    const pid = proc.child.pid;
    if (pid === undefined) return;
    const signalGroup = (sig: NodeJS.Signals) => {
      try {
        process.kill(-pid, sig);
      } catch {
        // group gone
      }
    };
    signalGroup("SIGTERM");
    const timer = setTimeout(() => signalGroup("SIGKILL"), graceMs);
    await proc.exit;
    clearTimeout(timer);
    signalGroup("SIGKILL"); // anything the leader left behind in its group
  }

  private async doStop(): Promise<void> {
    if (this.stopped) return;
    const byName = (n: string) => this.procs.filter((p) => p.name === n);
    // clients first, then the API server, then etcd
    await Promise.all(
      ["kwok", "kube-scheduler", "kube-controller-manager"].flatMap(byName).map((p) => this.killProc(p)),
    );
    await Promise.all(byName("kube-apiserver").map((p) => this.killProc(p)));
    await Promise.all(byName("etcd").map((p) => this.killProc(p)));
    this.removeRoutableSync();
    this.stopped = true;
    live.delete(this);
    this.stopWatchdog();
    if (process.env["CONVEYOR_KEEP_TMP"] === "1") {
      process.stderr.write(`${LOG_PREFIX} kept ${this.dir} (CONVEYOR_KEEP_TMP=1)\n`);
    } else {
      await fsp.rm(this.dir, { recursive: true, force: true });
    }
  }

  private stopWatchdog(): void {
    const pid = this.watchdog?.pid;
    if (pid === undefined) return;
    try {
      process.kill(-pid, "SIGKILL");
    } catch {
      // gone
    }
    this.watchdog = undefined;
  }

  /** Synchronous kill of everything; used by the process 'exit' / signal safety nets. */
  killSync(): void {
    if (this.stopped) return;
    this.stopped = true;
    for (const p of this.procs) {
      if (p.child.pid === undefined || p.exited) continue;
      try {
        process.kill(-p.child.pid, "SIGKILL");
      } catch {
        // gone
      }
    }
    this.removeRoutableSync();
    this.stopWatchdog();
    live.delete(this);
    if (process.env["CONVEYOR_KEEP_TMP"] !== "1") {
      try {
        fs.rmSync(this.dir, { recursive: true, force: true });
      } catch {
        // best effort
      }
    }
  }
}

// KEDA (operator + metrics adapter) as processes against a test control plane
// (test/support/controlplane.ts), from the binaries test/keda/install.sh builds from the Go
// module proxy (`make keda`; cached in ~/.cache/conveyor/keda-<version>).
//
// As KEDA's own manifests install it, minus the Deployments: its CRDs and RBAC from the module's
// config/ directory, both processes with the identity of the ServiceAccount keda/keda-operator
// (a client certificate with that user name, so KEDA's RBAC is what limits them), the operator's
// gRPC metrics service on loopback with mutual TLS, and the adapter serving
// external.metrics.k8s.io through the aggregation layer (an APIService on a routable address).
// While it runs KEDA owns external.metrics.k8s.io: Conveyor's operator runs in `direct` mode
// beside it.
import { execFileSync } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { pollUntil } from "./poll.ts";
import { freePort } from "./ports.ts";
import type { ControlPlane } from "./controlplane.ts";
import { startProcess, stopProcess, type Started } from "./processes.ts";
import { REPO } from "./workers.ts";

const INSTALL = join(REPO, "test/keda/install.sh");
export const KEDA_NAMESPACE = "keda";
/** The ServiceAccount KEDA's RBAC binds (config/rbac/role_binding.yaml). */
const KEDA_USER = `system:serviceaccount:${KEDA_NAMESPACE}:keda-operator`;

export interface KedaAssets {
  dir: string;
  operator: string;
  adapter: string;
  /** The module's config/ directory (crd/, rbac/, metrics-server/). */
  config: string;
  /** versions.txt of the build. */
  versions: string;
}

function assetsIn(dir: string): KedaAssets {
  return {
    dir,
    operator: join(dir, "keda-operator"),
    adapter: join(dir, "keda-adapter"),
    config: join(dir, "config"),
    versions: existsSync(join(dir, "..", "versions.txt"))
      ? readFileSync(join(dir, "..", "versions.txt"), "utf8").trim()
      : "",
  };
}

/** The built KEDA, or an error saying how to get it. */
export function findKedaAssets(): KedaAssets {
  const dir = execFileSync("bash", [INSTALL, "--print-dir"], { encoding: "utf8" }).trim();
  const a = assetsIn(dir);
  const missing = [a.operator, a.adapter, join(a.config, "crd")].filter((f) => !existsSync(f));
  if (missing.length > 0)
    throw new Error(
      `KEDA is not built (${missing.join(", ")} missing): run \`make keda\` (test/keda/install.sh builds it from the Go module proxy once, ~7 min, then caches it)`,
    );
  return a;
}

/** Builds KEDA when it is not cached (one build at a time, progress on stderr), then finds it. */
export function ensureKeda(): KedaAssets {
  execFileSync("bash", [INSTALL], { stdio: ["ignore", "inherit", "inherit"] });
  return findKedaAssets();
}

export interface KedaProcesses {
  assets: KedaAssets;
  operator: Started;
  adapter: Started;
  operatorLog: string;
  adapterLog: string;
  /** The operator's Prometheus metrics (keda_scaler_metrics_value, …). */
  metricsPort: number;
  stop(): Promise<void>;
}

function yamlFiles(dir: string, names?: string[]): string[] {
  return (
    names ??
    readdirSync(dir)
      .filter((f) => f.endsWith(".yaml"))
      .sort()
  ).map((f) => join(dir, f));
}

/** Installs KEDA's CRDs and RBAC and starts its operator and metrics adapter; resolves once the APIService is Available. */
export async function startKeda(
  cp: ControlPlane,
  opts: { dir: string; assets?: KedaAssets; logLevel?: string },
): Promise<KedaProcesses> {
  const assets = opts.assets ?? findKedaAssets();
  const dir = join(opts.dir, "keda");
  mkdirSync(dir, { recursive: true });
  await cp.kubectl("create", "namespace", KEDA_NAMESPACE);
  for (const f of yamlFiles(join(assets.config, "crd", "bases")))
    await cp.kubectl("apply", "--server-side", "-f", f);
  for (const crd of ["scaledobjects.keda.sh", "triggerauthentications.keda.sh"]) await cp.waitForCrd(crd);
  // RBAC exactly as config/rbac and config/metrics-server ship it (the kustomizations' role files).
  for (const f of [
    ...yamlFiles(join(assets.config, "rbac"), [
      "role.yaml",
      "role_binding.yaml",
      "aggregate_cluster_roles.yaml",
    ]),
    ...yamlFiles(join(assets.config, "metrics-server"), ["role.yaml", "role_binding.yaml"]),
  ])
    await cp.kubectl("apply", "-f", f);
  // KEDA binds its external-metrics reader to the HPA controller's ServiceAccount; this control
  // plane's controller manager runs without service-account credentials, as one user.
  await cp.kubectl(
    "create",
    "clusterrolebinding",
    "keda-hpa-controller-external-metrics-kcm",
    "--clusterrole=keda-external-metrics-reader",
    "--user=system:kube-controller-manager",
  );

  const kubeconfig = await cp.clientKubeconfig(KEDA_USER, "system:serviceaccounts");
  const clientCert = cp.pkiFile(`client-${KEDA_USER.replace(/[^A-Za-z0-9_.-]/g, "_")}`);
  // gRPC between adapter and operator is mutual TLS against the harness CA: the operator serves
  // with a server certificate for 127.0.0.1, the adapter presents its client certificate.
  const grpc = await cp.issueServingCert("keda-operator", {
    ips: ["127.0.0.1"],
    dnsNames: [`keda-operator.${KEDA_NAMESPACE}.svc`, `keda-operator.${KEDA_NAMESPACE}.svc.cluster.local`],
  });
  const operatorCerts = join(dir, "operator-certs");
  const adapterCerts = join(dir, "adapter-certs");
  mkdirSync(operatorCerts, { recursive: true });
  mkdirSync(adapterCerts, { recursive: true });
  copyFileSync(grpc.certFile, join(operatorCerts, "tls.crt"));
  copyFileSync(grpc.keyFile, join(operatorCerts, "tls.key"));
  copyFileSync(grpc.caFile, join(operatorCerts, "ca.crt"));
  copyFileSync(`${clientCert}.crt`, join(adapterCerts, "tls.crt"));
  copyFileSync(`${clientCert}.key`, join(adapterCerts, "tls.key"));
  copyFileSync(grpc.caFile, join(adapterCerts, "ca.crt"));

  const env = {
    PATH: process.env.PATH ?? "",
    HOME: process.env.HOME ?? "/tmp",
    KUBECONFIG: kubeconfig,
    WATCH_NAMESPACE: "",
    POD_NAMESPACE: KEDA_NAMESPACE,
    KEDA_CLUSTER_OBJECT_NAMESPACE: KEDA_NAMESPACE,
  };
  const logLevel = opts.logLevel ?? "info";
  const metricsPort = await freePort();
  const probePort = await freePort();
  const grpcPort = await freePort();
  const operatorLog = join(dir, "keda-operator.log");
  const operator = startProcess(
    assets.operator,
    [
      `--metrics-bind-address=127.0.0.1:${metricsPort}`,
      `--health-probe-bind-address=127.0.0.1:${probePort}`,
      `--metrics-service-bind-address=127.0.0.1:${grpcPort}`,
      `--cert-dir=${operatorCerts}`,
      "--enable-cert-rotation=false",
      "--leader-elect=false",
      `--ca-dir=${operatorCerts}`,
      `--zap-log-level=${logLevel}`,
      "--zap-encoder=console",
    ],
    { logFile: operatorLog, env },
  );
  let adapter: Started | undefined;
  const adapterLog = join(dir, "keda-adapter.log");
  const tail = (f: string) => {
    try {
      return readFileSync(f, "utf8").slice(-3000);
    } catch {
      return "";
    }
  };
  try {
    await pollUntil(
      "keda-operator /readyz",
      async () => {
        if (operator.child.exitCode !== null) throw new Error(`keda-operator exited:\n${tail(operatorLog)}`);
        return (await fetch(`http://127.0.0.1:${probePort}/readyz`)).ok;
      },
      { timeoutMs: 180_000, intervalMs: 250 },
    );

    const routable = await cp.routableAddress();
    const serviceName = "keda-metrics-apiserver";
    const serving = await cp.issueServingCert(serviceName, {
      ips: [routable.address],
      dnsNames: [`${serviceName}.${KEDA_NAMESPACE}.svc`],
    });
    const securePort = await freePort();
    const adapterMetricsPort = await freePort();
    adapter = startProcess(
      assets.adapter,
      [
        `--secure-port=${securePort}`,
        `--bind-address=${routable.address}`,
        `--tls-cert-file=${serving.certFile}`,
        `--tls-private-key-file=${serving.keyFile}`,
        `--cert-dir=${adapterCerts}`,
        `--authentication-kubeconfig=${kubeconfig}`,
        `--authorization-kubeconfig=${kubeconfig}`,
        `--lister-kubeconfig=${kubeconfig}`,
        `--metrics-service-address=127.0.0.1:${grpcPort}`,
        `--port=${adapterMetricsPort}`,
        `--zap-log-level=${logLevel === "info" ? "error" : logLevel}`,
      ],
      { logFile: adapterLog, env },
    );
    await cp.registerAPIService({
      group: "external.metrics.k8s.io",
      version: "v1beta1",
      address: routable.address,
      port: securePort,
      namespace: KEDA_NAMESPACE,
      serviceName,
    });
    await pollUntil(
      "KEDA's external metrics APIService available",
      async () => {
        if (adapter!.child.exitCode !== null) throw new Error(`keda-adapter exited:\n${tail(adapterLog)}`);
        const out = await cp.kubectl(
          "get",
          "apiservice",
          "v1beta1.external.metrics.k8s.io",
          "-o",
          'jsonpath={.status.conditions[?(@.type=="Available")].status}',
        );
        return out.trim() === "True";
      },
      { timeoutMs: 180_000, intervalMs: 500, onTimeout: () => tail(adapterLog) },
    );
  } catch (err) {
    if (adapter) await stopProcess(adapter, 5000);
    await stopProcess(operator, 5000);
    throw err;
  }
  const started = adapter;
  return {
    assets,
    operator,
    adapter: started,
    operatorLog,
    adapterLog,
    metricsPort,
    async stop() {
      await stopProcess(started, 10_000);
      await stopProcess(operator, 10_000);
    },
  };
}

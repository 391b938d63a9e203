// The Helm chart (charts/conveyor) and the examples (examples/), against a real API server:
// `helm lint --strict` and `helm template` with default and non-default values; every render
// applies with `kubectl apply --dry-run=server` and passes kubeconform (strict, with schemas
// taken from this API server's OpenAPI); the RBAC is least privilege (no wildcards, no Secret
// list/watch) and is enough for every call the operator makes — checked by making those calls
// as the chart's ServiceAccount (impersonation), with OwnerReferencesPermissionEnforcement on;
// pods are locked down; the chart's CRD is crds/'s; `helm install` keeps the CRD on uninstall
// and its serving certificate across upgrades; the examples apply once the CRD exists. The
// optional job API (jobApi.enabled) gets no Kubernetes API access (no RBAC, no token mounted) and
// its credentials only by Secret reference.
import { describe, it, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { X509Certificate } from "node:crypto";
import * as fs from "node:fs";
import * as https from "node:https";
import * as os from "node:os";
import * as path from "node:path";
import { parseAllDocuments } from "yaml";
import { ControlPlane } from "../support/controlplane.ts";
import { pollUntil } from "../support/poll.ts";

const ROOT = path.resolve(import.meta.dirname, "../..");
const CHART = path.join(ROOT, "charts", "conveyor");
const EXAMPLES = path.join(ROOT, "examples");
const NS = "conveyor-system";
const RELEASE = "conveyor";

type Obj = {
  apiVersion: string;
  kind: string;
  metadata: {
    name: string;
    namespace?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
  };
  [k: string]: unknown;
};
type Rule = {
  apiGroups?: string[];
  resources?: string[];
  verbs: string[];
  resourceNames?: string[];
  nonResourceURLs?: string[];
};
type Values = Record<string, unknown>;

const CA_PEM_B64 = Buffer.from("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n").toString(
  "base64",
);

/** Value sets rendered and applied: the defaults and every mode the chart has. */
const VALUE_SETS: Record<string, Values> = {
  default: {},
  "namespaced-cert-manager": {
    commonLabels: { team: "platform" },
    operator: {
      replicas: 3,
      image: { digest: `sha256:${"a".repeat(64)}` },
      imagePullSecrets: [{ name: "regcred" }],
      logLevel: "debug",
      watchNamespaces: ["team-a", "team-b"],
      reconcileWorkers: 8,
      leaderElection: {
        leaseName: "conveyor-leader",
        leaseDurationSeconds: 30,
        renewDeadlineSeconds: 20,
        retryPeriodSeconds: 4,
      },
      resources: { requests: { cpu: "100m", memory: "256Mi" }, limits: { cpu: 1, memory: "512Mi" } },
      podAnnotations: { "example.com/owner": "platform" },
      podLabels: { tier: "control" },
      nodeSelector: { "kubernetes.io/os": "linux" },
      tolerations: [{ key: "dedicated", operator: "Equal", value: "control", effect: "NoSchedule" }],
      affinity: {
        nodeAffinity: {
          requiredDuringSchedulingIgnoredDuringExecution: {
            nodeSelectorTerms: [
              {
                matchExpressions: [{ key: "kubernetes.io/arch", operator: "In", values: ["amd64", "arm64"] }],
              },
            ],
          },
        },
      },
      topologySpreadConstraints: [
        {
          maxSkew: 1,
          topologyKey: "topology.kubernetes.io/zone",
          whenUnsatisfiable: "ScheduleAnyway",
          labelSelector: { matchLabels: { "app.kubernetes.io/name": "conveyor" } },
        },
      ],
      podDisruptionBudget: { minAvailable: 2 },
      extraEnv: [{ name: "NODE_OPTIONS", value: "--max-old-space-size=384" }],
      extraArgs: ["--relist-seconds=300"],
    },
    worker: { image: { repository: "registry.example.com/conveyor-worker", tag: "0.1.0-custom" } },
    serviceAccount: { annotations: { "example.com/role": "conveyor" } },
    rbac: { secrets: { resourceNames: ["redis-auth", "postgres-url"] } },
    metrics: {
      apiService: { authDelegator: true, groupPriorityMinimum: 200 },
      tls: { source: "cert-manager" },
      serviceMonitor: { enabled: true, interval: "15s", labels: { release: "prometheus" } },
      podMonitor: { enabled: true, interval: "15s", labels: { release: "prometheus" } },
      prometheusRule: { enabled: true, labels: { release: "prometheus" }, backlogAgeSeconds: 300 },
      grafanaDashboard: { enabled: true, annotations: { grafana_folder: "Conveyor" } },
    },
  },
  "cert-manager-issuer": {
    metrics: {
      tls: {
        source: "cert-manager",
        certManager: {
          issuerRef: { name: "corp-ca", kind: "ClusterIssuer", group: "cert-manager.io" },
          duration: "2160h",
          renewBefore: "360h",
        },
      },
    },
  },
  "direct-single": {
    operator: { replicas: 1, leaderElection: { enabled: false }, podDisruptionBudget: { enabled: false } },
    serviceAccount: { create: false, name: "existing-operator" },
    rbac: { aggregateToDefaultRoles: false },
    metrics: { mode: "direct" },
  },
  "own-secret": {
    metrics: {
      tls: { source: "secret", secret: { name: "my-metrics-tls", caBundle: CA_PEM_B64 } },
      apiService: { hpaReaderRole: false },
    },
  },
  "self-signed": { fullnameOverride: "cvy", metrics: { tls: { source: "self-signed" } } },
  "job-api": {
    jobApi: {
      enabled: true,
      replicas: 3,
      logLevel: "debug",
      maxBodyBytes: 4 * 1024 * 1024,
      redis: {
        url: "rediss://redis.queues.svc:6380/2",
        secretRef: { name: "redis-auth", key: "redis-password" },
      },
      auth: { secretRef: { name: "conveyor-api-token" } },
      service: { port: 80, annotations: { "example.com/expose": "internal" } },
      resources: { requests: { cpu: "100m", memory: "128Mi" }, limits: { cpu: 1, memory: "384Mi" } },
      podAnnotations: { "example.com/owner": "producers" },
      podLabels: { tier: "api" },
      nodeSelector: { "kubernetes.io/os": "linux" },
      tolerations: [{ key: "dedicated", operator: "Equal", value: "api", effect: "NoSchedule" }],
      topologySpreadConstraints: [
        {
          maxSkew: 1,
          topologyKey: "topology.kubernetes.io/zone",
          whenUnsatisfiable: "ScheduleAnyway",
          labelSelector: { matchLabels: { "app.kubernetes.io/component": "job-api" } },
        },
      ],
      podDisruptionBudget: { minAvailable: 2 },
    },
  },
  "job-api-insecure": {
    jobApi: {
      enabled: true,
      replicas: 1,
      redis: { url: "redis-cluster://redis-0.redis:6379,redis-1.redis:6379" },
      auth: { enabled: false },
      serviceAccount: { create: false, name: "existing-api" },
      preStopSleepSeconds: 0,
      // the dashboard read-only for two queues, its history from PostgreSQL
      dashboard: { readOnly: true, queues: ["docs/ocr", "emails"] },
      database: { secretRef: { name: "records-db" } },
    },
  },
  // the dashboard's Pools page: read-only Kubernetes access for the job API (make demo uses it)
  "job-api-pools": {
    jobApi: {
      enabled: true,
      replicas: 1,
      redis: { url: "redis://redis.queues.svc:6379" },
      auth: { secretRef: { name: "conveyor-api-token" } },
      tokens: { secretRef: { name: "conveyor-api-tokens" } },
      pools: { enabled: true },
      extraEnv: [{ name: "LOG_FORMAT", value: "json" }],
    },
  },
};

/** What helm install uses: the job API on, its credentials in Secrets the test creates. */
const INSTALL_VALUES: Values = {
  rbac: { secrets: { resourceNames: ["redis-auth"] } },
  jobApi: {
    enabled: true,
    redis: { url: "redis://redis.queues.svc:6379", secretRef: { name: "redis-auth" } },
    auth: { secretRef: { name: "conveyor-api-token" } },
  },
};
const API_SA = `${RELEASE}-job-api`;

// Stand-ins for the CRDs optional integrations need (cert-manager, the Prometheus Operator), so
// their objects can be dry-run and validated here without installing those projects.
function stubCRD(group: string, kind: string, plural: string): string {
  return JSON.stringify({
    apiVersion: "apiextensions.k8s.io/v1",
    kind: "CustomResourceDefinition",
    metadata: { name: `${plural}.${group}` },
    spec: {
      group,
      scope: "Namespaced",
      names: { kind, plural, singular: kind.toLowerCase(), listKind: `${kind}List` },
      versions: [
        {
          name: "v1",
          served: true,
          storage: true,
          schema: { openAPIV3Schema: { type: "object", "x-kubernetes-preserve-unknown-fields": true } },
        },
      ],
    },
  });
}

function docs(text: string): Obj[] {
  return parseAllDocuments(text)
    .map((d) => {
      if (d.errors.length > 0) throw new Error(`invalid YAML: ${d.errors.map((e) => e.message).join("; ")}`);
      return d.toJS() as Obj | null;
    })
    .filter((o): o is Obj => !!o && typeof o === "object");
}

const podSpecOf = (o: Obj) =>
  (o.spec as { template?: { spec?: Record<string, unknown> } } | undefined)?.template?.spec;
const component = (o: Obj) => o.metadata.labels?.["app.kubernetes.io/component"];
type Container = {
  name: string;
  image: string;
  args: string[];
  env?: { name: string; value?: string; valueFrom?: { secretKeyRef?: { name: string; key: string } } }[];
  ports?: { name: string; containerPort: number }[];
  livenessProbe?: { httpGet: { path: string; port: string } };
  readinessProbe?: { httpGet: { path: string; port: string } };
  lifecycle?: unknown;
  volumeMounts?: { name: string; mountPath: string }[];
};
/** The job API's objects in a render (jobApi.enabled). */
const jobApiOf = (objs: Obj[]) => objs.filter((o) => component(o) === "job-api");
const containerOf = (dep: Obj) => (podSpecOf(dep)!.containers as Container[])[0]!;
/** The operator container's arguments in a render that start with `flag`. */
const operatorArgs = (text: string, flag: string) => {
  const op = docs(text).find((o) => o.kind === "Deployment" && component(o) === "operator")!;
  return (containerOf(op).args ?? []).filter((a) => a.startsWith(flag));
};

describe("helm chart charts/conveyor", { timeout: 20 * 60_000 }, () => {
  let cp: ControlPlane;
  let tmp: string;
  let kubeVersion: string;
  const rendered = new Map<string, string>();

  const valuesFile = (name: string, v: Values): string => {
    const f = path.join(tmp, `values-${name}.json`);
    fs.writeFileSync(f, JSON.stringify(v));
    return f;
  };
  const installValues = () => valuesFile("install", INSTALL_VALUES);
  const template = async (v: Values, ...extra: string[]): Promise<string> =>
    cp.helm(
      "template",
      RELEASE,
      CHART,
      "--namespace",
      NS,
      "--kube-version",
      kubeVersion,
      "-f",
      valuesFile(`t${Math.random().toString(36).slice(2)}`, v),
      ...extra,
    );

  before(async () => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), "conveyor-chart-test-"));
    cp = await ControlPlane.start({
      // Folds the chart's WorkerPool editor/viewer roles into the built-in edit/view roles.
      controllers: ["clusterrole-aggregation-controller"],
      // The admission plugin that makes owner references with blockOwnerDeletion need
      // permission on the owner's finalizers (on in OpenShift and hardened clusters).
      apiServerArgs: ["--enable-admission-plugins=OwnerReferencesPermissionEnforcement"],
    });
    kubeVersion = cp.version.replace(/^v/, "");
    for (const ns of [NS, "team-a", "team-b", "examples"]) await cp.kubectl("create", "namespace", ns);
    await cp.apply(
      [
        stubCRD("cert-manager.io", "Certificate", "certificates"),
        stubCRD("cert-manager.io", "Issuer", "issuers"),
        stubCRD("monitoring.coreos.com", "ServiceMonitor", "servicemonitors"),
        stubCRD("monitoring.coreos.com", "PodMonitor", "podmonitors"),
        stubCRD("monitoring.coreos.com", "PrometheusRule", "prometheusrules"),
      ].join("\n---\n"),
    );
    await cp.kubectl("apply", "--server-side", "-f", path.join(CHART, "crds"));
    await cp.waitForCrd("workerpools.conveyor.dev", 60_000);
    for (const [name, v] of Object.entries(VALUE_SETS)) rendered.set(name, await template(v));
  });

  after(async () => {
    await cp?.stop();
    if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
  });

  it("passes helm lint --strict with default and non-default values", async () => {
    for (const [name, v] of Object.entries(VALUE_SETS)) {
      const res = await cp.run(
        "helm",
        [
          "lint",
          "--strict",
          CHART,
          "--namespace",
          NS,
          "--kube-version",
          kubeVersion,
          "-f",
          valuesFile(`lint-${name}`, v),
        ],
        { check: false },
      );
      assert.equal(res.code, 0, `helm lint --strict (${name}):\n${res.stdout}${res.stderr}`);
      assert.match(res.stdout, /1 chart\(s\) linted, 0 chart\(s\) failed/);
    }
  });

  it("rejects unknown values and contradictory settings", async () => {
    await assert.rejects(
      template({ operator: { replica: 2 } }),
      /additional properties 'replica' not allowed/,
    );
    await assert.rejects(template({ metrics: { mode: "prometheus" } }), /metrics\/mode|must be one of/);
    await assert.rejects(
      template({ operator: { leaderElection: { enabled: false } } }),
      /leaderElection\.enabled/,
    );
    await assert.rejects(
      template({ metrics: { tls: { source: "secret", secret: { name: "x" } } } }),
      /caBundle/,
    );
    await assert.rejects(
      template({ operator: { leaderElection: { renewDeadlineSeconds: 20 } } }),
      /retryPeriodSeconds < renewDeadlineSeconds < leaseDurationSeconds/,
    );
    await assert.rejects(
      template({ operator: { podDisruptionBudget: { minAvailable: 2 } } }),
      /no node could ever be drained/,
    );
    // one replica: no PDB (it would block every drain)
    assert.ok(
      !docs(await template({ operator: { replicas: 1 } })).some((o) => o.kind === "PodDisruptionBudget"),
    );

    // the job API: a Redis URL and a token Secret, unless running without authentication is said outright
    const api = (v: Values) => template({ jobApi: { enabled: true, ...v } });
    await assert.rejects(template({ jobApi: { replica: 2 } }), /additional properties 'replica' not allowed/);
    await assert.rejects(api({ auth: { enabled: false } }), /jobApi\.redis\.url is required/);
    await assert.rejects(
      api({ redis: { url: "redis://r:6379" } }),
      /jobApi\.auth\.secretRef\.name is required.*jobApi\.auth\.enabled: false/,
    );
    await assert.rejects(
      api({ redis: { url: "http://r:6379" }, auth: { enabled: false } }),
      /jobApi\/redis\/url/,
    );
    await assert.rejects(
      api({ redis: { url: "redis://r" }, auth: { secretRef: { name: "t", key: "a b" } } }),
      /jobApi\/auth\/secretRef\/key/,
    );
    await assert.rejects(
      api({
        redis: { url: "redis://r" },
        auth: { enabled: false },
        podDisruptionBudget: { minAvailable: 2 },
      }),
      /no node could ever be drained/,
    );
    // a password in the URL is refused, and the error does not repeat it
    for (const url of [
      "redis://:pw-in-url@r:6379",
      "redis://app:pw-in-url@r:6379/1",
      "redis-cluster://app:pw-in-url@a:1,b:2",
    ]) {
      await assert.rejects(api({ redis: { url }, auth: { enabled: false } }), (err: Error) => {
        assert.match(err.message, /jobApi\.redis\.url must not contain a password/);
        assert.doesNotMatch(err.message, /pw-in-url/);
        return true;
      });
    }
    // named tokens: the Secret mounted as a directory (kubelet updates it in place) and served
    const withTokens = jobApiOf(
      docs(
        await api({
          redis: { url: "redis://r" },
          auth: { secretRef: { name: "t" } },
          tokens: { secretRef: { name: "api-tokens", key: "scoped.yaml" } },
        }),
      ),
    ).find((o) => o.kind === "Deployment")!;
    const spec = podSpecOf(withTokens)! as {
      containers: {
        args: string[];
        volumeMounts: { name: string; mountPath: string; subPath?: string; readOnly?: boolean }[];
      }[];
      volumes: { name: string; secret?: { secretName: string; items: { key: string; path: string }[] } }[];
    };
    const args = spec.containers[0]!.args;
    assert.equal(args[args.indexOf("--tokens-file") + 1], "/etc/conveyor/tokens/scoped.yaml");
    assert.deepEqual(
      spec.containers[0]!.volumeMounts.find((m) => m.name === "tokens"),
      { name: "tokens", mountPath: "/etc/conveyor/tokens", readOnly: true },
    );
    assert.deepEqual(spec.volumes.find((v) => v.name === "tokens")!.secret, {
      secretName: "api-tokens",
      items: [{ key: "scoped.yaml", path: "scoped.yaml" }],
    });
    await assert.rejects(
      api({
        redis: { url: "redis://r" },
        auth: { secretRef: { name: "t" } },
        tokens: { secretRef: { name: "Bad_Name" } },
      }),
      /jobApi\/tokens\/secretRef\/name/,
    );
    // one replica: no PDB for the job API either
    assert.ok(
      !jobApiOf(docs(await api({ replicas: 1, redis: { url: "redis://r" }, auth: { enabled: false } }))).some(
        (o) => o.kind === "PodDisruptionBudget",
      ),
    );
  });

  it("ships crds/ unchanged (the chart installs the CRD npm run gen:crds generates)", () => {
    const source = fs.readFileSync(path.join(ROOT, "crds", "conveyor.dev_workerpools.yaml"), "utf8");
    const shipped = fs.readFileSync(path.join(CHART, "crds", "conveyor.dev_workerpools.yaml"), "utf8");
    assert.equal(shipped, source, "charts/conveyor/crds/ is stale: run `npm run gen:crds`");
    assert.deepEqual(
      fs.readdirSync(path.join(CHART, "crds")).sort(),
      fs
        .readdirSync(path.join(ROOT, "crds"))
        .filter((f) => f.endsWith(".yaml"))
        .sort(),
    );
  });

  it("passes only flags that `conveyor operator` knows", async (t) => {
    // The usage text of `conveyor operator --help` lists every flag.
    const res = spawnSync(process.execPath, [path.join(ROOT, "bin", "conveyor.js"), "operator", "--help"], {
      encoding: "utf8",
      timeout: 60_000,
    });
    if (res.status !== 0 || !/--worker-image/.test(res.stdout))
      return t.skip("`conveyor operator --help` is not available in this tree");
    const known = new Set([...res.stdout.matchAll(/--([a-z][a-z-]+)/g)].map((m) => m[1]!));
    for (const [name, text] of rendered) {
      for (const o of docs(text)) {
        if (o.kind !== "Deployment" || component(o) !== "operator") continue;
        const c = (podSpecOf(o)!.containers as { args: string[] }[])[0]!;
        assert.equal(c.args[0], "operator", `${name}: the container runs \`conveyor operator\``);
        for (const a of c.args.slice(1)) {
          const flag = /^--([a-z][a-z-]+)=/.exec(a)?.[1];
          assert.ok(flag && known.has(flag), `${name}: ${a} is not a flag of conveyor operator`);
        }
      }
    }
  });

  it("passes only flags that `conveyor api` knows", () => {
    // The job API's Deployment runs the operator image, whose entrypoint is `conveyor`. Its args,
    // with the port made invalid, must fail on the port (checked after every flag is parsed,
    // strictly) and not on an unknown option — and before anything connects to Redis.
    let seen = 0;
    for (const [name, text] of rendered) {
      for (const dep of jobApiOf(docs(text)).filter((o) => o.kind === "Deployment")) {
        const { args } = containerOf(dep);
        assert.equal(args[0], "api", `${name}: the container runs \`conveyor api\``);
        const port = args.indexOf("--port");
        assert.equal(args[port + 1], "8080", `${name}: listens on the container port`);
        const probe = [...args.slice(0, port + 1), "not-a-port", ...args.slice(port + 2)];
        const res = spawnSync(process.execPath, [path.join(ROOT, "bin", "conveyor.js"), ...probe], {
          encoding: "utf8",
          timeout: 60_000,
          env: { ...process.env, REDIS_URL: "redis://127.0.0.1:1" },
        });
        assert.equal(res.status, 2, `${name}: ${res.stderr}`);
        assert.match(res.stderr, /--port expects a whole number/, `${name}: ${args.join(" ")}`);
        seen++;
      }
    }
    assert.equal(seen, 3);
  });

  it("renders the recommended labels on every object and a working PDB and Services", () => {
    for (const [name, text] of rendered) {
      const objs = docs(text);
      for (const o of objs) {
        const l = o.metadata.labels ?? {};
        for (const k of [
          "app.kubernetes.io/name",
          "app.kubernetes.io/instance",
          "app.kubernetes.io/version",
          "app.kubernetes.io/managed-by",
          "app.kubernetes.io/part-of",
          "helm.sh/chart",
        ]) {
          assert.ok(l[k], `${name}: ${o.kind}/${o.metadata.name} lacks label ${k}`);
        }
      }
      // Each Service and PDB selects the pods of exactly one Deployment: its own component's.
      const pods = objs
        .filter((o) => o.kind === "Deployment")
        .map((d) => ({
          component: component(d),
          labels: (d.spec as { template: { metadata: { labels: Record<string, string> } } }).template.metadata
            .labels,
        }));
      for (const o of objs.filter((x) => x.kind === "Service" || x.kind === "PodDisruptionBudget")) {
        const sel =
          o.kind === "Service"
            ? (o.spec as { selector: Record<string, string> }).selector
            : (o.spec as { selector: { matchLabels: Record<string, string> } }).selector.matchLabels;
        const selected = pods.filter((p) => Object.entries(sel).every(([k, v]) => p.labels[k] === v));
        assert.deepEqual(
          selected.map((p) => p.component),
          [component(o)],
          `${name}: ${o.kind}/${o.metadata.name} selects the ${component(o)} pods only`,
        );
      }
    }
    const def = docs(rendered.get("default")!);
    const dep = def.find((o) => o.kind === "Deployment")!;
    assert.equal((dep.spec as { replicas: number }).replicas, 2);
    const pdb = def.find((o) => o.kind === "PodDisruptionBudget")!;
    assert.equal((pdb.spec as { minAvailable: number }).minAvailable, 1);
    const anti = (
      podSpecOf(dep)!.affinity as {
        podAntiAffinity?: { preferredDuringSchedulingIgnoredDuringExecution?: unknown[] };
      }
    ).podAntiAffinity;
    assert.ok(anti?.preferredDuringSchedulingIgnoredDuringExecution?.length, "soft anti-affinity by default");
  });

  it("runs locked-down operator pods: non-root, read-only root, no escalation, no capabilities, seccomp, resources", () => {
    for (const [name, text] of rendered) {
      for (const o of docs(text)) {
        const spec = podSpecOf(o);
        if (!spec) continue;
        const psc = spec.securityContext as Record<string, unknown>;
        assert.equal(psc.runAsNonRoot, true, `${name}: pod runAsNonRoot`);
        assert.ok(Number(psc.runAsUser) > 0, `${name}: pod runAsUser non-root`);
        assert.deepEqual(psc.seccompProfile, { type: "RuntimeDefault" });
        for (const c of spec.containers as {
          name: string;
          securityContext: Record<string, unknown>;
          resources: { requests?: object; limits?: object };
        }[]) {
          const sc = c.securityContext;
          assert.equal(sc.allowPrivilegeEscalation, false, `${name}/${c.name}: allowPrivilegeEscalation`);
          assert.equal(sc.readOnlyRootFilesystem, true, `${name}/${c.name}: readOnlyRootFilesystem`);
          assert.equal(sc.runAsNonRoot, true, `${name}/${c.name}: runAsNonRoot`);
          assert.equal(sc.privileged ?? false, false);
          assert.deepEqual((sc.capabilities as { drop: string[] }).drop, ["ALL"]);
          assert.ok(c.resources.requests && c.resources.limits, `${name}/${c.name}: resources set`);
        }
        const tmpVol = (spec.volumes as { name: string; emptyDir?: object }[]).find((v) => v.name === "tmp");
        assert.ok(tmpVol?.emptyDir, `${name}: /tmp is an emptyDir (read-only root)`);
      }
    }
  });

  it("gives the operator a 2 MiB young generation unless extraEnv sets NODE_OPTIONS, which then stands alone", async () => {
    const nodeOptions = (text: string) => {
      const op = docs(text).find((o) => o.kind === "Deployment" && component(o) === "operator")!;
      return (containerOf(op).env ?? []).filter((e) => e.name === "NODE_OPTIONS").map((e) => e.value);
    };
    assert.deepEqual(nodeOptions(rendered.get("default")!), ["--max-semi-space-size=2"]);
    assert.deepEqual(nodeOptions(rendered.get("namespaced-cert-manager")!), ["--max-old-space-size=384"]);
    assert.deepEqual(nodeOptions(await template({ operator: { nodeOptions: "" } })), []);
  });

  it("restricts the operator to labelled Secrets unless operator.restrictSecretAccess is false", async () => {
    const flag = (text: string) => operatorArgs(text, "--restrict-secret-access");
    assert.deepEqual(flag(rendered.get("default")!), ["--restrict-secret-access=true"]);
    assert.deepEqual(flag(await template({ operator: { restrictSecretAccess: false } })), [
      "--restrict-secret-access=false",
    ]);
  });

  it("hands the workers' outbox byte budget to the operator (256 MiB unless set)", async () => {
    const budget = (text: string) => operatorArgs(text, "--worker-outbox-max-bytes");
    assert.deepEqual(budget(rendered.get("default")!), ["--worker-outbox-max-bytes=268435456"]);
    assert.deepEqual(budget(await template({ worker: { outboxMaxBytes: 4294967296 } })), [
      "--worker-outbox-max-bytes=4294967296",
    ]);
  });

  it("caps the operator's malloc arenas at 2 unless extraEnv sets MALLOC_ARENA_MAX, which then stands alone", async () => {
    const arenaMax = (text: string) => {
      const op = docs(text).find((o) => o.kind === "Deployment" && component(o) === "operator")!;
      return (containerOf(op).env ?? []).filter((e) => e.name === "MALLOC_ARENA_MAX").map((e) => e.value);
    };
    assert.deepEqual(arenaMax(rendered.get("default")!), ["2"]);
    assert.deepEqual(
      arenaMax(await template({ operator: { extraEnv: [{ name: "MALLOC_ARENA_MAX", value: "4" }] } })),
      ["4"],
    );
    assert.deepEqual(arenaMax(await template({ operator: { mallocArenaMax: 0 } })), []);
  });

  it("has least-privilege RBAC: no wildcards, Secrets by get only, nothing cluster-wide when namespaced", () => {
    for (const [name, text] of rendered) {
      const objs = docs(text);
      for (const o of objs.filter((x) => x.kind === "ClusterRole" || x.kind === "Role")) {
        for (const r of o.rules as Rule[]) {
          const where = `${name}: ${o.kind}/${o.metadata.name} ${JSON.stringify(r)}`;
          for (const f of [r.verbs, r.resources ?? [], r.apiGroups ?? [], r.resourceNames ?? []])
            assert.ok(!f.some((x) => x.includes("*")), `wildcard in ${where}`);
          assert.equal(r.nonResourceURLs, undefined, where);
          if (r.resources?.some((x) => x === "secrets" || x.startsWith("secrets/"))) {
            assert.deepEqual(r.verbs, ["get"], `Secrets are read by get only: ${where}`);
          }
          for (const bad of ["escalate", "bind", "impersonate", "deletecollection"]) {
            if (!o.metadata.name.endsWith("-workerpool-editor"))
              assert.ok(!r.verbs.includes(bad), `${bad} in ${where}`);
          }
          if (r.resources?.includes("pods"))
            assert.ok(
              !r.verbs.some((v) => ["create", "delete", "update"].includes(v)),
              `pods are only patched: ${where}`,
            );
        }
      }
      // Every binding names the chart's ServiceAccount, the HPA controller, or nothing else —
      // never the job API's, which gets no permission at all (but the read-only Pools-page role
      // it asks for with jobApi.pools.enabled: the next tests).
      const apiAccounts = jobApiOf(objs)
        .filter((o) => o.kind === "Deployment")
        .map((d) => podSpecOf(d)!.serviceAccountName as string);
      for (const b of objs.filter((x) => x.kind === "ClusterRoleBinding" || x.kind === "RoleBinding")) {
        for (const s of b.subjects as { kind: string; name: string; namespace: string }[]) {
          assert.equal(s.kind, "ServiceAccount", `${name}: ${b.metadata.name}`);
          assert.ok(
            !apiAccounts.includes(s.name) ||
              (name === "job-api-pools" && b.metadata.name.endsWith("-pools-reader")),
            `${name}: ${b.metadata.name} binds the job API's ServiceAccount ${s.name}`,
          );
          assert.ok(
            (s.namespace === NS && s.name !== "default") ||
              (s.namespace === "kube-system" && s.name === "horizontal-pod-autoscaler"),
            `${name}: ${b.metadata.name} binds ${s.namespace}/${s.name}`,
          );
        }
        const role = (b.roleRef as { name: string }).name;
        assert.ok(
          !["cluster-admin", "admin", "edit"].includes(role),
          `${name}: ${b.metadata.name} binds ${role}`,
        );
      }
    }
    // Namespaced: the workload permissions are Roles in the watched namespaces only.
    const ns = docs(rendered.get("namespaced-cert-manager")!);
    const clusterRoles = ns.filter(
      (o) =>
        o.kind === "ClusterRole" &&
        !o.metadata.labels?.["rbac.authorization.k8s.io/aggregate-to-view"] &&
        !o.metadata.labels?.["rbac.authorization.k8s.io/aggregate-to-edit"],
    );
    for (const r of clusterRoles)
      assert.ok(
        !(r.rules as Rule[]).some((x) =>
          x.resources?.some((y) => ["secrets", "pods", "deployments", "workerpools"].includes(y)),
        ),
        `${r.metadata.name} is cluster-wide`,
      );
    const roles = ns.filter(
      (o) => o.kind === "Role" && (o.rules as Rule[]).some((x) => x.resources?.includes("workerpools")),
    );
    assert.deepEqual(roles.map((r) => r.metadata.namespace).sort(), ["team-a", "team-b"]);
    for (const r of roles)
      assert.deepEqual((r.rules as Rule[]).find((x) => x.resources?.includes("secrets"))?.resourceNames, [
        "redis-auth",
        "postgres-url",
      ]);
    const dep = ns.find((o) => o.kind === "Deployment")!;
    assert.ok(
      (podSpecOf(dep)!.containers as { args: string[] }[])[0]!.args.includes("--namespaces=team-a,team-b"),
    );
  });

  it("renders the external metrics API per mode: APIService, Service and certificate, or none in direct mode", () => {
    const byKind = (name: string, kind: string) => docs(rendered.get(name)!).filter((o) => o.kind === kind);
    const api = (name: string) =>
      byKind(name, "APIService")[0] as (Obj & { spec: Record<string, unknown> }) | undefined;
    const args = (name: string) =>
      (podSpecOf(byKind(name, "Deployment")[0]!)!.containers as { args: string[] }[])[0]!.args;

    // helm: the Secret's CA is the APIService's caBundle, and the pod mounts the Secret.
    const secret = byKind("default", "Secret")[0] as Obj & { data: Record<string, string> };
    assert.equal(api("default")!.spec.caBundle, secret.data["ca.crt"]);
    assert.equal(api("default")!.spec.insecureSkipTLSVerify, undefined);
    assert.ok(args("default").includes("--metrics-api-cert=/etc/conveyor/metrics-api-tls/tls.crt"));
    const svcName = (api("default")!.spec.service as { name: string }).name;
    assert.ok(byKind("default", "Service").some((s) => s.metadata.name === svcName));
    const crt = Buffer.from(secret.data["tls.crt"]!, "base64").toString();
    const x509 = new X509Certificate(crt);
    assert.match(x509.subjectAltName ?? "", new RegExp(`DNS:${svcName}\\.${NS}\\.svc`));

    // cert-manager: the CA is injected; no Secret rendered by Helm.
    assert.equal(
      api("namespaced-cert-manager")!.metadata.annotations?.["cert-manager.io/inject-ca-from"],
      `${NS}/${RELEASE}-metrics-api`,
    );
    assert.equal(byKind("namespaced-cert-manager", "Secret").length, 0);
    assert.equal(byKind("namespaced-cert-manager", "Certificate").length, 2);
    assert.equal(byKind("cert-manager-issuer", "Certificate").length, 1);
    assert.equal(byKind("cert-manager-issuer", "Issuer").length, 0);

    // own secret: its CA is the caBundle; self-signed: verification off, the operator names its hosts.
    assert.equal(api("own-secret")!.spec.caBundle, CA_PEM_B64);
    assert.ok(args("own-secret").includes("--metrics-api-key=/etc/conveyor/metrics-api-tls/tls.key"));
    assert.equal(api("self-signed")!.spec.insecureSkipTLSVerify, true);
    assert.ok(args("self-signed").some((a) => a.startsWith("--metrics-api-hosts=cvy-metrics-api,")));

    // direct: no APIService, no metrics API Service, no aggregated-API RBAC.
    assert.equal(api("direct-single"), undefined);
    assert.ok(args("direct-single").includes("--metrics-api=false"));
    assert.ok(!byKind("direct-single", "Service").some((s) => s.metadata.name.endsWith("-metrics-api")));
    assert.ok(!byKind("direct-single", "RoleBinding").some((b) => b.metadata.namespace === "kube-system"));
    assert.equal(byKind("direct-single", "PodDisruptionBudget").length, 0);
    assert.ok(args("direct-single").includes("--leader-elect=false"));

    // ServiceMonitor, PodMonitor, PrometheusRule and the dashboard only when asked for.
    for (const kind of ["ServiceMonitor", "PodMonitor", "PrometheusRule"]) {
      assert.equal(byKind("default", kind).length, 0, kind);
      assert.equal(byKind("namespaced-cert-manager", kind).length, 1, kind);
    }
    const pm = byKind("namespaced-cert-manager", "PodMonitor")[0] as unknown as {
      spec: {
        namespaceSelector: { matchNames: string[] };
        selector: { matchLabels: Record<string, string> };
      };
    };
    assert.deepEqual(pm.spec.namespaceSelector.matchNames, ["team-a", "team-b"]);
    assert.equal(pm.spec.selector.matchLabels["app.kubernetes.io/name"], "conveyor-worker");
    const dashboards = byKind("namespaced-cert-manager", "ConfigMap").filter(
      (c) => c.metadata.labels?.grafana_dashboard === "1",
    );
    assert.equal(dashboards.length, 1, "the dashboard ConfigMap");
    assert.ok(
      JSON.parse((dashboards[0] as unknown as { data: Record<string, string> }).data["conveyor.json"]!)
        .panels,
    );
    assert.equal(
      byKind("default", "ConfigMap").filter((c) => c.metadata.labels?.grafana_dashboard).length,
      0,
    );
  });

  it("renders the job API only when enabled: Deployment, Service, its own ServiceAccount, PDB", () => {
    for (const name of Object.keys(VALUE_SETS).filter((n) => !n.startsWith("job-api")))
      assert.deepEqual(jobApiOf(docs(rendered.get(name)!)), [], `${name}: no job API by default`);
    const all = docs(rendered.get("job-api")!);
    const api = jobApiOf(all);
    assert.deepEqual(api.map((o) => o.kind).sort(), [
      "Deployment",
      "PodDisruptionBudget",
      "Service",
      "ServiceAccount",
    ]);
    assert.ok(api.every((o) => o.metadata.name === API_SA && o.metadata.namespace === NS));
    const dep = api.find((o) => o.kind === "Deployment")!;
    const spec = podSpecOf(dep)!;
    const c = containerOf(dep);
    assert.equal((dep.spec as { replicas: number }).replicas, 3);
    const operator = all.find((o) => o.kind === "Deployment" && component(o) === "operator")!;
    assert.equal(c.image, containerOf(operator).image, "the operator image");
    assert.deepEqual(c.args, [
      "api",
      "--port",
      "8080",
      "--max-body",
      String(4 * 1024 * 1024),
      "--dashboard",
      "on",
      "--kubernetes",
      "off",
    ]);
    assert.deepEqual(c.ports, [{ name: "http", containerPort: 8080, protocol: "TCP" }]);
    for (const probe of [c.livenessProbe, c.readinessProbe])
      assert.deepEqual(probe?.httpGet, { path: "/healthz", port: "http" }, "/healthz needs no token");
    assert.ok(c.lifecycle, "a preStop pause");
    // Redis and the token: the URL as a value, every credential by Secret reference
    const env = Object.fromEntries((c.env ?? []).map((e) => [e.name, e]));
    assert.equal(env.REDIS_URL?.value, "rediss://redis.queues.svc:6380/2");
    assert.deepEqual(env.REDIS_PASSWORD?.valueFrom, {
      secretKeyRef: { name: "redis-auth", key: "redis-password" },
    });
    assert.deepEqual(env.CONVEYOR_API_TOKEN?.valueFrom, {
      secretKeyRef: { name: "conveyor-api-token", key: "token" },
    });
    assert.equal(env.LOG_LEVEL?.value, "debug");
    assert.equal(
      env.NODE_OPTIONS?.value,
      "--max-semi-space-size=2",
      "a small young generation (bench/dashboard.ts)",
    );
    // the Service targets the container port; the PDB keeps two of three
    const svc = api.find((o) => o.kind === "Service")!.spec as {
      type: string;
      ports: { port: number; targetPort: string }[];
    };
    assert.equal(svc.type, "ClusterIP");
    assert.deepEqual(
      svc.ports.map((p) => [p.port, p.targetPort]),
      [[80, "http"]],
    );
    assert.equal(
      (api.find((o) => o.kind === "PodDisruptionBudget")!.spec as { minAvailable: number }).minAvailable,
      2,
    );
    assert.equal(spec.enableServiceLinks, false);

    // without authentication and with an existing ServiceAccount: no token, no ServiceAccount, no PDB
    const insecure = jobApiOf(docs(rendered.get("job-api-insecure")!));
    assert.deepEqual(insecure.map((o) => o.kind).sort(), ["Deployment", "Service"]);
    const insecureDep = insecure.find((o) => o.kind === "Deployment")!;
    const ic = containerOf(insecureDep);
    assert.deepEqual((ic.env ?? []).map((e) => e.name).sort(), [
      "DATABASE_URL",
      "LOG_LEVEL",
      "NODE_OPTIONS",
      "REDIS_URL",
    ]);
    assert.deepEqual(Object.fromEntries((ic.env ?? []).map((e) => [e.name, e])).DATABASE_URL?.valueFrom, {
      secretKeyRef: { name: "records-db", key: "url" },
    });
    // no token: said in values, so the API is told (it refuses to start unauthenticated otherwise)
    assert.deepEqual(ic.args.slice(5), [
      "--dashboard",
      "on",
      "--read-only",
      "--queues",
      "docs/ocr,emails",
      "--insecure-no-auth",
      "--kubernetes",
      "off",
    ]);
    assert.equal(ic.lifecycle, undefined);
    assert.equal(podSpecOf(insecureDep)!.serviceAccountName, "existing-api");
  });

  it("gives the job API no RBAC and no ServiceAccount token, and renders no credential", () => {
    for (const [name, text] of rendered) {
      if (name === "job-api-pools") continue; // asked for the Pools page: the next test
      const objs = docs(text);
      for (const dep of jobApiOf(objs).filter((o) => o.kind === "Deployment")) {
        const spec = podSpecOf(dep)!;
        const sa = spec.serviceAccountName as string;
        assert.equal(spec.automountServiceAccountToken, false, `${name}: no token in the job API pods`);
        const mounts = (spec.containers as Container[]).flatMap((c) => c.volumeMounts ?? []);
        assert.deepEqual(
          mounts.map((m) => m.mountPath),
          ["/tmp"],
          `${name}: the job API mounts /tmp only`,
        );
        assert.ok(
          !JSON.stringify(spec.volumes).includes("serviceAccountToken"),
          `${name}: no projected token volume`,
        );
        const account = objs.find((o) => o.kind === "ServiceAccount" && o.metadata.name === sa);
        if (account)
          assert.equal(account.automountServiceAccountToken, false, `${name}: ServiceAccount ${sa}`);
        assert.notEqual(
          sa,
          podSpecOf(objs.find((o) => o.kind === "Deployment" && component(o) === "operator")!)!
            .serviceAccountName,
          `${name}: not the operator's ServiceAccount`,
        );
        // RBAC: no Role or binding of the job API's (bindings by subject are checked above too)
        assert.ok(
          !jobApiOf(objs).some((o) => o.apiVersion.startsWith("rbac.authorization.k8s.io/")),
          `${name}: job API RBAC`,
        );
        for (const b of objs.filter((x) => x.kind === "ClusterRoleBinding" || x.kind === "RoleBinding")) {
          assert.ok(
            !(b.subjects as { name: string }[]).some((s) => s.name === sa),
            `${name}: ${b.kind}/${b.metadata.name} binds ${sa}`,
          );
        }
      }
      // No Secret is rendered for credentials, and no credential-looking variable has a value.
      for (const o of objs) {
        if (o.kind === "Secret")
          assert.equal(
            (o as { type?: string }).type,
            "kubernetes.io/tls",
            `${name}: Secret/${o.metadata.name}`,
          );
        for (const c of (podSpecOf(o)?.containers ?? []) as Container[]) {
          for (const e of c.env ?? []) {
            if (/TOKEN|PASSWORD|SECRET|CREDENTIAL|_KEY$/.test(e.name))
              assert.ok(
                e.value === undefined && e.valueFrom?.secretKeyRef,
                `${name}/${c.name}: ${e.name} must come from a Secret`,
              );
            if (e.value)
              assert.doesNotMatch(
                e.value,
                /^[a-z-]+:\/\/[^/@]*:[^/@]*@/,
                `${name}/${c.name}: ${e.name} carries a password`,
              );
          }
        }
      }
    }
  });

  it("gives the job API read-only access to WorkerPools and pods only with jobApi.pools.enabled", () => {
    const objs = docs(rendered.get("job-api-pools")!);
    const dep = jobApiOf(objs).find((o) => o.kind === "Deployment")!;
    const spec = podSpecOf(dep)!;
    assert.equal(spec.automountServiceAccountToken, true, "the token is mounted");
    const c = (spec.containers as (Container & { args: string[] })[])[0]!;
    assert.equal(c.args[c.args.indexOf("--kubernetes") + 1], "auto");
    assert.ok(
      c.env?.some((e) => e.name === "LOG_FORMAT" && e.value === "json"),
      "jobApi.extraEnv",
    );
    const roles = jobApiOf(objs).filter((o) => o.kind === "ClusterRole" || o.kind === "Role");
    assert.deepEqual(
      roles.map((r) => r.rules),
      [
        [
          { apiGroups: ["conveyor.dev"], resources: ["workerpools"], verbs: ["get", "list"] },
          { apiGroups: [""], resources: ["pods"], verbs: ["list"] },
        ],
      ],
    );
    const binding = jobApiOf(objs).find((o) => o.kind === "ClusterRoleBinding")!;
    assert.deepEqual(binding.subjects, [
      { kind: "ServiceAccount", name: spec.serviceAccountName, namespace: NS },
    ]);
  });

  it("renders RBAC standalone (helm template --show-only templates/rbac.yaml)", async () => {
    const out = docs(await template({}, "--show-only", "templates/rbac.yaml"));
    assert.ok(out.length >= 6);
    assert.ok(out.every((o) => o.apiVersion === "rbac.authorization.k8s.io/v1"));
  });

  it("every render applies with kubectl apply --dry-run=server (with the CRD installed)", async () => {
    for (const [name, text] of rendered) {
      const res = await cp.run(
        "kubectl",
        [`--kubeconfig=${cp.kubeconfigPath}`, "apply", "--dry-run=server", "--validate=strict", "-f", "-"],
        { input: text, check: false },
      );
      assert.equal(res.code, 0, `${name}: ${res.stderr}`);
      assert.match(res.stdout, /deployment\.apps\/\S+ created \(server dry run\)/, name);
    }
  });

  it("validates every render with kubeconform (strict, schemas from this API server)", async () => {
    const schemas = await openAPISchemas(cp, tmp, [
      "WorkerPool",
      "Certificate",
      "ServiceMonitor",
      "PodMonitor",
      "PrometheusRule",
    ]);
    for (const [name, text] of rendered) {
      const file = path.join(tmp, `rendered-${name}.yaml`);
      fs.writeFileSync(file, text);
      const res = await cp.run(
        "kubeconform",
        [
          "-strict",
          "-summary",
          "-output",
          "json",
          "-schema-location",
          `${schemas}/{{ .ResourceKind }}{{ .KindSuffix }}.json`,
          file,
        ],
        { check: false },
      );
      const report = JSON.parse(res.stdout) as {
        resources?: { kind: string; name: string; status: string; msg: string }[];
        summary: { valid: number; invalid: number; errors: number; skipped: number };
      };
      const bad = (report.resources ?? []).filter((r) => r.status !== "statusValid");
      assert.deepEqual(bad, [], `${name}: kubeconform`);
      assert.equal(res.code, 0, res.stderr);
      assert.equal(report.summary.skipped, 0, `${name}: every kind has a schema`);
      assert.ok(report.summary.valid >= 4, `${name}: ${JSON.stringify(report.summary)}`);
    }
    // and it does catch a mistake
    const broken = path.join(tmp, "broken.yaml");
    fs.writeFileSync(
      broken,
      rendered.get("default")!.replace("revisionHistoryLimit: 5", "revisionHistoryLimit: 5\n  replica: 3"),
    );
    const res = await cp.run(
      "kubeconform",
      ["-strict", "-schema-location", `${schemas}/{{ .ResourceKind }}{{ .KindSuffix }}.json`, broken],
      { check: false },
    );
    assert.notEqual(res.code, 0);
    assert.match(res.stdout, /replica/);
  });

  it("applies the examples with --dry-run=server once the CRD exists", async () => {
    const files = fs
      .readdirSync(EXAMPLES)
      .filter((f) => f.endsWith(".yaml"))
      .sort();
    assert.deepEqual(files, [
      "pipeline.yaml",
      "redis-secret.yaml",
      "workerpool-command.yaml",
      "workerpool-http.yaml",
      "workerpool-module.yaml",
    ]);
    const out = await cp.kubectl(
      "apply",
      "--dry-run=server",
      "--validate=strict",
      "--namespace",
      "examples",
      ...files.flatMap((f) => ["-f", path.join(EXAMPLES, f)]),
      "-f",
      path.join(EXAMPLES, "python", "workerpool.yaml"),
    );
    for (const pool of ["resize", "shout", "wordcount", "docs-ocr", "docs-embed", "reader"])
      assert.match(out, new RegExp(`workerpool\\.conveyor\\.dev/${pool} created \\(server dry run\\)`));
    // one pool per handler kind, a two-stage pipeline sharing its prefix, credentials by reference
    const pools = files
      .filter((f) => f !== "redis-secret.yaml")
      .flatMap((f) => docs(fs.readFileSync(path.join(EXAMPLES, f), "utf8")));
    const spec = (n: string) =>
      pools.find((p) => p.metadata.name === n)!.spec as {
        queue: string;
        nextQueue?: string;
        handler: Record<string, unknown>;
        redis: { url: string; secretRef: { name: string } };
      };
    assert.ok(
      spec("resize").handler.module && spec("shout").handler.http && spec("wordcount").handler.command,
    );
    assert.equal(spec("docs-ocr").nextQueue, spec("docs-embed").queue);
    assert.equal(spec("docs-ocr").queue.split("/")[0], spec("docs-embed").queue.split("/")[0]);
    for (const p of pools)
      assert.equal((p.spec as { redis: { secretRef: { name: string } } }).redis.secretRef.name, "redis-auth");
    // the handler files they name exist
    for (const p of pools) {
      const h = (p.spec as { handler: { module?: string; command?: string[] } }).handler;
      const file = h.module ?? h.command?.find((a) => a.startsWith("/handlers/"));
      if (file)
        assert.ok(
          fs.existsSync(path.join(EXAMPLES, "handlers", path.basename(file))),
          `${p.metadata.name}: ${file}`,
        );
    }
    // the CRD refuses what it should: a nextQueue in another pipeline
    const bad = fs
      .readFileSync(path.join(EXAMPLES, "pipeline.yaml"), "utf8")
      .replace("nextQueue: docs/embed", "nextQueue: other/embed");
    const res = await cp.run(
      "kubectl",
      [`--kubeconfig=${cp.kubeconfigPath}`, "apply", "--dry-run=server", "-n", "examples", "-f", "-"],
      { input: bad, check: false },
    );
    assert.notEqual(res.code, 0);
    assert.match(res.stderr, /same pipeline/);
  });

  it("prints NOTES that tell the user what to do next, per mode", async () => {
    const notes = async (name: string) => {
      const out = await cp.helm(
        "install",
        `notes-${name}`.slice(0, 40),
        CHART,
        "--namespace",
        NS,
        "--dry-run=server",
        "-f",
        valuesFile(`notes-${name}`, VALUE_SETS[name]!),
      );
      return out.slice(out.indexOf("NOTES:"));
    };
    const def = await notes("default");
    assert.match(def, /rollout status deployment\//);
    assert.match(def, /kubectl get apiservice v1beta1\.external\.metrics\.k8s\.io/);
    assert.match(def, /kubectl create secret generic redis-auth/);
    assert.match(def, /kubectl apply -f examples\/workerpool-module\.yaml/);
    assert.match(def, /kubectl get wp -w/);
    assert.match(def, /never deletes or\s+upgrades it/);
    const direct = await notes("direct-single");
    assert.match(direct, /mode: direct/);
    assert.doesNotMatch(direct, /get apiservice/);
    assert.match(await notes("self-signed"), /WARNING: metrics\.tls\.source=self-signed/);
    const namespaced = await notes("namespaced-cert-manager");
    assert.match(namespaced, /watched namespaces: team-a, team-b/);
    assert.match(namespaced, /only these Secrets \(rbac\.secrets\.resourceNames\): redis-auth, postgres-url/);
    assert.doesNotMatch(def, /job API/i);
    const api = await notes("job-api");
    assert.match(
      api,
      new RegExp(`The job API \\(3 replica\\(s\\)\\) at http://notes-job-api-${API_SA}\\.${NS}\\.svc:80`),
    );
    assert.match(api, new RegExp(`rollout status deployment/notes-job-api-${API_SA}\\n`));
    assert.match(api, /get secret conveyor-api-token/);
    assert.match(api, /Authorization: Bearer \$TOKEN/);
    assert.match(api, /read the token and the Redis password at start/);
    assert.doesNotMatch(api, /WARNING/);
    const insecure = await notes("job-api-insecure");
    assert.match(insecure, /WARNING: jobApi\.auth\.enabled=false/);
    assert.doesNotMatch(insecure, /Bearer|read the .* at start/);
  });

  it("helm install keeps the serving certificate across upgrades and the CRD after uninstall", async () => {
    await cp.helm("install", RELEASE, CHART, "--namespace", NS, "-f", installValues());
    const ca = async () =>
      JSON.parse(await cp.kubectl("get", "apiservice", "v1beta1.external.metrics.k8s.io", "-o", "json")).spec
        .caBundle as string;
    const first = await ca();
    const secretCA = JSON.parse(
      await cp.kubectl("get", "secret", "-n", NS, `${RELEASE}-metrics-api-tls`, "-o", "json"),
    ).data["ca.crt"];
    assert.equal(first, secretCA);
    await cp.helm(
      "upgrade",
      RELEASE,
      CHART,
      "--namespace",
      NS,
      "-f",
      installValues(),
      "--set",
      "operator.logLevel=debug",
    );
    assert.equal(await ca(), first, "an upgrade keeps the certificate (lookup of the existing Secret)");
    await cp.kubectl("get", "crd", "workerpools.conveyor.dev");
  });

  it("gives the operator's ServiceAccount exactly what the operator's API calls need (impersonation)", async () => {
    // The operator's requests as operator/kube/client.ts makes them (same verbs, paths and
    // content types), sent as the chart's ServiceAccount.
    const user = `system:serviceaccount:${NS}:${RELEASE}`;
    const call = (method: string, p: string, body?: unknown, contentType = "application/json") =>
      impersonated(cp, user, method, p, body, contentType);
    const ok = async (what: string, r: Promise<{ status: number; body: string }>) => {
      const res = await r;
      assert.ok(res.status >= 200 && res.status < 300, `${what}: HTTP ${res.status} ${res.body}`);
      return res;
    };
    const denied = async (what: string, r: Promise<{ status: number; body: string }>) => {
      const res = await r;
      assert.equal(
        res.status,
        403,
        `${what} must be forbidden: HTTP ${res.status} ${res.body.slice(0, 300)}`,
      );
    };
    const apply = (p: string, body: unknown) =>
      call("PATCH", `${p}?fieldManager=conveyor-operator&force=true`, body, "application/apply-patch+yaml");
    const merge = (p: string, body: unknown) =>
      call("PATCH", `${p}?fieldManager=conveyor-operator`, body, "application/merge-patch+json");
    const ns = "team-a";
    await cp.helm("upgrade", "--install", RELEASE, CHART, "--namespace", NS, "-f", installValues());
    // what a user sets up: a pool, its Secret, a pod of the pool
    await cp.apply(fs.readFileSync(path.join(EXAMPLES, "redis-secret.yaml"), "utf8"), "-n", ns);
    await cp.apply(fs.readFileSync(path.join(EXAMPLES, "workerpool-module.yaml"), "utf8"), "-n", ns);
    await cp.apply(
      JSON.stringify({
        apiVersion: "v1",
        kind: "Secret",
        metadata: { name: "unrelated", namespace: ns },
        stringData: { k: "v" },
      }),
    );
    const pool = JSON.parse(await cp.kubectl("get", "wp", "resize", "-n", ns, "-o", "json")) as {
      metadata: { uid: string };
    };
    const owner = [
      {
        apiVersion: "conveyor.dev/v1alpha1",
        kind: "WorkerPool",
        name: "resize",
        uid: pool.metadata.uid,
        controller: true,
        blockOwnerDeletion: true,
      },
    ];
    const labels = {
      "app.kubernetes.io/managed-by": "conveyor-operator",
      "conveyor.dev/workerpool": "resize",
    };
    const nsPath = (group: string, plural: string, name = "", sub = "") =>
      `${group ? `/apis/${group}` : "/api/v1"}/namespaces/${ns}/${plural}${name ? `/${name}` : ""}${sub ? `/${sub}` : ""}`;

    // informers: list + watch of pools, Deployments, HPAs, pods in all namespaces
    for (const p of [
      "/apis/conveyor.dev/v1alpha1/workerpools",
      "/apis/apps/v1/deployments",
      "/apis/autoscaling/v2/horizontalpodautoscalers",
      "/api/v1/pods",
    ]) {
      await ok(`list ${p}`, call("GET", `${p}?limit=500`));
      await ok(`watch ${p}`, call("GET", `${p}?watch=true&timeoutSeconds=1&allowWatchBookmarks=true`));
    }
    // server-side apply creates the Deployment (owner reference with blockOwnerDeletion), reads it, scales it
    const deployment = {
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name: "resize", namespace: ns, labels, ownerReferences: owner },
      spec: {
        replicas: 0,
        selector: { matchLabels: { "conveyor.dev/workerpool": "resize" } },
        template: {
          metadata: { labels },
          spec: { containers: [{ name: "worker", image: "ghcr.io/conveyor-dev/conveyor-worker:0.1.0" }] },
        },
      },
    };
    await ok("apply (create) Deployment", apply(nsPath("apps/v1", "deployments", "resize"), deployment));
    await ok(
      "apply (update) Deployment",
      apply(nsPath("apps/v1", "deployments", "resize"), {
        ...deployment,
        spec: { ...deployment.spec, revisionHistoryLimit: 3 },
      }),
    );
    await ok("get Deployment", call("GET", nsPath("apps/v1", "deployments", "resize")));
    await ok(
      "patch deployments/scale",
      merge(nsPath("apps/v1", "deployments", "resize", "scale"), { spec: { replicas: 1 } }),
    );
    // the HPA: apply, delete
    const hpa = {
      apiVersion: "autoscaling/v2",
      kind: "HorizontalPodAutoscaler",
      metadata: { name: "resize", namespace: ns, labels, ownerReferences: owner },
      spec: {
        scaleTargetRef: { apiVersion: "apps/v1", kind: "Deployment", name: "resize" },
        minReplicas: 1,
        maxReplicas: 20,
        metrics: [
          {
            type: "External",
            external: {
              metric: { name: "conveyor-backlog", selector: { matchLabels: { workerpool: "resize" } } },
              target: { type: "AverageValue", averageValue: "8" },
            },
          },
        ],
      },
    };
    await ok("apply HPA", apply(nsPath("autoscaling/v2", "horizontalpodautoscalers", "resize"), hpa));
    await ok(
      "delete HPA",
      call("DELETE", nsPath("autoscaling/v2", "horizontalpodautoscalers", "resize"), {
        apiVersion: "v1",
        kind: "DeleteOptions",
      }),
    );
    // pool status, pod-deletion-cost, Secrets by name, Events
    await ok(
      "apply workerpools/status",
      apply(nsPath("conveyor.dev/v1alpha1", "workerpools", "resize", "status"), {
        apiVersion: "conveyor.dev/v1alpha1",
        kind: "WorkerPool",
        metadata: { name: "resize", namespace: ns },
        status: { backlog: 3 },
      }),
    );
    await cp.apply(
      JSON.stringify({
        apiVersion: "v1",
        kind: "Pod",
        metadata: { name: "resize-abc", namespace: ns, labels },
        spec: { containers: [{ name: "worker", image: "x" }] },
      }),
    );
    await ok(
      "patch pod",
      merge(nsPath("", "pods", "resize-abc"), {
        metadata: { annotations: { "controller.kubernetes.io/pod-deletion-cost": "-100" } },
      }),
    );
    await ok("get the referenced Secret", call("GET", nsPath("", "secrets", "redis-auth")));
    // a pool's contract ConfigMap: list + watch of that one name (operator/controllers/contractSource.ts)
    const contractCm = `${nsPath("", "configmaps")}?fieldSelector=${encodeURIComponent("metadata.name=resize-contract")}`;
    await ok("list a contract ConfigMap", call("GET", `${contractCm}&limit=500`));
    await ok(
      "watch a contract ConfigMap",
      call("GET", `${contractCm}&watch=true&timeoutSeconds=1&allowWatchBookmarks=true`),
    );
    const event = {
      apiVersion: "v1",
      kind: "Event",
      metadata: { name: "resize.1", namespace: ns },
      involvedObject: {
        apiVersion: "conveyor.dev/v1alpha1",
        kind: "WorkerPool",
        name: "resize",
        namespace: ns,
        uid: pool.metadata.uid,
      },
      type: "Normal",
      reason: "ScaledUp",
      message: "0 → 1",
      source: { component: "conveyor-operator" },
    };
    await ok("create Event", call("POST", `${nsPath("", "events")}?fieldManager=conveyor-operator`, event));
    // leader election on its own Lease (in the release namespace)
    const leases = `/apis/coordination.k8s.io/v1/namespaces/${NS}/leases`;
    await ok(
      "create Lease",
      call("POST", `${leases}?fieldManager=conveyor-operator`, {
        apiVersion: "coordination.k8s.io/v1",
        kind: "Lease",
        metadata: { name: RELEASE, namespace: NS },
        spec: { holderIdentity: "a", leaseDurationSeconds: 15 },
      }),
    );
    const got = JSON.parse((await ok("get Lease", call("GET", `${leases}/${RELEASE}`))).body) as {
      spec: { holderIdentity: string };
    };
    got.spec.holderIdentity = "b";
    await ok("update Lease", call("PUT", `${leases}/${RELEASE}?fieldManager=conveyor-operator`, got));
    // the front proxy's CA
    await ok(
      "get extension-apiserver-authentication",
      call("GET", "/api/v1/namespaces/kube-system/configmaps/extension-apiserver-authentication"),
    );

    // a promoted rollout's canary Deployment (operator/rollout/step.ts)
    await ok("delete Deployment", call("DELETE", nsPath("apps/v1", "deployments", "resize")));

    // ... and no more
    await denied("list Secrets", call("GET", nsPath("", "secrets")));
    await denied("list Secrets cluster-wide", call("GET", "/api/v1/secrets"));
    await denied("watch Secrets", call("GET", `${nsPath("", "secrets")}?watch=true&timeoutSeconds=1`));
    await denied(
      "get a Secret outside rbac.secrets.resourceNames",
      call("GET", nsPath("", "secrets", "unrelated")),
    );
    await denied("delete a pod", call("DELETE", nsPath("", "pods", "resize-abc")));
    await denied(
      "create a pod",
      call("POST", nsPath("", "pods"), {
        apiVersion: "v1",
        kind: "Pod",
        metadata: { name: "p" },
        spec: { containers: [{ name: "c", image: "x" }] },
      }),
    );
    await denied(
      "create a ConfigMap",
      call("POST", nsPath("", "configmaps"), {
        apiVersion: "v1",
        kind: "ConfigMap",
        metadata: { name: "x" },
      }),
    );
    await denied("change a ConfigMap", merge(nsPath("", "configmaps", "resize-contract"), { data: {} }));
    await denied(
      "read another kube-system ConfigMap",
      call("GET", "/api/v1/namespaces/kube-system/configmaps/kube-root-ca.crt"),
    );
    await denied(
      "change a pool's spec",
      merge(nsPath("conveyor.dev/v1alpha1", "workerpools", "resize"), { spec: { concurrency: 2 } }),
    );
    await denied("delete a pool", call("DELETE", nsPath("conveyor.dev/v1alpha1", "workerpools", "resize")));
    await denied("read another Lease", call("GET", `${leases}/other`));
    await denied(
      "update another Lease",
      call("PUT", `${leases}/other`, {
        apiVersion: "coordination.k8s.io/v1",
        kind: "Lease",
        metadata: { name: "other", namespace: NS },
      }),
    );
    await denied(
      "create a Lease elsewhere",
      call("POST", nsPath("coordination.k8s.io/v1", "leases"), {
        apiVersion: "coordination.k8s.io/v1",
        kind: "Lease",
        metadata: { name: RELEASE },
      }),
    );
    await denied("list nodes", call("GET", "/api/v1/nodes"));
    await denied("list ClusterRoles", call("GET", "/apis/rbac.authorization.k8s.io/v1/clusterroles"));

    // The HPA controller may read the backlog metric; nobody else gets it from the chart.
    const canI = async (who: string, verb: string, group: string, resource: string) => {
      const res = await cp.request("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", {
        apiVersion: "authorization.k8s.io/v1",
        kind: "SubjectAccessReview",
        spec: {
          user: who,
          groups: who.startsWith("system:serviceaccount:")
            ? ["system:serviceaccounts", "system:authenticated"]
            : ["system:authenticated"],
          resourceAttributes: { namespace: ns, verb, group, resource },
        },
      });
      assert.equal(res.status, 201, res.body);
      return (JSON.parse(res.body) as { status: { allowed: boolean } }).status.allowed;
    };
    assert.equal(
      await canI(
        "system:serviceaccount:kube-system:horizontal-pod-autoscaler",
        "list",
        "external.metrics.k8s.io",
        "conveyor-backlog",
      ),
      true,
    );
    assert.equal(
      await canI(
        "system:serviceaccount:team-a:default",
        "list",
        "external.metrics.k8s.io",
        "conveyor-backlog",
      ),
      false,
    );
    // Namespace users get WorkerPools through the built-in edit/view roles.
    await cp.kubectl("create", "rolebinding", "dev-edit", "--clusterrole=edit", "--user=dev", "-n", ns);
    await cp.kubectl("create", "rolebinding", "viewer-view", "--clusterrole=view", "--user=viewer", "-n", ns);
    await pollUntil("the aggregated edit role", () => canI("dev", "create", "conveyor.dev", "workerpools"), {
      timeoutMs: 30_000,
    });
    await pollUntil("the aggregated view role", () => canI("viewer", "list", "conveyor.dev", "workerpools"), {
      timeoutMs: 30_000,
    });
    assert.equal(await canI("viewer", "create", "conveyor.dev", "workerpools"), false);
  });

  it("runs the job API with no permissions, no ServiceAccount token and no credential in the release", async () => {
    // The Secrets the job API references, with values that must never show up in the release.
    const password = `redis-pw-${Math.random().toString(36).slice(2)}`;
    const token = `api-token-${Math.random().toString(36).slice(2)}`;
    await cp.apply(
      [
        {
          apiVersion: "v1",
          kind: "Secret",
          metadata: { name: "redis-auth", namespace: NS },
          stringData: { password },
        },
        {
          apiVersion: "v1",
          kind: "Secret",
          metadata: { name: "conveyor-api-token", namespace: NS },
          stringData: { token },
        },
      ]
        .map((o) => JSON.stringify(o))
        .join("\n---\n"),
    );
    await cp.helm("upgrade", "--install", RELEASE, CHART, "--namespace", NS, "-f", installValues());
    const release = await cp.helm("get", "all", RELEASE, "--namespace", NS);
    const live = await cp.kubectl(
      "get",
      "deployments,services,serviceaccounts,poddisruptionbudgets",
      "-n",
      NS,
      "-l",
      "app.kubernetes.io/component=job-api",
      "-o",
      "json",
    );
    for (const [what, text] of [
      ["helm get all", release],
      ["the live objects", live],
    ] as const) {
      assert.ok(!text.includes(password) && !text.includes(token), `${what} holds a credential`);
      assert.ok(
        !text.includes(Buffer.from(password).toString("base64")) &&
          !text.includes(Buffer.from(token).toString("base64")),
        `${what} holds a base64 credential`,
      );
    }
    assert.match(live, new RegExp(`"name": "${API_SA}"`));

    // The ServiceAccount exists, bound to nothing in the cluster.
    const sa = JSON.parse(await cp.kubectl("get", "serviceaccount", API_SA, "-n", NS, "-o", "json")) as {
      automountServiceAccountToken?: boolean;
    };
    assert.equal(sa.automountServiceAccountToken, false);
    const bindings = JSON.parse(
      await cp.kubectl("get", "clusterrolebindings,rolebindings", "--all-namespaces", "-o", "json"),
    ) as { items: (Obj & { subjects?: { kind: string; name: string; namespace?: string }[] })[] };
    const bound = bindings.items.filter((b) =>
      (b.subjects ?? []).some((s) => s.kind === "ServiceAccount" && s.name === API_SA && s.namespace === NS),
    );
    assert.deepEqual(
      bound.map((b) => `${b.kind}/${b.metadata.name}`),
      [],
      "the job API is bound to no role",
    );

    // Its pods opt out of the token, and so does the ServiceAccount. (This control plane runs
    // without the ServiceAccount admission plugin, as envtest does, so the opt-outs are checked
    // on the objects the API server stored rather than on an admitted pod.)
    const dep = JSON.parse(await cp.kubectl("get", "deployment", API_SA, "-n", NS, "-o", "json")) as {
      spec: {
        template: {
          spec: Record<string, unknown> & {
            serviceAccountName: string;
            volumes?: unknown[];
            containers: Container[];
          };
        };
      };
    };
    const podSpec = dep.spec.template.spec;
    assert.equal(podSpec.serviceAccountName, API_SA);
    assert.equal(podSpec.automountServiceAccountToken, false);
    assert.ok(!JSON.stringify(podSpec.volumes ?? []).includes("serviceAccountToken"));
    assert.ok(
      !podSpec.containers.some((c) =>
        (c.volumeMounts ?? []).some((m) => m.mountPath.startsWith("/var/run/secrets/kubernetes.io")),
      ),
    );

    // And as that ServiceAccount, the API server refuses what the operator may do.
    const user = `system:serviceaccount:${NS}:${API_SA}`;
    const denied = async (what: string, method: string, p: string) => {
      const res = await impersonated(cp, user, method, p, undefined, "application/json");
      assert.equal(
        res.status,
        403,
        `${what} must be forbidden to the job API: HTTP ${res.status} ${res.body.slice(0, 300)}`,
      );
    };
    await denied("get its token Secret", "GET", `/api/v1/namespaces/${NS}/secrets/conveyor-api-token`);
    await denied("get the Redis Secret", "GET", `/api/v1/namespaces/${NS}/secrets/redis-auth`);
    await denied("list Secrets", "GET", `/api/v1/namespaces/${NS}/secrets`);
    await denied("list pods", "GET", "/api/v1/pods");
    await denied("list WorkerPools", "GET", "/apis/conveyor.dev/v1alpha1/workerpools");
    await denied("list Deployments", "GET", `/apis/apps/v1/namespaces/${NS}/deployments`);
    await denied("get the Lease", "GET", `/apis/coordination.k8s.io/v1/namespaces/${NS}/leases/${RELEASE}`);
    await denied("list ConfigMaps", "GET", `/api/v1/namespaces/${NS}/configmaps`);
  });

  it("uninstall leaves the CRD (and the pools) in place", async () => {
    await cp.helm("uninstall", RELEASE, "--namespace", NS);
    await cp.kubectl("get", "crd", "workerpools.conveyor.dev");
    await cp.kubectl("get", "wp", "resize", "-n", "team-a");
    await assert.rejects(
      cp.kubectl("get", "apiservice", "v1beta1.external.metrics.k8s.io"),
      /NotFound|not found/,
    );
  });
});

/** One request to the API server as `user` (admin credentials + Impersonate-User). */
function impersonated(
  cp: ControlPlane,
  user: string,
  method: string,
  apiPath: string,
  body: unknown,
  contentType: string,
): Promise<{ status: number; body: string }> {
  const payload = body === undefined ? undefined : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = https.request(
      `${cp.apiServerURL}${apiPath}`,
      {
        method,
        ca: fs.readFileSync(cp.pkiFile("ca.crt")),
        cert: fs.readFileSync(cp.pkiFile("admin.crt")),
        key: fs.readFileSync(cp.pkiFile("admin.key")),
        agent: false,
        headers: {
          Accept: "application/json",
          "Impersonate-User": user,
          ...(payload === undefined ? {} : { "Content-Type": contentType }),
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () =>
          resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString("utf8") }),
        );
        res.on("error", reject);
      },
    );
    req.setTimeout(30_000, () => req.destroy(new Error(`timeout: ${method} ${apiPath}`)));
    req.on("error", reject);
    if (payload !== undefined) req.write(payload);
    req.end();
  });
}

/**
 * JSON schemas for kubeconform from the API server's /openapi/v2, the way openapi2jsonschema
 * makes them (strict: no unknown fields; int-or-string and quantities as either): one file per
 * kind named `<kind><-group-prefix>-<version>.json`, referring into `_definitions.json`.
 * Waits until the listed (custom) kinds are published.
 */
async function openAPISchemas(cp: ControlPlane, tmp: string, kinds: string[]): Promise<string> {
  type Def = Record<string, unknown> & {
    "x-kubernetes-group-version-kind"?: { group: string; version: string; kind: string }[];
  };
  const definitions = await pollUntil(
    `${kinds.join(", ")} in /openapi/v2`,
    async () => {
      const res = await cp.request("GET", "/openapi/v2");
      if (res.status !== 200) return undefined;
      const defs = (JSON.parse(res.body) as { definitions: Record<string, Def> }).definitions;
      const have = new Set(
        Object.values(defs).flatMap((d) => (d["x-kubernetes-group-version-kind"] ?? []).map((g) => g.kind)),
      );
      return kinds.every((k) => have.has(k)) ? defs : undefined;
    },
    { timeoutMs: 60_000, intervalMs: 1000 },
  );
  const fix = (node: unknown): unknown => {
    if (Array.isArray(node)) return node.map(fix);
    if (!node || typeof node !== "object") return node;
    const n = node as Record<string, unknown>;
    if (typeof n.$ref === "string")
      return { ...n, $ref: n.$ref.replace(/^#\/definitions\//, "_definitions.json#/definitions/") };
    if (n.format === "int-or-string") return { oneOf: [{ type: "string" }, { type: "integer" }] };
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(n))
      out[k] =
        k === "properties"
          ? Object.fromEntries(Object.entries(v as object).map(([pk, pv]) => [pk, fix(pv)]))
          : fix(v);
    if (
      out.properties &&
      out.additionalProperties === undefined &&
      !out["x-kubernetes-preserve-unknown-fields"]
    )
      out.additionalProperties = false;
    return out;
  };
  const dir = path.join(tmp, "schemas");
  fs.mkdirSync(dir, { recursive: true });
  const fixed: Record<string, unknown> = {};
  for (const [name, def] of Object.entries(definitions)) {
    fixed[name] =
      name === "io.k8s.apimachinery.pkg.api.resource.Quantity"
        ? { oneOf: [{ type: "string" }, { type: "number" }] }
        : fix(def);
  }
  fs.writeFileSync(path.join(dir, "_definitions.json"), JSON.stringify({ definitions: fixed }));
  for (const [name, def] of Object.entries(definitions)) {
    for (const gvk of def["x-kubernetes-group-version-kind"] ?? []) {
      const suffix = gvk.group ? `-${gvk.group.split(".")[0]}-${gvk.version}` : `-${gvk.version}`;
      fs.writeFileSync(
        path.join(dir, `${gvk.kind.toLowerCase()}${suffix}.json`),
        JSON.stringify({ $ref: `_definitions.json#/definitions/${name}` }),
      );
    }
  }
  return dir;
}

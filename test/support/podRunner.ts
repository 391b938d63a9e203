// A small stand-in for the kubelet, for the demo and end-to-end tests on a machine without a
// kubelet: every pod the scheduler binds gets run, with the pod's environment (values, Secret and
// field references resolved like a kubelet would); when the pod is deleted, it gets SIGTERM and
// the pod's grace period to drain, then SIGKILL — exactly what a scale-down does to a real worker.
// Two runtimes:
//   process     (default, fast) a `conveyor worker` process from this checkout per pod;
//   containers  the image the pod's spec names, run by podman (test/support/containers.ts) on the
//               host network with its args, env, securityContext (read-only root, user, dropped
//               capabilities) and the volumes it can map: emptyDir → tmpfs, hostPath, Secret and
//               ConfigMap files, and the ServiceAccount token a kubelet projects (so in-cluster
//               clients such as the operator authenticate as their ServiceAccount, RBAC and all).
//
// One difference from a kubelet: kwok removes a deleted pod object at once, while a kubelet keeps
// it Terminating until the container exits. The process still drains the full grace period here.
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  CoreV1Api,
  type KubeConfig,
  type V1Container,
  type V1EnvVar,
  type V1Pod,
  type V1Volume,
} from "@kubernetes/client-node";
import { freePort } from "./ports.ts";
import { runContainer, type Container } from "./containers.ts";
import { startProcess, type Started } from "./processes.ts";
import { CONVEYOR, NODE } from "./workers.ts";

export interface RunningPod {
  name: string;
  namespace: string;
  proc: Started;
  /** The container (runtime "containers"). */
  container?: Container;
  port: number;
  logFile: string;
  stopping: boolean;
  exitCode?: number | string;
}

export interface PodRunnerOptions {
  namespace: string;
  /** Pods to run, e.g. `app.kubernetes.io/name=conveyor-worker`. */
  labelSelector: string;
  /** Where process logs go (one file per pod). */
  dir: string;
  /** Environment added to every process (e.g. EXEC_LOG for tests). */
  extraEnv?: Record<string, string>;
  /** "process" (default): a `conveyor worker` process; "containers": the pod's image with podman. */
  runtime?: "process" | "containers";
  /** Containers: CONVEYOR_PORT is set to a free port (host network) unless false (e.g. the operator). */
  assignPort?: boolean;
  /** Progress lines (pod started/stopping/exited). */
  onEvent?: (line: string) => void;
  pollMs?: number;
}

export class PodRunner {
  readonly pods = new Map<string, RunningPod>();
  /** Every pod ever run, with its exit code once it exited. */
  readonly history: RunningPod[] = [];
  private readonly core: CoreV1Api;
  private readonly opts: PodRunnerOptions;
  private timer: NodeJS.Timeout | undefined;
  /** The sync under way, if any: stop() waits for it, or a pod it launches after stop() began runs on. */
  private syncing: Promise<void> | undefined;
  private stopped = false;
  private readonly secrets = new Map<string, Record<string, string>>();

  private readonly kc: KubeConfig;

  constructor(kc: KubeConfig, opts: PodRunnerOptions) {
    this.kc = kc;
    this.core = kc.makeApiClient(CoreV1Api);
    this.opts = opts;
  }

  start(): void {
    const tick = () => {
      if (this.syncing || this.stopped) return;
      this.syncing = this.sync()
        .catch((err: Error) => this.opts.onEvent?.(`pod runner: ${err.message}`))
        .finally(() => (this.syncing = undefined));
    };
    this.timer = setInterval(tick, this.opts.pollMs ?? 500);
    tick();
  }

  /** Stop watching; SIGTERM every process and wait for all (their grace periods apply). */
  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    await this.syncing;
    await Promise.all([...this.pods.values()].map((p) => this.terminate(p, 30)));
  }

  /** Processes of pods that still exist (not being terminated). */
  get running(): RunningPod[] {
    return [...this.pods.values()].filter((p) => !p.stopping);
  }

  /** Every process not yet exited, those in their grace period included. */
  get alive(): RunningPod[] {
    return [...this.pods.values()];
  }

  private async sync(): Promise<void> {
    const list = await this.core.listNamespacedPod({
      namespace: this.opts.namespace,
      labelSelector: this.opts.labelSelector,
    });
    const live = new Map<string, V1Pod>();
    for (const pod of list.items) {
      const name = pod.metadata?.name;
      if (!name) continue;
      if (pod.metadata?.deletionTimestamp) continue;
      live.set(name, pod);
      if (!this.pods.has(name) && pod.spec?.nodeName && !this.stopped) await this.launch(pod);
    }
    for (const p of this.pods.values()) {
      if (!p.stopping && !live.has(p.name)) {
        const pod = list.items.find((x) => x.metadata?.name === p.name);
        void this.terminate(p, pod?.spec?.terminationGracePeriodSeconds ?? this.graceOf(p));
      }
    }
  }

  private readonly graces = new Map<string, number>();
  private graceOf(p: RunningPod): number {
    return this.graces.get(p.name) ?? 30;
  }

  private async launch(pod: V1Pod): Promise<void> {
    const name = pod.metadata!.name!;
    const namespace = pod.metadata!.namespace ?? this.opts.namespace;
    const container = pod.spec!.containers.find((c) => c.name === "worker") ?? pod.spec!.containers[0]!;
    const env: Record<string, string> = {};
    for (const e of container.env ?? []) {
      const v = await this.resolve(e, pod);
      if (v !== undefined) env[e.name] = v;
    }
    const port = await freePort();
    const logFile = join(this.opts.dir, `${name}.log`);
    let proc: Started;
    let running: RunningPod;
    if (this.opts.runtime === "containers") {
      const c = await this.runPodContainer(pod, container, env, port, logFile);
      proc = c;
      running = { name, namespace, proc, container: c, port, logFile, stopping: false };
    } else {
      const args = container.args ?? ["worker"];
      proc = startProcess(NODE, [CONVEYOR, ...args], {
        logFile,
        env: {
          PATH: process.env.PATH ?? "",
          HOME: process.env.HOME ?? "/tmp",
          ...env,
          ...this.opts.extraEnv,
          CONVEYOR_PORT: String(port),
        },
      });
      running = { name, namespace, proc, port, logFile, stopping: false };
    }
    this.graces.set(name, pod.spec?.terminationGracePeriodSeconds ?? 30);
    this.pods.set(name, running);
    this.history.push(running);
    this.opts.onEvent?.(
      running.container
        ? `pod ${name}: container ${container.image} started`
        : `pod ${name}: worker process ${proc.child.pid} started`,
    );
    void proc.exited.then((code) => {
      running.exitCode = code;
      this.pods.delete(name);
      this.opts.onEvent?.(`pod ${name}: ${running.container ? "container" : "worker"} exited with ${code}`);
    });
  }

  private async terminate(p: RunningPod, graceSeconds: number): Promise<void> {
    if (p.stopping) return;
    p.stopping = true;
    this.opts.onEvent?.(`pod ${p.name}: deleted — SIGTERM, grace ${graceSeconds}s`);
    if (p.container) {
      // podman stop: SIGTERM to the container's PID 1 (tini), SIGKILL after the grace period
      await p.container.stop(graceSeconds);
      return;
    }
    try {
      process.kill(p.proc.child.pid!, "SIGTERM");
    } catch {
      return;
    }
    const timer = setTimeout(() => {
      try {
        process.kill(-p.proc.child.pid!, "SIGKILL");
        this.opts.onEvent?.(`pod ${p.name}: grace period over — SIGKILL`);
      } catch {
        // exited
      }
    }, graceSeconds * 1000);
    await p.proc.exited;
    clearTimeout(timer);
  }

  /** The pod's container as a podman container: what a kubelet would give it, on the host network. */
  private async runPodContainer(
    pod: V1Pod,
    container: V1Container,
    env: Record<string, string>,
    port: number,
    logFile: string,
  ): Promise<Container> {
    const name = pod.metadata!.name!;
    const namespace = pod.metadata!.namespace ?? this.opts.namespace;
    const podDir = join(this.opts.dir, "pods", name);
    mkdirSync(podDir, { recursive: true });
    const volumes: Record<string, string> = {};
    const flags: string[] = [];
    const byName = new Map((pod.spec!.volumes ?? []).map((v) => [v.name, v]));
    for (const m of container.volumeMounts ?? []) {
      const v = byName.get(m.name);
      if (!v || m.mountPath === "/tmp") continue; // runContainer gives every container a /tmp tmpfs
      const ro = m.readOnly ? ":ro" : "";
      if (v.emptyDir) flags.push("--tmpfs", `${m.mountPath}:rw,mode=1777`);
      else if (v.hostPath) volumes[v.hostPath.path] = `${m.mountPath}${ro}`;
      else {
        const files = await this.volumeFiles(v, namespace);
        if (!files) continue;
        const dir = join(podDir, m.name);
        mkdirSync(dir, { recursive: true, mode: 0o755 });
        for (const [f, data] of Object.entries(files)) writeFileSync(join(dir, f), data, { mode: 0o644 });
        volumes[dir] = `${m.mountPath}:ro`;
      }
    }
    const sa = pod.spec!.serviceAccountName;
    if (sa && pod.spec!.automountServiceAccountToken !== false) {
      const dir = join(podDir, "serviceaccount");
      mkdirSync(dir, { recursive: true, mode: 0o755 });
      const token = await this.core.createNamespacedServiceAccountToken({
        name: sa,
        namespace,
        body: { spec: { audiences: [], expirationSeconds: 3600 } },
      });
      writeFileSync(join(dir, "token"), token.status?.token ?? "", { mode: 0o644 });
      writeFileSync(join(dir, "namespace"), namespace, { mode: 0o644 });
      writeFileSync(join(dir, "ca.crt"), this.clusterCA(), { mode: 0o644 });
      volumes[dir] = "/var/run/secrets/kubernetes.io/serviceaccount:ro";
      const server = new URL(this.kc.getCurrentCluster()!.server);
      env.KUBERNETES_SERVICE_HOST = server.hostname;
      env.KUBERNETES_SERVICE_PORT = server.port || "443";
    }
    const sc = { ...pod.spec!.securityContext, ...container.securityContext };
    if (sc.runAsUser !== undefined) flags.push("--user", `${sc.runAsUser}:${sc.runAsGroup ?? sc.runAsUser}`);
    return runContainer({
      image: container.image!,
      name: `cvy-pod-${namespace}-${name}`.slice(0, 120),
      entrypoint: container.command?.[0],
      args: [...(container.command?.slice(1) ?? []), ...(container.args ?? [])],
      env: {
        ...env,
        ...this.opts.extraEnv,
        ...(this.opts.assignPort === false ? {} : { CONVEYOR_PORT: String(port) }),
      },
      volumes,
      readOnlyRoot: container.securityContext?.readOnlyRootFilesystem === true,
      flags,
      logFile,
    });
  }

  /** The files a Secret or ConfigMap volume projects (undefined for kinds not mapped here). */
  private async volumeFiles(v: V1Volume, namespace: string): Promise<Record<string, string> | undefined> {
    if (v.secret?.secretName) {
      const s = await this.core.readNamespacedSecret({ name: v.secret.secretName, namespace });
      return Object.fromEntries(
        Object.entries(s.data ?? {}).map(([k, b]) => [k, Buffer.from(b, "base64").toString("utf8")]),
      );
    }
    if (v.configMap?.name) {
      const cm = await this.core.readNamespacedConfigMap({ name: v.configMap.name, namespace });
      return { ...cm.data };
    }
    return undefined;
  }

  private clusterCA(): string {
    const cluster = this.kc.getCurrentCluster()!;
    if (cluster.caData) return Buffer.from(cluster.caData, "base64").toString("utf8");
    return "";
  }

  private async resolve(e: V1EnvVar, pod: V1Pod): Promise<string | undefined> {
    if (e.value !== undefined) return e.value;
    const from = e.valueFrom;
    if (from?.fieldRef) {
      const path = from.fieldRef.fieldPath;
      if (path === "metadata.name") return pod.metadata?.name;
      if (path === "metadata.namespace") return pod.metadata?.namespace;
      if (path === "spec.nodeName") return pod.spec?.nodeName;
      if (path === "status.podIP") return "127.0.0.1";
      return undefined;
    }
    if (from?.secretKeyRef) {
      const ns = pod.metadata?.namespace ?? this.opts.namespace;
      const key = `${ns}/${from.secretKeyRef.name}`;
      let data = this.secrets.get(key);
      if (!data) {
        try {
          const s = await this.core.readNamespacedSecret({ name: from.secretKeyRef.name!, namespace: ns });
          data = Object.fromEntries(
            Object.entries(s.data ?? {}).map(([k, v]) => [k, Buffer.from(v, "base64").toString("utf8")]),
          );
        } catch {
          data = {};
        }
        this.secrets.set(key, data);
      }
      return data[from.secretKeyRef.key];
    }
    return undefined;
  }
}

/**
 * Runs a `conveyor worker` for every WorkerPool pod in `default`, logs in `dir`; `executionLog`
 * (the recording handler's EXEC_LOG) when given.
 */
export function startPoolPodRunner(kc: KubeConfig, dir: string, executionLog?: string): PodRunner {
  const runner = new PodRunner(kc, {
    namespace: "default",
    labelSelector: "conveyor.dev/workerpool",
    dir,
    ...(executionLog ? { extraEnv: { EXEC_LOG: executionLog } } : {}),
  });
  runner.start();
  return runner;
}

// A small stand-in for the kubelet, for the demo and end-to-end tests on a machine without a
// container runtime: every worker pod the scheduler binds gets a real `conveyor worker` process
// with the pod's environment (values, Secret and field references resolved like a kubelet
// would); when the pod is deleted, the process gets SIGTERM and the pod's grace period to drain,
// then SIGKILL — exactly what a scale-down does to a real worker.
//
// One difference from a kubelet: kwok removes a deleted pod object at once, while a kubelet keeps
// it Terminating until the container exits. The process still drains the full grace period here.
import { join } from "node:path";
import { CoreV1Api, type KubeConfig, type V1EnvVar, type V1Pod } from "@kubernetes/client-node";
import { freePort } from "../../lib/ports.ts";
import { startProcess, type Started } from "./processes.ts";
import { CONVEYOR, NODE } from "./workers.ts";

export interface RunningPod {
  name: string;
  namespace: string;
  proc: Started;
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
  private syncing = false;
  private readonly secrets = new Map<string, Record<string, string>>();

  constructor(kc: KubeConfig, opts: PodRunnerOptions) {
    this.core = kc.makeApiClient(CoreV1Api);
    this.opts = opts;
  }

  start(): void {
    const tick = async () => {
      if (this.syncing) return;
      this.syncing = true;
      try {
        await this.sync();
      } catch (err) {
        this.opts.onEvent?.(`pod runner: ${(err as Error).message}`);
      } finally {
        this.syncing = false;
      }
    };
    this.timer = setInterval(() => void tick(), this.opts.pollMs ?? 500);
    void tick();
  }

  /** Stop watching; SIGTERM every process and wait for all (their grace periods apply). */
  async stop(): Promise<void> {
    clearInterval(this.timer);
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
      if (!this.pods.has(name) && pod.spec?.nodeName) await this.launch(pod);
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
    const args = container.args ?? ["worker"];
    const proc = startProcess(NODE, [CONVEYOR, ...args], {
      logFile,
      env: {
        PATH: process.env.PATH ?? "",
        HOME: process.env.HOME ?? "/tmp",
        ...env,
        ...this.opts.extraEnv,
        CONVEYOR_PORT: String(port),
      },
    });
    const running: RunningPod = { name, namespace, proc, port, logFile, stopping: false };
    this.graces.set(name, pod.spec?.terminationGracePeriodSeconds ?? 30);
    this.pods.set(name, running);
    this.history.push(running);
    this.opts.onEvent?.(`pod ${name}: worker process ${proc.child.pid} started`);
    void proc.exited.then((code) => {
      running.exitCode = code;
      this.pods.delete(name);
      this.opts.onEvent?.(`pod ${name}: worker exited with ${code}`);
    });
  }

  private async terminate(p: RunningPod, graceSeconds: number): Promise<void> {
    if (p.stopping) return;
    p.stopping = true;
    this.opts.onEvent?.(`pod ${p.name}: deleted — SIGTERM, grace ${graceSeconds}s`);
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

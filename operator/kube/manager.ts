// The manager runs what one operator process is made of, in controller-runtime's order: its
// own /metrics /healthz /readyz server, then the servers added to it (e.g. the external metrics
// API), then leader election, then the controllers (every replica watches and observes; only
// the leader writes, through the client's write gate). Stop runs the other way round, and a
// leader releases its Lease first so a standby takes over at once.
import * as http from "node:http";
import type { Logger } from "pino";
import type { OperatorMetrics } from "../metrics.ts";
import type { KubeClient } from "./client.ts";
import { LeaderElector, type LeaderElectionOptions } from "./leader.ts";

/** Something the manager starts and stops. */
export interface Runnable {
  start(): Promise<unknown>;
  stop(): Promise<void>;
}

/** A controller also hears when this replica gains leadership (to re-check every key). */
export interface ManagedController extends Runnable {
  onStartedLeading?(): void;
}

export interface ManagerOptions {
  /** The client without a write gate; controllers get `client` (gated on leadership). */
  baseClient: KubeClient;
  log: Logger;
  metrics: OperatorMetrics;
  metricsAddress: string;
  metricsPort: number;
  /** Absent: this replica always leads. */
  leaderElection?: Omit<LeaderElectionOptions, "log" | "onStartedLeading" | "onStoppedLeading">;
}

/** A runnable that could not start; `what` names it for the operator's fatal log line. */
export class StartError extends Error {
  readonly what: string;

  constructor(what: string, cause: unknown) {
    super(`${what}: ${(cause as Error)?.message ?? String(cause)}`, { cause });
    this.what = what;
  }
}

export class Manager {
  /** Writes refused unless this replica leads. */
  readonly client: KubeClient;
  private readonly opts: ManagerOptions;
  private readonly elector: LeaderElector | undefined;
  private readonly servers: { what: string; runnable: Runnable }[] = [];
  private readonly controllers: ManagedController[] = [];
  private httpServer: http.Server | undefined;
  private synced = false;

  constructor(opts: ManagerOptions) {
    this.opts = opts;
    const { metrics, log } = opts;
    if (opts.leaderElection) {
      // A lease request may take no longer than the renew deadline (client-go bounds each
      // attempt the same way): a hung renew must not outlive the leadership it renews.
      const renewDeadlineMs = opts.leaderElection.renewDeadlineMs ?? 10_000;
      this.elector = new LeaderElector(
        opts.baseClient.with({ canWrite: undefined, timeoutMs: renewDeadlineMs }),
        {
          ...opts.leaderElection,
          log,
          onStartedLeading: () => {
            metrics.isLeader.set(1);
            metrics.leaderTransitions.inc();
            for (const c of this.controllers) c.onStartedLeading?.();
          },
          onStoppedLeading: () => metrics.isLeader.set(0),
        },
      );
    }
    this.client = opts.baseClient.with({
      canWrite: () => this.isLeader(),
      writeSignal: () => this.elector?.leadershipSignal,
    });
  }

  isLeader(): boolean {
    return this.elector ? this.elector.isLeader() : true;
  }

  /** True once every controller's caches have synced (/readyz). */
  get ready(): boolean {
    return this.synced;
  }

  /** The port /metrics listens on once started (the one asked for, or the one given for 0). */
  get metricsPort(): number | undefined {
    const a = this.httpServer?.address();
    return typeof a === "object" && a ? a.port : undefined;
  }

  /** A server started before leader election (a failure to listen stops the start). */
  addServer(what: string, runnable: Runnable): void {
    this.servers.push({ what, runnable });
  }

  addController(controller: ManagedController): void {
    this.controllers.push(controller);
  }

  /**
   * Starts the metrics server, the added servers and leader election (throws StartError naming
   * what failed, with everything already started stopped again), then the controllers: the
   * returned promise resolves once those are started; `ready` turns true when they synced.
   */
  async start(): Promise<void> {
    try {
      this.httpServer = await this.serveMetrics();
    } catch (err) {
      throw new StartError(`cannot listen on --metrics-port ${this.opts.metricsPort}`, err);
    }
    for (const [i, { what, runnable }] of this.servers.entries()) {
      try {
        await runnable.start();
      } catch (err) {
        for (const s of this.servers.slice(0, i)) await s.runnable.stop();
        await this.closeMetrics();
        throw new StartError(what, err);
      }
    }
    if (this.elector) this.elector.start();
    else this.opts.metrics.isLeader.set(1);
    void Promise.all(this.controllers.map((c) => c.start())).then(
      () => (this.synced = true),
      (err: unknown) => this.opts.log.error({ err: String(err) }, "a controller failed to start"),
    );
  }

  async stop(): Promise<void> {
    await this.elector?.stop();
    for (const c of this.controllers) await c.stop();
    for (const s of this.servers) await s.runnable.stop();
    await this.closeMetrics();
  }

  private async closeMetrics(): Promise<void> {
    const server = this.httpServer;
    if (!server) return;
    this.httpServer = undefined;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  private serveMetrics(): Promise<http.Server> {
    const { metrics, log, metricsAddress, metricsPort } = this.opts;
    const server = http.createServer((req, res) => {
      const path = (req.url ?? "/").split("?")[0];
      if (path === "/metrics") {
        metrics.registry
          .metrics()
          .then((text) => {
            res.writeHead(200, { "Content-Type": metrics.registry.contentType });
            res.end(text);
          })
          .catch((err: unknown) => {
            res.writeHead(500);
            res.end(String(err));
          });
        return;
      }
      if (path === "/healthz" || path === "/livez") {
        res.writeHead(200, { "Content-Type": "text/plain" });
        return void res.end("ok");
      }
      if (path === "/readyz") {
        const ok = this.synced;
        res.writeHead(ok ? 200 : 503, { "Content-Type": "text/plain" });
        return void res.end(ok ? "ok" : "caches not synced");
      }
      res.writeHead(404);
      res.end();
    });
    return new Promise((resolve, reject) => {
      server.once("error", reject);
      server.listen(metricsPort, metricsAddress, () => {
        server.off("error", reject);
        server.on("error", (err) => log.error({ err: err.message }, "metrics server error"));
        const a = server.address();
        log.info(
          { address: metricsAddress, port: typeof a === "object" && a ? a.port : metricsPort },
          "serving /metrics /healthz /readyz",
        );
        resolve(server);
      });
    });
  }
}

// Prometheus metrics of one `conveyor api` process (its own registry, served at GET /metrics):
// every error the API handles is logged once (a failed request as an error, a retried read as a
// warning) and counted here.
import type { Logger } from "pino";
import { Counter, Gauge, Registry, collectDefaultMetrics } from "prom-client";

/**
 * Where an error was handled: the event hub's read loop, a queue directory rescan, a request
 * answered 500, a part of a reply served without (the rest answered: one bad key must not
 * take a page down), or a sample of the resources' utilization.
 */
export type ErrorSite =
  | "event_hub"
  | "queue_directory"
  | "request"
  | "partial_read"
  | "resource_history"
  | "rollout_history"
  | "layout_report"
  | "audit_drain";

export class ApiMetrics {
  readonly registry = new Registry();
  private readonly errors = new Counter({
    name: "conveyor_api_errors_total",
    help: "Errors the job API handled (logged once each), by where they happened",
    labelNames: ["site"] as const,
    registers: [this.registry],
  });
  /** Open /events streams (the event hub reads only while there is one). */
  readonly eventStreams = new Gauge({
    name: "conveyor_api_event_streams",
    help: "Server-Sent Events streams open on this process",
    registers: [this.registry],
  });
  private readonly log: Logger | undefined;

  constructor(log?: Logger) {
    this.log = log;
    collectDefaultMetrics({ register: this.registry });
  }

  error(site: ErrorSite, err: unknown, detail: Record<string, unknown> = {}): void {
    this.errors.inc({ site });
    this.log?.[site === "request" ? "error" : "warn"](
      { site, err: err instanceof Error ? err.message : String(err), ...detail },
      "job API error",
    );
  }
}

// The real programs the observability tests run: an OpenTelemetry Collector that forwards the
// spans it receives over OTLP/HTTP to a receiver in the test (OTLP JSON), and Prometheus +
// promtool. Built by test/observability/install.sh (`make test` runs it).
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { freePort } from "../support/ports.ts";
import { startProcess, stopProcess, waitFor, type Started } from "../support/processes.ts";

const INSTALL = new URL("./install.sh", import.meta.url).pathname;

/** The directory with prometheus, promtool and otelcol-conveyor; a clear error when not built. */
export function observabilityAssets(): string {
  const dir = execFileSync("bash", [INSTALL, "--print-dir"], { encoding: "utf8" }).trim();
  for (const b of ["prometheus", "promtool", "otelcol-conveyor"]) {
    if (!existsSync(join(dir, b)))
      throw new Error(`${b} not found in ${dir}: run 'bash test/observability/install.sh' (make test does)`);
  }
  return dir;
}

// ---- OpenTelemetry Collector -------------------------------------------------------------

export interface OtlpAttribute {
  key: string;
  value: { stringValue?: string; intValue?: string; boolValue?: boolean; doubleValue?: number };
}
export interface ExportedSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  attributes?: OtlpAttribute[];
  events?: { name: string; attributes?: OtlpAttribute[] }[];
  links?: { traceId: string; spanId: string; attributes?: OtlpAttribute[] }[];
  status?: { code?: number; message?: string };
  /** service.name of the process that sent it (from the resource). */
  service: string;
}

export const SPAN_KIND = { INTERNAL: 1, SERVER: 2, CLIENT: 3, PRODUCER: 4, CONSUMER: 5 } as const;

/** An attribute's value as a string (OTLP JSON encodes 64-bit ints as strings). */
export function attr(
  s: { attributes?: OtlpAttribute[] } | undefined,
  key: string,
): string | boolean | number | undefined {
  const a = s?.attributes?.find((x) => x.key === key);
  if (!a) return undefined;
  const v = a.value;
  return v.stringValue ?? v.intValue ?? v.boolValue ?? v.doubleValue;
}

/**
 * A real collector between the Conveyor processes and the test: it receives OTLP/HTTP
 * (protobuf, what the SDK sends) and forwards through its batch processor and OTLP/HTTP
 * exporter, JSON-encoded, to a receiver in this process, which keeps every span.
 */
export class Collector {
  readonly endpoint: string;
  private readonly received: ExportedSpan[] = [];
  private readonly proc: Started;
  private readonly sink: Server;

  private constructor(endpoint: string, proc: Started, sink: Server, received: ExportedSpan[]) {
    this.endpoint = endpoint;
    this.proc = proc;
    this.sink = sink;
    this.received = received;
  }

  static async start(dir: string): Promise<Collector> {
    const bin = join(observabilityAssets(), "otelcol-conveyor");
    const received: ExportedSpan[] = [];
    const sink = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        try {
          received.push(...spansOf(JSON.parse(Buffer.concat(chunks).toString("utf8")) as ExportRequest));
          res.setHeader("content-type", "application/json");
          res.end("{}");
        } catch (err) {
          res.statusCode = 400;
          res.end(String(err));
        }
      });
    });
    await new Promise<void>((resolve) => sink.listen(0, "127.0.0.1", resolve));
    const sinkPort = (sink.address() as AddressInfo).port;
    const port = await freePort();
    const config = join(dir, "otelcol.yaml");
    writeFileSync(
      config,
      `receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:${port}
processors:
  batch:
    timeout: 100ms
exporters:
  otlphttp:
    traces_endpoint: http://127.0.0.1:${sinkPort}/v1/traces
    encoding: json
    compression: none
service:
  telemetry:
    logs:
      level: warn
    metrics:
      level: none
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [otlphttp]
`,
    );
    const logFile = join(dir, "otelcol.log");
    const proc = startProcess(bin, ["--config", config], { logFile });
    const endpoint = `http://127.0.0.1:${port}`;
    await waitFor(
      "the collector's OTLP/HTTP receiver",
      async () => {
        if (proc.child.exitCode !== null) throw new Error(`otelcol exited: ${readFileSync(logFile, "utf8")}`);
        // An empty export request is a valid OTLP call: 200 once the receiver listens.
        const res = await fetch(`${endpoint}/v1/traces`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: "{}",
        });
        return res.ok;
      },
      60_000,
      100,
    );
    return new Collector(endpoint, proc, sink, received);
  }

  /** Every span forwarded so far. */
  spans(): ExportedSpan[] {
    return [...this.received];
  }

  async stop(): Promise<void> {
    await stopProcess(this.proc);
    this.sink.close();
  }
}

interface ExportRequest {
  resourceSpans?: {
    resource?: { attributes?: OtlpAttribute[] };
    scopeSpans?: { spans?: Omit<ExportedSpan, "service">[] }[];
  }[];
}

function spansOf(req: ExportRequest): ExportedSpan[] {
  const out: ExportedSpan[] = [];
  for (const rs of req.resourceSpans ?? []) {
    const service = String(attr(rs.resource, "service.name") ?? "");
    for (const ss of rs.scopeSpans ?? []) for (const s of ss.spans ?? []) out.push({ ...s, service });
  }
  return out;
}

/** The OTEL_* variables that make a Conveyor process export to `collector`, quickly. */
export function otelEnv(collector: Collector, service: string): Record<string, string> {
  return {
    OTEL_EXPORTER_OTLP_ENDPOINT: collector.endpoint,
    OTEL_SERVICE_NAME: service,
    OTEL_BSP_SCHEDULE_DELAY: "100",
  };
}

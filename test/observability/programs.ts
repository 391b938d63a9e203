// The real programs the observability tests run: an OpenTelemetry Collector that writes the
// spans it receives over OTLP/HTTP to a file (OTLP JSON, one export request a line), and
// Prometheus + promtool. Built by test/observability/install.sh (`make test` runs it).
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
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

export class Collector {
  readonly endpoint: string;
  private readonly file: string;
  private readonly proc: Started;

  private constructor(endpoint: string, file: string, proc: Started) {
    this.endpoint = endpoint;
    this.file = file;
    this.proc = proc;
  }

  static async start(dir: string): Promise<Collector> {
    const bin = join(observabilityAssets(), "otelcol-conveyor");
    const port = await freePort();
    const file = join(dir, "spans.jsonl");
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
  file:
    path: ${file}
    flush_interval: 100ms
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
      exporters: [file]
`,
    );
    const proc = startProcess(bin, ["--config", config], { logFile: join(dir, "otelcol.log") });
    const endpoint = `http://127.0.0.1:${port}`;
    await waitFor(
      "the collector's OTLP/HTTP receiver",
      async () => {
        if (proc.child.exitCode !== null)
          throw new Error(`otelcol exited: ${readFileSync(join(dir, "otelcol.log"), "utf8")}`);
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
    return new Collector(endpoint, file, proc);
  }

  /** Every span written so far. */
  spans(): ExportedSpan[] {
    if (!existsSync(this.file)) return [];
    const out: ExportedSpan[] = [];
    for (const line of readFileSync(this.file, "utf8").split("\n")) {
      if (!line.trim()) continue;
      const req = JSON.parse(line) as {
        resourceSpans?: {
          resource?: { attributes?: OtlpAttribute[] };
          scopeSpans?: { spans?: Omit<ExportedSpan, "service">[] }[];
        }[];
      };
      for (const rs of req.resourceSpans ?? []) {
        const service = String(attr(rs.resource, "service.name") ?? "");
        for (const ss of rs.scopeSpans ?? []) for (const s of ss.spans ?? []) out.push({ ...s, service });
      }
    }
    return out;
  }

  async stop(): Promise<void> {
    await stopProcess(this.proc);
  }
}

/** The OTEL_* variables that make a Conveyor process export to `collector`, quickly. */
export function otelEnv(collector: Collector, service: string): Record<string, string> {
  return {
    OTEL_EXPORTER_OTLP_ENDPOINT: collector.endpoint,
    OTEL_SERVICE_NAME: service,
    OTEL_BSP_SCHEDULE_DELAY: "100",
  };
}

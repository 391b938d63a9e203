// An OTLP/HTTP receiver that accepts and discards: what `bench:throughput --otlp` exports the
// worker's spans to, so the bench measures the worker's cost of tracing and not a collector's.
// It answers an empty ExportTraceServiceResponse (zero protobuf bytes, or `{}` for http/json)
// and counts requests and bytes, so a run whose export silently failed is visible.
import { createServer, type Server } from "node:http";

export interface OtlpSink {
  /** For OTEL_EXPORTER_OTLP_ENDPOINT (the exporter appends /v1/traces). */
  endpoint: string;
  requests: number;
  bytes: number;
  /** Protocols seen, by Content-Type. */
  contentTypes: Set<string>;
  stop(): Promise<void>;
}

export async function startOtlpSink(): Promise<OtlpSink> {
  const sink = {
    endpoint: "",
    requests: 0,
    bytes: 0,
    contentTypes: new Set<string>(),
    stop: async () => {},
  };
  const server: Server = createServer((req, res) => {
    const type = String(req.headers["content-type"] ?? "");
    req.on("data", (chunk: Buffer) => (sink.bytes += chunk.length));
    req.on("end", () => {
      sink.requests++;
      sink.contentTypes.add(type);
      const json = type.includes("json");
      res.writeHead(200, { "content-type": json ? "application/json" : "application/x-protobuf" });
      res.end(json ? "{}" : undefined);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  sink.endpoint = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  sink.stop = () => new Promise<void>((resolve) => server.close(() => resolve()));
  return sink;
}

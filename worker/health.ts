// /healthz (the process and its lease heartbeat are alive), /readyz (taking new jobs),
// /metrics (Prometheus). Readiness turns false the moment a drain starts.
import { createServer, type Server } from "node:http";
import type { Registry } from "prom-client";

export interface HealthState {
  live(): { ok: boolean; reason: string };
  ready(): { ok: boolean; reason: string };
}

export async function startHealthServer(
  port: number,
  state: HealthState,
  registry: Registry,
  host = "0.0.0.0",
): Promise<Server> {
  const server = createServer((req, res) => {
    const path = (req.url ?? "/").split("?")[0];
    const reply = (status: number, body: string, type = "text/plain; charset=utf-8") => {
      res.writeHead(status, { "content-type": type });
      res.end(body);
    };
    if (path === "/healthz" || path === "/readyz") {
      const s = path === "/healthz" ? state.live() : state.ready();
      return reply(s.ok ? 200 : 503, `${s.reason}\n`);
    }
    if (path === "/metrics") {
      registry.metrics().then(
        (text) => reply(200, text, registry.contentType),
        (err: Error) => reply(500, err.message),
      );
      return;
    }
    reply(404, "not found\n");
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, resolve);
  });
  return server;
}

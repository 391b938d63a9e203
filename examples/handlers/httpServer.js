// An `http` handler's sidecar (examples/workerpool-http.yaml), here in Node — any language
// works. The worker POSTs each job's data as JSON to http://127.0.0.1:<port><path> with the
// job's identity in headers (conveyor-job-id, conveyor-queue, conveyor-attempt,
// conveyor-execution-id); the JSON response body is the result. 2xx = done; 4xx = bad input,
// dead-lettered; 5xx, 408 and 429 = retried. Listen on loopback only: the pod's network
// namespace is shared with the worker, and nothing else should reach the handler.
import { createServer } from "node:http";

const port = Number(process.env.PORT ?? 8080);

let active = 0;
let stopping = false;

const server = createServer((req, res) => {
  active++;
  res.on("close", () => {
    active--;
    if (stopping) exitWhenIdle();
  });
  if (req.method === "GET" && req.url === "/healthz") {
    res.writeHead(200, { "content-type": "text/plain" }).end("ok");
    return;
  }
  if (req.method !== "POST" || req.url !== "/run") {
    res.writeHead(404).end();
    return;
  }
  let body = "";
  req.setEncoding("utf8");
  req.on("data", (c) => (body += c));
  req.on("end", () => {
    let data;
    try {
      data = JSON.parse(body);
    } catch {
      res
        .writeHead(400, { "content-type": "application/json" })
        .end(JSON.stringify({ error: "body is not JSON" }));
      return;
    }
    const text = typeof data?.text === "string" ? data.text : "";
    const result = { upper: text.toUpperCase(), job: req.headers["conveyor-job-id"] ?? null };
    res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(result));
  });
});

server.listen(port, "127.0.0.1", () =>
  process.stdout.write(`handler sidecar listening on 127.0.0.1:${port}\n`),
);
// The pod's SIGTERM reaches this sidecar and the worker at the same time. The worker stops
// claiming but lets its running jobs finish — and they are requests to us. So keep serving and
// exit once no request has been running for a moment (the worker sends no new ones).
let idleTimer;
function exitWhenIdle() {
  clearTimeout(idleTimer);
  if (active > 0) return;
  idleTimer = setTimeout(() => {
    if (active === 0) server.close(() => process.exit(0));
  }, 2000);
}
process.on("SIGTERM", () => {
  stopping = true;
  exitWhenIdle();
});

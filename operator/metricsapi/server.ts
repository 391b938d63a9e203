// The external metrics API (external.metrics.k8s.io/v1beta1) the pools' HPAs read through the
// API server's aggregation layer:
//   GET /apis/external.metrics.k8s.io/v1beta1                                  discovery
//   GET /apis/external.metrics.k8s.io/v1beta1/namespaces/<ns>/conveyor-backlog?labelSelector=workerpool=<name>
// The value is the pool's whole backlog (ready + due-delayed + in-flight); the HPA's
// AverageValue target divides it by the replica count. A stale or failed poll answers 503 so
// the HPA keeps its replica count instead of scaling on a wrong number.
//
// Authentication: only clients presenting a certificate the requestheader client CA signed
// (--metrics-api-client-ca, or the kube-system/extension-apiserver-authentication ConfigMap) and
// whose common name is an allowed name (requestheader-allowed-names; none listed = any) — the
// API server's front proxy — are served. With no CA known every client is refused, unless
// --metrics-api-client-ca=none said to accept any. Authorization of the end user is the API
// server's (RBAC on external.metrics.k8s.io).
import * as https from "node:https";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { TLSSocket } from "node:tls";
import type { Logger } from "pino";
import { rfc3339 } from "../../lib/time.ts";
import type { OperatorMetrics } from "../metrics.ts";
import { METRIC_NAME, METRIC_POOL_LABEL } from "../controllers/names.ts";

export const EXTERNAL_METRICS_GROUP = "external.metrics.k8s.io";
export const EXTERNAL_METRICS_VERSION = "v1beta1";
const PREFIX = `/apis/${EXTERNAL_METRICS_GROUP}/${EXTERNAL_METRICS_VERSION}`;

export type MetricLookup =
  | { kind: "ok"; value: number; at: number }
  | { kind: "not-found"; message: string }
  | { kind: "unavailable"; message: string };

export interface MetricsApiOptions {
  host: string;
  port: number;
  cert: string;
  key: string;
  /** Who may call: the front proxy's CA and allowed names, any client, or nobody (no CA known). */
  clients: ClientPolicy;
  lookup: (namespace: string, pool: string) => MetricLookup;
  log?: Logger;
  metrics?: OperatorMetrics;
}

export type ClientPolicy =
  | { kind: "front-proxy"; ca: string; allowedNames: string[] }
  | { kind: "any" }
  | { kind: "refuse"; why: string };

/** Why a client is refused under `policy` (undefined: served); `cn` is its certificate's common name. */
export function clientRefusal(
  policy: ClientPolicy,
  authorized: boolean,
  cn: string | undefined,
): string | undefined {
  if (policy.kind === "any") return undefined;
  if (policy.kind === "refuse") return policy.why;
  if (!authorized) return "a client certificate signed by the requestheader CA is required";
  if (policy.allowedNames.length > 0 && !policy.allowedNames.includes(cn ?? ""))
    return `client certificate name ${JSON.stringify(cn ?? "")} is not among the requestheader allowed names`;
  return undefined;
}

/** A %-escaped path segment, or undefined when an escape is malformed (decodeURIComponent throws). */
function decodePathSegment(segment: string): string | undefined {
  try {
    return decodeURIComponent(segment);
  } catch {
    return undefined;
  }
}

/** Parses the equality parts of a label selector: "a=b,c==d,e in (f)". */
export function parseSelector(sel: string): Record<string, string> | undefined {
  const out: Record<string, string> = {};
  if (!sel.trim()) return out;
  for (const part of sel.split(/,(?![^(]*\))/)) {
    const p = part.trim();
    let m = /^([A-Za-z0-9./_-]+)\s*==?\s*([A-Za-z0-9._-]*)$/.exec(p);
    if (m) {
      out[m[1]!] = m[2]!;
      continue;
    }
    m = /^([A-Za-z0-9./_-]+)\s+in\s+\(\s*([A-Za-z0-9._-]+)\s*\)$/.exec(p);
    if (m) {
      out[m[1]!] = m[2]!;
      continue;
    }
    return undefined;
  }
  return out;
}

function send(res: ServerResponse, code: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(code, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(text) });
  res.end(text);
}

function status(code: number, reason: string, message: string) {
  return { kind: "Status", apiVersion: "v1", metadata: {}, status: "Failure", message, reason, code };
}

export const DISCOVERY = {
  kind: "APIResourceList",
  apiVersion: "v1",
  groupVersion: `${EXTERNAL_METRICS_GROUP}/${EXTERNAL_METRICS_VERSION}`,
  resources: [
    {
      name: METRIC_NAME,
      singularName: "",
      namespaced: true,
      kind: "ExternalMetricValueList",
      verbs: ["get"],
    },
  ],
};

/** The discovery and OpenAPI documents the aggregation layer reads, by path. */
const DOCUMENTS: Record<string, unknown> = {
  "/openapi/v2": {
    swagger: "2.0",
    info: { title: "conveyor external metrics", version: EXTERNAL_METRICS_VERSION },
    paths: {},
  },
  "/openapi/v3": { paths: {} },
  "/apis": {
    kind: "APIGroupList",
    apiVersion: "v1",
    groups: [
      {
        name: EXTERNAL_METRICS_GROUP,
        versions: [
          {
            groupVersion: `${EXTERNAL_METRICS_GROUP}/${EXTERNAL_METRICS_VERSION}`,
            version: EXTERNAL_METRICS_VERSION,
          },
        ],
        preferredVersion: {
          groupVersion: `${EXTERNAL_METRICS_GROUP}/${EXTERNAL_METRICS_VERSION}`,
          version: EXTERNAL_METRICS_VERSION,
        },
      },
    ],
  },
  [PREFIX]: DISCOVERY,
};

export function handleMetricsRequest(
  req: IncomingMessage,
  res: ServerResponse,
  o: Pick<MetricsApiOptions, "lookup" | "metrics" | "clients">,
): void {
  const url = new URL(req.url ?? "/", "https://x");
  const path = url.pathname.replace(/\/+$/, "");
  const count = (result: string) => o.metrics?.metricRequests.inc({ result });
  const socket = req.socket as TLSSocket;
  const cn = o.clients.kind === "front-proxy" ? socket.getPeerCertificate().subject?.CN : undefined;
  const refused = clientRefusal(o.clients, socket.authorized, Array.isArray(cn) ? cn[0] : cn);
  if (refused) {
    count("unauthorized");
    return send(res, 401, status(401, "Unauthorized", refused));
  }
  if (req.method !== "GET")
    return send(res, 405, status(405, "MethodNotAllowed", `${req.method} is not supported`));
  if (path === "/healthz" || path === "/readyz" || path === "/livez") {
    res.writeHead(200, { "Content-Type": "text/plain" });
    return void res.end("ok");
  }
  if (Object.hasOwn(DOCUMENTS, path)) return send(res, 200, DOCUMENTS[path]);
  const m = new RegExp(`^${PREFIX}/namespaces/([^/]+)/([^/]+)$`).exec(path);
  if (!m) return send(res, 404, status(404, "NotFound", `no such path ${path}`));
  serveMetric(res, path, m[1]!, m[2]!, url.searchParams.get("labelSelector") ?? "", o.lookup, count);
}

/** GET <PREFIX>/namespaces/<namespace>/<metric>?labelSelector=workerpool=<name>: the pool's metric value. */
function serveMetric(
  res: ServerResponse,
  path: string,
  rawNamespace: string,
  rawMetric: string,
  labelSelector: string,
  lookup: MetricsApiOptions["lookup"],
  count: (result: string) => void,
): void {
  const namespace = decodePathSegment(rawNamespace);
  const metric = decodePathSegment(rawMetric)?.toLowerCase();
  if (namespace === undefined || metric === undefined) {
    count("bad-path");
    const field = namespace === undefined ? "namespace" : "metric name";
    return send(res, 400, status(400, "BadRequest", `malformed %-escape in the ${field} of ${path}`));
  }
  if (metric !== METRIC_NAME) {
    count("unknown-metric");
    return send(
      res,
      404,
      status(
        404,
        "NotFound",
        `unknown external metric ${JSON.stringify(metric)}: this server serves ${METRIC_NAME}`,
      ),
    );
  }
  const selector = parseSelector(labelSelector);
  const pool = selector?.[METRIC_POOL_LABEL];
  if (!pool) {
    count("bad-selector");
    return send(
      res,
      400,
      status(400, "BadRequest", `${METRIC_NAME} needs labelSelector ${METRIC_POOL_LABEL}=<WorkerPool name>`),
    );
  }
  const r = lookup(namespace, pool);
  if (r.kind === "not-found") {
    count("not-found");
    return send(res, 404, status(404, "NotFound", r.message));
  }
  if (r.kind === "unavailable") {
    count("unavailable");
    return send(res, 503, status(503, "ServiceUnavailable", r.message));
  }
  count("ok");
  send(res, 200, {
    kind: "ExternalMetricValueList",
    apiVersion: `${EXTERNAL_METRICS_GROUP}/${EXTERNAL_METRICS_VERSION}`,
    metadata: {},
    items: [
      {
        metricName: METRIC_NAME,
        metricLabels: { [METRIC_POOL_LABEL]: pool },
        timestamp: rfc3339(r.at),
        value: String(Math.max(0, Math.round(r.value))),
      },
    ],
  });
}

export class MetricsApiServer {
  private server: https.Server | undefined;
  private readonly options: MetricsApiOptions;

  constructor(o: MetricsApiOptions) {
    this.options = o;
  }

  async start(): Promise<{ address: string; port: number }> {
    const server = https.createServer(
      {
        cert: this.options.cert,
        key: this.options.key,
        ...this.clientTls(),
        ...(this.options.clients.kind === "front-proxy"
          ? { requestCert: true, rejectUnauthorized: false }
          : {}),
      },
      (req, res) => {
        try {
          handleMetricsRequest(req, res, this.options);
        } catch (err) {
          this.options.log?.error({ err: String(err) }, "external metrics request failed");
          if (!res.headersSent) send(res, 500, status(500, "InternalError", "internal error"));
        }
      },
    );
    server.on("tlsClientError", (err) =>
      this.options.log?.debug({ err: err.message }, "external metrics: TLS client error"),
    );
    this.server = server;
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(this.options.port, this.options.host, () => {
        server.off("error", reject);
        server.on("error", (err) =>
          this.options.log?.error({ err: err.message }, "external metrics API server error"),
        );
        resolve();
      });
    });
    const addr = server.address();
    const port = typeof addr === "object" && addr ? addr.port : this.options.port;
    this.options.log?.info({ host: this.options.host, port }, "external metrics API listening");
    return { address: this.options.host, port };
  }

  /** Serve `pair` to new connections (a rotated certificate); open connections keep theirs. */
  setCertificate(pair: { cert: string; key: string }): void {
    this.options.cert = pair.cert;
    this.options.key = pair.key;
    this.server?.setSecureContext({
      cert: pair.cert,
      key: pair.key,
      ...this.clientTls(),
    });
  }

  private clientTls(): { ca?: string } {
    const c = this.options.clients;
    return c.kind === "front-proxy" ? { ca: c.ca } : {};
  }

  async stop(): Promise<void> {
    const s = this.server;
    if (!s) return;
    this.server = undefined;
    s.closeAllConnections();
    await new Promise<void>((resolve) => s.close(() => resolve()));
  }
}

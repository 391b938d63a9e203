// The handler callback: a loopback HTTP endpoint through which an `http` or `command` handler
// (any language) reports progress, writes job log lines and asks whether it should stop. Each
// execution gets its own random token (header / environment), valid only while the worker runs
// that execution; the writes go through the same fenced scripts as a module handler's ctx, so a
// handler whose lease moved on is refused. Contract: docs/protocol.md, "Handler callback".
import { randomBytes } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

/** What one execution lets its handler do through the callback. */
export interface ExecutionReporter {
  signal: AbortSignal;
  /** false when the lease was lost (the script refused the write). */
  progress(fraction: number, message: string): Promise<boolean>;
  log(message: string): Promise<boolean>;
  /** Actual usage so far per resource and unit (`POST /usage`); false: the job holds no such resource. */
  usage?(used: Record<string, Record<string, number>>): Promise<boolean>;
  /** A flow job's parent's result, inline or fetched by reference (`GET /parents/<key>`). */
  parentResult?(key: string): Promise<unknown>;
  /** The provider rate-limited the job's key (`POST /rate-limited`): sidelined when the handler fails. */
  rateLimited?(mark: { retryAfterMs: number; resource?: string }): void;
}

/** Where a handler reaches the callback for one execution. */
export interface CallbackAddress {
  url: string;
  token: string;
}

const MAX_BODY_BYTES = 64 * 1024;

export class HandlerCallbacks {
  private readonly server: Server;
  private readonly executions = new Map<string, ExecutionReporter>();
  readonly url: string;

  private constructor(server: Server, url: string) {
    this.server = server;
    this.url = url;
  }

  /** Listen on a free loopback port (handlers run in the same pod: never reachable from outside). */
  static async start(host = "127.0.0.1"): Promise<HandlerCallbacks> {
    let callbacks: HandlerCallbacks | undefined;
    const server = createServer((req, res) => void callbacks!.handle(req, res));
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(0, host, () => resolve());
    });
    server.unref();
    const { port } = server.address() as AddressInfo;
    callbacks = new HandlerCallbacks(server, `http://${host}:${port}`);
    return callbacks;
  }

  /** Register an execution; the returned close() ends its token (also done when its signal aborts). */
  open(reporter: ExecutionReporter): CallbackAddress & { close(): void } {
    const token = randomBytes(24).toString("base64url");
    this.executions.set(token, reporter);
    const close = () => {
      this.executions.delete(token);
      reporter.signal.removeEventListener("abort", close);
    };
    reporter.signal.addEventListener("abort", close, { once: true });
    return { url: this.url, token, close };
  }

  async close(): Promise<void> {
    this.executions.clear();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    try {
      const auth = req.headers.authorization ?? "";
      const token = auth.startsWith("Bearer ") ? auth.slice(7).trim() : "";
      const execution = token ? this.executions.get(token) : undefined;
      if (!execution) {
        req.resume();
        return reply(res, 410, {
          error: "unknown or finished execution: its callback token is no longer valid",
        });
      }
      const path = (req.url ?? "").split("?")[0];
      if (req.method === "GET" && path === "/status") {
        req.resume();
        return reply(res, 200, { cancelled: execution.signal.aborted });
      }
      if (req.method === "GET" && path?.startsWith("/parents/")) {
        req.resume();
        return await this.parentResult(res, execution, path.slice("/parents/".length));
      }
      if (req.method !== "POST" || !["/progress", "/log", "/usage", "/rate-limited"].includes(path ?? ""))
        return reply(res, 404, {
          error:
            "use POST /progress, POST /log, POST /usage, POST /rate-limited, GET /status or GET /parents/<key>",
        });
      const body = await readJson(req);
      if (typeof body === "string") return reply(res, 400, { error: body });
      let ok: boolean;
      if (path === "/progress") {
        const { fraction, message = "" } = body as { fraction?: unknown; message?: unknown };
        if (typeof fraction !== "number" || !(fraction >= 0 && fraction <= 1))
          return reply(res, 400, { error: "fraction: a number between 0 and 1 is required" });
        if (typeof message !== "string") return reply(res, 400, { error: "message: must be a string" });
        ok = await execution.progress(fraction, message);
      } else if (path === "/usage") {
        const problem = usageProblem(body);
        if (problem) return reply(res, 400, { error: problem });
        if (!execution.usage || !(await execution.usage(body as Record<string, Record<string, number>>)))
          return reply(res, 400, { error: "usage: names a resource this job was not granted" });
        ok = true;
      } else if (path === "/rate-limited") {
        const { retryAfterMs, resource } = body as { retryAfterMs?: unknown; resource?: unknown };
        if (
          retryAfterMs !== undefined &&
          !(typeof retryAfterMs === "number" && retryAfterMs >= 0 && Number.isFinite(retryAfterMs))
        )
          return reply(res, 400, { error: "retryAfterMs: a number ≥ 0 (ms) is required when given" });
        if (resource !== undefined && typeof resource !== "string")
          return reply(res, 400, { error: "resource: must be a string" });
        execution.rateLimited?.({
          retryAfterMs: (retryAfterMs as number | undefined) ?? 60_000,
          ...(resource !== undefined ? { resource: resource as string } : {}),
        });
        ok = true;
      } else {
        const { message } = body as { message?: unknown };
        if (typeof message !== "string" || message === "")
          return reply(res, 400, { error: "message: a non-empty string is required" });
        ok = await execution.log(message);
      }
      if (!ok) return reply(res, 409, { error: "the lease of this execution was lost: not recorded" });
      res.writeHead(204).end();
    } catch (err) {
      reply(res, 503, { error: `not recorded: ${(err as Error).message}` });
    }
  }

  /** `GET /parents/<key>`: 200 {result}; 404 naming the key when it has no result to give. */
  private async parentResult(
    res: ServerResponse,
    execution: ExecutionReporter,
    rawKey: string,
  ): Promise<void> {
    let key: string;
    try {
      key = decodeURIComponent(rawKey);
    } catch {
      return reply(res, 400, { error: `parents: ${JSON.stringify(rawKey)} is not a URL-encoded key` });
    }
    if (!execution.parentResult) return reply(res, 404, { error: "this execution has no parents' results" });
    let result: unknown;
    try {
      result = await execution.parentResult(key);
    } catch (err) {
      if ((err as Error).name === "ParentResultError")
        return reply(res, 404, { error: (err as Error).message });
      throw err;
    }
    reply(res, 200, { result });
  }
}

/** What is wrong with a /usage body ({resource: {unit: amount ≥ 0}}), or null. */
function usageProblem(body: Record<string, unknown>): string | null {
  if (Object.keys(body).length === 0) return "usage: {resource: {unit: amount}} is required";
  for (const [name, units] of Object.entries(body)) {
    if (typeof units !== "object" || units === null || Array.isArray(units))
      return `usage.${name}: an object {unit: amount} is required`;
    for (const [unit, amount] of Object.entries(units as Record<string, unknown>))
      if (typeof amount !== "number" || !Number.isFinite(amount) || amount < 0)
        return `usage.${name}.${unit}: a number ≥ 0 is required, got ${JSON.stringify(amount)}`;
  }
  return null;
}

/** The body as a JSON object, or the reason it is not one. */
async function readJson(req: IncomingMessage): Promise<Record<string, unknown> | string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) return `body larger than ${MAX_BODY_BYTES} bytes`;
    chunks.push(chunk);
  }
  try {
    const v: unknown = JSON.parse(Buffer.concat(chunks).toString("utf8"));
    if (typeof v === "object" && v !== null && !Array.isArray(v)) return v as Record<string, unknown>;
  } catch {
    // fall through
  }
  return "body: a JSON object is required";
}

function reply(res: ServerResponse, status: number, body: unknown): void {
  if (res.headersSent) return;
  res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body));
}

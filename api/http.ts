// Request/response plumbing shared by every route: errors that carry their HTTP status, JSON
// replies, a size-limited JSON body reader and a path decoder that turns a malformed `%`
// escape into a 400 instead of a crash.
import type { IncomingMessage, ServerResponse } from "node:http";

export class HttpError extends Error {
  readonly status: number;
  readonly headers: Record<string, string>;
  constructor(status: number, message: string, headers: Record<string, string> = {}) {
    super(message);
    this.status = status;
    this.headers = headers;
  }
}

export function sendJson(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  res.writeHead(status, {
    "content-type": "application/json",
    "cache-control": "no-store",
    ...headers,
  });
  res.end(JSON.stringify(body));
}

/** `decodeURIComponent` that answers 400 naming the segment instead of throwing URIError. */
export function decodeSegment(segment: string, what = "path"): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    throw new HttpError(400, `malformed %-escape in the path: ${JSON.stringify(segment)} (${what})`);
  }
}

export async function readJson(req: IncomingMessage, maxBytes: number): Promise<unknown> {
  if (!(req.headers["content-type"] ?? "").startsWith("application/json"))
    throw new HttpError(415, "send the body as JSON (Content-Type: application/json)");
  const declared = Number(req.headers["content-length"] ?? 0);
  if (declared > maxBytes) throw new HttpError(413, `request body is larger than ${maxBytes} bytes`);
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > maxBytes) throw new HttpError(413, `request body is larger than ${maxBytes} bytes`);
    chunks.push(chunk as Buffer);
  }
  const text = Buffer.concat(chunks).toString("utf8");
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new HttpError(400, `request body is not valid JSON: ${(err as Error).message}`);
  }
}

/** A stored JSON text as a value (left as text when it is not JSON). */
export function parseStored(s: string | null | undefined): unknown {
  if (s === undefined || s === null) return null;
  try {
    return JSON.parse(s);
  } catch {
    return s;
  }
}

// Request/response plumbing shared by every route: errors that carry their HTTP status, JSON
// replies, a size-limited JSON body reader and a path decoder that turns a malformed `%`
// escape into a 400 instead of a crash.
import type { IncomingMessage, ServerResponse } from "node:http";
import type { ContractViolationError, JobViolations } from "../queue/contracts.ts";

/** The machine-readable code of an error reply when nothing more specific applies. */
const STATUS_CODES: Record<number, string> = {
  400: "invalid_request",
  401: "unauthorized",
  403: "forbidden",
  404: "not_found",
  405: "method_not_allowed",
  409: "conflict",
  413: "too_large",
  415: "unsupported_media_type",
  422: "unprocessable",
  500: "internal",
  501: "not_implemented",
  503: "unavailable",
};

/**
 * Every error reply has this one shape: `error` is the reason for a person (a string, so clients
 * that print `body.error` keep working), `code` is for programs, and `field` names the input at
 * fault as `<where>.<path>` (`body.jobs.3.priority`, `query.limit`, `path.queue`,
 * `header.Last-Event-ID`), or null when no one input is.
 */
export interface ErrorBody {
  error: string;
  code: string;
  field: string | null;
}

export class HttpError extends Error {
  readonly status: number;
  readonly headers: Record<string, string>;
  readonly field: string | null;
  readonly code: string;
  constructor(
    status: number,
    message: string,
    headers: Record<string, string> = {},
    field: string | null = null,
    code?: string,
  ) {
    super(message);
    this.status = status;
    this.headers = headers;
    this.field = field;
    this.code = code ?? STATUS_CODES[status] ?? (status >= 500 ? "internal" : "invalid_request");
  }

  /** A 4xx about one input field. */
  static field(status: number, field: string, message: string, code?: string): HttpError {
    return new HttpError(status, message, {}, field, code);
  }

  get body(): ErrorBody {
    return { error: this.message, code: this.code, field: this.field };
  }
}

/**
 * Jobs refused by the queue's contract (422, code contract_violation): the error shape with one
 * entry per bad job, `index` its place in the request.
 */
export class ContractRefusal extends HttpError {
  readonly jobs: JobViolations[];
  constructor(message: string, field: string | null, jobs: JobViolations[]) {
    super(422, message, {}, field, "contract_violation");
    this.jobs = jobs;
  }
  override get body(): ErrorBody & { jobs: JobViolations[] } {
    return { ...super.body, jobs: this.jobs };
  }
}

/** `field`: the data at fault when one job of the request is (body.data, body.jobs.3.data). */
export function contractRefusal(err: ContractViolationError, field: string | null = null): ContractRefusal {
  return new ContractRefusal(`nothing enqueued: ${err.message}`, field, err.jobs);
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
    throw HttpError.field(
      400,
      `path.${what}`,
      `malformed %-escape in the path: ${JSON.stringify(segment)} (${what})`,
      "invalid_field",
    );
  }
}

export async function readJson(req: IncomingMessage, maxBytes: number): Promise<unknown> {
  if (!(req.headers["content-type"] ?? "").startsWith("application/json"))
    throw HttpError.field(
      415,
      "header.Content-Type",
      "send the body as JSON (Content-Type: application/json)",
    );
  const tooLarge = () =>
    HttpError.field(413, "body", `request body is larger than ${maxBytes} bytes`, "body_too_large");
  const declared = Number(req.headers["content-length"] ?? 0);
  if (declared > maxBytes) throw tooLarge();
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > maxBytes) throw tooLarge();
    chunks.push(chunk as Buffer);
  }
  const text = Buffer.concat(chunks).toString("utf8");
  try {
    return JSON.parse(text);
  } catch (err) {
    throw HttpError.field(
      400,
      "body",
      `request body is not valid JSON: ${(err as Error).message}`,
      "invalid_json",
    );
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

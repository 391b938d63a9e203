// A small router over the definitions table: matches a path template, then validates path
// parameters, query and body against the route's JSON Schemas (ajv) before the handler runs,
// so every bad request is a 4xx naming the field and never reaches a handler. The queue
// allow-list is enforced here too, once for every route: a `{queue}` path parameter, a `queue`
// query parameter, or else the queue a `{id}` job belongs to.
import type { IncomingMessage, ServerResponse } from "node:http";
import { Ajv, type ErrorObject, type ValidateFunction } from "ajv";
import { PARAMS, ROUTES, type JsonSchema, type RouteDefinition } from "./definitions.ts";
import { assertJobId, assertQueueName } from "../queue/index.ts";
import { decodeSegment, HttpError, readJson } from "./http.ts";
import { FULL_ACCESS, type Principal } from "./tokens.ts";

export interface RequestContext {
  req: IncomingMessage;
  res: ServerResponse;
  url: URL;
  route: RouteDefinition;
  params: Record<string, string>;
  query: Record<string, unknown>;
  body: unknown;
  /** Who asked: the full-access token, or a named token and its scope. */
  principal: Principal;
}

/** What a handler answers: a JSON reply, or undefined when it wrote the response itself (SSE, files). */
export interface Reply {
  status?: number;
  body: unknown;
  headers?: Record<string, string>;
}
export type Handler = (rc: RequestContext) => Promise<Reply | undefined>;
export type Handlers = Record<string, Handler>;

interface CompiledRoute {
  def: RouteDefinition;
  segments: { literal?: string; param?: string }[];
  params?: ValidateFunction;
  query?: ValidateFunction;
  body?: ValidateFunction;
}

/** Refuses (404) a queue, or a job's queue, that this server does not serve. */
export type QueueGuard = (queue: string | undefined, jobId: string | undefined) => Promise<void>;
/** Holds a named token to its scope once the request is validated (api/access.ts). */
export type Authorize = (rc: RequestContext) => Promise<void>;

export interface Match {
  route: CompiledRoute;
  params: Record<string, string>;
}

// Query strings are text: coerce "20" to 20 and fill defaults. Bodies are JSON: no coercion.
// allErrors: an unknown field is reported before a missing one (a misspelt field is both).
const queryAjv = new Ajv({ coerceTypes: true, useDefaults: true, allErrors: true, strict: false });
const bodyAjv = new Ajv({ allErrors: true, strict: false });

/** One ajv error as the reply: the reason, a code, and the field as `<where>.<path>`. */
export function describeError(where: string, e: ErrorObject): HttpError {
  const path = e.instancePath
    .split("/")
    .filter(Boolean)
    .map((p) => p.replaceAll("~1", "/").replaceAll("~0", "~"));
  const p = e.params as Record<string, unknown>;
  const named = (parts: unknown[]) => JSON.stringify(parts.join("."));
  const fieldOf = (parts: unknown[]) => [where, ...parts].join(".");
  const at = path.length > 0 ? `${where} field ${named(path)}` : where;
  const fail = (message: string, code = "invalid_field", parts: unknown[] = path, status = 400) =>
    HttpError.field(status, fieldOf(parts), message, code);
  switch (e.keyword) {
    case "required":
      return fail(`${where} field ${named([...path, p.missingProperty])} is required`, "missing_field", [
        ...path,
        p.missingProperty,
      ]);
    case "additionalProperties": {
      const what = where === "query" ? "query parameter" : "field";
      const inside = path.length > 0 ? ` ${named(path)}` : "";
      return fail(
        `unknown ${what} ${JSON.stringify(p.additionalProperty)} in ${where}${inside}`,
        "unknown_field",
        [...path, p.additionalProperty],
      );
    }
    case "type": {
      const t = String(p.type).replace(",", " or ");
      return fail(`${at} must be ${/^[aeiou]/.test(t) ? "an" : "a"} ${t}`);
    }
    case "enum":
      return fail(`${at} must be one of ${(p.allowedValues as unknown[]).join(", ")}`);
    case "pattern":
      return fail(`${at} has characters or a shape it may not have`);
    case "minimum":
    case "maximum":
      return fail(`${at} must be ${e.keyword === "minimum" ? "≥" : "≤"} ${String(p.limit)}`);
    case "maxItems":
      // A batch (or id list) over its limit: 413 naming the limit, nothing done.
      return fail(
        `${at} has more than ${String(p.limit)} items; send at most ${String(p.limit)} per call`,
        "too_many_items",
        path,
        413,
      );
    default:
      return fail(`${at} ${e.message ?? "is invalid"}`);
  }
}

function check(validate: ValidateFunction | undefined, where: string, value: unknown): void {
  if (!validate || validate(value)) return;
  const errors = validate.errors!;
  const e = errors.find((x) => x.keyword === "additionalProperties") ?? errors[0]!;
  throw describeError(where, e);
}

function compile(def: RouteDefinition): CompiledRoute {
  const segments = def.path
    .split("/")
    .filter(Boolean)
    .map((s) => (s.startsWith("{") ? { param: s.slice(1, -1) } : { literal: s }));
  const names = segments.flatMap((s) => (s.param ? [s.param] : []));
  const paramsSchema: JsonSchema | undefined =
    names.length > 0
      ? {
          type: "object",
          properties: Object.fromEntries(names.map((n) => [n, PARAMS[n] ?? { type: "string" }])),
        }
      : undefined;
  return {
    def,
    segments,
    params: paramsSchema ? bodyAjv.compile(paramsSchema) : undefined,
    query: queryAjv.compile(def.query ?? { type: "object", additionalProperties: false }),
    body: def.body ? bodyAjv.compile(def.body) : undefined,
  };
}

export class Router {
  private readonly routes: CompiledRoute[];
  private readonly handlers: Handlers;
  private readonly guard: QueueGuard;
  private readonly authorize: Authorize;
  constructor(
    handlers: Handlers,
    routes: readonly RouteDefinition[] = ROUTES,
    guard: QueueGuard = async () => {},
    authorize: Authorize = async () => {},
  ) {
    this.routes = routes.map(compile);
    this.handlers = handlers;
    this.guard = guard;
    this.authorize = authorize;
    for (const r of routes)
      if (!handlers[r.name]) throw new Error(`route ${r.name} (${r.method} ${r.path}) has no handler`);
  }

  /** The route for a request: 404 when no path matches, 405 when only the method is wrong. */
  match(method: string, pathname: string): Match {
    const parts = pathname.split("/").filter(Boolean);
    const allowed: string[] = [];
    for (const route of this.routes) {
      if (route.segments.length !== parts.length) continue;
      const params: Record<string, string> = {};
      let ok = true;
      for (let i = 0; i < parts.length && ok; i++) {
        const seg = route.segments[i]!;
        if (seg.literal !== undefined) ok = seg.literal === parts[i];
        else params[seg.param!] = decodeSegment(parts[i]!, seg.param);
      }
      if (!ok) continue;
      if (route.def.method === method || (method === "HEAD" && route.def.method === "GET"))
        return { route, params };
      allowed.push(route.def.method);
    }
    if (allowed.length > 0)
      throw new HttpError(405, `use ${allowed.join(" or ")} for ${pathname}`, { allow: allowed.join(", ") });
    throw new HttpError(404, `no route ${method} ${pathname}`);
  }

  /** Validate and run. `before` runs once the route is known, before the body is read (auth). */
  async handle(
    req: IncomingMessage,
    res: ServerResponse,
    url: URL,
    m: Match,
    maxBodyBytes: number,
    principal: Principal = FULL_ACCESS,
  ): Promise<Reply | undefined> {
    const { route, params } = m;
    // The queue library's own checks first: their messages are the ones the CLI and clients know.
    for (const [name, assert] of [
      ["queue", assertQueueName],
      ["id", assertJobId],
    ] as const) {
      if (params[name] === undefined) continue;
      try {
        assert(params[name]);
      } catch (err) {
        throw HttpError.field(400, `path.${name}`, (err as Error).message, "invalid_field");
      }
    }
    check(route.params, "path", params);
    const query: Record<string, unknown> = {};
    for (const key of new Set(url.searchParams.keys())) {
      const values = url.searchParams.getAll(key);
      if (values.length > 1)
        throw HttpError.field(
          400,
          `query.${key}`,
          `query parameter ${JSON.stringify(key)} is given twice`,
          "invalid_field",
        );
      query[key] = values[0];
    }
    check(route.query, "query", query);
    await this.guard(params.queue ?? (query.queue as string | undefined), params.id);
    let body: unknown;
    if (route.body) {
      body = await readJson(req, maxBodyBytes);
      if (
        route.def.body?.type === "object" &&
        (typeof body !== "object" || body === null || Array.isArray(body))
      )
        throw HttpError.field(400, "body", 'body must be an object like {"data": …}', "invalid_field");
      check(route.body, "body", body);
    }
    const rc: RequestContext = { req, res, url, route: route.def, params, query, body, principal };
    await this.authorize(rc);
    return this.handlers[route.def.name]!(rc);
  }
}

// A small router over the definitions table: matches a path template, then validates path
// parameters, query and body against the route's JSON Schemas (ajv) before the handler runs,
// so every bad request is a 4xx naming the field and never reaches a handler.
import type { IncomingMessage, ServerResponse } from "node:http";
import { Ajv, type ErrorObject, type ValidateFunction } from "ajv";
import { PARAMS, ROUTES, type JsonSchema, type RouteDefinition } from "./definitions.ts";
import { assertJobId, assertQueueName } from "../queue/index.ts";
import { decodeSegment, HttpError, readJson } from "./http.ts";

export interface RequestContext {
  req: IncomingMessage;
  res: ServerResponse;
  url: URL;
  route: RouteDefinition;
  params: Record<string, string>;
  query: Record<string, unknown>;
  body: unknown;
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

export interface Match {
  route: CompiledRoute;
  params: Record<string, string>;
}

// Query strings are text: coerce "20" to 20 and fill defaults. Bodies are JSON: no coercion.
// allErrors: an unknown field is reported before a missing one (a misspelt field is both).
const queryAjv = new Ajv({ coerceTypes: true, useDefaults: true, allErrors: true, strict: false });
const bodyAjv = new Ajv({ allErrors: true, strict: false });

function describeError(where: string, e: ErrorObject): string {
  const field = e.instancePath
    .split("/")
    .filter(Boolean)
    .map((p) => p.replaceAll("~1", "/").replaceAll("~0", "~"));
  const at = field.length > 0 ? `${where} field ${JSON.stringify(field.join("."))}` : where;
  const p = e.params as Record<string, unknown>;
  switch (e.keyword) {
    case "required":
      return `${where} field ${JSON.stringify([...field, p.missingProperty].join("."))} is required`;
    case "additionalProperties":
      return `unknown ${where === "query" ? "query parameter" : "field"} ${JSON.stringify(p.additionalProperty)} in ${where}`;
    case "type": {
      const t = String(p.type);
      return `${at} must be ${/^[aeiou]/.test(t) ? "an" : "a"} ${t}`;
    }
    case "enum":
      return `${at} must be one of ${(p.allowedValues as unknown[]).join(", ")}`;
    case "pattern":
      return `${at} has characters or a shape it may not have`;
    default:
      return `${at} ${e.message ?? "is invalid"}`;
  }
}

function check(validate: ValidateFunction | undefined, where: string, value: unknown): void {
  if (!validate || validate(value)) return;
  const errors = validate.errors!;
  const e = errors.find((x) => x.keyword === "additionalProperties") ?? errors[0]!;
  throw new HttpError(400, describeError(where, e));
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
  constructor(handlers: Handlers, routes: readonly RouteDefinition[] = ROUTES) {
    this.routes = routes.map(compile);
    this.handlers = handlers;
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
  ): Promise<Reply | undefined> {
    const { route, params } = m;
    // The queue library's own checks first: their messages are the ones the CLI and clients know.
    if (params.queue !== undefined) assertQueueName(params.queue);
    if (params.id !== undefined) assertJobId(params.id);
    check(route.params, "path", params);
    const query: Record<string, unknown> = {};
    for (const key of new Set(url.searchParams.keys())) {
      const values = url.searchParams.getAll(key);
      if (values.length > 1)
        throw new HttpError(400, `query parameter ${JSON.stringify(key)} is given twice`);
      query[key] = values[0];
    }
    check(route.query, "query", query);
    let body: unknown;
    if (route.body) {
      body = await readJson(req, maxBodyBytes);
      if (
        route.def.body?.type === "object" &&
        (typeof body !== "object" || body === null || Array.isArray(body))
      )
        throw new HttpError(400, 'body must be an object like {"data": …}');
      check(route.body, "body", body);
    }
    return this.handlers[route.def.name]!({ req, res, url, route: route.def, params, query, body });
  }
}

// The OpenAPI 3.1 document of `conveyor api`, built from the table the router validates with
// (api/definitions.ts) and the reply shapes (api/responses.ts): served at GET /openapi.json and
// committed as docs/openapi.yaml by `npm run gen:openapi` (api/openapi.test.ts checks it is fresh).
import { packageVersion } from "../lib/packageVersion.ts";
import { stringify } from "yaml";
import { SESSION_COOKIE } from "./auth.ts";
import { EVENT_ID } from "./eventHub.ts";
import { JOB_ENVELOPE, PARAMS, ROUTES, type JsonSchema, type RouteDefinition } from "./definitions.ts";
import { RESPONSES, SCHEMAS } from "./responses.ts";

export const OPENAPI_FILE = new URL("../docs/openapi.yaml", import.meta.url);

const TAGS: Record<RouteDefinition["tag"], string> = {
  jobs: "enqueue (one or a batch), look up, cancel, retry, logs",
  queues: "counts, workers, pause/resume, rate limit, groups, schedules, dead letters",
  events: "live queue transitions over Server-Sent Events",
  search: "find jobs by id, idempotency key or payload field",
  pools: "WorkerPools, when the server has a Kubernetes API",
  resources: "Resources: API keys with budgets, shared by a pipeline's stages",
  auth: "the browser session (the dashboard); programs send the bearer token instead",
  health: "liveness",
  meta: "this document",
};

const version = packageVersion();

function operation(def: RouteDefinition): Record<string, unknown> {
  const parameters: Record<string, unknown>[] = [];
  for (const [, name] of def.path.matchAll(/\{(\w+)\}/g))
    parameters.push({
      name,
      in: "path",
      required: true,
      description: name === "queue" ? "stage or pipeline/stage; a / is sent as %2F" : undefined,
      schema: PARAMS[name!] ?? { type: "string" },
    });
  const query = def.query as { properties?: Record<string, JsonSchema>; required?: string[] } | undefined;
  for (const [name, schema] of Object.entries(query?.properties ?? {})) {
    const { description, ...rest } = schema as { description?: string };
    parameters.push({
      name,
      in: "query",
      required: query?.required?.includes(name) ?? false,
      description,
      schema: rest,
    });
  }
  if (def.name === "events")
    parameters.push({
      name: "Last-Event-ID",
      in: "header",
      required: false,
      description:
        "resume after this event id (a stream id like 1700000000000-0, with /<part> for a later job of a batch entry: 1700000000000-0/3); browsers send it on reconnect",
      schema: { type: "string", pattern: EVENT_ID.source },
    });
  const responses: Record<string, unknown> = {};
  const replies = RESPONSES[def.name];
  if (!replies) throw new Error(`route ${def.name} has no entry in api/responses.ts`);
  for (const r of replies)
    responses[String(r.status)] = {
      description: r.description,
      headers: r.headers
        ? Object.fromEntries(
            Object.entries(r.headers).map(([h, { description, ...schema }]) => [h, { description, schema }]),
          )
        : undefined,
      content: r.content
        ? Object.fromEntries(Object.entries(r.content).map(([type, schema]) => [type, { schema }]))
        : { "application/json": { schema: r.schema } },
    };
  responses["4XX"] = { $ref: "#/components/responses/Error" };
  responses["5XX"] = { $ref: "#/components/responses/Error" };
  return {
    operationId: def.name,
    summary: def.summary,
    tags: [def.tag],
    security: def.public ? [] : undefined,
    // What a named token needs (docs/api.md, Tokens and scopes).
    "x-conveyor-access": def.access,
    parameters: parameters.length > 0 ? parameters : undefined,
    requestBody: def.body
      ? { required: true, content: { "application/json": { schema: named(def.body) } } }
      : undefined,
    responses,
  };
}

/** Request schemas the table shares by identity, named once under components.schemas. */
const SHARED_REQUEST_SCHEMAS: [JsonSchema, string][] = [[JOB_ENVELOPE, "JobEnvelope"]];

function named(schema: unknown): unknown {
  if (typeof schema !== "object" || schema === null) return schema;
  const shared = SHARED_REQUEST_SCHEMAS.find(([s]) => s === schema);
  if (shared) return { $ref: `#/components/schemas/${shared[1]}` };
  if (Array.isArray(schema)) return schema.map(named);
  return Object.fromEntries(Object.entries(schema).map(([k, v]) => [k, named(v)]));
}

/** Drops undefined values, so the JSON and the YAML carry the same keys. */
function clean<T>(v: T): T {
  return JSON.parse(JSON.stringify(v)) as T;
}

export function openApiDocument(): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const def of ROUTES) (paths[def.path] ??= {})[def.method.toLowerCase()] = operation(def);
  return clean({
    openapi: "3.1.0",
    info: {
      title: "Conveyor job API",
      version,
      description:
        "`conveyor api`: enqueue and inspect jobs, control queues and follow their events. " +
        "Every request is validated against the schemas below before it runs; every error is " +
        "the Error shape with the field at fault, and no input gives a 5xx. Generated from " +
        "api/definitions.ts and api/responses.ts (`npm run gen:openapi`).",
      license: { name: "Apache-2.0", identifier: "Apache-2.0" },
    },
    servers: [{ url: "/", description: "wherever `conveyor api` listens (default port 8080)" }],
    tags: Object.entries(TAGS).map(([name, description]) => ({ name, description })),
    security: [{ bearer: [] }, { session: [] }],
    paths,
    components: {
      schemas: {
        ...Object.fromEntries(SHARED_REQUEST_SCHEMAS.map(([schema, name]) => [name, schema])),
        ...SCHEMAS,
      },
      responses: {
        Error: {
          description: "the one error shape",
          content: { "application/json": { schema: { $ref: "#/components/schemas/Error" } } },
        },
      },
      securitySchemes: {
        bearer: { type: "http", scheme: "bearer", description: "the API token (CONVEYOR_API_TOKEN)" },
        session: {
          type: "apiKey",
          in: "cookie",
          name: SESSION_COOKIE,
          description: "a browser's session (POST /auth/session); state changes need a same-origin Origin",
        },
      },
    },
  });
}

export function openApiYaml(): string {
  return `# Generated by \`npm run gen:openapi\` from api/definitions.ts and api/responses.ts; do not edit.\n${stringify(openApiDocument(), { lineWidth: 0 })}`;
}

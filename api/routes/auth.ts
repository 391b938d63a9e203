// Signing a browser in and out (the API token is exchanged once for a session cookie), and the
// process's health and metrics.
import type { ApiContext } from "../context.ts";
import { HttpError } from "../http.ts";
import type { Handlers } from "../router.ts";

export function authHandlers(ctx: ApiContext): Handlers {
  return {
    async health() {
      return { body: { ok: true } };
    },
    async metrics({ res }) {
      const text = await ctx.metrics.registry.metrics();
      res.writeHead(200, { "content-type": ctx.metrics.registry.contentType });
      res.end(text);
      return undefined;
    },
    async session({ req }) {
      const who = ctx.auth.identify(req);
      const credential = who?.credential ?? null;
      return {
        body: {
          authRequired: ctx.auth.required,
          authenticated: credential !== null,
          // Who the session is and what it may do: the dashboard hides the rest.
          token: who ? who.principal.name : null,
          scopes: who ? who.principal.scope : null,
          readOnly: ctx.auth.readOnly,
          // The allow-list names queues: only for callers who may see them.
          queues: credential !== null ? ctx.auth.allowList : null,
          history: ctx.records !== null,
          pools: ctx.pools !== null,
        },
      };
    },
    async signIn({ req, body }) {
      const { token } = body as { token: string };
      if (!ctx.auth.required) return { body: { authenticated: true } };
      const who = ctx.auth.signInAs(req, token);
      if (!who) throw new HttpError(401, "wrong token");
      return {
        body: { authenticated: true, token: who.name },
        headers: { "set-cookie": ctx.auth.newSession(req, Date.now(), who) },
      };
    },
    async audit({ query }) {
      const items = await ctx.audit.list({
        since: query.since as number | undefined,
        token: query.token as string | undefined,
        verb: query.verb as string | undefined,
        target: query.target as string | undefined,
        limit: query.limit as number,
      });
      return { body: { items } };
    },
    async signOut({ req }) {
      return { body: { authenticated: false }, headers: { "set-cookie": ctx.auth.endSession(req) } };
    },
  };
}

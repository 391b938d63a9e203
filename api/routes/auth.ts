// Signing a browser in and out: the API token is exchanged once for a session cookie.
import type { ApiContext } from "../context.ts";
import { HttpError } from "../http.ts";
import type { Handlers } from "../router.ts";

export function authHandlers(ctx: ApiContext): Handlers {
  return {
    async health() {
      return { body: { ok: true } };
    },
    async session({ req }) {
      const credential = ctx.auth.credential(req);
      return {
        body: {
          authRequired: ctx.auth.required,
          authenticated: credential !== null,
          readOnly: ctx.auth.readOnly,
          queues: ctx.auth.allowList,
          history: ctx.records !== null,
          pools: ctx.pools !== null,
        },
      };
    },
    async signIn({ req, body }) {
      const { token } = body as { token: string };
      if (!ctx.auth.required) return { body: { authenticated: true } };
      if (!ctx.auth.tokenMatches(token)) throw new HttpError(401, "wrong token");
      return { body: { authenticated: true }, headers: { "set-cookie": ctx.auth.newSession(req) } };
    },
    async signOut({ req }) {
      return { body: { authenticated: false }, headers: { "set-cookie": ctx.auth.endSession(req) } };
    },
  };
}

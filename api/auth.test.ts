// Credentials, sessions and the CSRF rule without a server.
import assert from "node:assert/strict";
import type { IncomingMessage } from "node:http";
import { test } from "node:test";
import { Auth, isLoopback, SIGN_IN_FAILURES, SIGN_IN_WINDOW_MS } from "./auth.ts";
import { HttpError } from "./http.ts";

const req = (headers: Record<string, string>, encrypted = false) =>
  ({
    headers: { host: "dash.example:8080", ...headers },
    socket: { encrypted },
  }) as unknown as IncomingMessage;

const status = (f: () => void) => {
  try {
    f();
    return 200;
  } catch (err) {
    return (err as HttpError).status;
  }
};

test("bearer tokens: right one passes, wrong or malformed ones are 401", () => {
  const auth = new Auth({ token: "s3cret" });
  assert.equal(auth.credential(req({ authorization: "Bearer s3cret" })), "bearer");
  assert.equal(auth.credential(req({ authorization: "Bearer s3cre" })), null);
  assert.equal(auth.credential(req({ authorization: "Basic s3cret" })), null);
  assert.equal(auth.credential(req({})), null);
  assert.equal(
    status(() => auth.authenticate(req({}))),
    401,
  );
  assert.equal(new Auth({}).credential(req({})), "none-needed");
});

test("a session cookie is HttpOnly, SameSite=Strict, Secure behind HTTPS, and signed with the token", () => {
  const auth = new Auth({ token: "s3cret" });
  const cookie = auth.newSession(req({ "x-forwarded-proto": "https" }));
  assert.match(
    cookie,
    /^conveyor_session=\d+\.[\w-]{16}\.[\w-]{43}; Path=\/; HttpOnly; SameSite=Strict; Max-Age=43200; Secure$/,
  );
  const sid = cookie.split(";")[0]!;
  assert.equal(auth.credential(req({ cookie: `a=b; ${sid}` })), "session");
  assert.equal(auth.credential(req({ cookie: "conveyor_session=forged" })), null);
  assert.match(auth.endSession(req({ cookie: sid })), /^conveyor_session=; .*Max-Age=0/);
  // Stateless: another replica (or this one restarted) with the same token accepts it ...
  assert.equal(new Auth({ token: "s3cret" }).credential(req({ cookie: sid })), "session");
  // ... a rotated token ends it, and so do a changed expiry and the end of its life.
  assert.equal(new Auth({ token: "rotated" }).credential(req({ cookie: sid })), null);
  const [, exp, rest] = /^conveyor_session=(\d+)(\..*)$/.exec(sid)!;
  assert.equal(auth.credential(req({ cookie: `conveyor_session=${Number(exp) + 1}${rest}` })), null);
  const old = auth.newSession(req({}), Date.now() - 13 * 3600_000).split(";")[0]!;
  assert.equal(auth.credential(req({ cookie: old })), null);
});

test("failed sign-ins are throttled per client address; the right token resets the count", () => {
  const auth = new Auth({ token: "s3cret" });
  const from = (addr: string) =>
    ({ headers: {}, socket: { remoteAddress: addr } }) as unknown as IncomingMessage;
  const t0 = 1_000_000;
  for (let i = 0; i < SIGN_IN_FAILURES; i++) assert.equal(auth.signIn(from("10.0.0.1"), "wrong", t0), false);
  assert.throws(
    () => auth.signIn(from("10.0.0.1"), "s3cret", t0 + 1000),
    (e: HttpError) => {
      assert.equal(e.status, 429);
      assert.equal(e.headers["retry-after"], "59");
      return true;
    },
  );
  assert.equal(auth.signIn(from("10.0.0.2"), "s3cret", t0), true, "another client is not affected");
  assert.equal(auth.signIn(from("10.0.0.1"), "s3cret", t0 + SIGN_IN_WINDOW_MS), true, "the window ended");
  assert.equal(
    auth.signIn(from("10.0.0.1"), "wrong", t0 + SIGN_IN_WINDOW_MS),
    false,
    "counting from 0 again",
  );
});

test("state changes with a cookie need this Origin; bearer clients may omit it but not forge it", () => {
  const auth = new Auth({ token: "t" });
  assert.equal(
    status(() => auth.checkMutation(req({}), "session")),
    403,
  );
  assert.equal(
    status(() => auth.checkMutation(req({ origin: "https://evil.example" }), "session")),
    403,
  );
  assert.equal(
    status(() => auth.checkMutation(req({ origin: "null" }), "session")),
    403,
  );
  assert.equal(
    status(() => auth.checkMutation(req({ origin: "http://dash.example:8080" }), "session")),
    200,
  );
  assert.equal(
    status(() =>
      auth.checkMutation(
        req({ origin: "https://conveyor.example.com", "x-forwarded-host": "conveyor.example.com" }),
        "session",
      ),
    ),
    200,
  );
  assert.equal(
    status(() => auth.checkMutation(req({}), "bearer")),
    200,
  );
  assert.equal(
    status(() => auth.checkMutation(req({ origin: "https://evil.example" }), "bearer")),
    403,
  );
});

test("read-only refuses mutations (not signing in); the allow-list hides other queues", () => {
  const auth = new Auth({ token: "t", readOnly: true, queues: ["a/b"] });
  const origin = { origin: "http://dash.example:8080" };
  assert.equal(
    status(() => auth.checkMutation(req(origin), "session")),
    403,
  );
  assert.equal(
    status(() => auth.checkMutation(req(origin), "session", true)),
    200,
  );
  assert.equal(auth.queueAllowed("a/b"), true);
  assert.equal(auth.queueAllowed("a/c"), false);
  assert.equal(
    status(() => auth.assertQueue("a/c")),
    404,
  );
});

test("loopback addresses", () => {
  for (const h of ["127.0.0.1", "127.1.2.3", "::1", "localhost"]) assert.equal(isLoopback(h), true, h);
  for (const h of ["0.0.0.0", "::", "10.0.0.1", "dash.example"]) assert.equal(isLoopback(h), false, h);
});

import { strict as assert } from "node:assert";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import type * as https from "node:https";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { after, before, describe, it } from "node:test";
import { stringify } from "yaml";
import { KubeConfigError, loadKubeConfig, type KubeCredentials } from "./kubeConfig.ts";

const CA = "-----BEGIN CERTIFICATE-----\nca\n-----END CERTIFICATE-----\n";
const CERT = "-----BEGIN CERTIFICATE-----\nclient\n-----END CERTIFICATE-----\n";
const KEY = "-----BEGIN PRIVATE KEY-----\nkey\n-----END PRIVATE KEY-----\n";
const b64 = (s: string) => Buffer.from(s).toString("base64");

let dir: string;
before(() => {
  dir = mkdtempSync(join(tmpdir(), "kubeconfig-"));
  writeFileSync(join(dir, "ca.crt"), CA);
  writeFileSync(join(dir, "client.crt"), CERT);
  writeFileSync(join(dir, "client.key"), KEY);
});
after(() => rmSync(dir, { recursive: true, force: true }));

function kubeconfig(name: string, doc: Record<string, unknown>): string {
  const file = join(dir, name);
  writeFileSync(file, stringify(doc));
  return file;
}

/** A kubeconfig with one context `ctx` → cluster `c`, user `u`. */
function single(cluster: Record<string, unknown>, user: Record<string, unknown>, extra = {}) {
  return {
    apiVersion: "v1",
    kind: "Config",
    "current-context": "ctx",
    clusters: [{ name: "c", cluster: { server: "https://10.0.0.1:6443", ...cluster } }],
    users: [{ name: "u", user }],
    contexts: [{ name: "ctx", context: { cluster: "c", user: "u", namespace: "team" } }],
    ...extra,
  };
}

async function applied(
  kc: KubeCredentials,
): Promise<https.RequestOptions & { headers: Record<string, string> }> {
  const opts: https.RequestOptions = {};
  await kc.applyToHTTPSOptions(opts);
  return opts as https.RequestOptions & { headers: Record<string, string> };
}

async function rejectsWith(p: Promise<unknown>, pattern: RegExp): Promise<void> {
  await assert.rejects(p, (err: Error) => {
    assert.ok(err instanceof KubeConfigError, `a KubeConfigError, not ${err.name}: ${err.message}`);
    assert.match(err.message, pattern);
    return true;
  });
}

describe("loadKubeConfig", () => {
  it("token and certificates as files (relative to the kubeconfig's directory)", async () => {
    const file = kubeconfig(
      "files.yaml",
      single(
        { "certificate-authority": "ca.crt", "tls-server-name": "kubernetes" },
        { token: "abc", "client-certificate": "client.crt", "client-key": join(dir, "client.key") },
      ),
    );
    const kc = await loadKubeConfig({ file, env: {} });
    assert.equal(kc.getCurrentCluster()?.server, "https://10.0.0.1:6443");
    const o = await applied(kc);
    assert.equal(String(o.ca), CA);
    assert.equal(String(o.cert), CERT);
    assert.equal(String(o.key), KEY);
    assert.equal(o.servername, "kubernetes");
    assert.equal(o.rejectUnauthorized, undefined);
    assert.equal(o.headers.Authorization, "Bearer abc");
  });

  it("certificates as data, insecure-skip-tls-verify, username/password", async () => {
    const file = kubeconfig(
      "data.yaml",
      single(
        { "certificate-authority-data": b64(CA), "insecure-skip-tls-verify": true },
        {
          "client-certificate-data": b64(CERT),
          "client-key-data": b64(KEY),
          username: "ann",
          password: "pw",
        },
      ),
    );
    const o = await applied(await loadKubeConfig({ file, env: {} }));
    assert.equal(String(o.ca), CA);
    assert.equal(String(o.cert), CERT);
    assert.equal(String(o.key), KEY);
    assert.equal(o.rejectUnauthorized, false);
    assert.equal(o.auth, "ann:pw");
    assert.equal(o.headers.Authorization, undefined);
  });

  it("a tokenFile is read again after tokenReloadMs (rotation)", async () => {
    const tokenFile = join(dir, "token-rotating");
    writeFileSync(tokenFile, "first\n");
    const file = kubeconfig("tokenfile.yaml", single({}, { tokenFile }));
    const kc = await loadKubeConfig({ file, env: {}, tokenReloadMs: 0 });
    assert.equal((await applied(kc)).headers.Authorization, "Bearer first");
    writeFileSync(tokenFile, "second\n");
    assert.equal((await applied(kc)).headers.Authorization, "Bearer second");
    // a token file missing for a moment (being replaced) keeps the last token
    rmSync(tokenFile);
    assert.equal((await applied(kc)).headers.Authorization, "Bearer second");
  });

  it("KUBECONFIG with several files merges them as kubectl does", async () => {
    const a = kubeconfig("a.yaml", {
      "current-context": "from-a",
      clusters: [{ name: "shared", cluster: { server: "https://a.example:6443" } }],
      contexts: [{ name: "from-a", context: { cluster: "shared", user: "bob" } }],
    });
    const b = kubeconfig("b.yaml", {
      "current-context": "from-b",
      clusters: [{ name: "shared", cluster: { server: "https://b.example:6443" } }],
      users: [{ name: "bob", user: { token: "from-b" } }],
      contexts: [{ name: "from-b", context: { cluster: "shared", user: "bob" } }],
    });
    const kc = await loadKubeConfig({ env: { KUBECONFIG: a + delimiter + delimiter + b } });
    // first file wins for current-context and for the cluster named in both; the user comes from b
    assert.equal(kc.getCurrentCluster()?.server, "https://a.example:6443");
    assert.equal((await applied(kc)).headers.Authorization, "Bearer from-b");
    const other = await loadKubeConfig({ env: { KUBECONFIG: `${a}${delimiter}${b}` }, context: "from-b" });
    assert.equal(other.getCurrentCluster()?.server, "https://a.example:6443");
  });

  it("~/.kube/config when KUBECONFIG is unset", async () => {
    const home = join(dir, "home");
    mkdirSync(join(home, ".kube"), { recursive: true });
    writeFileSync(join(home, ".kube", "config"), stringify(single({}, { token: "home" })));
    const kc = await loadKubeConfig({ env: { HOME: home } });
    assert.equal((await applied(kc)).headers.Authorization, "Bearer home");
  });

  it("bad kubeconfigs: an error naming the file and the field", async () => {
    const missingCtx = kubeconfig(
      "nocontext.yaml",
      single({}, { token: "t" }, { "current-context": "gone" }),
    );
    await rejectsWith(
      loadKubeConfig({ file: missingCtx, env: {} }),
      /nocontext\.yaml: context "gone" not found/,
    );
    await rejectsWith(
      loadKubeConfig({ file: kubeconfig("ok.yaml", single({}, { token: "t" })), context: "nope", env: {} }),
      /context "nope" not found \(--context\)/,
    );
    await rejectsWith(
      loadKubeConfig({
        file: kubeconfig("noca.yaml", single({ "certificate-authority": "absent.crt" }, {})),
        env: {},
      }),
      /noca\.yaml: clusters\[c\]\.cluster\.certificate-authority: .*absent\.crt: not found/,
    );
    await rejectsWith(
      loadKubeConfig({
        file: kubeconfig("nokey.yaml", single({}, { "client-certificate": "client.crt" })),
        env: {},
      }),
      /nokey\.yaml: users\[u\]\.user\.client-key: missing/,
    );
    await rejectsWith(
      loadKubeConfig({ file: kubeconfig("badserver.yaml", single({ server: "10.0.0.1" }, {})), env: {} }),
      /badserver\.yaml: clusters\[c\]\.cluster\.server: not an http\(s\) URL/,
    );
    await rejectsWith(
      loadKubeConfig({
        file: kubeconfig("badtype.yaml", single({ "insecure-skip-tls-verify": "yes" }, {})),
        env: {},
      }),
      /clusters\[c\]\.cluster\.insecure-skip-tls-verify: not true or false/,
    );
    await rejectsWith(
      loadKubeConfig({
        file: kubeconfig("baddata.yaml", single({ "certificate-authority-data": "%%%" }, {})),
        env: {},
      }),
      /certificate-authority-data: not base64/,
    );
    const nouser = single({}, {});
    nouser.contexts = [{ name: "ctx", context: { cluster: "c", user: "ghost", namespace: "x" } }];
    await rejectsWith(
      loadKubeConfig({ file: kubeconfig("nouser.yaml", nouser), env: {} }),
      /nouser\.yaml: contexts\[ctx\]\.context\.user: user "ghost" not found/,
    );
    writeFileSync(join(dir, "notyaml.yaml"), "clusters: [unclosed\n");
    await rejectsWith(loadKubeConfig({ file: join(dir, "notyaml.yaml"), env: {} }), /notyaml\.yaml: /);
    await rejectsWith(loadKubeConfig({ file: join(dir, "absent.yaml"), env: {} }), /absent\.yaml: ENOENT/);
    await rejectsWith(loadKubeConfig({ env: { HOME: join(dir, "nohome") } }), /no Kubernetes configuration/);
  });

  it("in-cluster: service host and port, ca.crt, the token (re-read), the namespace", async () => {
    const root = join(dir, "pod");
    const sa = join(root, "var/run/secrets/kubernetes.io/serviceaccount");
    mkdirSync(sa, { recursive: true });
    writeFileSync(join(sa, "ca.crt"), CA);
    writeFileSync(join(sa, "token"), "sa-1");
    writeFileSync(join(sa, "namespace"), "conveyor-system");
    const env = {
      KUBERNETES_SERVICE_HOST: "fd00::1",
      KUBERNETES_SERVICE_PORT: "443",
      HOME: join(dir, "nohome"),
    };
    const kc = await loadKubeConfig({ env, root, tokenReloadMs: 0 });
    assert.equal(kc.getCurrentCluster()?.server, "https://[fd00::1]:443");
    assert.equal((kc as unknown as { namespace: string }).namespace, "conveyor-system");
    let o = await applied(kc);
    assert.equal(String(o.ca), CA);
    assert.equal(o.headers.Authorization, "Bearer sa-1");
    writeFileSync(join(sa, "token"), "sa-2");
    o = await applied(kc);
    assert.equal(o.headers.Authorization, "Bearer sa-2");

    rmSync(join(sa, "ca.crt"));
    await rejectsWith(loadKubeConfig({ env, root }), /in-cluster service account: ca\.crt: .*not found/);
  });

  it("an exec credential plugin is left to client-node's KubeConfig", async () => {
    const file = kubeconfig(
      "exec.yaml",
      single({}, { exec: { apiVersion: "client.authentication.k8s.io/v1", command: "true" } }),
    );
    const kc = await loadKubeConfig({ file, env: {} });
    assert.equal(kc.constructor.name, "KubeConfig");
    assert.equal(kc.getCurrentCluster()?.server, "https://10.0.0.1:6443");
  });

  it("impersonation fields become headers; fields the loader does not implement are refused by name", async () => {
    const file = kubeconfig(
      "impersonate.yaml",
      single(
        {},
        {
          token: "t",
          as: "alice",
          "as-uid": "1234",
          "as-groups": ["devs", "ops"],
          "as-user-extra": { scopes: ["a", "b"] },
        },
      ),
    );
    const o = await applied(await loadKubeConfig({ file, env: {} }));
    const headers = o.headers as Record<string, string | string[]>;
    assert.equal(headers["Impersonate-User"], "alice");
    assert.equal(headers["Impersonate-Uid"], "1234");
    assert.deepEqual(headers["Impersonate-Group"], ["devs", "ops"]);
    assert.deepEqual(headers["Impersonate-Extra-scopes"], ["a", "b"]);

    const proxy = kubeconfig("proxy.yaml", single({ "proxy-url": "http://proxy:3128" }, { token: "t" }));
    await rejectsWith(
      loadKubeConfig({ file: proxy, env: {} }),
      /proxy\.yaml: clusters\[c\]\.cluster\.proxy-url: not supported/,
    );
    const asUser = kubeconfig("as-user.yaml", single({}, { token: "t", "as-user": "bob" }));
    await rejectsWith(
      loadKubeConfig({ file: asUser, env: {} }),
      /as-user\.yaml: users\[u\]\.user\.as-user: not supported/,
    );
    const badGroups = kubeconfig("groups.yaml", single({}, { token: "t", "as-groups": "devs" }));
    await rejectsWith(
      loadKubeConfig({ file: badGroups, env: {} }),
      /users\[u\]\.user\.as-groups: not a list/,
    );
  });
});

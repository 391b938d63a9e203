// Where the operator's API server and credentials come from — a kubeconfig file (--kubeconfig,
// KUBECONFIG merged as kubectl merges it, ~/.kube/config) or the in-cluster service account —
// without @kubernetes/client-node: importing it loads all its generated models (~83 MiB RSS),
// more than half of the 1,000-idle-pool budget. Only a user with an `exec` credential plugin or
// an `auth-provider` loads client-node's KubeConfig (dynamic import), which implements those.
import { existsSync, readFileSync } from "node:fs";
import type * as https from "node:https";
import { isIPv6 } from "node:net";
import { homedir } from "node:os";
import { delimiter, dirname, isAbsolute, join, resolve } from "node:path";
import { parse } from "yaml";

/** What KubeClient needs of a kubeconfig; client-node's KubeConfig has the same shape. */
export interface KubeCredentials {
  getCurrentCluster(): { server: string } | null;
  /** Sets TLS options (ca, cert, key, servername, rejectUnauthorized) and the Authorization header. */
  applyToHTTPSOptions(opts: https.RequestOptions): Promise<void>;
}

/** A kubeconfig or service account that cannot be used; the message names the file and field. */
export class KubeConfigError extends Error {
  override name = "KubeConfigError";
}

export interface LoadKubeConfigOptions {
  /**
   * --kubeconfig: this file, or files separated as in KUBECONFIG (the operator's flag defaults to
   * that variable); else KUBECONFIG, ~/.kube/config, the service account.
   */
  file?: string;
  /** Overrides the kubeconfig's current-context. */
  context?: string;
  env?: NodeJS.ProcessEnv;
  /** Prefix of /var/run/secrets/kubernetes.io/serviceaccount (tests). */
  root?: string;
  /** How long a token file's content is used before it is read again (rotation); default 60 s, as client-go. */
  tokenReloadMs?: number;
}

/** Where a pod's service account (token, ca.crt, namespace) is mounted. */
export const SERVICE_ACCOUNT = "/var/run/secrets/kubernetes.io/serviceaccount";

interface Cluster {
  server: string;
  ca?: Buffer;
  insecure?: boolean;
  tlsServerName?: string;
}

interface User {
  token?: string;
  tokenFile?: string;
  cert?: Buffer;
  key?: Buffer;
  username?: string;
  password?: string;
  impersonate?: string;
  impersonateUid?: string;
  impersonateGroups?: string[];
  impersonateExtra?: Record<string, string[]>;
}

/** Fields the loader implements (or hands to client-node: exec, auth-provider); any other is refused, never ignored. */
const CLUSTER_FIELDS = new Set([
  "server",
  "certificate-authority",
  "certificate-authority-data",
  "insecure-skip-tls-verify",
  "tls-server-name",
  "disable-compression",
  "extensions",
]);
const USER_FIELDS = new Set([
  "token",
  "tokenFile",
  "client-certificate",
  "client-certificate-data",
  "client-key",
  "client-key-data",
  "username",
  "password",
  "as",
  "as-uid",
  "as-groups",
  "as-user-extra",
  "exec",
  "auth-provider",
  "extensions",
]);

/** The first field of `body` not in `known`, refused with the field's full name. */
function refuseUnknown(
  body: Record<string, unknown>,
  known: Set<string>,
  field: (f: string) => string,
): void {
  const unknown = Object.keys(body).find((k) => !known.has(k));
  if (unknown !== undefined)
    throw new KubeConfigError(
      `${field(unknown)}: not supported by the operator's kubeconfig loader (supported: ${[...known].join(", ")})`,
    );
}

/** A loaded kubeconfig context or service account. */
export class KubeConnection implements KubeCredentials {
  private readonly cluster: Cluster;
  private readonly user: User;
  /** The context's (or the service account's) namespace, when it names one. */
  readonly namespace: string | undefined;
  /** Where it came from, for logs: the files, or "in-cluster". */
  readonly source: string;
  private readonly tokenReloadMs: number;
  private token: { value: string; readAt: number } | undefined;

  constructor(o: {
    cluster: Cluster;
    user: User;
    namespace?: string;
    source: string;
    tokenReloadMs?: number;
  }) {
    this.cluster = o.cluster;
    this.user = o.user;
    this.namespace = o.namespace;
    this.source = o.source;
    this.tokenReloadMs = o.tokenReloadMs ?? 60_000;
    if (this.user.tokenFile) this.bearerToken(); // an unreadable token file fails at load, not at the first request
  }

  getCurrentCluster(): { server: string } {
    return { server: this.cluster.server };
  }

  async applyToHTTPSOptions(opts: https.RequestOptions): Promise<void> {
    const { cluster, user } = this;
    if (cluster.ca) opts.ca = cluster.ca;
    if (cluster.insecure) opts.rejectUnauthorized = false;
    if (cluster.tlsServerName) opts.servername = cluster.tlsServerName;
    if (user.cert) opts.cert = user.cert;
    if (user.key) opts.key = user.key;
    if (user.username !== undefined) opts.auth = `${user.username}:${user.password ?? ""}`;
    const headers = (opts.headers ??= {}) as Record<string, string>;
    const token = this.bearerToken();
    if (token) headers.Authorization = `Bearer ${token}`;
    if (user.impersonate) headers["Impersonate-User"] = user.impersonate;
    if (user.impersonateUid) headers["Impersonate-Uid"] = user.impersonateUid;
    // node sends an array header value as repeated headers, as the API server reads groups and extras.
    const multi = headers as Record<string, string | string[]>;
    if (user.impersonateGroups?.length) multi["Impersonate-Group"] = user.impersonateGroups;
    for (const [k, v] of Object.entries(user.impersonateExtra ?? {}))
      multi[`Impersonate-Extra-${encodeURIComponent(k)}`] = v;
  }

  /** The token; a token file is re-read once its content is older than tokenReloadMs (projected tokens rotate). */
  private bearerToken(): string | undefined {
    const { token, tokenFile } = this.user;
    if (!tokenFile) return token;
    const now = Date.now();
    if (!this.token || now - this.token.readAt >= this.tokenReloadMs) {
      try {
        this.token = { value: readFileSync(tokenFile, "utf8").trim(), readAt: now };
      } catch (err) {
        // A rotation in progress: keep the previous token rather than sending none.
        if (!this.token) throw new KubeConfigError(`token file ${tokenFile}: ${(err as Error).message}`);
      }
    }
    return this.token!.value;
  }
}

/**
 * The connection as kubectl would choose it: `file`, else KUBECONFIG (several files merged: the
 * first to name a cluster, user or context wins, current-context from the first that sets one),
 * else ~/.kube/config, else the in-cluster service account.
 */
export async function loadKubeConfig(opts: LoadKubeConfigOptions = {}): Promise<KubeCredentials> {
  const env = opts.env ?? process.env;
  const files = kubeConfigFiles(env, opts.file);
  if (files.length === 0) {
    if (env.KUBERNETES_SERVICE_HOST && env.KUBERNETES_SERVICE_PORT)
      return inCluster(env, opts.root ?? "", opts.tokenReloadMs);
    throw new KubeConfigError(
      "no Kubernetes configuration: give --kubeconfig, set KUBECONFIG, create ~/.kube/config, or run in a pod",
    );
  }
  return fromFiles(files, opts);
}

/** The kubeconfig files kubectl would read: `file` (the flag), else KUBECONFIG, else ~/.kube/config if it exists. */
export function kubeConfigFiles(env: NodeJS.ProcessEnv, file?: string): string[] {
  const given = (file || env.KUBECONFIG || "").split(delimiter).filter(Boolean);
  if (given.length > 0) return given;
  const home = join(env.HOME || homedir(), ".kube", "config");
  return existsSync(home) ? [home] : [];
}

function inCluster(env: NodeJS.ProcessEnv, root: string, tokenReloadMs: number | undefined): KubeConnection {
  const dir = root + SERVICE_ACCOUNT;
  const host = env.KUBERNETES_SERVICE_HOST!;
  const port = env.KUBERNETES_SERVICE_PORT!;
  const caFile = join(dir, "ca.crt");
  const namespaceFile = join(dir, "namespace");
  return new KubeConnection({
    cluster: {
      server: `https://${isIPv6(host) ? `[${host}]` : host}:${port}`,
      ca: readFileFor(caFile, "in-cluster service account: ca.crt"),
    },
    user: { tokenFile: join(dir, "token") },
    namespace: existsSync(namespaceFile) ? readFileSync(namespaceFile, "utf8").trim() : undefined,
    source: "in-cluster",
    tokenReloadMs,
  });
}

type Entry = { name: string; body: Record<string, unknown>; file: string; index: number };

interface Merged {
  currentContext?: string;
  clusters: Map<string, Entry>;
  users: Map<string, Entry>;
  contexts: Map<string, Entry>;
}

async function fromFiles(files: string[], opts: LoadKubeConfigOptions): Promise<KubeCredentials> {
  const merged: Merged = { clusters: new Map(), users: new Map(), contexts: new Map() };
  for (const file of files) mergeFile(merged, file);
  const where = files.join(files.length > 1 ? ", " : "");
  const contextName = opts.context ?? merged.currentContext;
  if (!contextName) throw new KubeConfigError(`${where}: no current-context (set one, or give --context)`);
  const ctx = merged.contexts.get(contextName);
  if (!ctx)
    throw new KubeConfigError(
      `${where}: context "${contextName}" not found (${opts.context ? "--context" : "current-context"})`,
    );
  const ctxField = (f: string) => `${ctx.file}: contexts[${ctx.name}].context.${f}`;
  const clusterName = str(ctx.body.cluster, ctxField("cluster"));
  const userName = ctx.body.user === undefined ? undefined : str(ctx.body.user, ctxField("user"));
  if (!clusterName) throw new KubeConfigError(`${ctxField("cluster")}: missing`);
  const clusterEntry = merged.clusters.get(clusterName);
  if (!clusterEntry) throw new KubeConfigError(`${ctxField("cluster")}: cluster "${clusterName}" not found`);
  const userEntry = userName === undefined ? undefined : merged.users.get(userName);
  if (userName !== undefined && !userEntry)
    throw new KubeConfigError(`${ctxField("user")}: user "${userName}" not found`);
  const u = userEntry?.body ?? {};
  refuseUnknown(
    clusterEntry.body,
    CLUSTER_FIELDS,
    (f) => `${clusterEntry.file}: clusters[${clusterName}].cluster.${f}`,
  );
  if (userEntry) refuseUnknown(u, USER_FIELDS, (f) => `${userEntry.file}: users[${userName}].user.${f}`);
  if (u.exec !== undefined || u["auth-provider"] !== undefined)
    return clientNodeKubeConfig(files, contextName);
  const namespace =
    ctx.body.namespace === undefined ? undefined : str(ctx.body.namespace, ctxField("namespace"));
  return new KubeConnection({
    cluster: cluster(clusterEntry),
    user: userEntry ? user(userEntry) : {},
    namespace,
    source: where,
    tokenReloadMs: opts.tokenReloadMs,
  });
}

function mergeFile(merged: Merged, file: string): void {
  let doc: unknown;
  try {
    doc = parse(readFileSync(file, "utf8"));
  } catch (err) {
    throw new KubeConfigError(`${file}: ${(err as Error).message}`);
  }
  if (doc === null || doc === undefined) return; // an empty file merges as nothing, as in kubectl
  if (typeof doc !== "object" || Array.isArray(doc))
    throw new KubeConfigError(`${file}: not a kubeconfig (a mapping)`);
  const d = doc as Record<string, unknown>;
  if (d["current-context"] !== undefined && d["current-context"] !== "")
    merged.currentContext ??= str(d["current-context"], `${file}: current-context`);
  for (const [list, inner] of [
    ["clusters", "cluster"],
    ["users", "user"],
    ["contexts", "context"],
  ] as const) {
    const items = d[list];
    if (items === undefined || items === null) continue;
    if (!Array.isArray(items)) throw new KubeConfigError(`${file}: ${list}: not a list`);
    items.forEach((item: unknown, index) => {
      const at = `${file}: ${list}[${index}]`;
      if (typeof item !== "object" || item === null) throw new KubeConfigError(`${at}: not a mapping`);
      const it = item as Record<string, unknown>;
      const name = str(it.name, `${at}.name`);
      if (!name) throw new KubeConfigError(`${at}.name: missing`);
      const body = it[inner] ?? {};
      if (typeof body !== "object" || body === null || Array.isArray(body))
        throw new KubeConfigError(`${file}: ${list}[${name}].${inner}: not a mapping`);
      const map = merged[list];
      if (!map.has(name)) map.set(name, { name, body: body as Record<string, unknown>, file, index });
    });
  }
}

function cluster(e: Entry): Cluster {
  const b = e.body;
  const field = (f: string) => `${e.file}: clusters[${e.name}].cluster.${f}`;
  const server = str(b.server, field("server"));
  if (!server) throw new KubeConfigError(`${field("server")}: missing`);
  try {
    const u = new URL(server);
    if (u.protocol !== "https:" && u.protocol !== "http:") throw new Error("not http(s)");
  } catch {
    throw new KubeConfigError(`${field("server")}: not an http(s) URL: ${server}`);
  }
  const insecure = b["insecure-skip-tls-verify"];
  if (insecure !== undefined && typeof insecure !== "boolean")
    throw new KubeConfigError(`${field("insecure-skip-tls-verify")}: not true or false`);
  return {
    server,
    ca: fileOrData(e, "certificate-authority", "certificate-authority-data", field),
    insecure: insecure === true,
    tlsServerName:
      b["tls-server-name"] === undefined ? undefined : str(b["tls-server-name"], field("tls-server-name")),
  };
}

function user(e: Entry): User {
  const b = e.body;
  const field = (f: string) => `${e.file}: users[${e.name}].user.${f}`;
  const opt = (f: string) => (b[f] === undefined || b[f] === "" ? undefined : str(b[f], field(f)));
  const tokenFile = opt("tokenFile");
  const u: User = {
    token: opt("token"),
    tokenFile: tokenFile && relativeTo(e.file, tokenFile),
    cert: fileOrData(e, "client-certificate", "client-certificate-data", field),
    key: fileOrData(e, "client-key", "client-key-data", field),
    username: opt("username"),
    password: opt("password"),
    impersonate: opt("as"),
    impersonateUid: opt("as-uid"),
    impersonateGroups: b["as-groups"] === undefined ? undefined : strings(b["as-groups"], field("as-groups")),
    impersonateExtra: extras(b["as-user-extra"], field("as-user-extra")),
  };
  if (!u.cert !== !u.key)
    throw new KubeConfigError(
      `${field(u.cert ? "client-key" : "client-certificate")}: missing (a client certificate needs its key)`,
    );
  if (u.tokenFile && !existsSync(u.tokenFile))
    throw new KubeConfigError(`${field("tokenFile")}: ${u.tokenFile} not found`);
  return u;
}

/** `<name>` (a path, relative to the kubeconfig's directory) or `<name>-data` (base64). */
function fileOrData(
  e: Entry,
  fileKey: string,
  dataKey: string,
  field: (f: string) => string,
): Buffer | undefined {
  const data = e.body[dataKey];
  if (data !== undefined && data !== "") {
    const s = str(data, field(dataKey));
    const buf = Buffer.from(s, "base64");
    if (buf.length === 0 || !/^[A-Za-z0-9+/=\s]+$/.test(s))
      throw new KubeConfigError(`${field(dataKey)}: not base64`);
    return buf;
  }
  const path = e.body[fileKey];
  if (path === undefined || path === "") return undefined;
  return readFileFor(relativeTo(e.file, str(path, field(fileKey))), field(fileKey));
}

/** The file's content; else an error naming the field that points to it. */
function readFileFor(path: string, field: string): Buffer {
  try {
    return readFileSync(path);
  } catch (err) {
    const reason = (err as NodeJS.ErrnoException).code === "ENOENT" ? "not found" : (err as Error).message;
    throw new KubeConfigError(`${field}: ${path}: ${reason}`);
  }
}

function relativeTo(kubeconfig: string, path: string): string {
  return isAbsolute(path) ? path : resolve(dirname(kubeconfig), path);
}

function strings(v: unknown, field: string): string[] {
  if (!Array.isArray(v)) throw new KubeConfigError(`${field}: not a list of strings`);
  return v.map((x, i) => str(x, `${field}[${i}]`));
}

function extras(v: unknown, field: string): Record<string, string[]> | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "object" || Array.isArray(v)) throw new KubeConfigError(`${field}: not a mapping`);
  return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, strings(x, `${field}.${k}`)]));
}

function str(v: unknown, field: string): string {
  if (typeof v !== "string") throw new KubeConfigError(`${field}: not a string`);
  return v;
}

/** exec plugins and auth providers: client-node implements them (and is loaded only for them). */
async function clientNodeKubeConfig(files: string[], context: string): Promise<KubeCredentials> {
  const { KubeConfig } = await import("@kubernetes/client-node");
  const kc = new KubeConfig();
  kc.loadFromFile(files[0]!);
  for (const file of files.slice(1)) {
    const more = new KubeConfig();
    more.loadFromFile(file);
    // kubectl's merge: the first file to name a cluster, user or context wins.
    for (const c of more.clusters) if (!kc.getCluster(c.name)) kc.addCluster(c);
    for (const u of more.users) if (!kc.getUser(u.name)) kc.addUser(u);
    for (const c of more.contexts) if (!kc.getContextObject(c.name)) kc.addContext(c);
  }
  kc.setCurrentContext(context);
  return kc;
}

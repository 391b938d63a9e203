// Named API tokens with scopes, kept as hashes in a YAML file (a mounted Secret in the chart):
//   tokens:
//     - name: docs-team
//       hash: "sha256:<hex>"          (or "scrypt:<salt b64url>:<hash b64url>")
//       scopes: { pipelines: [docs], queues: ["docs/*"], groups: [acme], verbs: [read, enqueue] }
// A list left out (or empty) covers everything of its kind; verbs are never implied by others.
// The file is read again when it changes (fs.watch, and a stat every few seconds where events
// do not arrive, as on a Secret's symlink swap); a file that does not parse keeps the last good
// set and logs an error naming its line.
import { createHash, randomBytes, scryptSync, timingSafeEqual } from "node:crypto";
import { readFileSync, statSync, watch, writeFileSync, renameSync, type FSWatcher } from "node:fs";
import { basename, dirname, join } from "node:path";
import { LineCounter, parseDocument, isMap, isSeq, type Node } from "yaml";
import { formatRateLimit, parseRateLimit, type RateLimit } from "../queue/control.ts";

export const VERBS = ["read", "enqueue", "operate", "admin"] as const;
export type Verb = (typeof VERBS)[number];

/** null: every one of its kind. */
export interface Scope {
  pipelines: string[] | null;
  /** Globs: `*` is any run of characters (a `/` too). */
  queues: string[] | null;
  groups: string[] | null;
  verbs: Verb[];
}

export interface TokenEntry {
  name: string;
  hash: string;
  scopes: Scope;
  /** Requests per window across every replica (`rate: 50/s`); absent: no limit. */
  rate?: RateLimit | null;
}

/** Who a request is: the full-access CONVEYOR_API_TOKEN (scope null) or a named token. */
export interface Principal {
  name: string;
  scope: Scope | null;
  rate?: RateLimit | null;
}

export const FULL_ACCESS: Principal = { name: "api-token", scope: null };
export const TOKEN_NAME = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/;

export class TokensFileError extends Error {
  override name = "TokensFileError";
}

const globRegex = (glob: string) =>
  new RegExp(
    `^${glob
      .split("*")
      .map((s) => s.replace(/[.+?^${}()|[\]\\]/g, "\\$&"))
      .join(".*")}$`,
  );

export function queueInScope(scope: Scope | null, queue: string): boolean {
  if (!scope) return true;
  if (scope.pipelines && !scope.pipelines.includes(queue.split("/")[0]!)) return false;
  return !scope.queues || scope.queues.some((g) => globRegex(g).test(queue));
}

/** A job without a group belongs to no tenant: a group-scoped token does not see it. */
export function groupInScope(scope: Scope | null, group: string | undefined | null): boolean {
  if (!scope?.groups) return true;
  return group !== undefined && group !== null && scope.groups.includes(group);
}

export function hasVerb(scope: Scope | null, verb: Verb): boolean {
  return !scope || scope.verbs.includes(verb);
}

/** `sha256:<hex>` of a token: what the file stores. */
export function hashToken(token: string): string {
  return `sha256:${createHash("sha256").update(token).digest("hex")}`;
}

export function newToken(): string {
  return `cvy_${randomBytes(32).toString("base64url")}`;
}

function hashMatches(hash: string, token: string): boolean {
  const [kind, a, b] = hash.split(":");
  if (kind === "sha256") return timingSafeEqual(Buffer.from(hashToken(token)), Buffer.from(hash));
  const expected = Buffer.from(b!, "base64url");
  const got = scryptSync(token, Buffer.from(a!, "base64url"), expected.length);
  return timingSafeEqual(got, expected);
}

/** `pipeline=docs,queues=docs/*,groups=acme+globex,verbs=read+enqueue` (plural or not; `+` joins values). */
export function parseScope(text: string): Scope {
  const scope: Scope = { pipelines: null, queues: null, groups: null, verbs: [] };
  for (const part of text.split(",").filter(Boolean)) {
    const m = /^\s*(pipelines?|queues?|groups?|verbs?)\s*=\s*(.+)$/.exec(part);
    if (!m)
      throw new TokensFileError(
        `scope part ${JSON.stringify(part)}: expected pipeline=, queues=, groups= or verbs= with values joined by +`,
      );
    const key = m[1]!.replace(/s?$/, "s") as "pipelines" | "queues" | "groups" | "verbs";
    const values = m[2]!.split("+").map((v) => v.trim());
    if (key === "verbs") scope.verbs = values.map((v) => checkVerb(v, "verbs"));
    else scope[key] = [...(scope[key] ?? []), ...values];
  }
  if (scope.verbs.length === 0)
    throw new TokensFileError(
      `scope ${JSON.stringify(text)} names no verbs (verbs=read+enqueue+operate+admin)`,
    );
  return scope;
}

function checkVerb(v: unknown, where: string): Verb {
  if (typeof v !== "string" || !(VERBS as readonly string[]).includes(v))
    throw new TokensFileError(`${where}: unknown verb ${JSON.stringify(v)} (one of ${VERBS.join(", ")})`);
  return v as Verb;
}

/** The file's entries; an error names the line of what is wrong. */
export function parseTokensFile(text: string, file = "tokens file"): TokenEntry[] {
  const lines = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lines, prettyErrors: false });
  const at = (node: Node | null | undefined) =>
    node?.range ? `${file}:${lines.linePos(node.range[0]).line}` : file;
  if (doc.errors.length > 0) {
    const e = doc.errors[0]!;
    throw new TokensFileError(`${file}:${lines.linePos(e.pos[0]).line}: ${e.message.split("\n")[0]}`);
  }
  if (doc.contents === null) return [];
  if (!isMap(doc.contents)) throw new TokensFileError(`${at(doc.contents)}: expected a map with "tokens:"`);
  const list = doc.contents.get("tokens", true) as Node | undefined;
  if (list === undefined || list === null) return [];
  if (!isSeq(list)) throw new TokensFileError(`${at(list)}: "tokens" must be a list`);
  const seen = new Set<string>();
  return list.items.map((item) => {
    const where = at(item as Node);
    if (!isMap(item)) throw new TokensFileError(`${where}: each token is a map with name, hash, scopes`);
    const e = item.toJSON() as Record<string, unknown>;
    for (const key of Object.keys(e))
      if (!["name", "hash", "scopes", "rate"].includes(key))
        throw new TokensFileError(
          `${where}: unknown field ${JSON.stringify(key)} (name, hash, scopes, rate)`,
        );
    if (typeof e.name !== "string" || !TOKEN_NAME.test(e.name))
      throw new TokensFileError(`${where}: name must match ${TOKEN_NAME.source}`);
    if (seen.has(e.name)) throw new TokensFileError(`${where}: token ${e.name} is named twice`);
    if (e.name === FULL_ACCESS.name)
      throw new TokensFileError(`${where}: the name ${e.name} is CONVEYOR_API_TOKEN's in the audit trail`);
    seen.add(e.name);
    if (typeof e.hash !== "string" || !/^(sha256:[0-9a-f]{64}|scrypt:[\w-]{8,}:[\w-]{16,})$/.test(e.hash))
      throw new TokensFileError(
        `${where}: token ${e.name}: hash must be "sha256:<64 hex>" or "scrypt:<salt>:<hash>" (base64url)`,
      );
    const s = (e.scopes ?? {}) as Record<string, unknown>;
    if (typeof s !== "object" || Array.isArray(s))
      throw new TokensFileError(`${where}: token ${e.name}: scopes must be a map`);
    const names = (key: string): string[] | null => {
      const v = s[key];
      if (v === undefined || v === null) return null;
      if (!Array.isArray(v) || v.some((x) => typeof x !== "string"))
        throw new TokensFileError(`${where}: token ${e.name}: scopes.${key} must be a list of names`);
      return v.length === 0 ? null : (v as string[]);
    };
    for (const key of Object.keys(s))
      if (!["pipelines", "queues", "groups", "verbs"].includes(key))
        throw new TokensFileError(
          `${where}: token ${e.name}: unknown scope ${JSON.stringify(key)} (pipelines, queues, groups, verbs)`,
        );
    const verbs = names("verbs") ?? [];
    if (verbs.length === 0) throw new TokensFileError(`${where}: token ${e.name}: scopes.verbs is empty`);
    let rate: RateLimit | null = null;
    if (e.rate !== undefined && e.rate !== null)
      try {
        rate = parseRateLimit(String(e.rate));
      } catch (err) {
        throw new TokensFileError(`${where}: token ${e.name}: rate: ${(err as Error).message}`);
      }
    return {
      name: e.name,
      hash: e.hash,
      ...(rate ? { rate } : {}),
      scopes: {
        pipelines: names("pipelines"),
        queues: names("queues"),
        groups: names("groups"),
        verbs: verbs.map((v) => checkVerb(v, `${where}: token ${e.name}`)),
      },
    };
  });
}

export function formatTokensFile(entries: TokenEntry[]): string {
  const out = ["tokens:"];
  if (entries.length === 0) return "tokens: []\n";
  for (const e of entries) {
    out.push(`  - name: ${e.name}`, `    hash: "${e.hash}"`);
    if (e.rate) out.push(`    rate: "${formatRateLimit(e.rate)}"`);
    out.push("    scopes:");
    for (const key of ["pipelines", "queues", "groups", "verbs"] as const) {
      const v = e.scopes[key];
      if (v) out.push(`      ${key}: [${v.map((x) => JSON.stringify(x)).join(", ")}]`);
    }
  }
  return `${out.join("\n")}\n`;
}

/** Reads the file (absent: no tokens). */
export function readTokensFile(file: string): TokenEntry[] {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return [];
    throw err;
  }
  return parseTokensFile(text, file);
}

/** Replaces the file at once (a reader never sees half of it). */
export function writeTokensFile(file: string, entries: TokenEntry[]): void {
  const tmp = join(dirname(file), `.${basename(file)}.${process.pid}.tmp`);
  writeFileSync(tmp, formatTokensFile(entries), { mode: 0o600 });
  renameSync(tmp, file);
}

const STAT_EVERY_MS = 2_000;

/** The tokens in force, reloaded when the file changes. */
export class TokenStore {
  private entries: TokenEntry[] = [];
  private bySha = new Map<string, TokenEntry>();
  /** sha256 of a token that matched a scrypt entry → that entry: scrypt is slow by design. */
  private scryptHits = new Map<string, TokenEntry>();
  private watcher: FSWatcher | null = null;
  private timer: ReturnType<typeof setInterval> | null = null;
  private lastStat = "";
  /** Bumped on every successful load (tests wait for it). */
  generation = 0;

  readonly file: string;
  private readonly onError: (message: string) => void;
  private readonly onLoad: (names: string[]) => void;

  constructor(
    file: string,
    onError: (message: string) => void = () => {},
    onLoad: (names: string[]) => void = () => {},
  ) {
    this.file = file;
    this.onError = onError;
    this.onLoad = onLoad;
    // The first read must succeed: a server that starts on a broken file would refuse everyone.
    this.install(readTokensFile(file));
    this.lastStat = this.statKey();
  }

  start(): this {
    try {
      this.watcher = watch(dirname(this.file), { persistent: false }, () => this.check());
      this.watcher.on("error", () => {});
    } catch {
      // (no watch on this filesystem: the stat below finds changes)
    }
    this.timer = setInterval(() => this.check(), STAT_EVERY_MS);
    this.timer.unref();
    return this;
  }

  stop(): void {
    this.watcher?.close();
    if (this.timer) clearInterval(this.timer);
  }

  get names(): string[] {
    return this.entries.map((e) => e.name);
  }

  /** Reads the file again when it changed; a broken file keeps the last good set. */
  check(): void {
    const key = this.statKey();
    if (key === this.lastStat) return;
    this.lastStat = key;
    try {
      this.install(readTokensFile(this.file));
    } catch (err) {
      this.onError(`tokens file not reloaded, keeping the last good one: ${(err as Error).message}`);
    }
  }

  private statKey(): string {
    try {
      const s = statSync(this.file);
      return `${s.ino}:${s.size}:${s.mtimeMs}`;
    } catch {
      return "absent";
    }
  }

  private install(entries: TokenEntry[]): void {
    this.entries = entries;
    this.bySha = new Map(entries.filter((e) => e.hash.startsWith("sha256:")).map((e) => [e.hash, e]));
    this.scryptHits.clear();
    this.generation++;
    this.onLoad(this.names);
  }

  /** The entry this token is, or null. */
  find(token: string): TokenEntry | null {
    const key = hashToken(token);
    const known = this.bySha.get(key) ?? this.scryptHits.get(key);
    if (known) return known;
    for (const e of this.entries)
      if (e.hash.startsWith("scrypt:") && hashMatches(e.hash, token)) {
        if (this.scryptHits.size >= 1000) this.scryptHits.clear();
        this.scryptHits.set(key, e);
        return e;
      }
    return null;
  }

  byName(name: string): TokenEntry | null {
    return this.entries.find((e) => e.name === name) ?? null;
  }
}

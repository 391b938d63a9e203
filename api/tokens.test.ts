// The tokens file: parsing (errors name the line), scopes, hashes, and a reload that keeps the
// last good set when the file is broken.
import assert from "node:assert/strict";
import { scryptSync } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import {
  formatTokensFile,
  groupInScope,
  hashToken,
  parseScope,
  parseTokensFile,
  queueInScope,
  TokenStore,
  writeTokensFile,
} from "./tokens.ts";

const HASH = hashToken("t0ken-of-at-least-16");

test("a malformed tokens file is refused naming its line", () => {
  assert.throws(
    () =>
      parseTokensFile(`tokens:\n  - name: a\n    hash: "${HASH}"\n    scopes: {verbs: [fly]}\n`, "t.yaml"),
    /t\.yaml:2: token a: unknown verb "fly"/,
  );
  assert.throws(
    () => parseTokensFile(`tokens:\n  - name: a\n    hash: [\n`, "t.yaml"),
    /^TokensFileError: t\.yaml:\d+:/,
  );
  assert.throws(
    () =>
      parseTokensFile(
        `tokens:\n  - name: a\n    hash: "${HASH}"\n    scopes: {verbs: [read]}\n  - name: b\n    hash: nope\n`,
        "t.yaml",
      ),
    /t\.yaml:5: token b: hash must be/,
  );
  assert.throws(
    () => parseTokensFile(`tokens:\n  - name: api-token\n    hash: "${HASH}"\n    scopes: {verbs: [read]}\n`),
    /api-token is CONVEYOR_API_TOKEN's/,
  );
  assert.deepEqual(parseTokensFile(""), []);
});

test("a rate limit per token: parsed, written back, and a bad one named", () => {
  const text = `tokens:\n  - name: a\n    hash: "${HASH}"\n    rate: 50/s\n    scopes: {verbs: [read]}\n`;
  const [e] = parseTokensFile(text, "t.yaml");
  assert.deepEqual(e!.rate, { max: 50, perMs: 1000 });
  assert.deepEqual(parseTokensFile(formatTokensFile([e!])), [e]);
  assert.throws(
    () => parseTokensFile(text.replace("50/s", "fast"), "t.yaml"),
    /t\.yaml:2: token a: rate: invalid rate limit "fast": expected <N>\/<s\|m\|h>/,
  );
});

test("scopes: pipelines, queue globs, groups; a job of no group is no tenant's", () => {
  const s = parseScope("pipeline=docs,queues=docs/o*,groups=acme+initech,verbs=read+enqueue");
  assert.deepEqual(s, {
    pipelines: ["docs"],
    queues: ["docs/o*"],
    groups: ["acme", "initech"],
    verbs: ["read", "enqueue"],
  });
  assert.equal(queueInScope(s, "docs/ocr"), true);
  assert.equal(queueInScope(s, "docs/index"), false);
  assert.equal(queueInScope(s, "mail/ocr"), false);
  assert.equal(groupInScope(s, "acme"), true);
  assert.equal(groupInScope(s, "globex"), false);
  assert.equal(groupInScope(s, undefined), false);
  assert.equal(groupInScope(null, undefined), true);
  assert.throws(() => parseScope("pipeline=docs"), /names no verbs/);
});

test("a scrypt hash is accepted", () => {
  const salt = Buffer.from("0123456789abcdef");
  const hash = `scrypt:${salt.toString("base64url")}:${scryptSync("s3cret-token-0123", salt, 32).toString("base64url")}`;
  const dir = mkdtempSync(join(tmpdir(), "cvy-tokens-scrypt-"));
  try {
    const file = join(dir, "tokens.yaml");
    writeTokensFile(file, [
      { name: "s", hash, scopes: { pipelines: null, queues: null, groups: null, verbs: ["read"] } },
    ]);
    const store = new TokenStore(file);
    assert.equal(store.find("s3cret-token-0123")?.name, "s");
    assert.equal(store.find("s3cret-token-0123")?.name, "s", "(remembered)");
    assert.equal(store.find("wrong-token-000000"), null);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a broken file on reload keeps the last good set and reports the line", () => {
  const dir = mkdtempSync(join(tmpdir(), "cvy-tokens-unit-"));
  const file = join(dir, "tokens.yaml");
  try {
    writeTokensFile(file, [
      { name: "a", hash: HASH, scopes: { pipelines: null, queues: null, groups: null, verbs: ["read"] } },
    ]);
    const errors: string[] = [];
    const store = new TokenStore(file, (m) => errors.push(m));
    assert.equal(store.find("t0ken-of-at-least-16")?.name, "a");
    writeFileSync(
      file,
      `tokens:\n  - name: a\n    hash: "${HASH}"\n    scopes: {verbs: [read], colour: [red]}\n`,
    );
    store.check();
    assert.match(
      errors[0] ?? "",
      /keeping the last good one: .*tokens\.yaml:2: token a: unknown scope "colour"/,
    );
    assert.equal(store.find("t0ken-of-at-least-16")?.name, "a", "the last good set is in force");
    writeTokensFile(file, []);
    store.check();
    assert.equal(store.find("t0ken-of-at-least-16"), null);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

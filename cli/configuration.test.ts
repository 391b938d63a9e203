// One declaration per setting: docs/configuration.md is generated from the tables, and every
// variable or flag the chart sets (and the operator sets on worker pods) is declared there.
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { test } from "node:test";
import type { Setting } from "../lib/options.ts";
import { workerEnv } from "../operator/controllers/deployment.ts";
import { allSettings, CONFIGURATION_FILE, configurationMarkdown } from "./configuration.ts";

const TEMPLATES = new URL("../charts/conveyor/templates/", import.meta.url);

const declared = async () => {
  const all = await allSettings();
  const settings = all.flatMap(({ settings }) => Object.values(settings) as Setting[]);
  // The chart uses current names only (a former one would print a warning at every start).
  const variables = new Set(settings.flatMap((s) => (s.env ? [s.env] : [])));
  const formerVariables = new Set(settings.flatMap((s) => (s.deprecatedEnv ? [s.deprecatedEnv] : [])));
  const flags = (command: string) =>
    new Set(
      (Object.entries(all.find((a) => a.command === command)!.settings) as [string, Setting][]).flatMap(
        ([flag, s]) => (s.envOnly ? [] : [flag]),
      ),
    );
  return { variables, formerVariables, flags };
};

test("docs/configuration.md is generated from the settings tables (run `npm run gen:config` when this fails)", async () => {
  assert.equal(
    readFileSync(CONFIGURATION_FILE, "utf8"),
    await configurationMarkdown(),
    "docs/configuration.md is stale: run `npm run gen:config`",
  );
});

test("every variable the chart's templates set is a declared setting", async () => {
  const { variables } = await declared();
  const set: string[] = [];
  for (const file of readdirSync(TEMPLATES).filter((f) => f.endsWith(".yaml"))) {
    const text = readFileSync(new URL(file, TEMPLATES), "utf8");
    for (const m of text.matchAll(/^\s*- name: ([A-Z][A-Z0-9_]*)\s*$/gm)) set.push(`${file}: ${m[1]}`);
  }
  assert.ok(set.length >= 8, `found the chart's env: ${set.join(", ")}`);
  const undeclared = set.filter((s) => !variables.has(s.split(": ")[1]!));
  assert.deepEqual(
    undeclared,
    [],
    "declare each in a settings table (lib/settings.ts ENVIRONMENT for others)",
  );
});

test("every flag the chart passes is one its command declares", async () => {
  const { flags } = await declared();
  const commands: Record<string, string> = {
    "deployment.yaml": "operator",
    "job-api-deployment.yaml": "api",
  };
  let checked = 0;
  for (const [file, command] of Object.entries(commands)) {
    const text = readFileSync(new URL(file, TEMPLATES), "utf8");
    const known = flags(command);
    for (const m of text.matchAll(/^\s*- --([a-z][a-z-]*)/gm)) {
      assert.ok(known.has(m[1]!), `${file} passes --${m[1]}, which conveyor ${command} does not declare`);
      checked++;
    }
  }
  assert.ok(checked >= 15, `checked ${checked} flags`);
});

test("every variable the operator sets on worker pods is a declared setting", async () => {
  const { variables, formerVariables } = await declared();
  const spec = {
    queue: "q",
    handler: { module: "/app/h.js", passCredentials: true },
    concurrency: 1,
    maxJobSeconds: 60,
    redis: { url: "redis://r:6379", secretRef: { name: "r", key: "p" } },
    database: { secretRef: { name: "pg", key: "url" } },
    template: {},
  };
  const names = workerEnv(spec as unknown as Parameters<typeof workerEnv>[0]).map((e) => e.name);
  assert.deepEqual(
    names.filter((n) => !variables.has(n) && !formerVariables.has(n)),
    [],
  );
});

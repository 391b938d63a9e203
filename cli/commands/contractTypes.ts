// `conveyor contract types`: TypeScript types and Python TypedDicts for a stage's contract, so
// producers and handlers type-check against what the queue enforces. TypeScript comes from
// json-schema-to-typescript, an optional package (requireOptional: the packed command and its
// images do not carry it or its prettier); Python from the small generator below, as no
// maintained one is installable alongside the client.
import { readFileSync, writeFileSync } from "node:fs";
import { extname } from "node:path";
import { REDIS_URL_SETTING } from "../../lib/settings.ts";
import { readOptions, type Settings } from "../../lib/options.ts";
import { requireOptional } from "../../lib/optionalPackage.ts";
import { compileContract, getContract, type Contract, type JsonSchema } from "../../queue/contracts.ts";
import { assertQueueNameForUsage, UsageError, withRedis } from "../command.ts";

export const CONTRACT_TYPES_USAGE =
  "contract types (<queue> | --file CONTRACT.json|yaml) --lang ts|python [--out FILE]";

export const CONTRACT_TYPES_SETTINGS = {
  redis: REDIS_URL_SETTING,
  lang: {
    kind: "choice",
    choices: ["ts", "python"],
    arg: "ts|python",
    help: "contract types: the language of the types (TypeScript, or Python TypedDicts)",
  },
  out: {
    kind: "string",
    arg: "FILE",
    help: "contract types: write the types to FILE (default: standard output)",
  },
  file: {
    kind: "file",
    help: "contract types: read the contract from FILE (JSON or YAML: {data, result, tasks}) instead of a queue",
  },
} as const satisfies Settings;

/**
 * `conveyor contract types …`: `argv` is what follows `contract types` (a leading `types` is
 * skipped). Returns the exit status; a usage error throws UsageError or OptionError.
 */
export async function contractTypesCommand(argv: string[]): Promise<number> {
  const args = argv[0] === "types" ? argv.slice(1) : argv;
  const o = readOptions(args, process.env, CONTRACT_TYPES_SETTINGS, { positionals: true });
  const [queue, ...extra] = o.positionals;
  if (extra.length > 0)
    throw new UsageError(
      `contract types: unexpected argument ${JSON.stringify(extra[0])} (${CONTRACT_TYPES_USAGE})`,
    );
  const lang = o.raw("lang");
  if (lang === undefined) throw new UsageError(`contract types: --lang ts|python is required`);
  o.choice("lang");
  const file = o.file("file");
  if ((queue === undefined) === (file === undefined))
    throw new UsageError(`contract types: name a queue or --file, not both (${CONTRACT_TYPES_USAGE})`);

  let contract: unknown;
  let source: string;
  if (file !== undefined) {
    contract = await readContractFile(file);
    source = file;
  } else {
    assertQueueNameForUsage(queue!);
    const stored = await withRedis(o.str("redis")!, (redis) => getContract(redis, queue!));
    if (!stored) {
      process.stderr.write(`conveyor: queue ${queue} has no contract (conveyor contract set)\n`);
      return 1;
    }
    contract = stored.contract;
    source = `queue ${queue}`;
  }
  const compiled = compileContract(contract);
  const text =
    lang === "ts"
      ? await typescriptTypes(compiled.contract, `${source}, contract ${compiled.hash}`)
      : pythonTypes(compiled.contract, `${source}, contract ${compiled.hash}`);
  const out = o.str("out");
  if (out) writeFileSync(out, text);
  else process.stdout.write(text);
  return 0;
}

/** A contract file as JSON, or YAML when its name says so (.yaml/.yml); errors name the file. */
export async function readContractFile(path: string): Promise<unknown> {
  const text = readFileSync(path, "utf8");
  const yaml = [".yaml", ".yml"].includes(extname(path).toLowerCase());
  try {
    return yaml ? (await import("yaml")).parse(text) : JSON.parse(text);
  } catch (err) {
    throw new Error(`${path}: not valid ${yaml ? "YAML" : "JSON"}: ${(err as Error).message}`);
  }
}

// --- Which types a contract gives -----------------------------------------------------------

/** Each declared schema with its type name: `Data`, `Result`, `<Task>Data`, `<Task>Result`. */
export function namedSchemas(contract: Contract): { name: string; schema: JsonSchema; where: string }[] {
  const out: { name: string; schema: JsonSchema; where: string }[] = [];
  const add = (name: string, schema: JsonSchema | undefined, where: string) => {
    if (schema === undefined) return;
    const clash = out.find((o) => o.name === name);
    if (clash) throw new Error(`${where} and ${clash.where} would both be named ${name}: rename a task`);
    out.push({ name, schema, where });
  };
  add("Data", contract.data, "data");
  add("Result", contract.result, "result");
  for (const [task, t] of Object.entries(contract.tasks ?? {})) {
    add(`${pascal(task)}Data`, t.data, `tasks.${task}.data`);
    add(`${pascal(task)}Result`, t.result, `tasks.${task}.result`);
  }
  return out;
}

/** `org.extract-v2` → `OrgExtractV2`; a name that would start with a digit gets a `T` first. */
export function pascal(s: string): string {
  const p = s
    .split(/[^A-Za-z0-9]+/)
    .filter(Boolean)
    .map((w) => w[0]!.toUpperCase() + w.slice(1))
    .join("");
  return /^[0-9]/.test(p) ? `T${p}` : p || "T";
}

const SCHEMA_MAPS = ["properties", "patternProperties", "$defs", "definitions", "dependentSchemas"];
const SCHEMA_ONE = [
  "items",
  "additionalItems",
  "additionalProperties",
  "unevaluatedItems",
  "unevaluatedProperties",
  "contains",
  "propertyNames",
  "not",
  "if",
  "then",
  "else",
];
const SCHEMA_LISTS = ["allOf", "anyOf", "oneOf", "prefixItems", "items"];

/** Calls `fn` on every subschema below `schema` (not on `schema` itself), knowing which keys hold schemas. */
function eachSubschema(schema: unknown, fn: (s: Record<string, unknown>) => void): void {
  if (!schema || typeof schema !== "object" || Array.isArray(schema)) return;
  const s = schema as Record<string, unknown>;
  const visit = (x: unknown) => {
    if (x && typeof x === "object" && !Array.isArray(x)) {
      fn(x as Record<string, unknown>);
      eachSubschema(x, fn);
    }
  };
  for (const k of SCHEMA_MAPS)
    if (s[k] && typeof s[k] === "object") for (const x of Object.values(s[k] as object)) visit(x);
  for (const k of SCHEMA_ONE) if (!Array.isArray(s[k])) visit(s[k]);
  for (const k of SCHEMA_LISTS) if (Array.isArray(s[k])) for (const x of s[k] as unknown[]) visit(x);
}

// --- TypeScript -----------------------------------------------------------------------------

interface Jstt {
  compile(schema: object, name: string, options: Record<string, unknown>): Promise<string>;
}

/**
 * One module of exported types. Every type a schema names (its $defs, titled subschemas) starts
 * with the schema's own type name, so two schemas' `Phone` definitions do not clash.
 */
export async function typescriptTypes(contract: Contract, source: string): Promise<string> {
  const jstt = requireOptional<Jstt>(
    "json-schema-to-typescript",
    "TypeScript types from a contract (conveyor contract types --lang ts)",
  );
  const blocks: string[] = [];
  for (const { name, schema, where } of namedSchemas(contract)) {
    if (typeof schema === "boolean") {
      blocks.push(
        `/** ${where}: ${schema ? "any value" : "no value is valid"} */\nexport type ${name} = ${schema ? "unknown" : "never"};\n`,
      );
      continue;
    }
    const s = structuredClone(schema) as Record<string, unknown>;
    delete s.title;
    delete s.$id;
    for (const key of ["$defs", "definitions"]) {
      const defs = s[key];
      if (defs && typeof defs === "object")
        for (const [k, d] of Object.entries(defs as Record<string, unknown>))
          if (d && typeof d === "object" && !Array.isArray(d) && !("title" in d))
            (d as Record<string, unknown>).title = k;
    }
    eachSubschema(s, (sub) => {
      if (typeof sub.title === "string") sub.title = `${name}${pascal(sub.title)}`;
      delete sub.$id;
    });
    try {
      const text = await jstt.compile(s, name, {
        bannerComment: "",
        format: true,
        additionalProperties: true,
        unreachableDefinitions: false,
        $refOptions: { resolve: { external: false, file: false, http: false } },
      });
      blocks.push(`// ${where}\n${text.trimEnd()}\n${aliasForRootRef(s, name, text)}`);
    } catch (err) {
      throw new Error(`${where}: cannot make TypeScript types: ${(err as Error).message}`);
    }
  }
  return `// Generated by conveyor contract types from ${source}: do not edit; regenerate when the contract changes.\n\n${blocks.join("\n")}`;
}

/** A root that is only a $ref comes out under its target's name: `name` is then an alias of it. */
function aliasForRootRef(s: Record<string, unknown>, name: string, text: string): string {
  if (new RegExp(`^export (interface|type) ${name}\\b`, "m").test(text)) return "";
  const m = typeof s.$ref === "string" ? /^#\/(\$defs|definitions)\/([^/]+)$/.exec(s.$ref) : null;
  const target = m ? (s[m[1]!] as Record<string, { title?: string }> | undefined)?.[m[2]!] : undefined;
  return `export type ${name} = ${target?.title ?? "unknown"};\n`;
}

// --- Python ---------------------------------------------------------------------------------

const PY_KEYWORDS = new Set(
  (
    "False None True and as assert async await break class continue def del elif else except finally for " +
    "from global if import in is lambda nonlocal not or pass raise return try while with yield"
  ).split(" "),
);

type Schema = Record<string, unknown>;

/**
 * Python 3.11 TypedDicts: an object with properties is a TypedDict (optional properties
 * NotRequired; nested objects their own TypedDicts named by path), enum/const a Literal, arrays
 * list[...], anyOf/oneOf and type lists unions, $ref to $defs/definitions the definition's type,
 * additionalProperties alone dict[str, ...]; anything else Any, with a comment saying why.
 */
export function pythonTypes(contract: Contract, source: string): string {
  const gen = new PythonGenerator();
  for (const { name, schema, where } of namedSchemas(contract)) gen.root(name, schema, where);
  return gen.module(source);
}

class PythonGenerator {
  private readonly blocks: string[] = [];
  private readonly names = new Set<string>();
  /** Named schemas (roots, definitions, nested objects) by identity: a $ref reuses its name. */
  private readonly named = new Map<object, string>();
  private readonly inProgress = new Set<string>();
  private readonly imports = new Set<string>();
  private root_: Schema | boolean = true;

  root(name: string, schema: JsonSchema, where: string): void {
    this.root_ = schema;
    if (typeof schema === "boolean") {
      this.imports.add("Any");
      this.blocks.push(`# ${where}: ${schema ? "any value" : "no value is valid"}\n${name} = Any\n`);
      this.names.add(name);
      return;
    }
    this.names.add(name);
    this.define(schema, name, `# ${where}`);
  }

  module(source: string): string {
    const typing = [...this.imports].sort();
    const head = `"""Generated by conveyor contract types from ${source}: do not edit; regenerate when the contract changes."""\n\n`;
    const imports = typing.length ? `from typing import ${typing.join(", ")}\n\n\n` : "";
    return `${head}${imports}${this.blocks.join("\n\n")}`;
  }

  private unique(name: string): string {
    let n = name;
    for (let i = 2; this.names.has(n); i++) n = `${name}${i}`;
    this.names.add(n);
    return n;
  }

  /** Emits `name` for `s` (a TypedDict, or an alias) after what it uses; returns the name. */
  private define(s: Schema, name: string, heading?: string): string {
    // Marked before its parts are made, so a recursive $ref names it (quoted) instead of looping.
    this.named.set(s, name);
    this.inProgress.add(name);
    let block: string;
    if (this.isTypedDict(s)) {
      block = this.typedDict(s, name, s.properties as Record<string, unknown>);
    } else {
      const own: string[] = [];
      const expr = this.shape(s, name, own);
      const description = typeof s.description === "string" ? `# ${oneLine(s.description)}\n` : "";
      block = `${description}${name} = ${expr}${own.length ? `  # ${own.join("; ")}` : ""}\n`;
    }
    this.inProgress.delete(name);
    this.blocks.push(`${heading ? `${heading}\n` : ""}${block}`);
    return name;
  }

  private isTypedDict(s: Schema): boolean {
    const props = s.properties;
    const typ = s.type;
    const objectish = typ === undefined || typ === "object";
    return objectish && !!props && typeof props === "object" && Object.keys(props).length > 0;
  }

  private typedDict(s: Schema, name: string, props: Record<string, unknown>): string {
    this.imports.add("TypedDict");
    const required = new Set(Array.isArray(s.required) ? (s.required as string[]) : []);
    const fields: { key: string; type: string; comment: string[]; description?: string }[] = [];
    for (const [key, sub] of Object.entries(props)) {
      const notes: string[] = [];
      let t = this.typeOf(sub, `${name}${pascal(key)}`, notes);
      if (!required.has(key)) {
        this.imports.add("NotRequired");
        t = `NotRequired[${t}]`;
      }
      const description =
        sub && typeof sub === "object" && typeof (sub as Schema).description === "string"
          ? oneLine((sub as Schema).description as string)
          : undefined;
      fields.push({ key, type: t, comment: notes, description });
    }
    const extra: string[] = [];
    const ap = s.additionalProperties;
    if (ap !== undefined && ap !== false) {
      const notes: string[] = [];
      const t = ap === true ? "Any" : this.typeOf(ap, `${name}Value`, notes);
      extra.push(`# other keys allowed (${t}): a TypedDict cannot say so`);
    }
    const tail = (f: (typeof fields)[number]) => (f.comment.length ? `  # ${f.comment.join("; ")}` : "");
    const doc =
      typeof s.description === "string" ? `    """${oneLine(s.description).replace(/"""/g, "'''")}"""\n` : "";
    const classSyntax = fields.every(
      (f) => /^[A-Za-z_][A-Za-z0-9_]*$/.test(f.key) && !PY_KEYWORDS.has(f.key),
    );
    if (classSyntax) {
      const body = fields.map(
        (f) => `${f.description ? `    # ${f.description}\n` : ""}    ${f.key}: ${f.type}${tail(f)}`,
      );
      return `class ${name}(TypedDict):\n${doc}${extra.map((e) => `    ${e}\n`).join("")}${body.join("\n")}\n`;
    }
    const body = fields.map(
      (f) =>
        `${f.description ? `        # ${f.description}\n` : ""}        ${JSON.stringify(f.key)}: ${f.type},${tail(f)}`,
    );
    const comments = [doc ? `# ${oneLine(s.description as string)}` : "", ...extra].filter(Boolean);
    return `${comments.map((c) => `${c}\n`).join("")}${name} = TypedDict(\n    ${JSON.stringify(name)},\n    {\n${body.join("\n")}\n    },\n)\n`;
  }

  /** The type expression of `s`; nested objects and definitions are emitted first under their own names. */
  private typeOf(schema: unknown, hint: string, notes: string[]): string {
    if (schema === true || schema === undefined) return this.any();
    if (schema === false) return this.any(notes, "no value is valid here");
    if (!schema || typeof schema !== "object" || Array.isArray(schema))
      return this.any(notes, "not a schema");
    const s = schema as Schema;
    const known = this.named.get(s);
    if (known) return this.inProgress.has(known) ? JSON.stringify(known) : known;
    if (this.isTypedDict(s)) return this.define(s, this.unique(hint));
    return this.shape(s, hint, notes);
  }

  /** The type expression of a schema that is not a TypedDict itself. */
  private shape(s: Schema, hint: string, notes: string[]): string {
    if (typeof s.$ref === "string") return this.ref(s.$ref, notes);
    if ("const" in s) return this.literal([s.const], notes);
    if (Array.isArray(s.enum)) return this.literal(s.enum, notes);
    for (const key of ["anyOf", "oneOf"] as const)
      if (Array.isArray(s[key]))
        return this.union((s[key] as unknown[]).map((x, i) => this.typeOf(x, `${hint}${i + 1}`, notes)));
    if (Array.isArray(s.allOf)) {
      if (s.allOf.length === 1 && !s.properties) return this.typeOf(s.allOf[0], hint, notes);
      const merged = this.mergeObjects(s, 0);
      if (!merged) return this.any(notes, "allOf of schemas that are not all objects");
      const name = this.define(merged, this.unique(hint));
      this.named.set(s, name);
      return name;
    }
    if (Array.isArray(s.type))
      return this.union(s.type.map((t) => this.typeOf({ ...s, type: t }, hint, notes)));
    switch (s.type) {
      case "string":
        return "str";
      case "integer":
        return "int";
      case "number":
        return "float";
      case "boolean":
        return "bool";
      case "null":
        return "None";
      case "array": {
        if (Array.isArray(s.items) || Array.isArray(s.prefixItems))
          return `list[${this.any(notes, "tuple items")}]`;
        return `list[${this.typeOf(s.items, `${hint}Item`, notes)}]`;
      }
      case "object":
      case undefined: {
        const ap = s.additionalProperties;
        if (s.type === undefined && ap === undefined) {
          const other = ["if", "not", "patternProperties", "dependentSchemas"].find((k) => k in s);
          return other ? this.any(notes, `${other}: not expressed as a type`) : this.any();
        }
        const value = ap && typeof ap === "object" ? this.typeOf(ap, `${hint}Value`, notes) : this.any();
        return `dict[str, ${value}]`;
      }
      default:
        return this.any(notes, `type ${JSON.stringify(s.type)}`);
    }
  }

  /** The schema a local $ref points at (`#`, `#/$defs/<name>`, `#/definitions/<name>`), and its name's last part. */
  private resolve(ref: string): { target: unknown; key: string } | undefined {
    const root = this.root_;
    if (typeof root !== "object") return undefined;
    if (ref === "#") return { target: root, key: "" };
    const m = /^#\/(\$defs|definitions)\/([^/]+)$/.exec(ref);
    if (!m) return undefined;
    const key = m[2]!.replace(/~1/g, "/").replace(/~0/g, "~");
    return { target: (root[m[1]!] as Record<string, unknown> | undefined)?.[key], key };
  }

  private ref(ref: string, notes: string[]): string {
    const found = this.resolve(ref);
    if (!found) return this.any(notes, `$ref ${ref} not followed`);
    const { target, key } = found;
    if (target === undefined) return this.any(notes, `$ref ${ref} not found`);
    if (typeof target !== "object" || target === null) return this.typeOf(target, "", notes);
    const known = this.named.get(target);
    if (known) {
      if (!this.inProgress.has(known)) return known;
      if (this.isTypedDict(target as Schema)) return JSON.stringify(known);
      return this.any(notes, `recursive ${ref}`);
    }
    const rootName = (typeof this.root_ === "object" && this.named.get(this.root_)) || "";
    return this.define(target as Schema, this.unique(`${rootName}${pascal(key)}`));
  }

  /**
   * allOf of object schemas (directly or by $ref) as one object: their properties and required
   * keys together. Undefined when a part is not an object schema, or nothing has properties.
   */
  private mergeObjects(s: Schema, depth: number): Schema | undefined {
    if (depth > 8) return undefined;
    const properties: Record<string, unknown> = {};
    const required = new Set<string>();
    const parts: unknown[] = [{ ...s, allOf: undefined }, ...(s.allOf as unknown[])];
    for (let part of parts) {
      if (part && typeof part === "object" && typeof (part as Schema).$ref === "string")
        part = this.resolve((part as Schema).$ref as string)?.target;
      if (!part || typeof part !== "object" || Array.isArray(part)) return undefined;
      let p = part as Schema;
      if (Array.isArray(p.allOf)) {
        const inner = this.mergeObjects(p, depth + 1);
        if (!inner) return undefined;
        p = inner;
      }
      if (["anyOf", "oneOf", "enum", "const", "$ref"].some((k) => k in p && p[k] !== undefined))
        return undefined;
      if (p.type !== undefined && p.type !== "object") return undefined;
      Object.assign(properties, p.properties ?? {});
      for (const r of Array.isArray(p.required) ? (p.required as string[]) : []) required.add(r);
    }
    if (Object.keys(properties).length === 0) return undefined;
    return {
      type: "object",
      properties,
      required: [...required],
      ...(typeof s.description === "string" ? { description: s.description } : {}),
    };
  }

  private literal(values: unknown[], notes: string[]): string {
    const lit = (v: unknown) =>
      v === null
        ? "None"
        : v === true
          ? "True"
          : v === false
            ? "False"
            : typeof v === "string"
              ? JSON.stringify(v)
              : typeof v === "number" && Number.isInteger(v)
                ? String(v)
                : undefined;
    const parts = values.map(lit);
    if (parts.some((p) => p === undefined)) return this.any(notes, "enum of values a Literal cannot hold");
    this.imports.add("Literal");
    return `Literal[${parts.join(", ")}]`;
  }

  private union(types: string[]): string {
    const unique = [...new Set(types)];
    if (unique.includes("Any")) return "Any";
    if (unique.length === 1) return unique[0]!;
    if (unique.some((t) => t.startsWith('"'))) {
      this.imports.add("Union");
      return `Union[${unique.join(", ")}]`;
    }
    return unique.join(" | ");
  }

  private any(notes?: string[], why?: string): string {
    this.imports.add("Any");
    if (notes && why) notes.push(why);
    return "Any";
  }
}

function oneLine(s: string): string {
  return s.replace(/\s+/g, " ").trim();
}

// The field reference of docs/workerpool.md, generated from the schema (between markers), so
// the documentation cannot drift from the API either. `npm run gen:crds` rewrites it.
import type { CelRule, JSONSchemaProps } from "../jsonschema.ts";
import { specSchema, statusSchema } from "./schema.ts";

export const REFERENCE_FILE = "docs/workerpool.md";
export const BEGIN = "<!-- BEGIN GENERATED FIELD REFERENCE (npm run gen:crds) -->";
export const END = "<!-- END GENERATED FIELD REFERENCE -->";

function typeOf(s: JSONSchemaProps): string {
  if (s.enum) return s.enum.map((e) => `\`${e}\``).join(" | ");
  if (s.type === "array") return `${s.items ? typeOf(s.items) : "any"}[]`;
  if (s.type === "object" && s.additionalProperties) return `map[string]${typeOf(s.additionalProperties)}`;
  return s.type ?? "any";
}

function constraints(s: JSONSchemaProps): string {
  const c: string[] = [];
  const above = s.exclusiveMinimum ? ">" : "≥";
  if (s.minimum !== undefined && s.maximum !== undefined)
    c.push(s.exclusiveMinimum ? `> ${s.minimum}, ≤ ${s.maximum}` : `${s.minimum}..${s.maximum}`);
  else if (s.minimum !== undefined) c.push(`${above} ${s.minimum}`);
  else if (s.maximum !== undefined) c.push(`≤ ${s.maximum}`);
  if (s.minItems !== undefined) c.push(`≥ ${s.minItems} items`);
  if (s.maxItems !== undefined) c.push(`≤ ${s.maxItems} items`);
  if (s.maxLength !== undefined) c.push(`≤ ${s.maxLength} chars`);
  if (s.pattern) c.push(`pattern \`${s.pattern}\``);
  if (s.format) c.push(s.format);
  return c.join(", ");
}

const cell = (t: string) => t.replace(/\|/g, "\\|").replace(/\n/g, " ");

function rows(schema: JSONSchemaProps, prefix: string, required: readonly string[] = []): string[] {
  const out: string[] = [];
  for (const [name, prop] of Object.entries(schema.properties ?? {})) {
    const path = `${prefix}.${name}`;
    const def = prop.default === undefined ? "" : `\`${JSON.stringify(prop.default)}\``;
    const req = required.includes(name) ? " **(required)**" : "";
    // (a contract's schemas are free-form too, but checked by the operator, not the API server)
    const passthrough =
      prop["x-kubernetes-preserve-unknown-fields"] && !path.startsWith("spec.contract")
        ? " Passed through as the Kubernetes type; validated when the Deployment is applied."
        : "";
    out.push(
      `| \`${path}\`${req} | ${cell(typeOf(prop))} | ${def} | ${cell(constraints(prop))} | ${cell(((prop.description ?? "") + passthrough).trim())} |`,
    );
    if (prop.type === "object" && prop.properties && !prop["x-kubernetes-preserve-unknown-fields"])
      out.push(...rows(prop, path, prop.required));
    if (
      prop.type === "array" &&
      prop.items?.properties &&
      !prop.items["x-kubernetes-preserve-unknown-fields"]
    )
      out.push(...rows(prop.items, `${path}[]`, prop.items.required));
  }
  return out;
}

function rules(schema: JSONSchemaProps, path: string): { path: string; rule: CelRule }[] {
  const out = (schema["x-kubernetes-validations"] ?? []).map((rule) => ({ path, rule }));
  for (const [name, prop] of Object.entries(schema.properties ?? {}))
    out.push(...rules(prop, `${path}.${name}`));
  if (schema.items) out.push(...rules(schema.items, `${path}[]`));
  return out;
}

export function referenceMarkdown(): string {
  const header = ["| Field | Type | Default | Constraints | Description |", "|---|---|---|---|---|"];
  const celRows = rules(specSchema, "spec").map(
    ({ path, rule }) => `| \`${path}\` | \`${cell(rule.rule)}\` | ${cell(rule.message ?? "")} |`,
  );
  return [
    BEGIN,
    "",
    "### spec",
    "",
    ...header,
    ...rows(specSchema, "spec", specSchema.required),
    "",
    "### Validation rules (CEL, checked by the API server)",
    "",
    "| On | Rule | Message |",
    "|---|---|---|",
    `| \`metadata\` | \`self.metadata.name.size() <= 63\` | a WorkerPool name must be at most 63 characters (it is a label value of its pods) |`,
    ...celRows,
    "",
    "### status",
    "",
    ...header,
    ...rows(statusSchema, "status"),
    "",
    END,
  ].join("\n");
}

/** The document with its generated section replaced (or appended when the markers are missing). */
export function withReference(doc: string): string {
  const a = doc.indexOf(BEGIN);
  const b = doc.indexOf(END);
  if (a < 0 || b < 0) return `${doc.trimEnd()}\n\n## Field reference\n\n${referenceMarkdown()}\n`;
  return `${doc.slice(0, a)}${referenceMarkdown()}${doc.slice(b + END.length)}`;
}

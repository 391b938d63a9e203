// The contract bench's job: a ~1 KiB document of 30 fields (an organization record of the kind
// an extraction stage returns) and the JSON Schema that describes it, every field required and
// typed, some with formats — what a stage contract of an LLM pipeline checks.
import type { Contract } from "../../queue/contracts.ts";

const FIELDS = 30;

export function benchDocument(i: number): Record<string, unknown> {
  const doc: Record<string, unknown> = {
    id: `org-${i}`,
    email: `contact${i}@example.org`,
    site: `https://example.org/orgs/${i}`,
    founded: "2001-05-17",
    employees: 40 + (i % 900),
    active: i % 7 !== 0,
  };
  for (let f = Object.keys(doc).length; f < FIELDS; f++) doc[`field${f}`] = `value ${f} of document ${i}`;
  return doc;
}

/** The schema of benchDocument (draft 2020-12): 30 required fields, types and formats. */
export function benchDocumentSchema(): Record<string, unknown> {
  const properties: Record<string, unknown> = {
    id: { type: "string", pattern: "^org-[0-9]+$" },
    email: { type: "string", format: "email" },
    site: { type: "string", format: "uri" },
    founded: { type: "string", format: "date" },
    employees: { type: "integer", minimum: 0 },
    active: { type: "boolean" },
  };
  for (let f = Object.keys(properties).length; f < FIELDS; f++)
    properties[`field${f}`] = { type: "string", maxLength: 200 };
  return { type: "object", required: Object.keys(properties), properties, additionalProperties: false };
}

/** The contract the bench sets: the document as the stage's data and as its result (the handler echoes it). */
export function benchContract(): Contract {
  return { data: benchDocumentSchema(), result: benchDocumentSchema() };
}

// A job as JSON — {"data": …, "priority": 5, …} — the way the HTTP API and `conveyor enqueue
// --file` take it: unknown fields are refused by name (a typo such as "priorty" must not
// silently enqueue a job without its priority), and every field has its type checked.
import type { JobToEnqueue } from "./producer.ts";
import { checkUses, InvalidResourceError } from "./resources.ts";

export class EnvelopeError extends Error {
  override name = "EnvelopeError";
}

export const ENVELOPE_FIELDS = [
  "data",
  "id",
  "idempotencyKey",
  "priority",
  "delayMs",
  "attempts",
  "timeoutMs",
  "contentHash",
  "group",
  "dedupe",
  "uses",
  "task",
] as const;

const ALLOWED = new Set<string>(ENVELOPE_FIELDS);

/** Checks a parsed JSON envelope; throws an EnvelopeError naming the field. */
export function parseEnvelope(body: unknown): JobToEnqueue {
  if (typeof body !== "object" || body === null || Array.isArray(body))
    throw new EnvelopeError('a job must be an object like {"data": …, "priority": 0}');
  const b = body as Record<string, unknown>;
  for (const k of Object.keys(b))
    if (!ALLOWED.has(k))
      throw new EnvelopeError(`unknown field ${JSON.stringify(k)}; allowed: ${ENVELOPE_FIELDS.join(", ")}`);
  if (!("data" in b)) throw new EnvelopeError('"data" is required (any JSON value)');
  const str = (k: string) => {
    if (b[k] !== undefined && typeof b[k] !== "string") throw new EnvelopeError(`"${k}" must be a string`);
    return b[k] as string | undefined;
  };
  const num = (k: string) => {
    if (b[k] !== undefined && (typeof b[k] !== "number" || !Number.isFinite(b[k])))
      throw new EnvelopeError(`"${k}" must be a number`);
    return b[k] as number | undefined;
  };
  let dedupe: JobToEnqueue["dedupe"];
  if (b.dedupe !== undefined) {
    const d = b.dedupe as Record<string, unknown>;
    if (typeof d !== "object" || d === null || Array.isArray(d))
      throw new EnvelopeError(
        '"dedupe" must be an object like {"key": "k", "mode": "debounce", "windowMs": 5000}',
      );
    for (const k of Object.keys(d))
      if (k !== "key" && k !== "mode" && k !== "windowMs")
        throw new EnvelopeError(`unknown field "dedupe.${k}"; allowed: key, mode, windowMs`);
    // (the producer checks the values and names the field: InvalidJobError)
    dedupe = d as unknown as JobToEnqueue["dedupe"];
  }
  let uses: JobToEnqueue["uses"];
  try {
    uses = checkUses(b.uses, "uses");
  } catch (err) {
    if (err instanceof InvalidResourceError) throw new EnvelopeError(err.message);
    throw err;
  }
  return {
    data: b.data,
    dedupe,
    uses,
    id: str("id"),
    idempotencyKey: str("idempotencyKey"),
    contentHash: str("contentHash"),
    group: str("group"),
    task: str("task"),
    priority: num("priority"),
    delayMs: num("delayMs"),
    attempts: num("attempts"),
    timeoutMs: num("timeoutMs"),
  };
}

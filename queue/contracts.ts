// Stage contracts: JSON Schemas for a stage's job data and results (and per named task), kept in
// the queue's Redis (`<Q>contract`) with a content hash. Every door checks against the contract
// in force: producers at enqueue (the enqueue script refuses a call checked against another
// hash, so a cached contract costs no round trip), workers at settle and at advance.
// docs/contracts.md says what each door does.
import { createHash } from "node:crypto";
import type { Ajv, ErrorObject, ValidateFunction } from "ajv";
import type { Ajv2020 } from "ajv/dist/2020.js";
import { requireOptional } from "../lib/optionalPackage.ts";
import { QueueKeys } from "./keys.ts";
import type { RedisClient } from "./scripts.ts";

/** A JSON Schema (draft 2020-12, or draft-07 when its `$schema` says so). */
export type JsonSchema = Record<string, unknown> | boolean;

export interface ContractSchemas {
  data?: JsonSchema;
  result?: JsonSchema;
}

/** What a stage declares: schemas for untasked jobs and for each named task. */
export interface Contract extends ContractSchemas {
  tasks?: Record<string, ContractSchemas>;
}

/** A contract as stored in Redis. */
export interface StoredContract {
  /** The content hash of `contract` (16 hex digits of SHA-256 over its canonical JSON). */
  hash: string;
  contract: Contract;
  /** Who set it: `cli`, `api`, `operator:<namespace>/<pool>`, … */
  source: string;
  updatedAt: number;
}

/** One way a value breaks its schema. */
export interface Violation {
  /** JSON pointer into the value (`""` is the whole value). */
  pointer: string;
  /** The schema keyword that failed (`required`, `type`, `format`, …). */
  rule: string;
  message: string;
  /** The offending value as JSON, cut to 80 characters (absent for a missing property). */
  value?: string;
}

/** A job's data or result that breaks its contract. */
export interface JobViolations {
  /** The job's position in the call. */
  index: number;
  id?: string;
  task?: string;
  side: "data" | "result";
  violations: Violation[];
}

export class ContractError extends Error {
  override name = "ContractError";
}

/** Jobs refused by the contract in force; nothing of the call was written. */
export class ContractViolationError extends Error {
  override name = "ContractViolationError";
  readonly queue: string;
  readonly hash: string;
  readonly jobs: JobViolations[];
  constructor(queue: string, hash: string, jobs: JobViolations[]) {
    super(
      `${queue}: ${jobs.length} job(s) break the stage's contract (${hash}): ${jobs.map(describeJob).join("; ")}`,
    );
    this.queue = queue;
    this.hash = hash;
    this.jobs = jobs;
  }
}

export const TASK_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/;
/** The largest contract body (its JSON) a queue keeps. */
export const MAX_CONTRACT_BYTES = 256 * 1024;
const VALUE_CUT = 80;
const DRAFT_07 = /^https?:\/\/json-schema\.org\/draft-07\/schema#?$/;

/** The content hash of a contract: equal contracts hash alike whatever their key order. */
export function contractHash(contract: Contract): string {
  return createHash("sha256").update(canonicalJson(contract)).digest("hex").slice(0, 16);
}

function canonicalJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonicalJson).join(",")}]`;
  if (v && typeof v === "object") {
    const entries = Object.entries(v as Record<string, unknown>)
      .filter(([, x]) => x !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, x]) => `${JSON.stringify(k)}:${canonicalJson(x)}`).join(",")}}`;
  }
  return JSON.stringify(v);
}

/** A contract's shape checked and each schema compiled; throws ContractError naming what is wrong. */
export function compileContract(contract: unknown, hash?: string): CompiledContract {
  const c = checkShape(contract);
  return new CompiledContract(c, hash ?? contractHash(c));
}

function checkShape(contract: unknown): Contract {
  if (!contract || typeof contract !== "object" || Array.isArray(contract))
    throw new ContractError("a contract is an object with any of data, result, tasks");
  const c = contract as Record<string, unknown>;
  for (const k of Object.keys(c))
    if (!["data", "result", "tasks"].includes(k))
      throw new ContractError(`unknown contract member '${k}' (data, result, tasks)`);
  if (c.tasks !== undefined) {
    if (!c.tasks || typeof c.tasks !== "object" || Array.isArray(c.tasks))
      throw new ContractError("tasks is an object: task name → {data, result}");
    for (const [name, t] of Object.entries(c.tasks as Record<string, unknown>)) {
      if (!TASK_NAME_PATTERN.test(name))
        throw new ContractError(`task name '${name}' must match ${TASK_NAME_PATTERN.source}`);
      if (!t || typeof t !== "object" || Array.isArray(t))
        throw new ContractError(`tasks.${name} is an object with any of data, result`);
      for (const k of Object.keys(t))
        if (k !== "data" && k !== "result")
          throw new ContractError(`unknown member '${k}' in tasks.${name} (data, result)`);
    }
  }
  const bytes = Buffer.byteLength(JSON.stringify(c));
  if (bytes > MAX_CONTRACT_BYTES)
    throw new ContractError(`the contract is ${bytes} B as JSON; at most ${MAX_CONTRACT_BYTES} B`);
  return c as Contract;
}

let ajv2020: Ajv2020 | undefined;
let ajv07: Ajv | undefined;

// ajv and ajv-formats are optional peers of the library, loaded when a queue first has a
// contract: an app whose queues have none installs neither (a contract without them refuses to
// enqueue, naming the package: never checked by nothing).
const FEATURE = "A stage contract";
const addFormats = (ajv: Ajv | Ajv2020): void => {
  const m = requireOptional<{ default: (a: Ajv | Ajv2020) => void }>("ajv-formats", FEATURE);
  m.default(ajv);
};

/** One Ajv per draft, shared by every compiled contract (a schema compiles once per process). */
function ajvFor(schema: JsonSchema): Ajv | Ajv2020 {
  const draft07 = typeof schema === "object" && DRAFT_07.test(String(schema.$schema ?? ""));
  // strict off: contracts are users' schemas, often with annotations ajv does not know.
  // addUsedSchema off: a schema with an $id compiles again (an updated contract, another cache)
  // instead of clashing with the copy registered by the first compile.
  const opts = { allErrors: true, strict: false, validateFormats: true, addUsedSchema: false } as const;
  if (draft07) {
    if (!ajv07) {
      const { Ajv: Draft07 } = requireOptional<typeof import("ajv")>("ajv", FEATURE);
      addFormats((ajv07 = new Draft07(opts)));
    }
    return ajv07;
  }
  if (!ajv2020) {
    requireOptional("ajv", FEATURE); // (names the package when it is missing, not its subpath)
    const { Ajv2020: Draft2020 } = requireOptional<typeof import("ajv/dist/2020.js")>(
      "ajv/dist/2020",
      FEATURE,
    );
    addFormats((ajv2020 = new Draft2020(opts)));
  }
  return ajv2020;
}

function compileSchema(schema: JsonSchema, where: string): ValidateFunction {
  const ajv = ajvFor(schema); // (a missing ajv is its own error, not the schema's)
  try {
    return ajv.compile(schema);
  } catch (err) {
    throw new ContractError(`${where}: not a valid JSON Schema: ${(err as Error).message}`);
  }
}

/** A contract ready to check values: its schemas compiled once. */
export class CompiledContract {
  readonly hash: string;
  readonly contract: Contract;
  private readonly validators = new Map<string, ValidateFunction>();

  constructor(contract: Contract, hash: string) {
    this.contract = contract;
    this.hash = hash;
    const add = (key: string, s: JsonSchema | undefined, where: string) => {
      if (s !== undefined) this.validators.set(key, compileSchema(s, where));
    };
    add("data", contract.data, "data");
    add("result", contract.result, "result");
    for (const [name, t] of Object.entries(contract.tasks ?? {})) {
      add(`data:${name}`, t.data, `tasks.${name}.data`);
      add(`result:${name}`, t.result, `tasks.${name}.result`);
    }
  }

  /** The named tasks, when the contract lists them (a job must then name one of them or none). */
  get tasks(): string[] | undefined {
    return this.contract.tasks ? Object.keys(this.contract.tasks) : undefined;
  }

  /** Why a job's task is refused: an unknown name where the contract lists the tasks. */
  taskProblem(task: string | undefined): Violation | undefined {
    const tasks = this.tasks;
    if (task === undefined || !tasks || tasks.includes(task)) return undefined;
    return {
      pointer: "",
      rule: "task",
      message: `unknown task '${task}' (the stage's tasks: ${tasks.join(", ") || "none"})`,
      value: JSON.stringify(task),
    };
  }

  /** How `data` breaks the data schema of its task (or the stage's); [] when it keeps it. */
  checkData(data: unknown, task?: string): Violation[] {
    const unknown = this.taskProblem(task);
    if (unknown) return [unknown];
    return this.check(task !== undefined && this.contract.tasks ? `data:${task}` : "data", data);
  }

  /** How `result` breaks the result schema of its task (or the stage's); [] when it keeps it. */
  checkResult(result: unknown, task?: string): Violation[] {
    return this.check(task !== undefined && this.contract.tasks ? `result:${task}` : "result", result);
  }

  /** Whether values on `side` are checked at all (no schema: nothing to pay). */
  checks(side: "data" | "result", task?: string): boolean {
    if (side === "data" && task !== undefined && this.tasks && !this.tasks.includes(task)) return true;
    return this.validators.has(task !== undefined && this.contract.tasks ? `${side}:${task}` : side);
  }

  private check(key: string, value: unknown): Violation[] {
    const v = this.validators.get(key);
    if (!v || v(value)) return [];
    return (v.errors ?? []).map((e) => violationOf(e, value));
  }
}

function violationOf(e: ErrorObject, root: unknown): Violation {
  if (e.keyword === "required") {
    const missing = String((e.params as { missingProperty: string }).missingProperty);
    return {
      pointer: `${e.instancePath}/${escapePointer(missing)}`,
      rule: "required",
      message: "is required",
    };
  }
  const value = valueAt(root, e.instancePath);
  return {
    pointer: e.instancePath,
    rule: e.keyword,
    message: e.message ?? e.keyword,
    ...(value === undefined ? {} : { value: cut(JSON.stringify(value)) }),
  };
}

function escapePointer(s: string): string {
  return s.replace(/~/g, "~0").replace(/\//g, "~1");
}

function valueAt(root: unknown, pointer: string): unknown {
  let v = root;
  for (const raw of pointer.split("/").slice(1)) {
    const k = raw.replace(/~1/g, "/").replace(/~0/g, "~");
    if (v === null || typeof v !== "object") return undefined;
    v = (v as Record<string, unknown>)[k];
  }
  return v;
}

function cut(s: string | undefined): string | undefined {
  if (s === undefined || s.length <= VALUE_CUT) return s;
  return `${s.slice(0, VALUE_CUT - 1)}…`;
}

/** One line per violation: `/services/0/phone: must match format "phone" (format, value "abc")`. */
export function describeViolation(v: Violation): string {
  return `${v.pointer || "(the whole value)"}: ${v.message} (${v.rule}${v.value !== undefined ? `, value ${v.value}` : ""})`;
}

function describeJob(j: JobViolations): string {
  const who = `job ${j.index}${j.id !== undefined ? ` (id ${j.id})` : ""}${j.task !== undefined ? ` task ${j.task}` : ""}`;
  return `${who} ${j.side}: ${j.violations.map(describeViolation).join(", ")}`;
}

// --- Storage -------------------------------------------------------------------------------

/** Store `contract` as the queue's contract in force (checked and compiled first). */
export async function setContract(
  redis: RedisClient,
  queue: string,
  contract: unknown,
  source: string,
): Promise<StoredContract> {
  const compiled = compileContract(contract);
  const stored: StoredContract = {
    hash: compiled.hash,
    contract: compiled.contract,
    source,
    updatedAt: Date.now(),
  };
  await redis.hset(new QueueKeys(queue).contract, {
    hash: stored.hash,
    body: JSON.stringify(stored.contract),
    source,
    updatedAt: String(stored.updatedAt),
  });
  return stored;
}

/** The queue's contract in force, or undefined when it has none. */
export async function getContract(redis: RedisClient, queue: string): Promise<StoredContract | undefined> {
  const [hash, body, source, updatedAt] = await redis.hmget(
    new QueueKeys(queue).contract,
    "hash",
    "body",
    "source",
    "updatedAt",
  );
  if (!hash || !body) return undefined;
  return { hash, contract: JSON.parse(body) as Contract, source: source ?? "", updatedAt: Number(updatedAt) };
}

/** Remove the queue's contract; whether it had one. */
export async function deleteContract(redis: RedisClient, queue: string): Promise<boolean> {
  return (await redis.del(new QueueKeys(queue).contract)) > 0;
}

/**
 * Compiled contracts by queue, read from Redis once and kept until told the hash in force
 * changed (the enqueue script's ERR_CONTRACT_CHANGED, a claim reply's contract hash).
 */
export class ContractCache {
  private readonly redis: RedisClient;
  private readonly byQueue = new Map<string, CompiledContract | null>();
  private readonly byHash = new Map<string, CompiledContract>();

  constructor(redis: RedisClient) {
    this.redis = redis;
  }

  /** The queue's contract as last read (null: none), reading it when not known yet. */
  async get(queue: string): Promise<CompiledContract | null> {
    const known = this.byQueue.get(queue);
    if (known !== undefined) return known;
    return this.refresh(queue);
  }

  /** The queue's contract as last read (null: none), or undefined when not read yet; never reads. */
  known(queue: string): CompiledContract | null | undefined {
    return this.byQueue.get(queue);
  }

  /** The queue's contract when its hash in force is `hash` ('' or undefined: none), re-read when it differs. */
  async ensure(queue: string, hash: string | undefined): Promise<CompiledContract | null> {
    const known = this.byQueue.get(queue);
    if (known !== undefined && (known?.hash ?? "") === (hash ?? "")) return known;
    return this.refresh(queue);
  }

  /** Read the queue's contract now. */
  async refresh(queue: string): Promise<CompiledContract | null> {
    const stored = await getContract(this.redis, queue);
    let compiled: CompiledContract | null = null;
    if (stored) {
      compiled = this.byHash.get(stored.hash) ?? compileContract(stored.contract, stored.hash);
      this.byHash.set(stored.hash, compiled);
    }
    this.byQueue.set(queue, compiled);
    return compiled;
  }
}

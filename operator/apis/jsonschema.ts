// A small structural-schema toolkit: the WorkerPool's OpenAPI v3 schema is written once, as a
// TypeScript constant, and everything else is derived from it — the TypeScript types (at the
// type level, `FromSchema`), the defaults the operator applies (`applyDefaults`, the same
// structural defaulting the API server does), and the CRD YAML (`genCrd.ts`). Nothing here
// knows about WorkerPools.

/** A CEL rule as the API server takes it (`x-kubernetes-validations`). */
export interface CelRule {
  readonly rule: string;
  readonly message?: string;
  readonly messageExpression?: string;
  readonly reason?:
    "FieldValueInvalid" | "FieldValueForbidden" | "FieldValueRequired" | "FieldValueDuplicate";
  readonly fieldPath?: string;
  readonly optionalOldSelf?: boolean;
}

/** The subset of apiextensions.k8s.io/v1 JSONSchemaProps a structural CRD schema uses. */
export interface JSONSchemaProps {
  readonly type?: "object" | "array" | "string" | "integer" | "number" | "boolean";
  readonly description?: string;
  readonly format?: string;
  readonly properties?: { readonly [name: string]: JSONSchemaProps };
  readonly required?: readonly string[];
  readonly items?: JSONSchemaProps;
  readonly additionalProperties?: JSONSchemaProps;
  readonly enum?: readonly (string | number)[];
  readonly default?: unknown;
  readonly minimum?: number;
  readonly maximum?: number;
  /** The bound `minimum` itself is not allowed (OpenAPI v3.0's boolean form, as CRDs take it). */
  readonly exclusiveMinimum?: boolean;
  readonly minLength?: number;
  readonly maxLength?: number;
  readonly pattern?: string;
  readonly minItems?: number;
  readonly maxItems?: number;
  readonly minProperties?: number;
  readonly maxProperties?: number;
  readonly nullable?: boolean;
  readonly "x-kubernetes-preserve-unknown-fields"?: boolean;
  readonly "x-kubernetes-embedded-resource"?: boolean;
  readonly "x-kubernetes-int-or-string"?: boolean;
  readonly "x-kubernetes-list-type"?: "atomic" | "set" | "map";
  readonly "x-kubernetes-list-map-keys"?: readonly string[];
  readonly "x-kubernetes-map-type"?: "atomic" | "granular";
  readonly "x-kubernetes-validations"?: readonly CelRule[];
}

// A phantom marker: a schema node that stands for a Kubernetes type we do not re-describe
// (an EnvVar, a Toleration...) carries that type for `FromSchema`, and nothing at run time.
declare const tsType: unique symbol;
export type Typed<T> = { readonly [tsType]?: T };

/** `typed<V1Toleration[]>()({ type: "array", ... })`: the node keeps its schema, the type says what it holds. */
export function typed<T>() {
  return <const S extends JSONSchemaProps>(schema: S): S & Typed<T> => schema as S & Typed<T>;
}

type Simplify<T> = { [K in keyof T]: T[K] } & {};
type HasDefault<S> = S extends { readonly default: unknown } ? true : false;
type RequiredKeys<S> = S extends { readonly required: readonly (infer R)[] } ? R : never;

type Plain<S, D extends boolean> = S extends { readonly enum: readonly (infer E)[] }
  ? E
  : S extends { readonly type: "string" }
    ? string
    : S extends { readonly type: "integer" | "number" }
      ? number
      : S extends { readonly type: "boolean" }
        ? boolean
        : S extends { readonly type: "array"; readonly items: infer I }
          ? FromSchema<I, D>[]
          : S extends { readonly type: "object"; readonly properties: infer P }
            ? ObjectOf<P, RequiredKeys<S>, D>
            : S extends { readonly type: "object"; readonly additionalProperties: infer A }
              ? Record<string, FromSchema<A, D>>
              : unknown;

type PresentKey<P, K extends keyof P, R, D extends boolean> = K extends R
  ? true
  : D extends true
    ? HasDefault<P[K]>
    : false;

type ObjectOf<P, R, D extends boolean> = Simplify<
  { -readonly [K in keyof P as PresentKey<P, K, R, D> extends true ? K : never]: FromSchema<P[K], D> } & {
    -readonly [K in keyof P as PresentKey<P, K, R, D> extends true ? never : K]?: FromSchema<P[K], D>;
  }
>;

/**
 * The TypeScript type a schema node describes. With `Defaulted = true` a property that has a
 * `default` is present (what the operator reads after the API server, or `applyDefaults`, filled
 * it in); with `false` it is optional (what a user writes).
 */
export type FromSchema<S, Defaulted extends boolean = true> =
  S extends Typed<infer T> ? (unknown extends T ? Plain<S, Defaulted> : T) : Plain<S, Defaulted>;

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/**
 * Structural defaulting as the API server does it: a missing property with a `default` gets a
 * copy of it, then defaulting descends into the value (so `default: {}` on an object fills its
 * children's defaults). Returns a new value; the input is not changed.
 */
export function applyDefaults<T>(schema: JSONSchemaProps, value: T): T {
  return defaultValue(schema, structuredClone(value)) as T;
}

function defaultValue(schema: JSONSchemaProps, value: unknown): unknown {
  if (schema.type === "object" && isObject(value)) {
    if (schema.properties) {
      for (const [name, prop] of Object.entries(schema.properties)) {
        if (value[name] === undefined && prop.default !== undefined)
          value[name] = structuredClone(prop.default);
        if (value[name] !== undefined) value[name] = defaultValue(prop, value[name]);
      }
    }
    if (schema.additionalProperties) {
      for (const [name, v] of Object.entries(value)) {
        if (!schema.properties?.[name]) value[name] = defaultValue(schema.additionalProperties, v);
      }
    }
    return value;
  }
  if (schema.type === "array" && Array.isArray(value) && schema.items) {
    return value.map((item) => defaultValue(schema.items!, item));
  }
  return value;
}

/** Every property path of a schema (`spec.scaling.minReplicas`, `spec.template.env[]`), for agreement tests. */
export function schemaPaths(schema: JSONSchemaProps, prefix = ""): string[] {
  const out: string[] = [];
  if (schema.properties) {
    for (const [name, prop] of Object.entries(schema.properties)) {
      const p = prefix ? `${prefix}.${name}` : name;
      out.push(p, ...schemaPaths(prop, p));
    }
  }
  if (schema.items) out.push(...schemaPaths(schema.items, `${prefix}[]`));
  return out;
}

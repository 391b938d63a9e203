// Desired vs observed, so an idle reconcile makes no API call at all. Server-side apply of
// identical content is still a write (an audit-log entry, an etcd no-op at best), so the
// operator applies only when (a) what it wants changed — a hash of its applied configuration is
// stored on the object — or (b) what it owns drifted: some field of the desired configuration
// is missing or different on the live object. The live object has more than we applied
// (defaults, other managers' fields, status), so (b) is a subset test that knows the API
// server's normalizations: omitted zero values, canonical quantities, keyed lists.
import { createHash } from "node:crypto";

const QUANTITY = /^([+-]?(?:\d+(?:\.\d*)?|\.\d+))(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei|[eE][+-]?\d+)?$/;
const SUFFIX: Record<string, number> = {
  m: 1e-3,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  E: 1e18,
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
  Pi: 2 ** 50,
  Ei: 2 ** 60,
};

/** A Kubernetes quantity ("500m", "1Gi", "1e3") as a number, or undefined. */
export function parseQuantity(s: string): number | undefined {
  const m = QUANTITY.exec(s.trim());
  if (!m) return undefined;
  const base = Number(m[1]);
  const suffix = m[2];
  if (!suffix) return base;
  if (suffix[0] === "e" || suffix[0] === "E") return base * 10 ** Number(suffix.slice(1));
  return base * SUFFIX[suffix]!;
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** A value the API server drops when empty (omitempty): "", false, 0, [], {}. */
function isZero(v: unknown): boolean {
  if (v === undefined || v === null || v === "" || v === false || v === 0) return true;
  if (Array.isArray(v)) return v.length === 0;
  if (isPlainObject(v)) return Object.values(v).every(isZero);
  return false;
}

function sameScalar(want: unknown, have: unknown): boolean {
  if (want === have) return true;
  if (typeof want === "number" && typeof have === "string")
    return String(want) === have || parseQuantity(have) === want;
  if (typeof want === "string" && typeof have === "number")
    return want === String(have) || parseQuantity(want) === have;
  if (typeof want === "string" && typeof have === "string") {
    const a = parseQuantity(want);
    const b = parseQuantity(have);
    return a !== undefined && b !== undefined && Math.abs(a - b) <= 1e-9 * Math.max(1, Math.abs(a));
  }
  return false;
}

const LIST_KEYS = ["name", "containerPort", "mountPath", "type", "key", "topologyKey"] as const;

function listKey(item: unknown): string | undefined {
  if (!isPlainObject(item)) return undefined;
  for (const k of LIST_KEYS)
    if (typeof item[k] === "string" || typeof item[k] === "number") return `${k}=${String(item[k])}`;
  return undefined;
}

/**
 * Every field of `want` is present with the same value in `have` (which may hold more).
 * Lists of keyed objects (name, containerPort…) match by key regardless of order and extra
 * items (another manager's sidecar); lists of scalars must be equal; other object lists match
 * each wanted item against some live item.
 */
export function isSubset(want: unknown, have: unknown): boolean {
  if (isZero(want) && isZero(have)) return true;
  if (Array.isArray(want)) {
    if (!Array.isArray(have)) return false;
    if (want.every((w) => !isPlainObject(w))) {
      return want.length === have.length && want.every((w, i) => isSubset(w, have[i]));
    }
    return want.every((w) => {
      const k = listKey(w);
      if (k !== undefined) {
        const match = have.find((h) => listKey(h) === k);
        return match !== undefined && isSubset(w, match);
      }
      return have.some((h) => isSubset(w, h));
    });
  }
  if (isPlainObject(want)) {
    if (!isPlainObject(have)) return false;
    return Object.entries(want).every(([k, v]) => isSubset(v, have[k]));
  }
  return sameScalar(want, have);
}

/** Paths where `want` is not a subset of `have` (for logs: what drifted). */
export function subsetDiff(want: unknown, have: unknown, path = ""): string[] {
  if (isSubset(want, have)) return [];
  if (isPlainObject(want) && isPlainObject(have)) {
    return Object.entries(want).flatMap(([k, v]) => subsetDiff(v, have[k], path ? `${path}.${k}` : k));
  }
  return [path || "."];
}

function canonical(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(canonical);
  if (isPlainObject(v)) {
    return Object.fromEntries(
      Object.keys(v)
        .sort()
        .filter((k) => v[k] !== undefined)
        .map((k) => [k, canonical(v[k])]),
    );
  }
  return v;
}

/** A short stable hash of a JSON value (key order does not matter). */
export function configHash(v: unknown): string {
  return createHash("sha256")
    .update(JSON.stringify(canonical(v)))
    .digest("hex")
    .slice(0, 16);
}

export function deepEqual(a: unknown, b: unknown): boolean {
  return JSON.stringify(canonical(a)) === JSON.stringify(canonical(b));
}

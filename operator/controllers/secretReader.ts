// Values from the Secrets a pool references, read with GET (RBAC grants `get` on Secrets only,
// optionally limited to named ones — no list/watch of every Secret) and trusted for a while,
// so a reconcile per poll does not become a GET per poll.
import { RESOURCES, resourcePath } from "../apis/coordinates.ts";
import { apiMessage, type KubeClient } from "../kube/client.ts";
import { Reason, type Problem } from "./reasons.ts";

interface SecretEntry {
  at: number;
  data: Record<string, string> | null;
  error?: string;
}

/** A missing Secret is asked for again sooner than a present one. */
const MISSING_TTL_MS = 10_000;
/** Past this many cached Secrets, expired ones are dropped. */
const PRUNE_ABOVE = 256;

export class SecretReader {
  private readonly entries = new Map<string, SecretEntry>();
  private readonly client: KubeClient;
  private readonly ttlMs: number;

  constructor(client: KubeClient, ttlMs = 60_000) {
    this.client = client;
    this.ttlMs = ttlMs;
  }

  /** The value of `ref` in `namespace`, or the problem that keeps it from being read. */
  async value(
    namespace: string,
    ref: { name: string; key: string },
    what: string,
  ): Promise<{ value: string; problem?: undefined } | { value?: undefined; problem: Problem }> {
    const e = await this.entry(namespace, ref.name);
    if (e.error)
      return {
        problem: {
          reason: Reason.SecretUnreadable,
          message: `cannot read Secret ${ref.name} (${what}): ${e.error}`,
        },
      };
    if (!e.data)
      return {
        problem: {
          reason: Reason.SecretNotFound,
          message: `Secret ${ref.name} (${what}) not found in namespace ${namespace}`,
        },
      };
    const b64 = e.data[ref.key];
    if (b64 === undefined)
      return {
        problem: {
          reason: Reason.SecretKeyNotFound,
          message: `Secret ${ref.name} has no key ${JSON.stringify(ref.key)} (${what})`,
        },
      };
    return { value: Buffer.from(b64, "base64").toString("utf8") };
  }

  private async entry(namespace: string, name: string): Promise<SecretEntry> {
    const id = `${namespace}/${name}`;
    if (this.entries.size > PRUNE_ABOVE) {
      for (const [k, v] of this.entries) if (Date.now() - v.at > this.ttlMs) this.entries.delete(k);
    }
    const cached = this.entries.get(id);
    if (cached && Date.now() - cached.at <= (cached.data ? this.ttlMs : Math.min(this.ttlMs, MISSING_TTL_MS)))
      return cached;
    let e: SecretEntry;
    try {
      const s = await this.client.get<{ data?: Record<string, string> }>(
        resourcePath(RESOURCES.secrets, { namespace, name }),
      );
      e = { at: Date.now(), data: s ? (s.data ?? {}) : null };
    } catch (err) {
      e = { at: Date.now(), data: null, error: apiMessage(err) };
    }
    this.entries.set(id, e);
    return e;
  }
}

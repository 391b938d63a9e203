// Values from the Secrets a pool references, read with GET (RBAC grants `get` on Secrets only,
// optionally limited to named ones — no list/watch of every Secret) and trusted for a while,
// so a reconcile per poll does not become a GET per poll.
//
// Restricted (--restrict-secret-access, KEDA's restrictSecretAccess): the operator sends a
// pool's Redis password to the Redis URL the pool names, so whoever may create a WorkerPool could
// otherwise have any Secret of the namespace sent to a server of their choice. Then only Secrets
// labelled conveyor.dev/secret-access=true, or in the operator's own namespace, are sent.
import { RESOURCES, resourcePath } from "../apis/coordinates.ts";
import { apiMessage, type KubeClient } from "../kube/client.ts";
import { SECRET_ACCESS_LABEL } from "./names.ts";
import { Reason, type Problem } from "./reasons.ts";

interface SecretEntry {
  at: number;
  data: Record<string, string> | null;
  /** Labelled conveyor.dev/secret-access=true. */
  labelled?: boolean;
  error?: string;
}

/** Which Secrets the operator may use: all, or (restricted) labelled ones and its own namespace's. */
export interface SecretAccess {
  restricted: boolean;
  ownNamespace?: string;
}

/** A missing Secret is asked for again sooner than a present one. */
const MISSING_TTL_MS = 10_000;
/** Past this many cached Secrets, expired ones are dropped. */
const PRUNE_ABOVE = 256;

export class SecretReader {
  private readonly entries = new Map<string, SecretEntry>();
  private readonly client: KubeClient;
  private readonly ttlMs: number;
  private readonly access: SecretAccess;

  constructor(client: KubeClient, ttlMs = 60_000, access: SecretAccess = { restricted: false }) {
    this.client = client;
    this.ttlMs = ttlMs;
    this.access = access;
  }

  /**
   * The value of `ref` in `namespace`, or the problem that keeps it from being read. `sent`: the
   * operator sends the value to a server the pool names (the Redis password), so a restriction
   * applies; a Secret only checked for presence (the workers' PostgreSQL URL) is exempt.
   */
  async value(
    namespace: string,
    ref: { name: string; key: string },
    what: string,
    sent = false,
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
    if (sent && this.access.restricted && !e.labelled && namespace !== this.access.ownNamespace)
      return {
        problem: {
          reason: Reason.SecretNotPermitted,
          message: `Secret ${ref.name} (${what}) is not labelled ${SECRET_ACCESS_LABEL}=true: with --restrict-secret-access the operator reads only Secrets so labelled${this.access.ownNamespace ? ` or in its namespace ${this.access.ownNamespace}` : ""}`,
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
      const s = await this.client.get<{
        metadata?: { labels?: Record<string, string> };
        data?: Record<string, string>;
      }>(resourcePath(RESOURCES.secrets, { namespace, name }));
      e = {
        at: Date.now(),
        data: s ? (s.data ?? {}) : null,
        labelled: s?.metadata?.labels?.[SECRET_ACCESS_LABEL] === "true",
      };
    } catch (err) {
      e = { at: Date.now(), data: null, error: apiMessage(err) };
    }
    this.entries.set(id, e);
    return e;
  }
}

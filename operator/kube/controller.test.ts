// The generic controller against a loopback API server that serves lists and holds watches
// open, so events can be pushed: which events reach the reconciler, and what each Result does.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as http from "node:http";
import { setTimeout as sleep } from "node:timers/promises";
import { KubeConfig } from "@kubernetes/client-node";
import { pino } from "pino";
import type { Resource } from "../apis/coordinates.ts";
import { createOperatorMetrics } from "../metrics.ts";
import { KubeClient, NotLeaderError, type KubeObject } from "./client.ts";
import { Controller } from "./controller.ts";
import { BeingDeleted, GenerationChanged, LabelsChanged, anyOf } from "./filters.ts";
import { Result } from "./result.ts";

const THINGS: Resource = { group: "example.dev", version: "v1", plural: "things", kind: "Thing" };
const PARTS: Resource = { group: "apps", version: "v1", plural: "parts", kind: "Part" };

type Obj = KubeObject & { metadata: { name: string; namespace: string } };
let rv = 10;
const thing = (name: string, generation = 1, labels?: Record<string, string>): Obj => ({
  metadata: { name, namespace: "ns", uid: `uid-${name}`, generation, labels, resourceVersion: String(++rv) },
});
const part = (name: string, owner?: string): Obj => ({
  metadata: {
    name,
    namespace: "ns",
    resourceVersion: String(++rv),
    ...(owner
      ? {
          ownerReferences: [
            {
              apiVersion: "example.dev/v1",
              kind: "Thing",
              name: owner,
              uid: `uid-${owner}`,
              controller: true,
            },
          ],
        }
      : {}),
  },
});

/** A fake API server: a list per path, and open watches that events are written to. */
class FakeApi {
  readonly lists = new Map<string, Obj[]>();
  private readonly watches = new Map<string, http.ServerResponse[]>();
  private readonly server = http.createServer((req, res) => {
    const url = new URL(req.url!, "http://x");
    const items = this.lists.get(url.pathname) ?? [];
    res.writeHead(200, { "Content-Type": "application/json" });
    if (url.searchParams.get("watch") !== "true")
      return res.end(JSON.stringify({ metadata: { resourceVersion: String(rv) }, items }));
    res.flushHeaders();
    const open = this.watches.get(url.pathname) ?? [];
    open.push(res);
    this.watches.set(url.pathname, open);
  });
  port = 0;

  async start(): Promise<void> {
    await new Promise<void>((resolve) => this.server.listen(0, "127.0.0.1", resolve));
    this.port = (this.server.address() as { port: number }).port;
  }

  watching(path: string): boolean {
    return (this.watches.get(path)?.length ?? 0) > 0;
  }

  send(path: string, type: "ADDED" | "MODIFIED" | "DELETED", object: Obj): void {
    for (const res of this.watches.get(path) ?? []) res.write(`${JSON.stringify({ type, object })}\n`);
  }

  stop(): void {
    this.server.closeAllConnections();
    this.server.close();
  }
}

async function until(what: string, check: () => boolean, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
}

describe("generic controller", () => {
  const api = new FakeApi();
  const metrics = createOperatorMetrics(undefined, { defaultMetrics: false });
  const seen: string[] = [];
  const answers = new Map<string, () => Result>();
  let controller: Controller;

  before(async () => {
    await api.start();
    api.lists.set("/apis/example.dev/v1/things", [thing("a"), thing("b")]);
    api.lists.set("/apis/apps/v1/parts", [part("a-part", "a")]);
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: "c", server: `http://127.0.0.1:${api.port}`, skipTLSVerify: true }],
      users: [{ name: "u" }],
      contexts: [{ name: "x", cluster: "c", user: "u" }],
      currentContext: "x",
    });
    controller = new Controller({
      name: "test",
      client: new KubeClient(kc, { metrics }),
      log: pino({ level: "silent" }),
      metrics,
      workers: 2,
    });
    controller.for<Obj>(THINGS, { filters: [anyOf(GenerationChanged, LabelsChanged, BeingDeleted)] });
    controller.owns<Obj>(PARTS, THINGS);
    controller.complete({
      reconcile: async (key) => {
        seen.push(key);
        const answer = answers.get(key);
        return answer ? answer() : Result.done();
      },
    });
    await controller.start();
    await until(
      "both watches open",
      () => api.watching("/apis/example.dev/v1/things") && api.watching("/apis/apps/v1/parts"),
    );
  });

  after(async () => {
    await controller.stop();
    api.stop();
  });

  it("reconciles every primary object once after the first sync", async () => {
    await until("a and b reconciled", () => seen.includes("ns/a") && seen.includes("ns/b"));
    assert.deepEqual(
      [...seen].sort(),
      ["ns/a", "ns/b"],
      "add + synced + owned add of one key: one reconcile each",
    );
  });

  it("lets spec, label and deletion changes through and filters status-only updates", async () => {
    seen.length = 0;
    api.send("/apis/example.dev/v1/things", "MODIFIED", thing("a", 1)); // status only: same generation
    api.send("/apis/example.dev/v1/things", "MODIFIED", thing("b", 2)); // spec change
    await until("b reconciled", () => seen.includes("ns/b"));
    api.send("/apis/example.dev/v1/things", "MODIFIED", thing("a", 1, { team: "x" })); // labels
    await until("a reconciled", () => seen.includes("ns/a"));
    assert.deepEqual(seen, ["ns/b", "ns/a"], "the status-only update of a enqueued nothing");
  });

  it("maps an owned object's events to its controlling owner, and ignores unowned ones", async () => {
    seen.length = 0;
    api.send("/apis/apps/v1/parts", "ADDED", part("stray"));
    api.send("/apis/apps/v1/parts", "MODIFIED", part("a-part", "a"));
    await until("owner reconciled", () => seen.includes("ns/a"));
    assert.deepEqual(seen, ["ns/a"]);
  });

  it("requeues after the asked delay, retries errors with backoff, and treats NotLeader as done", async () => {
    seen.length = 0;
    let calls = 0;
    answers.set("ns/b", () => {
      calls++;
      if (calls === 1) return Result.requeueAfter(20);
      if (calls === 2) throw new Error("transient");
      if (calls === 3) throw new NotLeaderError("standby");
      return Result.done();
    });
    controller.enqueue("ns/b");
    await until("three reconciles of b", () => calls >= 3);
    const results = Object.fromEntries(
      (await metrics.reconciles.get()).values.map((v) => [String(v.labels.result), v.value]),
    );
    assert.ok(
      results.requeue! >= 1 && results.error! >= 1 && results["not-leader"]! >= 1,
      JSON.stringify(results),
    );
    assert.equal((await metrics.queueRetries.get()).values[0]?.value, 1, "only the thrown error was retried");
    answers.delete("ns/b");
  });
});

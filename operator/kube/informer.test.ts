// The informer survives what stops client-node's: a failed watch, a 410 Gone, a closed stream.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import * as http from "node:http";
import { KubeConfig } from "@kubernetes/client-node";
import { KubeClient } from "./client.ts";
import { Informer, stripManagedFields } from "./informer.ts";
import { createOperatorMetrics } from "../metrics.ts";

describe("informer", () => {
  it(
    "relists after a watch error, a reset connection and 410 Gone, re-watches after a closed stream, and reports every change",
    { timeout: 30_000 },
    async () => {
      const obj = (name: string, rv: string) => ({
        metadata: { name, namespace: "ns", resourceVersion: rv },
      });
      const lists = [
        { metadata: { resourceVersion: "2" }, items: [obj("a", "1")] },
        { metadata: { resourceVersion: "2" }, items: [obj("a", "1")] },
        { metadata: { resourceVersion: "6" }, items: [obj("a", "5")] },
        { metadata: { resourceVersion: "8" }, items: [obj("a", "7")] },
      ];
      let listCalls = 0;
      let watchCalls = 0;
      const watchRVs: string[] = [];
      const open: http.ServerResponse[] = [];
      const server = http.createServer((req, res) => {
        const url = new URL(req.url!, "http://x");
        if (url.searchParams.get("watch") !== "true") {
          const l = lists[Math.min(listCalls++, lists.length - 1)];
          res.writeHead(200, { "Content-Type": "application/json" });
          return res.end(JSON.stringify(l));
        }
        watchCalls++;
        watchRVs.push(url.searchParams.get("resourceVersion") ?? "");
        if (watchCalls === 1) {
          res.writeHead(500);
          return res.end('{"kind":"Status","message":"etcd hiccup","code":500}');
        }
        res.writeHead(200, { "Content-Type": "application/json" });
        if (watchCalls === 2) {
          res.write(`${JSON.stringify({ type: "ADDED", object: obj("b", "3") })}\n`);
          res.write(`${JSON.stringify({ type: "MODIFIED", object: obj("a", "4") })}\n`);
          return res.end(); // the server closes the watch (timeoutSeconds): re-watch from rv 4
        }
        if (watchCalls === 3) {
          return res.end(
            `${JSON.stringify({ type: "ERROR", object: { kind: "Status", code: 410, message: "too old resource version" } })}\n`,
          );
        }
        if (watchCalls === 4) {
          // an event, then the connection is reset (an API server restarting)
          res.write(`${JSON.stringify({ type: "MODIFIED", object: obj("a", "7") })}\n`, () =>
            setTimeout(() => res.socket?.destroy(), 20),
          );
          return;
        }
        open.push(res); // stays open
      });
      await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
      const port = (server.address() as { port: number }).port;
      const kc = new KubeConfig();
      kc.loadFromOptions({
        clusters: [{ name: "c", server: `http://127.0.0.1:${port}`, skipTLSVerify: true }],
        users: [{ name: "u" }],
        contexts: [{ name: "x", cluster: "c", user: "u" }],
        currentContext: "x",
      });
      const metrics = createOperatorMetrics(undefined, { defaultMetrics: false });
      const inf = new Informer<ReturnType<typeof obj>>(new KubeClient(kc, { metrics }), {
        path: "/apis/x/v1/things",
        minBackoffMs: 10,
        maxBackoffMs: 50,
        metrics,
      });
      const seen: string[] = [];
      let syncs = 0;
      inf.on({
        add: (o) => seen.push(`add ${o.metadata.name}@${o.metadata.resourceVersion}`),
        update: (o) => seen.push(`update ${o.metadata.name}@${o.metadata.resourceVersion}`),
        delete: (o) => seen.push(`delete ${o.metadata.name}`),
        synced: () => syncs++,
      });
      inf.start();
      try {
        for (let i = 0; i < 200 && open.length === 0; i++) await sleep(25);
        assert.equal(open.length, 1, "watching again at the end");
        assert.deepEqual(seen, ["add a@1", "add b@3", "update a@4", "update a@5", "delete b", "update a@7"]);
        assert.deepEqual(
          watchRVs,
          ["2", "2", "4", "6", "8"],
          "watch from the list's version, from the last event's, and after each relist",
        );
        assert.equal(listCalls, 4, "initial list, relists after the 500, the 410 and the reset");
        assert.equal(syncs, 4);
        assert.deepEqual(
          inf.list().map((o) => `${o.metadata.name}@${o.metadata.resourceVersion}`),
          ["a@7"],
        );
        const restarts = (await metrics.informerRestarts.get()).values.reduce((n, v) => n + v.value, 0);
        assert.equal(restarts, 2, "the 500 and the reset count as restarts; the 410 is a normal relist");
      } finally {
        for (const res of open) res.destroy();
        await inf.stop();
        server.closeAllConnections();
        server.close();
      }
    },
  );
});

describe("stripManagedFields (the informers' default transform)", () => {
  it("drops metadata.managedFields and keeps everything else, without touching the input", () => {
    const obj = {
      metadata: {
        name: "a",
        namespace: "ns",
        resourceVersion: "3",
        labels: { x: "1" },
        managedFields: [{ manager: "conveyor-operator", fieldsV1: { "f:spec": {} } }],
      },
      spec: { replicas: 0 },
    };
    const stripped = stripManagedFields(obj);
    assert.deepEqual(stripped, {
      metadata: { name: "a", namespace: "ns", resourceVersion: "3", labels: { x: "1" } },
      spec: { replicas: 0 },
    });
    assert.equal(obj.metadata.managedFields.length, 1);
    const plain = { metadata: { name: "b" } };
    assert.equal(stripManagedFields(plain), plain, "nothing to strip: the same object");
  });
});

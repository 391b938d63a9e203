// The manager's start/stop order and its health endpoints, with runnables that record what
// happens to them (no API server: leader election is off, so this replica always leads).
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import * as net from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import { KubeConfig } from "@kubernetes/client-node";
import { pino } from "pino";
import { createOperatorMetrics } from "../metrics.ts";
import { KubeClient } from "./client.ts";
import { Manager, StartError } from "./manager.ts";

function newManager(metricsPort = 0) {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: "c", server: "http://127.0.0.1:1" }],
    users: [{ name: "u" }],
    contexts: [{ name: "x", cluster: "c", user: "u" }],
    currentContext: "x",
  });
  const metrics = createOperatorMetrics(undefined, { defaultMetrics: false });
  return new Manager({
    baseClient: new KubeClient(kc, { metrics }),
    log: pino({ level: "silent" }),
    metrics,
    metricsAddress: "127.0.0.1",
    metricsPort,
  });
}

async function status(port: number, path: string): Promise<number> {
  const res = await fetch(`http://127.0.0.1:${port}${path}`);
  await res.text();
  return res.status;
}

describe("manager", () => {
  it("starts servers before controllers, is ready once they synced, stops in reverse", async () => {
    const manager = newManager();
    const order: string[] = [];
    let synced!: () => void;
    manager.addServer("api", {
      start: async () => void order.push("start api"),
      stop: async () => void order.push("stop api"),
    });
    manager.addController({
      start: () => {
        order.push("start controller");
        return new Promise<void>((resolve) => (synced = resolve));
      },
      stop: async () => void order.push("stop controller"),
    });
    await manager.start();
    const port = manager.metricsPort!;
    assert.equal(await status(port, "/healthz"), 200);
    assert.equal(await status(port, "/readyz"), 503, "not ready before the caches synced");
    synced();
    for (let i = 0; i < 500 && !manager.ready; i++) await sleep(10);
    assert.equal(await status(port, "/readyz"), 200);
    assert.equal(await status(port, "/metrics"), 200);
    assert.ok(manager.isLeader(), "no leader election: this replica leads");
    await manager.stop();
    assert.deepEqual(order, ["start api", "start controller", "stop controller", "stop api"]);
  });

  it("names the server that could not start, and starts no controller", async () => {
    const manager = newManager();
    let controllerStarted = false;
    let firstStopped = false;
    manager.addServer("first", { start: async () => {}, stop: async () => void (firstStopped = true) });
    manager.addServer("cannot listen on --metrics-api-port 1", {
      start: async () => {
        throw new Error("EADDRINUSE");
      },
      stop: async () => {},
    });
    manager.addController({ start: async () => void (controllerStarted = true), stop: async () => {} });
    await assert.rejects(manager.start(), (err: unknown) => {
      assert.ok(err instanceof StartError);
      assert.equal(err.what, "cannot listen on --metrics-api-port 1");
      return true;
    });
    assert.equal(controllerStarted, false);
    assert.equal(firstStopped, true, "what had started is stopped again");
  });

  it("fails to start when its metrics port is taken", async () => {
    const blocker = net.createServer();
    await new Promise<void>((resolve) => blocker.listen(0, "127.0.0.1", resolve));
    const port = (blocker.address() as net.AddressInfo).port;
    try {
      await assert.rejects(newManager(port).start(), /--metrics-port/);
    } finally {
      blocker.close();
    }
  });
});

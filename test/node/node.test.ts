// The real node (test/support/node.ts): a pod runs under the kubelet and containerd, and the host
// is as it was afterwards — also when the run was killed half-way.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import * as fs from "node:fs";
import { after, before, test } from "node:test";
import { CoreV1Api } from "@kubernetes/client-node";
import { pollUntil } from "../support/poll.ts";
import { ControlPlane } from "../support/controlplane.ts";
import { RealNode, hostState, nodeFootprint, nodeUnavailable, type HostState } from "../support/node.ts";

const skip = nodeUnavailable();
let cp: ControlPlane;
let node: RealNode;
let hostBefore: HostState;

before(async () => {
  if (skip) return;
  hostBefore = await hostState();
  cp = await ControlPlane.start({ scheduler: true });
  node = await RealNode.start(cp);
});
after(async () => {
  await node?.stop();
  await cp?.stop();
});

test(
  "a pod runs under the kubelet: Running, then stopped by SIGTERM within its grace period",
  { skip },
  async () => {
    const core = cp.kubeConfig().makeApiClient(CoreV1Api);
    const created = Date.now();
    await core.createNamespacedPod({
      namespace: "default",
      body: {
        metadata: { name: "sleeper" },
        spec: {
          terminationGracePeriodSeconds: 30,
          containers: [{ name: "pause", image: "localhost/conveyor-pause:1", imagePullPolicy: "Never" }],
        },
      },
    });
    const running = await pollUntil(
      "pod sleeper Running",
      async () => {
        const p = await core.readNamespacedPod({ name: "sleeper", namespace: "default" });
        return p.status?.phase === "Running" && p;
      },
      { onTimeout: () => node.logTail() },
    );
    console.log(`pod create → Running: ${Date.now() - created} ms`);
    assert.equal(running.spec?.nodeName, node.name);
    assert.match(running.status?.podIP ?? "", /^10\.213\.\d+\.\d+$/, "an address on the node's bridge");
    const { kubelet, containerd } = node.rssMiB();
    console.log(`RSS: kubelet ${kubelet.toFixed(0)} MiB, containerd ${containerd.toFixed(0)} MiB`);
    assert.ok(kubelet > 0 && containerd > 0);
    // the containers are containerd's, in the kubelet's cgroup root
    assert.match(await node.ctr("containers", "list", "-q"), /\w{64}/);
    assert.ok(fs.existsSync(`/sys/fs/cgroup/memory/${node.cgroupRoot}/kubepods`));

    // a node is visible on the host while it runs: the footprint check can fail
    const during = nodeFootprint(hostBefore, await hostState(), node);
    assert.ok(
      during.some((l) => l.includes(node.bridge)),
      `the running node's bridge shows up: ${during.join("; ")}`,
    );

    // pause exits 0 on SIGTERM: the deletion completes well inside the grace period
    const deleting = Date.now();
    await core.deleteNamespacedPod({ name: "sleeper", namespace: "default" });
    await pollUntil("pod sleeper gone", async () => {
      const pods = await core.listNamespacedPod({ namespace: "default" });
      return pods.items.length === 0;
    });
    assert.ok(Date.now() - deleting < 30_000, "stopped by SIGTERM, not by the grace period's SIGKILL");
  },
);

test("after stop() the host is as before: sysctls, iptables, mounts, links, cgroups", { skip }, async () => {
  await node.stop();
  assert.deepEqual(nodeFootprint(hostBefore, await hostState(), node), []);
  assert.equal(fs.existsSync(node.dir), false, "the run directory is gone");
});

test(
  "a run killed half-way (SIGKILL) is cleaned up and the next node starts",
  { skip, timeout: 300_000 },
  async () => {
    const child = spawn(
      process.execPath,
      [
        "--input-type=module",
        "-e",
        `import { ControlPlane } from ${JSON.stringify(new URL("../support/controlplane.ts", import.meta.url).href)};
       import { RealNode } from ${JSON.stringify(new URL("../support/node.ts", import.meta.url).href)};
       const cp = await ControlPlane.start({ scheduler: true, verbose: false });
       const node = await RealNode.start(cp, { verbose: false });
       console.log(JSON.stringify({ name: node.name, bridge: node.bridge, address: node.address, dir: node.dir }));
       setInterval(() => {}, 1000);`,
      ],
      { stdio: ["ignore", "pipe", "inherit"] },
    );
    let out = "";
    child.stdout.on("data", (c: Buffer) => (out += c.toString()));
    const killed = await pollUntil("the child's node Ready", () => out.includes("\n") && JSON.parse(out), {
      timeoutMs: 180_000,
    });
    child.kill("SIGKILL");
    await pollUntil(
      "the killed run cleaned up by its watchdog",
      async () =>
        !fs.existsSync(killed.dir) && nodeFootprint(hostBefore, await hostState(), killed).length === 0,
      {
        timeoutMs: 60_000,
        onTimeout: async () => nodeFootprint(hostBefore, await hostState(), killed).join("\n"),
      },
    );
    const next = await RealNode.start(cp);
    await next.stop();
    assert.deepEqual(nodeFootprint(hostBefore, await hostState(), next), []);
  },
);

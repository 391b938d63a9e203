// spec.contract: the operator publishes a pool's contract to its queue's Redis — inline or from a
// ConfigMap it watches — with the hash in status and an Event; an invalid one is a condition and
// an Event and leaves Redis as it was; removing it deletes the contract the pool published. A
// real control plane, Redis and `conveyor operator`; waits are polls.
import assert from "node:assert/strict";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { RESOURCES, resourcePath } from "../../operator/apis/coordinates.ts";
import type { WorkerPool } from "../../operator/apis/v1alpha1/types.ts";
import { KubeClient } from "../../operator/kube/client.ts";
import { connectRedis, contractHash, getContract, setContract, type RedisClient } from "../../queue/index.ts";
import { ControlPlane } from "../support/controlplane.ts";
import {
  isLeader,
  scrapeOperator,
  startOperator,
  sumSeries,
  workerPoolEvents,
  workerPoolManifest,
  type OperatorProcess,
} from "../support/operator.ts";
import { pollUntil } from "../support/poll.ts";
import { stopProcess } from "../support/processes.ts";
import { RedisServer } from "../support/redis.ts";

const ROOT = join(import.meta.dirname, "../..");
const LONG = 240_000;

const ORG = {
  type: "object",
  required: ["name"],
  properties: { name: { type: "string" }, phone: { type: "string" } },
};

describe("operator: spec.contract", { timeout: 15 * 60_000 }, () => {
  let cp: ControlPlane;
  let k: KubeClient;
  let redisServer: RedisServer;
  let redis: RedisClient;
  let op: OperatorProcess;

  before(async () => {
    cp = await ControlPlane.start({ controllers: false });
    k = new KubeClient(cp.kubeConfig());
    await cp.kubectl("apply", "--server-side", "-f", join(ROOT, "crds", "conveyor.dev_workerpools.yaml"));
    await cp.waitForCrd("workerpools.conveyor.dev");
    redisServer = await RedisServer.start();
    redis = connectRedis(redisServer.url);
    op = await startOperator(cp, "contract", ["--metrics-api=false"]);
    await pollUntil("the operator leads", () => isLeader(op), { timeoutMs: LONG });
  });
  after(async () => {
    if (op) await stopProcess(op.proc, 5000);
    redis?.disconnect();
    await redisServer?.stop();
    await cp?.stop();
  });

  const getPool = (name: string) =>
    k.get<WorkerPool>(resourcePath(RESOURCES.workerPools, { namespace: "default", name }));
  const applyPool = (name: string, contract: unknown) =>
    cp.apply(
      JSON.stringify(
        workerPoolManifest(name, redisServer.url, {
          contract,
          scaling: { mode: "direct", minReplicas: 0, maxReplicas: 1, pollSeconds: 1 },
        } as never),
      ),
    );
  const event = (name: string, reason: string, match: RegExp = /./) =>
    pollUntil(
      `a ${reason} Event on ${name} matching ${match}`,
      async () =>
        (await workerPoolEvents(k, "default", name)).find(
          (e) => e.reason === reason && match.test(e.message),
        ) ?? null,
      { timeoutMs: LONG },
    );
  /** The contract in force on the pool's queue once status.contract shows `hash` (and Redis agrees). */
  const published = (name: string, hash: string) =>
    pollUntil(
      `contract ${hash} of ${name} in Redis and in status`,
      async () => {
        const [inForce, pool] = await Promise.all([getContract(redis, `${name}/work`), getPool(name)]);
        return inForce?.hash === hash && pool?.status?.contract?.hash === hash
          ? { inForce, status: pool.status.contract }
          : null;
      },
      { timeoutMs: LONG },
    );

  it("publishes an inline contract (Redis, status, Event, metric); an invalid one is ContractInvalid and leaves Redis; removing it deletes it", async () => {
    const name = "inline";
    const contract = { data: ORG, result: { type: "object", required: ["ok"] } };
    const hash = contractHash(contract);
    await applyPool(name, contract);
    const { inForce, status } = await published(name, hash);
    assert.equal(inForce.source, "operator:default/inline");
    assert.deepEqual(inForce.contract, contract);
    assert.equal(status.source, "inline");
    assert.match(status.publishedAt ?? "", /^\d{4}-\d\d-\d\dT/);
    assert.match(await cp.kubectl("get", "wp", name, "-o", "wide"), new RegExp(`CONTRACT[\\s\\S]*${hash}`));
    await event(
      name,
      "ContractPublished",
      new RegExp(`contract ${hash} \\(inline\\) published to queue inline/work`),
    );
    assert.equal(
      sumSeries(
        await scrapeOperator(op),
        "conveyor_operator_contract_publishes_total",
        /workerpool="inline",action="published"/,
      ),
      1,
    );

    // a contract set by hand is replaced at the pool's next reconcile (here: an edit of its labels)
    await setContract(redis, `${name}/work`, { data: { type: "array" } }, "cli");
    await cp.kubectl("label", "wp", name, "touched=1");
    await pollUntil(
      "the pool's contract in force again",
      async () => {
        const c = await getContract(redis, `${name}/work`);
        return c?.hash === hash && c.source === "operator:default/inline";
      },
      { timeoutMs: LONG },
    );
    await event(name, "ContractPublished", /\(replacing [0-9a-f]{16} set by cli\)$/);

    // a schema ajv cannot compile: a condition and a Warning Event naming it; Redis keeps the one in force
    await applyPool(name, { data: { type: "objekt" } });
    const degraded = await pollUntil(
      "Degraded=True/ContractInvalid",
      async () =>
        (await getPool(name))?.status?.conditions?.find(
          (c) => c.type === "Degraded" && c.status === "True" && c.reason === "ContractInvalid",
        ) ?? null,
      { timeoutMs: LONG },
    );
    assert.match(degraded.message, /spec\.contract \(inline\): data: not a valid JSON Schema/);
    const warning = await event(name, "ContractInvalid");
    assert.equal(warning.type, "Warning");
    const still = await getContract(redis, `${name}/work`);
    assert.equal(still?.hash, hash);
    assert.equal((await getPool(name))?.status?.contract?.hash, hash);

    // spec.contract removed: the contract this pool published goes, and status.contract with it
    await cp.kubectl("patch", "wp", name, "--type=json", "-p", '[{"op":"remove","path":"/spec/contract"}]');
    await pollUntil(
      "the contract deleted from Redis and status",
      async () =>
        (await getContract(redis, `${name}/work`)) === undefined &&
        (await getPool(name))?.status?.contract === undefined,
      { timeoutMs: LONG },
    );
    await event(name, "ContractDeleted", new RegExp(`contract ${hash} deleted from queue inline/work`));
    await pollUntil(
      "Recovered",
      async () =>
        (await getPool(name))?.status?.conditions?.find((c) => c.type === "Degraded")?.status === "False",
      { timeoutMs: LONG },
    );
  });

  it("publishes a contract from a ConfigMap once it exists, and again when it changes", async () => {
    const name = "fromcm";
    const cm = (text: string) =>
      cp.apply(
        JSON.stringify({
          apiVersion: "v1",
          kind: "ConfigMap",
          metadata: { name: "fromcm-contract", namespace: "default" },
          data: { "contract.yaml": text },
        }),
      );
    await applyPool(name, { configMapRef: { name: "fromcm-contract", key: "contract.yaml" } });
    const missing = await pollUntil(
      "Degraded=True/ContractNotFound",
      async () =>
        (await getPool(name))?.status?.conditions?.find(
          (c) => c.type === "Degraded" && c.status === "True" && c.reason === "ContractNotFound",
        ) ?? null,
      { timeoutMs: LONG },
    );
    assert.match(missing.message, /ConfigMap fromcm-contract \(spec\.contract\.configMapRef\) not found/);

    // YAML, with named tasks
    await cm(
      [
        "tasks:",
        "  summarize:",
        "    data: {type: object, required: [text]}",
        "    result: {type: object, required: [summary]}",
      ].join("\n"),
    );
    const first = {
      tasks: {
        summarize: {
          data: { type: "object", required: ["text"] },
          result: { type: "object", required: ["summary"] },
        },
      },
    };
    const v1 = await published(name, contractHash(first));
    assert.equal(v1.status.source, "configmap/fromcm-contract");
    assert.equal(v1.inForce.source, "operator:default/fromcm");
    await event(
      name,
      "ContractPublished",
      new RegExp(`contract ${contractHash(first)} \\(configmap/fromcm-contract\\)`),
    );

    // edited: the watch re-reconciles the pool, the new hash is in force (JSON is YAML too)
    const second = { data: ORG };
    await cm(JSON.stringify(second));
    const v2 = await published(name, contractHash(second));
    assert.deepEqual(v2.inForce.contract, second);
    await event(name, "ContractPublished", new RegExp(`replacing ${contractHash(first)}`));

    // text that is neither JSON nor YAML, an empty value: ContractInvalid naming what is wrong; Redis keeps v2
    const contractInvalid = (message: RegExp) =>
      pollUntil(
        `Degraded=True/ContractInvalid matching ${message}`,
        async () =>
          (await getPool(name))?.status?.conditions?.find(
            (c) =>
              c.type === "Degraded" &&
              c.status === "True" &&
              c.reason === "ContractInvalid" &&
              message.test(c.message),
          ) ?? null,
        { timeoutMs: LONG },
      );
    await cm("data: [unclosed");
    await contractInvalid(/ConfigMap fromcm-contract key "contract\.yaml": neither JSON nor YAML/);
    await cm("");
    await contractInvalid(/spec\.contract \(configmap\/fromcm-contract\): a contract is an object/);
    assert.equal((await getContract(redis, `${name}/work`))?.hash, contractHash(second));
  });

  it("removing spec.contract leaves a contract someone else set since", async () => {
    const name = "foreign";
    const contract = { data: ORG };
    await applyPool(name, contract);
    await published(name, contractHash(contract));
    const theirs = { data: { type: "array" } };
    await setContract(redis, `${name}/work`, theirs, "cli");
    await cp.kubectl("patch", "wp", name, "--type=json", "-p", '[{"op":"remove","path":"/spec/contract"}]');
    await pollUntil(
      "status.contract cleared",
      async () => (await getPool(name))?.status?.contract === undefined,
      { timeoutMs: LONG },
    );
    const left = await getContract(redis, `${name}/work`);
    assert.equal(left?.hash, contractHash(theirs));
    assert.equal(left?.source, "cli");
    assert.equal(
      (await workerPoolEvents(k, "default", name)).filter((e) => e.reason === "ContractDeleted").length,
      0,
    );
  });

  it("refuses a contract that is both inline and a configMapRef", async () => {
    const res = await cp.run("kubectl", [`--kubeconfig=${cp.kubeconfigPath}`, "apply", "-f", "-"], {
      input: JSON.stringify(
        workerPoolManifest("both", redisServer.url, {
          contract: { data: ORG, configMapRef: { name: "x" } },
        } as never),
      ),
      check: false,
    });
    assert.notEqual(res.code, 0);
    assert.match(
      res.stderr,
      /contract must set either data\/result\/tasks inline or configMapRef \(exactly one\)/,
    );
  });
});

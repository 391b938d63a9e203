// Bad input against the real API server and the real operator (issue 7): seeded fuzzed
// WorkerPool specs, the API server restarted under the operator, and a second field manager
// fighting over the worker Deployment. Whatever happens, the operator keeps running (same pid,
// /healthz ok) and a valid pool beside the bad ones keeps scaling 0 → 1 → 0.
//
// The control plane here is etcd + kube-apiserver only: no controller-manager, so no pods and no
// HPA controller — a pinned `replicas: 10000` costs nothing, and what is checked is what the
// operator writes. The seed is printed; BADPOOLS_SEED=<n> repeats a run's cases.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import { rng } from "../support/random.ts";
import { ControlPlane } from "../support/controlplane.ts";
import { pollUntil } from "../support/poll.ts";
import { RedisServer } from "../support/redis.ts";
import { freePort } from "../support/ports.ts";
import { logLine, stopProcess } from "../support/processes.ts";
import {
  isLeader,
  operatorAlive,
  operatorLog,
  scrapeOperator,
  startOperator,
  sumSeries,
  waitForPolls,
  workerPoolEvents,
  workerPoolManifest,
  type OperatorProcess,
} from "../support/operator.ts";
import { drainQueue } from "../support/workers.ts";
import { Producer, connectRedis, type RedisClient } from "../../queue/index.ts";
import { RESOURCES, resourcePath } from "../../operator/apis/coordinates.ts";
import { KubeClient } from "../../operator/kube/client.ts";
import type { WorkerPool, WorkerPoolSpecInput } from "../../operator/apis/v1alpha1/types.ts";
import type { Deployment } from "../../operator/controllers/objects.ts";

const ROOT = join(import.meta.dirname, "../..");
const LONG = 240_000;
const FUZZ_NS = "fuzz";
const CASES = 48;

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };
type Obj = { [k: string]: Json };

interface Case {
  name: string;
  object: Obj;
  /** What was done to the spec, for messages. */
  mutations: string[];
  /** When accepted, the pool must end up Degraded (a bad reference, a template the API server refuses). */
  expectDegraded: boolean;
}

// ---- the fuzzer: pure functions of the seed -----------------------------------------------------

const pick = <T>(r: () => number, xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]!;

/** Spec paths the running mutation set (see fuzzCases: a later mutation may overwrite an earlier one). */
let touched: string[] = [];

function setPath(o: Obj, path: string, v: Json | undefined): void {
  touched.push(path);
  const parts = path.split(".");
  let cur: Obj = o;
  for (const p of parts.slice(0, -1)) {
    const next = cur[p];
    if (next === null || typeof next !== "object" || Array.isArray(next)) cur[p] = {};
    cur = cur[p] as Obj;
  }
  const last = parts[parts.length - 1]!;
  if (v === undefined) delete cur[last];
  else cur[last] = v;
}

function nested(depth: number): Json {
  let v: Json = { leaf: [1, "two", null, { three: true }] };
  for (let i = 0; i < depth; i++) v = { a: v };
  return v;
}

const INT_PATHS = [
  "concurrency",
  "maxJobSeconds",
  "drainSeconds",
  "replicas",
  "scaling.minReplicas",
  "scaling.maxReplicas",
  "scaling.targetBacklogPerReplica",
  "scaling.activationBacklog",
  "scaling.cooldownSeconds",
  "scaling.pollSeconds",
  "scaling.behavior.scaleUp.stabilizationWindowSeconds",
] as const;
const STRING_PATHS = [
  "queue",
  "nextQueue",
  "redis.url",
  "handler.module",
  "template.image",
  "redis.secretRef.name",
  "scaling.mode",
  "template.serviceAccountName",
] as const;
const OBJECT_PATHS = [
  "scaling",
  "template",
  "redis",
  "handler",
  "template.resources",
  "template.nodeSelector",
  "scaling.behavior",
] as const;

type Mutation = (
  spec: Obj,
  r: () => number,
  env: FuzzEnv,
) => {
  what: string;
  /** The pool is Degraded: at once, or ("afterPolls") once three backlog polls have failed. */
  degraded?: boolean | "afterPolls";
  top?: (o: Obj) => void;
};

interface FuzzEnv {
  redisPort: number;
  closedPort: number;
}

const MUTATIONS: Record<string, Mutation> = {
  wrongType: (s, r) => {
    const kind = r();
    if (kind < 0.45) {
      const p = pick(r, INT_PATHS);
      const v = pick(r, ["ten", "1", true, [1, 2], { n: 1 }, 1.5] as Json[]);
      setPath(s, p, v);
      return { what: `${p}=${JSON.stringify(v)}` };
    }
    if (kind < 0.8) {
      const p = pick(r, STRING_PATHS);
      const v = pick(r, [42, true, ["a"], { s: "x" }, 0.5] as Json[]);
      setPath(s, p, v);
      return { what: `${p}=${JSON.stringify(v)}` };
    }
    const p = pick(r, OBJECT_PATHS);
    const v = pick(r, ["object", 7, [{}], false] as Json[]);
    setPath(s, p, v);
    return { what: `${p}=${JSON.stringify(v)}` };
  },
  hugeNumber: (s, r) => {
    const p = pick(r, INT_PATHS);
    const v = pick(r, [2 ** 31, 2 ** 53, 2 ** 63, 1e20, 1e300, 10001, 1000001]);
    setPath(s, p, v);
    return { what: `${p}=${v}` };
  },
  negativeNumber: (s, r) => {
    const p = pick(r, INT_PATHS);
    const v = pick(r, [-1, -(2 ** 31), -1e15, -0.5]);
    setPath(s, p, v);
    return { what: `${p}=${v}` };
  },
  emptyString: (s, r) => {
    const p = pick(r, [
      ...STRING_PATHS,
      "handler.http.path",
      "template.priorityClassName",
      "database.secretRef.name",
      "redis.secretRef.key",
    ]);
    setPath(s, p, "");
    return { what: `${p}=""` };
  },
  oddQueueName: (s, r) => {
    const q = pick(r, [
      "ünïcode/q",
      "队列/阶段",
      "😀/x",
      "a b",
      "../etc",
      "a/b/c",
      "-lead",
      ".dot/x",
      "q\n",
      "q\u0000",
      "x".repeat(101),
      "a/",
      "/a",
      "a//b",
      "q*",
      "{tag}/q",
      "%2F",
      "q\u202Eevil",
      "A.b_c-D/x9",
      "0/0",
      "solo",
      `${"p".repeat(100)}/${"s".repeat(100)}`,
    ]);
    const field = r() < 0.75 ? "queue" : "nextQueue";
    setPath(s, field, q);
    return { what: `${field}=${JSON.stringify(q).slice(0, 40)}` };
  },
  unknownField: (s, r, _e) => {
    const c = pick(r, [
      "spec.bogus",
      "spec.scaling.turbo",
      "spec.handler.extra",
      "spec.redis.password",
      "top.status2",
      "spec.template.bogus",
      "spec.template.resources.bogus",
      "spec.template.containers[0].bogus",
    ]);
    if (c === "top.status2") return { what: c, top: (o) => void (o.status2 = { x: 1 }) };
    if (c === "spec.template.resources.bogus") {
      setPath(s, "template.resources", { requests: { cpu: "100m" }, bogus: { deep: 1 } });
      return { what: c, degraded: true };
    }
    if (c === "spec.template.containers[0].bogus") {
      setPath(s, "template.containers", [{ name: "side", image: "busybox", bogus: 1 }]);
      return { what: c, degraded: true };
    }
    setPath(s, c.slice("spec.".length), c.endsWith("password") ? "hunter2" : { what: "garbage" });
    return { what: c };
  },
  longString: (s, r) => {
    const c = r();
    if (c < 0.2) {
      setPath(s, "queue", "q".repeat(250));
      return { what: "queue: 250 chars" };
    }
    if (c < 0.35) {
      setPath(s, "handler.module", `/${"m".repeat(5000)}.js`);
      return { what: "handler.module: 5000 chars" };
    }
    if (c < 0.5) {
      setPath(s, "redis.url", `redis://${"h".repeat(3000)}:6379`);
      return { what: "redis.url: 3000 chars" };
    }
    if (c < 0.6) {
      setPath(s, "template.image", `registry.example/${"i".repeat(pick(r, [900, 2000]))}:1`);
      return { what: "template.image: long" };
    }
    if (c < 0.75) {
      setPath(s, "template.env", [{ name: "BIG", value: "v".repeat(200_000) }]);
      return { what: "template.env value: 200 KB" };
    }
    if (c < 0.88) {
      setPath(s, "template.annotations", { big: "x".repeat(300_000) });
      return { what: "template.annotations: 300 KB", degraded: true };
    }
    setPath(s, "template.labels", { tier: "l".repeat(100) });
    return { what: "template.labels value: 100 chars", degraded: true };
  },
  minAboveMax: (s, r) => {
    const max = 1 + Math.floor(r() * 50);
    const min = max + 1 + Math.floor(r() * 100);
    setPath(s, "scaling.minReplicas", min);
    setPath(s, "scaling.maxReplicas", max);
    return { what: `minReplicas ${min} > maxReplicas ${max}` };
  },
  badQuantity: (s, r) => {
    const [v, degraded] = pick(r, [
      [{ requests: { cpu: "lots" } }, true],
      [{ requests: { cpu: "-1" } }, true],
      [{ requests: { memory: "1.5.5Gi" } }, true],
      [{ requests: { cpu: "" } }, true],
      [{ limits: { memory: "1e1000" } }, false], // odd, but a quantity the API server takes
      [{ requests: { cpu: "∞" } }, true],
      [{ requests: { memory: "2Gi" }, limits: { memory: "1Gi" } }, true],
      [{ requests: "2" }, true],
      [{ requests: { cpu: { milli: 5 } } }, true],
      [{ requests: [{ cpu: "1" }] }, true],
    ] as [Json, boolean][]);
    setPath(s, "template.resources", v);
    return { what: `template.resources=${JSON.stringify(v)}`, degraded };
  },
  badHandler: (s, r) => {
    const v = pick(r, [
      {},
      { module: "relative.js" },
      { module: 5 },
      { http: {} },
      { http: { port: 0 } },
      { http: { port: 70000 } },
      { http: { port: 80, path: "nope" } },
      { command: [] },
      { command: "ls -l" },
      { command: [1, 2] },
      { module: "/a.js", http: { port: 80 } },
      { module: "/a.js", command: ["x"] },
      { http: { port: 8080 } },
      { command: ["/bin/true"] },
      { command: ["/bin/true"], passCredentials: true },
      { module: "/a.js", passCredentials: true },
      null,
      "module",
      [],
    ] as Json[]);
    setPath(s, "handler", v);
    return { what: `handler=${JSON.stringify(v)}` };
  },
  missingRequired: (s, r) => {
    const c = pick(r, [
      "queue",
      "redis",
      "handler",
      "redis.url",
      "database.secretRef",
      "template.env[].name",
      "handler.http.port",
      "redis.secretRef.name",
      "spec",
    ]);
    if (c === "spec") return { what: "no spec", top: (o) => void delete o.spec };
    if (c === "database.secretRef") setPath(s, "database", {});
    else if (c === "template.env[].name") setPath(s, "template.env", [{ value: "x" }]);
    else if (c === "handler.http.port") setPath(s, "handler", { http: { path: "/" } });
    else if (c === "redis.secretRef.name") setPath(s, "redis.secretRef", { key: "password" });
    else setPath(s, c, undefined);
    return { what: `missing ${c}` };
  },
  nestedGarbage: (s, r) => {
    const c = r();
    if (c < 0.15) setPath(s, "template.affinity", nested(pick(r, [3, 40])));
    else if (c < 0.3) setPath(s, "template.containers", [{ name: "side", image: { repo: "x" } }]);
    else if (c < 0.42) setPath(s, "template.volumes", [{ name: "v", emptyDir: "yes" }]);
    else if (c < 0.52) setPath(s, "template.tolerations", [[[]]] as Json);
    else if (c < 0.64) setPath(s, "template.env", [{ name: "A", valueFrom: { secretKeyRef: { name: 5 } } }]);
    else if (c < 0.74) setPath(s, "template.topologySpreadConstraints", [{ maxSkew: "x", deep: nested(5) }]);
    else if (c < 0.84) setPath(s, "template.securityContext", { runAsUser: "root", seLinuxOptions: [1] });
    else if (c < 0.92) setPath(s, "template.env", [{ name: "A", value: { nested: [1, { deep: null }] } }]);
    else setPath(s, "template.envFrom", [{ configMapRef: { name: "x" }, extra: [[]] }]);
    // tolerations items must be objects: rejected by the schema; the rest passes to the Deployment.
    return { what: "nested garbage in template", degraded: !(c >= 0.42 && c < 0.52) };
  },
  edgeValues: (s, r) => {
    // valid but extreme: accepted, and the operator must cope
    const c = pick(r, [
      "activation",
      "pinned",
      "limits",
      "unicode",
      "slowpoll",
      "solo",
      "sidecar",
      "zerodrain",
    ]);
    if (c === "activation") setPath(s, "scaling.activationBacklog", 2 ** 53);
    if (c === "pinned") setPath(s, "replicas", 10000);
    if (c === "limits") {
      setPath(s, "concurrency", 1000);
      setPath(s, "maxJobSeconds", 86400);
      setPath(s, "scaling.maxReplicas", 10000);
      setPath(s, "scaling.minReplicas", 10000);
      setPath(s, "scaling.targetBacklogPerReplica", 1000000);
    }
    if (c === "unicode")
      setPath(s, "template.env", [
        { name: "GREETING", value: 'ünïcode ✓ \u0000 "quoted" $(rm -rf /)' },
        { name: "EMPTY", value: "" },
      ]);
    if (c === "slowpoll") {
      setPath(s, "scaling.pollSeconds", 3600);
      setPath(s, "scaling.cooldownSeconds", 86400);
    }
    if (c === "solo")
      setPath(s, "queue", pick(r, ["solo", "A.b_c-D/x9", `${"p".repeat(100)}/${"s".repeat(100)}`]));
    if (c === "sidecar") {
      setPath(s, "handler", { http: { port: 8080, path: "/jobs?x=ü" } });
      setPath(s, "template.containers", [
        { name: "server", image: "example/server:1", ports: [{ containerPort: 8080 }] },
      ]);
    }
    if (c === "zerodrain") setPath(s, "drainSeconds", 0);
    return { what: `edge: ${c}` };
  },
  badReference: (s, r, e) => {
    const c = pick(r, ["secret", "closed", "tls", "cluster", "db", "dbsecret", "secretkey"]);
    if (c === "secret") setPath(s, "redis.secretRef", { name: "absent-secret" });
    if (c === "secretkey") setPath(s, "redis.secretRef", { name: "fuzz-redis", key: "no-such-key" });
    if (c === "closed") setPath(s, "redis.url", `redis://127.0.0.1:${e.closedPort}`);
    if (c === "tls") setPath(s, "redis.url", `rediss://127.0.0.1:${e.redisPort}`);
    if (c === "cluster") setPath(s, "redis.url", `redis-cluster://127.0.0.1:${e.redisPort}`);
    // A database index the server does not have: the client is closed rather than left serving
    // database 0 (as ioredis would), so the pool is Degraded, never Ready on the wrong data.
    if (c === "db") setPath(s, "redis.url", `redis://127.0.0.1:${e.redisPort}/99`);
    if (c === "dbsecret") setPath(s, "database", { secretRef: { name: "absent-db" } });
    // (an unreadable Redis is RedisUnreachable after three failed polls; a missing Secret at once)
    return {
      what: `bad reference: ${c}`,
      degraded: ["closed", "tls", "cluster", "db"].includes(c) ? "afterPolls" : true,
    };
  },
};

/** Mutations that the API server may accept come up more often: the operator has to cope with those. */
const WEIGHTED = Object.keys(MUTATIONS).flatMap((k) =>
  ["edgeValues", "badReference", "badQuantity", "nestedGarbage", "longString"].includes(k) ? [k, k, k] : [k],
);

export function fuzzCases(seed: number, n: number, env: FuzzEnv): Case[] {
  const r = rng(seed);
  const names = Object.keys(MUTATIONS);
  const cases: Case[] = [];
  for (let i = 0; i < n; i++) {
    const name = `fz-${i}`;
    const spec: Obj = {
      queue: `fz${i}/work`,
      redis: { url: `redis://127.0.0.1:${env.redisPort}` },
      handler: { module: "/app/handler.js" },
      scaling: { mode: r() < 0.5 ? "hpa" : "direct", pollSeconds: 2 },
    };
    const object: Obj = {
      apiVersion: "conveyor.dev/v1alpha1",
      kind: "WorkerPool",
      metadata: { name, namespace: FUZZ_NS },
      spec,
    };
    const mutations: string[] = [];
    // The spec paths of each mutation that makes the pool Degraded: a later mutation that sets
    // the same path (or one above it) replaces what made it so.
    const degradedBy: { paths: string[]; afterPolls: boolean }[] = [];
    // every kind at least once (in order), then random ones; a third of the cases get two
    const count = r() < 0.33 ? 2 : 1;
    for (let m = 0; m < count; m++) {
      const kind = m === 0 && i < names.length ? names[i]! : pick(r, WEIGHTED);
      touched = [];
      const res = MUTATIONS[kind]!(spec, r, env);
      res.top?.(object);
      mutations.push(`${kind}: ${res.what}`);
      for (let d = degradedBy.length - 1; d >= 0; d--) {
        const { paths } = degradedBy[d]!;
        const replaced =
          paths.length > 0 && paths.every((p) => touched.some((t) => p === t || p.startsWith(`${t}.`)));
        if (replaced) degradedBy.splice(d, 1);
      }
      if (res.degraded) degradedBy.push({ paths: touched, afterPolls: res.degraded === "afterPolls" });
    }
    // Three failed polls at an interval beyond the test's wait (edge "slowpoll": 3600 s) do not
    // come in time: such a pool shows BacklogUnavailable, and Degraded only an hour later.
    const pollSeconds = (spec.scaling as Obj | undefined)?.pollSeconds;
    const pollsInTime = !(typeof pollSeconds === "number" && pollSeconds > 30);
    cases.push({
      name,
      object,
      mutations,
      expectDegraded: degradedBy.some((d) => !d.afterPolls || pollsInTime),
    });
  }
  return cases;
}

// ---- the test ---------------------------------------------------------------------------------------

describe(
  "bad WorkerPools, an API server restart and a second field manager, against the real operator",
  { timeout: 20 * 60_000 },
  () => {
    const seed = process.env.BADPOOLS_SEED
      ? Number(process.env.BADPOOLS_SEED)
      : Math.floor(Math.random() * 2 ** 31);
    let cp: ControlPlane;
    let k: KubeClient;
    let redis: RedisServer;
    let r: RedisClient;
    let producer: Producer;
    let op: OperatorProcess;

    const getPool = (ns: string, name: string) =>
      k.get<WorkerPool>(resourcePath(RESOURCES.workerPools, { namespace: ns, name }));
    const getDeployment = (ns: string, name: string) =>
      k.get<Deployment>(resourcePath(RESOURCES.deployments, { namespace: ns, name }));
    const condition = (p: WorkerPool | null, type: string) =>
      p?.status?.conditions?.find((c) => c.type === type);
    const replicas = async (ns: string, name: string) => (await getDeployment(ns, name))?.spec?.replicas;

    const events = (ns: string, name: string) => workerPoolEvents(k, ns, name);

    async function applyPool(obj: unknown, ...extra: string[]): Promise<{ code: number; out: string }> {
      const res = await cp.run(
        "kubectl",
        [
          `--kubeconfig=${cp.kubeconfigPath}`,
          "apply",
          "--server-side",
          "--field-manager=tester",
          "-f",
          "-",
          ...extra,
        ],
        {
          input: JSON.stringify(obj),
          check: false,
        },
      );
      return { code: res.code, out: `${res.stdout}${res.stderr}` };
    }

    const pool = (name: string, spec: Partial<WorkerPoolSpecInput>) =>
      workerPoolManifest(name, redis.url, spec);

    /** The valid pool `steady` still works: 0 → 1 on a backlog, back to 0 once drained. */
    async function steadyScales(when: string): Promise<void> {
      const countOf = async (re: RegExp) =>
        (await events("default", "steady")).filter((e) => re.test(e.message)).length;
      const up = await countOf(/0 → 1: Activated/);
      const down = await countOf(/→ 0: CooledDown/);
      assert.equal(await replicas("default", "steady"), 0, `steady at zero ${when}`);
      await producer.enqueueMany(
        "steady/work",
        Array.from({ length: 5 }, (_, i) => ({ data: { i } })),
      );
      await pollUntil(
        `steady 0 → 1 ${when}`,
        async () => (await replicas("default", "steady")) === 1 && (await countOf(/0 → 1: Activated/)) > up,
        { timeoutMs: LONG },
      );
      await drainQueue(r, "steady/work");
      await pollUntil(
        `steady 1 → 0 ${when}`,
        async () => (await replicas("default", "steady")) === 0 && (await countOf(/→ 0: CooledDown/)) > down,
        { timeoutMs: LONG },
      );
    }

    async function assertOperatorAlive(when: string): Promise<void> {
      assert.ok(await operatorAlive(op), `operator alive (pid ${op.pid}, /healthz ok) ${when}`);
      const log = operatorLog(op);
      assert.doesNotMatch(
        log,
        /"level":60|uncaught|unhandled ?rejection|FATAL ERROR|heap out of memory/i,
        `no fatal log line ${when}`,
      );
    }

    before(async () => {
      process.stderr.write(`badpools: seed ${seed} (BADPOOLS_SEED=${seed} repeats the cases)\n`);
      cp = await ControlPlane.start({ controllers: false });
      k = new KubeClient(cp.kubeConfig());
      await cp.kubectl("apply", "--server-side", "-f", join(ROOT, "crds", "conveyor.dev_workerpools.yaml"));
      await cp.waitForCrd("workerpools.conveyor.dev");
      await cp.kubectl("create", "namespace", FUZZ_NS);
      await cp.kubectl(
        "create",
        "secret",
        "generic",
        "fuzz-redis",
        "-n",
        FUZZ_NS,
        "--from-literal=password=unused",
      );
      redis = await RedisServer.start();
      r = connectRedis(redis.url);
      producer = new Producer(r);
      op = await startOperator(cp, "badpools", ["--metrics-api=false", "--relist-seconds=60"]);
      await pollUntil("the operator leads", () => isLeader(op), { timeoutMs: LONG });
      const applied = await applyPool(
        pool("steady", { scaling: { mode: "direct", maxReplicas: 3, pollSeconds: 1, cooldownSeconds: 2 } }),
      );
      assert.equal(applied.code, 0, applied.out);
      await pollUntil(
        "steady Ready at zero",
        async () => {
          const p = await getPool("default", "steady");
          return (
            condition(p, "Ready")?.reason === "ScaledToZero" && (await replicas("default", "steady")) === 0
          );
        },
        { timeoutMs: LONG },
      );
    });

    after(async () => {
      r?.disconnect();
      if (op) await stopProcess(op.proc, 10_000);
      await redis?.stop();
      await cp?.stop();
    });

    it(`fuzzed specs (${CASES}, seeded): rejected with a readable message, or accepted and given a status — Degraded with an Event when invalid`, async () => {
      const cases = fuzzCases(seed, CASES, { redisPort: redis.port, closedPort: await freePort() });
      const accepted: Case[] = [];
      const rejections = new Map<string, string>();
      const tally = new Map<string, number>();
      for (const c of cases) {
        const res = await applyPool(c.object);
        const label = `${c.name} [${c.mutations.join(" + ")}] (seed ${seed})`;
        if (res.code !== 0) {
          tally.set("rejected", (tally.get("rejected") ?? 0) + 1);
          rejections.set(c.name, res.out.trim().split("\n").at(-1)!.replace(/\s+/g, " ").slice(0, 200));
          // the API server's message, naming what is wrong; never a crash of some component
          assert.match(res.out, /Error from server|is invalid|error:/, `${label}: ${res.out.slice(0, 500)}`);
          assert.match(
            res.out,
            /spec|WorkerPool|unknown field|field not declared|status2|Invalid value|Required value|Unsupported value/,
            `${label}: names the problem: ${res.out.slice(0, 500)}`,
          );
          assert.doesNotMatch(
            res.out,
            /panic|goroutine \d|runtime error|internal error/i,
            `${label}: ${res.out.slice(0, 500)}`,
          );
          assert.doesNotMatch(res.out, /hunter2/, `${label}: a rejected password is not echoed`);
        } else {
          accepted.push(c);
        }
      }

      // Every accepted pool gets a current status with a Ready condition and a reason; when it is
      // Degraded there is a Warning Event with that reason. Pools known to be broken are Degraded.
      const pending = new Set(accepted.map((c) => c.name));
      const outcome = new Map<string, string>();
      await pollUntil(
        `${accepted.length} accepted pools have a status (seed ${seed})`,
        async () => {
          for (const c of accepted) {
            if (!pending.has(c.name)) continue;
            const p = await getPool(FUZZ_NS, c.name);
            if (!p || p.status?.observedGeneration !== p.metadata.generation) continue;
            const ready = condition(p, "Ready");
            const degraded = condition(p, "Degraded");
            if (!ready?.reason) continue;
            if (c.expectDegraded && degraded?.status !== "True") continue;
            if (degraded?.status === "True") {
              const ev = await events(FUZZ_NS, c.name);
              if (!ev.some((e) => e.type === "Warning" && e.reason === degraded.reason)) continue;
              outcome.set(c.name, `Degraded/${degraded.reason}`);
            } else {
              outcome.set(c.name, `Ready=${ready.status}/${ready.reason}`);
            }
            pending.delete(c.name);
          }
          return pending.size === 0;
        },
        {
          timeoutMs: 3 * 60_000,
          intervalMs: 1000,
          onTimeout: async () => {
            const lines: string[] = [];
            for (const c of accepted.filter((x) => pending.has(x.name))) {
              const p = await getPool(FUZZ_NS, c.name);
              lines.push(
                `${c.name} [${c.mutations.join(" + ")}]: ${JSON.stringify(p?.status ?? null).slice(0, 600)}`,
              );
            }
            return lines.join("\n");
          },
        },
      );
      for (const o of outcome.values()) {
        const k = o.startsWith("Degraded/") ? o : "Ready";
        tally.set(k, (tally.get(k) ?? 0) + 1);
      }
      process.stderr.write(`badpools: seed ${seed}: ${[...tally].map(([k, v]) => `${k} ${v}`).join(", ")}\n`);
      for (const c of cases)
        process.stderr.write(
          `  ${c.name}: ${accepted.includes(c) ? outcome.get(c.name) : "rejected"} ← ${c.mutations.join(" + ").slice(0, 160)}\n`,
        );
      for (const [name, msg] of rejections) process.stderr.write(`  ${name} rejected: ${msg}\n`);
      assert.ok(tally.get("rejected")! > 0, "some specs were rejected by the schema/CEL");
      assert.ok(accepted.length > 0, "some specs were accepted");

      await assertOperatorAlive("after the fuzzed pools");
      await steadyScales("beside the fuzzed pools");
    });

    it("the API server restarted under the operator (SIGTERM, 15 s down; then SIGKILL): it survives, leads again and reconciles", async () => {
      const restartsBefore = sumSeries(await scrapeOperator(op), "conveyor_operator_informer_restarts_total");
      await cp.restartApiServer({ downMs: 15_000 }); // longer than the renew deadline (10 s): leadership is lost
      await assertOperatorAlive("after an API server restart");
      await pollUntil("the operator leads again", () => isLeader(op), { timeoutMs: LONG });
      await pollUntil(
        "informers restarted",
        async () =>
          sumSeries(await scrapeOperator(op), "conveyor_operator_informer_restarts_total") > restartsBefore,
        { timeoutMs: LONG },
      );
      // a change made after the restart is reconciled
      let res = await applyPool(pool("after-restart", { scaling: { pollSeconds: 1 } }));
      assert.equal(res.code, 0, res.out);
      await pollUntil(
        "after-restart's Deployment",
        async () => (await getDeployment("default", "after-restart")) ?? undefined,
        { timeoutMs: LONG },
      );

      await cp.restartApiServer({ downMs: 3000, kill: true });
      await assertOperatorAlive("after an API server crash");
      await pollUntil("the operator leads after the crash", () => isLeader(op), { timeoutMs: LONG });
      res = await applyPool(pool("after-restart", { concurrency: 7, scaling: { pollSeconds: 1 } }));
      assert.equal(res.code, 0, res.out);
      await pollUntil(
        "after-restart's Deployment converged",
        async () => {
          const env = (await getDeployment("default", "after-restart"))?.spec?.template?.spec?.containers[0]
            ?.env;
          return env?.find((e) => e.name === "CONVEYOR_CONCURRENCY")?.value === "7";
        },
        { timeoutMs: LONG },
      );
      await steadyScales("after the API server restarts");
      await cp.kubectl("delete", "wp", "after-restart", "--wait=false");
    });

    it("a second field manager on the worker Deployment: its image is taken back; replicas stay with whoever owns them (the HPA at 1..N, the operator for N → 0 and in direct mode)", async () => {
      const intrude = async (name: string, spec: Record<string, unknown>) => {
        const obj = {
          apiVersion: "apps/v1",
          kind: "Deployment",
          metadata: { name, namespace: "default" },
          spec,
        };
        await cp.run(
          "kubectl",
          [
            `--kubeconfig=${cp.kubeconfigPath}`,
            "apply",
            "--server-side",
            "--field-manager=intruder",
            "--force-conflicts",
            "-f",
            "-",
          ],
          { input: JSON.stringify(obj) },
        );
      };
      const image = async (name: string) =>
        (await getDeployment("default", name))?.spec?.template?.spec?.containers.find(
          (c) => c.name === "worker",
        )?.image;

      let res = await applyPool(
        pool("contested", { scaling: { mode: "hpa", pollSeconds: 1, cooldownSeconds: 3 } }),
      );
      assert.equal(res.code, 0, res.out);
      await pollUntil(
        "contested at zero",
        async () =>
          (await replicas("default", "contested")) === 0 &&
          condition(await getPool("default", "contested"), "Ready")?.reason === "ScaledToZero",
        { timeoutMs: LONG },
      );

      // the image: a field the operator owns — put back, and the log says what drifted
      const logBefore = operatorLog(op).length;
      await intrude("contested", {
        template: { spec: { containers: [{ name: "worker", image: "intruder/evil:1" }] } },
      });
      await pollUntil("the intruder's apply in the audit log", async () => {
        const mine = await cp.auditEvents(
          (e) =>
            e.userAgent?.startsWith("kubectl") === true &&
            e.verb === "patch" &&
            e.objectRef?.name === "contested" &&
            e.objectRef.resource === "deployments",
        );
        return mine.at(-1)?.responseStatus?.code === 200;
      });
      await pollUntil(
        "the image is the operator's again",
        async () => (await image("contested")) === "conveyor-worker:test",
        { timeoutMs: LONG },
      );
      const logged = await logLine(
        op.log,
        /"pool":"default\/contested".*"msg":"updating worker Deployment"/,
        {
          from: logBefore,
        },
      );
      assert.match(
        logged,
        /"changed":\[[^\]]*spec\.template\.spec\.containers/,
        `the log names the drifted field: ${logged}`,
      );
      const managers = JSON.parse(
        await cp.kubectl("get", "deployment", "contested", "-o", "json", "--show-managed-fields"),
      ) as { metadata: { managedFields: { manager: string; fieldsV1: unknown }[] } };
      const owner = (m: string) =>
        JSON.stringify(managers.metadata.managedFields.find((f) => f.manager === m)?.fieldsV1 ?? {});
      assert.match(owner("conveyor-operator"), /"f:image"/, "the operator owns the image again");
      assert.doesNotMatch(owner("intruder"), /"f:image"/, "the intruder lost the image");

      // replicas at zero in hpa mode: 0 ↔ 1 and N → 0 are the operator's — scaled back after the cooldown
      await intrude("contested", { replicas: 3 });
      await pollUntil(
        "the operator scales the intruder's 3 back to 0 (CooledDown)",
        async () =>
          (await replicas("default", "contested")) === 0 &&
          (await events("default", "contested")).some((e) => /^3 → 0: CooledDown/.test(e.message)),
        { timeoutMs: LONG },
      );

      // replicas while active in hpa mode: 1..N belongs to the HPA; the operator does not fight it
      await producer.enqueueMany(
        "contested/work",
        Array.from({ length: 3 }, (_, i) => ({ data: { i } })),
      );
      await pollUntil(
        "contested activated 0 → 1",
        async () => (await replicas("default", "contested")) === 1,
        { timeoutMs: LONG },
      );
      await intrude("contested", { replicas: 4 });
      await pollUntil(
        "the operator has seen 4 replicas",
        async () => (await getPool("default", "contested"))?.status?.desiredReplicas === 4,
        { timeoutMs: LONG },
      );
      const scaleEvents = (await events("default", "contested")).filter((e) =>
        /^(ScaledUp|ScaledDown)$/.test(e.reason),
      ).length;
      await waitForPolls(op, "default", "contested", 8); // each poll reconciles the pool
      assert.equal(
        await replicas("default", "contested"),
        4,
        "hpa mode at 1..N: replicas are left to the HPA",
      );
      assert.equal(
        (await events("default", "contested")).filter((e) => /^(ScaledUp|ScaledDown)$/.test(e.reason)).length,
        scaleEvents,
        "no scale decision of the operator",
      );
      // drained: N → 0 is the operator's again
      await drainQueue(r, "contested/work");
      await pollUntil(
        "contested 4 → 0 after the cooldown",
        async () =>
          (await replicas("default", "contested")) === 0 &&
          (await events("default", "contested")).some((e) => /^4 → 0: CooledDown/.test(e.message)),
        { timeoutMs: LONG },
      );

      // direct mode: the operator owns 1..N too — the intruder's count is scaled back by its algorithm
      res = await applyPool(
        pool("contested-direct", {
          scaling: {
            mode: "direct",
            pollSeconds: 1,
            cooldownSeconds: 3600,
            targetBacklogPerReplica: 10,
            behavior: { scaleDown: { stabilizationWindowSeconds: 0 } },
          },
        }),
      );
      assert.equal(res.code, 0, res.out);
      await producer.enqueueMany(
        "contested-direct/work",
        Array.from({ length: 5 }, (_, i) => ({ data: { i } })),
      );
      await pollUntil(
        "contested-direct activated 0 → 1",
        async () => (await replicas("default", "contested-direct")) === 1,
        { timeoutMs: LONG },
      );
      await intrude("contested-direct", { replicas: 6 });
      await pollUntil(
        "direct mode: 6 → 1 (DirectScaleDown)",
        async () =>
          (await replicas("default", "contested-direct")) === 1 &&
          (await events("default", "contested-direct")).some((e) =>
            /^6 → 1: DirectScaleDown/.test(e.message),
          ),
        { timeoutMs: LONG },
      );
      await drainQueue(r, "contested-direct/work");
      await assertOperatorAlive("after the field-manager fight");
    });

    it("after all of it: the operator is the same process, healthy, and the valid pool still scales 0 → 1 → 0", async () => {
      await assertOperatorAlive("at the end");
      await steadyScales("at the end");
      const m = await scrapeOperator(op);
      process.stderr.write(
        `badpools: operator pid ${op.pid}: ${sumSeries(m, "conveyor_operator_reconciles_total")} reconciles, ` +
          `${sumSeries(m, "conveyor_operator_reconciles_total", /result="error"/)} errors, ${sumSeries(m, "conveyor_operator_informer_restarts_total")} informer restarts\n`,
      );
    });
  },
);

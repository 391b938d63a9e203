// The chart's alerts and dashboard against a real Prometheus and promtool (built by
// test/observability/install.sh): the PrometheusRule as the chart renders it passes
// `promtool check rules` and the unit tests of each alert's threshold and `for`
// (alerts.promtool.yaml); every alert has a runbook in docs/alerts.md; the dashboard files are
// the generated ones; and Prometheus scraping a real run — control plane, operator, and real
// worker processes for the pods of a two-stage pipeline — evaluates every alert without error
// and returns data for every dashboard panel, variable and the scale-decision annotations.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { copyFileSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { parse } from "yaml";
import { connectRedis, Producer, QueueAdmin, type RedisClient } from "../../queue/index.ts";
import { dashboard, dashboardJson, DASHBOARD_FILES, SCALE_ANNOTATION_EXPR } from "../../scripts/dashboard.ts";
import { pollUntil } from "../support/poll.ts";
import { ControlPlane, findAssets } from "../support/controlplane.ts";
import { startOperator, type OperatorProcess } from "../support/operator.ts";
import { PodRunner } from "../support/podRunner.ts";
import { freePort } from "../support/ports.ts";
import { startProcess, stopProcess, type Started } from "../support/processes.ts";
import { RedisServer } from "../support/redis.ts";
import { REPO } from "../support/workers.ts";
import { attr, Collector, observabilityAssets, otelEnv } from "./programs.ts";

const CHART = join(REPO, "charts/conveyor");
/** The release name the tests render with: its metrics Service (the operator's job) is conveyor-metrics. */
const RELEASE = "conveyor";

interface Rule {
  alert: string;
  expr: string;
  for: string;
  annotations: Record<string, string>;
}

/** The PrometheusRule's spec (a Prometheus rules file) as the chart renders it. */
function renderedRules(values: string[] = []): { groups: { name: string; rules: Rule[] }[] } {
  const assets = findAssets();
  const out = execFileSync(
    join(assets.dir, "helm"),
    [
      "template",
      RELEASE,
      CHART,
      "--kube-version",
      assets.versions.K8S_VERSION!.replace(/^v/, ""),
      "--namespace",
      "conveyor-system",
      "--set",
      "metrics.prometheusRule.enabled=true",
      ...values.flatMap((v) => ["--set", v]),
      "--show-only",
      "templates/prometheusrule.yaml",
    ],
    { encoding: "utf8" },
  );
  return (parse(out) as { spec: { groups: { name: string; rules: Rule[] }[] } }).spec;
}

const alertsOf = (spec: ReturnType<typeof renderedRules>) => spec.groups.flatMap((g) => g.rules);

describe("alert rules and dashboard files", () => {
  let dir: string;
  let bin: string;
  before(() => {
    bin = observabilityAssets();
    dir = mkdtempSync(join(tmpdir(), "cvy-rules-"));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  test("the rendered PrometheusRule passes promtool check rules, default and with watched namespaces", () => {
    for (const [name, values] of [
      ["default", []],
      [
        "namespaces",
        ["operator.watchNamespaces={team-a,team-b}", "metrics.prometheusRule.backlogAgeSeconds=120"],
      ],
    ] as const) {
      const file = join(dir, `rules-${name}.yaml`);
      const spec = renderedRules([...values]);
      writeFileSync(file, JSON.stringify(spec));
      const out = execFileSync(join(bin, "promtool"), ["check", "rules", file], { encoding: "utf8" });
      assert.match(out, new RegExp(`SUCCESS: ${alertsOf(spec).length} rules found`), out);
      if (name === "namespaces") {
        const age = alertsOf(spec).find((r) => r.alert === "ConveyorBacklogTooOld")!;
        assert.match(age.expr, /namespace=~"team-a\|team-b"/);
        assert.match(age.expr, /> 120$/);
      }
    }
  });

  test("promtool test rules: each alert's threshold and `for`", () => {
    writeFileSync(join(dir, "rules.yaml"), JSON.stringify(renderedRules()));
    copyFileSync(join(import.meta.dirname, "alerts.promtool.yaml"), join(dir, "alerts.promtool.yaml"));
    let out: string;
    try {
      out = execFileSync(join(bin, "promtool"), ["test", "rules", "--diff", "alerts.promtool.yaml"], {
        cwd: dir,
        encoding: "utf8",
        stdio: ["ignore", "pipe", "pipe"],
      });
    } catch (err) {
      const e = err as { stdout?: string; stderr?: string };
      assert.fail(`promtool test rules failed:\n${e.stdout ?? ""}${e.stderr ?? ""}`);
    }
    assert.match(out, /SUCCESS/);
    // Every alert is unit-tested, and has its runbook section.
    const tests = readFileSync(join(import.meta.dirname, "alerts.promtool.yaml"), "utf8");
    const runbooks = readFileSync(join(REPO, "docs/alerts.md"), "utf8");
    for (const r of alertsOf(renderedRules())) {
      assert.match(tests, new RegExp(`alertname: ${r.alert}\\n`), `${r.alert} has promtool tests`);
      assert.match(runbooks, new RegExp(`^## ${r.alert}$`, "m"), `${r.alert} has a runbook section`);
      assert.ok(r.annotations.runbook_url?.endsWith(`#${r.alert.toLowerCase()}`), `${r.alert} runbook_url`);
    }
  });

  test("the dashboard in the chart and in docs/ is the generated one", () => {
    for (const f of DASHBOARD_FILES)
      assert.deepEqual(
        JSON.parse(readFileSync(join(REPO, f), "utf8")),
        JSON.parse(dashboardJson()),
        `${f} is stale: npm run gen:dashboard`,
      );
  });
});

describe("Prometheus scraping a real run of the operator and workers", () => {
  let cp: ControlPlane;
  let redisServer: RedisServer;
  let redis: RedisClient;
  let operator: OperatorProcess;
  let runner: PodRunner;
  let prometheus: Started;
  let promUrl: string;
  let dir: string;
  let startedAt: number;
  let targetsTimer: NodeJS.Timeout | undefined;
  let collector: Collector;
  const NS = "obs";

  /** A PromQL query over the whole run; the result series. */
  const queryRange = async (
    expr: string,
  ): Promise<{ metric: Record<string, string>; values: unknown[] }[]> => {
    const params = new URLSearchParams({
      query: expr,
      start: String(startedAt / 1000),
      end: String(Date.now() / 1000),
      step: "2",
    });
    const res = await fetch(`${promUrl}/api/v1/query_range?${params}`);
    const body = (await res.json()) as { status: string; error?: string; data?: { result: [] } };
    assert.equal(body.status, "success", `${expr}: ${body.error}`);
    return body.data!.result;
  };

  before(async () => {
    const bin = observabilityAssets();
    dir = mkdtempSync(join(tmpdir(), "cvy-prom-"));
    cp = await ControlPlane.start({ controllers: true, scheduler: true, kwok: true });
    await cp.kubectl("apply", "--server-side", "-f", join(REPO, "crds", "conveyor.dev_workerpools.yaml"));
    await cp.waitForCrd("workerpools.conveyor.dev");
    await cp.kubectl("create", "namespace", NS);
    redisServer = await RedisServer.start();
    redis = connectRedis(redisServer.url);
    // The operator also exports its reconcile and scale spans to a real collector.
    collector = await Collector.start(dir);
    operator = await startOperator(cp, "obs-operator", ["--metrics-api=false"], {
      env: otelEnv(collector, "conveyor-operator"),
    });
    runner = new PodRunner(cp.kubeConfig(), {
      namespace: NS,
      labelSelector: "app.kubernetes.io/name=conveyor-worker",
      dir,
      extraEnv: { CONVEYOR_BACKOFF_BASE: "100ms", CONVEYOR_BACKOFF_MAX: "200ms" },
    });
    runner.start();

    // Prometheus: the operator as the ServiceMonitor would scrape it (job = the metrics
    // Service, honor_labels), the worker pods as the PodMonitor would (namespace, workerpool).
    const rules = join(dir, "rules.yaml");
    writeFileSync(rules, JSON.stringify(renderedRules()));
    const workersFile = join(dir, "workers.json");
    writeFileSync(workersFile, "[]");
    let lastTargets = "";
    const writeTargets = () => {
      const targets = runner.running.map((p) => ({
        targets: [`127.0.0.1:${p.port}`],
        // The pod's pool: its Deployment's name (pods are <deployment>-<replicaset hash>-<suffix>).
        labels: { namespace: p.namespace, workerpool: p.name.split("-").slice(0, -2).join("-"), pod: p.name },
      }));
      const text = JSON.stringify(targets);
      if (text === lastTargets) return;
      lastTargets = text;
      writeFileSync(`${workersFile}.tmp`, text);
      renameSync(`${workersFile}.tmp`, workersFile);
    };
    targetsTimer = setInterval(writeTargets, 300);
    const port = await freePort();
    promUrl = `http://127.0.0.1:${port}`;
    writeFileSync(
      join(dir, "prometheus.yml"),
      JSON.stringify({
        global: { scrape_interval: "1s", evaluation_interval: "1s" },
        rule_files: [rules],
        scrape_configs: [
          {
            job_name: `${RELEASE}-metrics`,
            honor_labels: true,
            static_configs: [{ targets: [`127.0.0.1:${operator.metricsPort}`] }],
          },
          {
            job_name: "conveyor-workers",
            file_sd_configs: [{ files: [workersFile], refresh_interval: "1s" }],
          },
        ],
      }),
    );
    startedAt = Date.now();
    prometheus = startProcess(
      join(bin, "prometheus"),
      [
        `--config.file=${join(dir, "prometheus.yml")}`,
        `--storage.tsdb.path=${join(dir, "tsdb")}`,
        `--web.listen-address=127.0.0.1:${port}`,
        "--log.level=warn",
      ],
      { logFile: join(dir, "prometheus.log") },
    );
    await pollUntil("prometheus ready", async () => (await fetch(`${promUrl}/-/ready`)).ok, {
      timeoutMs: 120_000,
    });
  });

  after(async () => {
    clearInterval(targetsTimer);
    if (prometheus) await stopProcess(prometheus, 5000);
    await runner?.stop();
    if (operator) await stopProcess(operator.proc, 5000);
    await collector?.stop();
    redis?.disconnect();
    await redisServer?.stop();
    await cp?.stop();
    if (process.env.CONVEYOR_KEEP_TMP) console.log(`kept ${dir}`);
    else if (dir) rmSync(dir, { recursive: true, force: true });
  });

  test("every alert evaluates without error and every dashboard panel, variable and annotation returns data", async () => {
    // A two-stage pipeline in direct scaling mode (no external metrics API needed): 0 → N → 0.
    const pool = (name: string, queue: string, next?: string) => ({
      apiVersion: "conveyor.dev/v1alpha1",
      kind: "WorkerPool",
      metadata: { name, namespace: NS },
      spec: {
        queue,
        ...(next && { nextQueue: next }),
        redis: { url: redisServer.url },
        handler: { module: join(REPO, "test/fixtures/recordingHandler.js") },
        concurrency: 2,
        maxJobSeconds: 30,
        scaling: {
          mode: "direct",
          minReplicas: 0,
          maxReplicas: 2,
          targetBacklogPerReplica: 5,
          pollSeconds: 1,
          // (long enough that each stage's pods are still up and scraped when the run is read:
          // a fast second stage could otherwise drain and scale to zero between two scrapes)
          cooldownSeconds: 30,
        },
      },
    });
    await cp.apply(
      [pool("ingest", "obs/ingest", "obs/index"), pool("index", "obs/index")]
        .map((p) => JSON.stringify(p))
        .join("\n---\n"),
    );
    const producer = new Producer(redis);
    const admin = new QueueAdmin(redis);
    // Work for every panel: completions with durations, a retry, a dead letter.
    await producer.enqueueMany("obs/ingest", [
      ...Array.from({ length: 30 }, (_, i) => ({ data: { sleepMs: 200, i } })),
      { data: { failTimes: 1, sleepMs: 50 } },
      { data: { final: true } },
    ]);
    await pollUntil(
      "the pipeline drained",
      async () => {
        const [a, b] = await Promise.all([admin.counts("obs/ingest"), admin.counts("obs/index")]);
        return a.backlog === 0 && b.backlog === 0 && a.dead === 1 && b.completed >= 31;
      },
      { timeoutMs: 240_000, intervalMs: 500 },
    );
    // Every worker pod that ran is scraped before the run is read: Prometheus applies new
    // file_sd targets at most every 5 s, and the last stage's pods can start and finish their
    // work within that (a fixed 5 s wait lost them in about half the runs). Then the final
    // state is scraped and the rules evaluated a few more times.
    const ran = new Set(runner.running.map((p) => p.name));
    await pollUntil(
      `every worker pod scraped (${[...ran].join(", ")})`,
      async () => {
        const up = (await queryRange('up{job="conveyor-workers"} == 1')) as { metric: { pod?: string } }[];
        const scraped = new Set(up.map((x) => x.metric.pod));
        return [...ran].every((pod) => scraped.has(pod));
      },
      { timeoutMs: 60_000, intervalMs: 500 },
    );
    await new Promise((r) => setTimeout(r, 5000));

    // Every alert: loaded and evaluated by Prometheus without error.
    const rulesRes = (await (await fetch(`${promUrl}/api/v1/rules?type=alert`)).json()) as {
      data: { groups: { rules: { name: string; health: string; lastError?: string; query: string }[] }[] };
    };
    const loaded = rulesRes.data.groups.flatMap((g) => g.rules);
    const expectedAlerts = alertsOf(renderedRules()).map((r) => r.alert);
    assert.deepEqual(loaded.map((r) => r.name).sort(), [...expectedAlerts].sort());
    for (const r of loaded) {
      assert.equal(r.health, "ok", `${r.name}: ${r.lastError}`);
      await queryRange(r.query); // and it runs as a query over the run
    }
    // The alerts that read series the run produces find them (nothing pages on a healthy run).
    for (const metric of [
      "conveyor_queue_oldest_ready_age_seconds",
      "conveyor_queue_dead_letters",
      "conveyor_redeliveries_total",
      "conveyor_lease_renewal_lag_seconds_bucket",
      "conveyor_worker_lease_seconds",
      "conveyor_operator_pool_degraded",
      "conveyor_operator_pool_max_replicas",
      "conveyor_operator_backlog_poll_errors_total",
      "conveyor_operator_leader",
      'up{job="conveyor-metrics"}',
    ])
      assert.ok((await queryRange(metric)).length > 0, `${metric} was scraped`);
    const firing = (await (await fetch(`${promUrl}/api/v1/alerts`)).json()) as {
      data: { alerts: { labels: { alertname: string }; state: string }[] };
    };
    assert.deepEqual(
      firing.data.alerts.filter((a) => a.state === "firing").map((a) => a.labels.alertname),
      [],
      "no alert fires on a healthy run",
    );

    // Every panel's queries with the variables at "All", over the run: each parses and each
    // panel shows something.
    const d = dashboard() as {
      panels: { type: string; title: string; targets?: { expr: string }[] }[];
      templating: { list: { name: string; query: string | { query: string } }[] };
      annotations: { list: { expr?: string }[] };
    };
    const substitute = (expr: string) =>
      expr
        .replaceAll("$__rate_interval", "15s")
        .replaceAll("$namespace", ".*")
        .replaceAll("$pool", ".*")
        .replaceAll("$queue", ".*");
    const empty: string[] = [];
    for (const panel of d.panels.filter((p) => p.type !== "row")) {
      let series = 0;
      for (const t of panel.targets ?? []) series += (await queryRange(substitute(t.expr))).length;
      if (series === 0) empty.push(panel.title);
    }
    assert.deepEqual(empty, [], "panels without data");
    // The variables (Grafana's label_values(metric{…}, label)) have values.
    for (const v of d.templating.list) {
      if (typeof v.query !== "object") continue;
      const m = /^label_values\((.+), (\w+)\)$/.exec(v.query.query);
      assert.ok(m, `variable ${v.name}: ${v.query.query}`);
      const params = new URLSearchParams({ "match[]": substitute(m[1]!), start: String(startedAt / 1000) });
      const res = (await (await fetch(`${promUrl}/api/v1/label/${m[2]}/values?${params}`)).json()) as {
        data: string[];
      };
      assert.ok(res.data.length > 0, `variable ${v.name} has values`);
      if (v.name === "queue")
        assert.ok(
          res.data.includes("obs/ingest") && res.data.includes("obs/index"),
          JSON.stringify(res.data),
        );
      if (v.name === "pool") assert.deepEqual([...res.data].sort(), ["index", "ingest"]);
      if (v.name === "namespace") assert.deepEqual(res.data, [NS]);
    }
    // The scale decisions (0 → N at least, per pool) are there for the annotations.
    const decisions = await queryRange(substitute(SCALE_ANNOTATION_EXPR));
    assert.deepEqual(
      [...new Set(decisions.map((s) => s.metric.workerpool))].sort(),
      ["index", "ingest"],
      "scale decisions of both pools",
    );
    assert.ok(decisions.some((s) => s.metric.direction === "up"));

    // The operator's spans: a reconcile per pass, and each scale decision inside its reconcile.
    const spans = await pollUntil(
      "the operator's scale spans",
      () => {
        const all = collector.spans();
        const scales = all.filter((s) => s.name === "scale WorkerPool");
        const pools = new Set(scales.map((s) => attr(s, "conveyor.workerpool")));
        return pools.has("ingest") && pools.has("index") ? all : null;
      },
      { timeoutMs: 60_000, intervalMs: 200 },
    );
    const reconciles = spans.filter((s) => s.name === "reconcile WorkerPool");
    assert.ok(reconciles.length > 0);
    assert.ok(
      reconciles.every((s) => s.service === "conveyor-operator" && attr(s, "k8s.namespace.name") === NS),
    );
    for (const scale of spans.filter((s) => s.name === "scale WorkerPool")) {
      const parent = reconciles.find((r) => r.spanId === scale.parentSpanId);
      assert.ok(parent, "a scale span is a child of a reconcile span");
      assert.equal(attr(parent, "conveyor.workerpool"), attr(scale, "conveyor.workerpool"));
      assert.ok(attr(scale, "conveyor.scale.reason"), "the decision's reason");
      assert.notEqual(attr(scale, "conveyor.scale.from"), attr(scale, "conveyor.scale.to"));
    }
  });
});

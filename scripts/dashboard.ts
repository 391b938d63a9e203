// The Conveyor Grafana dashboard, generated: `npm run gen:dashboard` writes
// charts/conveyor/files/dashboards/conveyor.json (shipped by the chart as a ConfigMap) and
// docs/dashboards/conveyor.json (for importing by hand); test/observability checks both are
// current and runs every query against a real Prometheus.
import { writeFileSync, mkdirSync } from "node:fs";
import { dirname, join } from "node:path";

export const DASHBOARD_FILES = [
  "charts/conveyor/files/dashboards/conveyor.json",
  "docs/dashboards/conveyor.json",
];

const W = `namespace=~"$namespace", queue=~"$queue"`; // worker series (PodMonitor: namespace, workerpool, queue)
const P = `namespace=~"$namespace", workerpool=~"$pool"`; // the operator's per-pool series
const QP = `namespace=~"$namespace", workerpool=~"$pool", queue=~"$queue"`; // the operator's per-queue series
const RATE = "$__rate_interval";

interface Target {
  expr: string;
  legendFormat: string;
}
interface Panel {
  title: string;
  description: string;
  unit: string;
  targets: Target[];
  stack?: boolean;
}

const t = (expr: string, legendFormat: string): Target => ({ expr, legendFormat });
const quantile = (q: number, metric: string, by: string, filter: string) =>
  `histogram_quantile(${q}, sum by (${by}, le) (rate(${metric}_bucket{${filter}}[${RATE}])))`;

const ROWS: { title: string; panels: Panel[] }[] = [
  {
    title: "Queues",
    panels: [
      {
        title: "Throughput",
        description: "Executions started and jobs completed per second, by queue.",
        unit: "ops",
        targets: [
          t(`sum by (queue) (rate(conveyor_jobs_completed_total{${W}}[${RATE}]))`, "{{queue}} completed"),
          t(`sum by (queue) (rate(conveyor_jobs_started_total{${W}}[${RATE}]))`, "{{queue}} started"),
          t(`sum by (queue) (rate(conveyor_jobs_failed_total{${W}}[${RATE}]))`, "{{queue}} failed"),
        ],
      },
      {
        title: "Job duration (completed)",
        description: "Handler run time of completed jobs: p50, p95 and p99 by queue.",
        unit: "s",
        targets: [0.5, 0.95, 0.99].map((q) =>
          t(
            quantile(q, "conveyor_job_duration_seconds", "queue", `${W}, outcome="completed"`),
            `{{queue}} p${Math.round(q * 100)}`,
          ),
        ),
      },
      {
        title: "Backlog",
        description:
          "Ready + due-delayed + in-flight jobs of each pool, as the operator polls it (what scaling follows).",
        unit: "short",
        targets: [
          t(
            `sum by (namespace, workerpool) (conveyor_operator_pool_backlog{${P}})`,
            "{{namespace}}/{{workerpool}}",
          ),
        ],
      },
      {
        title: "Age of the oldest ready job",
        description:
          "How long the oldest ready job of each queue has waited in its stage (ConveyorBacklogTooOld fires on it; a latency-mode pool scales to keep it under its targetWaitSeconds).",
        unit: "s",
        targets: [
          t(
            `max by (namespace, workerpool, queue) (conveyor_queue_oldest_ready_age_seconds{${QP}})`,
            "{{queue}}",
          ),
        ],
      },
      {
        title: "In flight",
        description: "Jobs running in worker slots, and the slots there are.",
        unit: "short",
        targets: [
          t(`sum by (queue) (conveyor_jobs_in_flight{${W}})`, "{{queue}} running"),
          t(`sum by (queue) (conveyor_worker_slots{${W}})`, "{{queue}} slots"),
        ],
      },
      {
        title: "Retries, stalls, hand-backs and dead letters",
        description:
          "Failed attempts scheduled for retry, redeliveries by cause (lease_expired = a stall, shutdown_handback = the drain deadline), deferrals (circuit breaker) and dead letters per second.",
        unit: "ops",
        stack: true,
        targets: [
          t(`sum by (queue) (rate(conveyor_jobs_retried_total{${W}}[${RATE}]))`, "{{queue}} retried"),
          t(
            `sum by (queue, cause) (rate(conveyor_redeliveries_total{${W}}[${RATE}]))`,
            "{{queue}} redelivered: {{cause}}",
          ),
          t(`sum by (queue) (rate(conveyor_jobs_deferred_total{${W}}[${RATE}]))`, "{{queue}} deferred"),
          t(
            `sum by (queue) (rate(conveyor_jobs_dead_lettered_total{${W}}[${RATE}]))`,
            "{{queue}} dead-lettered",
          ),
        ],
      },
      {
        title: "Dead letters",
        description: "Jobs waiting in each queue's dead letters (`conveyor dlq list`).",
        unit: "short",
        targets: [
          t(`max by (namespace, queue) (conveyor_queue_dead_letters{${QP}})`, "{{namespace}} {{queue}}"),
        ],
      },
    ],
  },
  {
    title: "Pools and workers",
    panels: [
      {
        title: "Replicas: desired vs ready",
        description:
          "The Deployment's spec.replicas against its ready pods and the pool's maxReplicas; the annotations are the operator's scale decisions.",
        unit: "short",
        targets: [
          t(
            `max by (namespace, workerpool) (conveyor_operator_pool_desired_replicas{${P}})`,
            "{{workerpool}} desired",
          ),
          t(
            `max by (namespace, workerpool) (conveyor_operator_pool_ready_replicas{${P}})`,
            "{{workerpool}} ready",
          ),
          t(
            `max by (namespace, workerpool) (conveyor_operator_pool_max_replicas{${P}})`,
            "{{workerpool}} max",
          ),
        ],
      },
      {
        title: "Lease renewal lag",
        description:
          "How late the lease heartbeat runs (p99), against the lease: a lag near the lease loses leases (ConveyorLeaseRenewalLagHigh).",
        unit: "s",
        targets: [
          t(quantile(0.99, "conveyor_lease_renewal_lag_seconds", "queue", W), "{{queue}} p99 lag"),
          t(`max by (queue) (conveyor_worker_lease_seconds{${W}})`, "{{queue}} lease"),
        ],
      },
      {
        title: "Leases lost and circuit breaker",
        description:
          "Leases a worker lost (its late result is fenced off) per second, and the share of workers whose circuit is open (claiming paused).",
        unit: "short",
        targets: [
          t(`sum by (queue) (rate(conveyor_leases_lost_total{${W}}[${RATE}]))`, "{{queue}} leases lost/s"),
          t(`avg by (queue) (conveyor_circuit_open{${W}})`, "{{queue}} circuit open"),
        ],
      },
      {
        title: "Pool health",
        description: "1 while a pool's Degraded condition is True; failed backlog polls per second.",
        unit: "short",
        targets: [
          t(
            `max by (namespace, workerpool) (conveyor_operator_pool_degraded{${P}})`,
            "{{workerpool}} degraded",
          ),
          t(
            `sum by (namespace, workerpool) (rate(conveyor_operator_backlog_poll_errors_total{${P}}[${RATE}]))`,
            "{{workerpool}} poll errors/s",
          ),
        ],
      },
    ],
  },
  {
    title: "Operator",
    panels: [
      {
        title: "Reconciles",
        description: "Reconciles per second by result (success, requeue, error, not-leader).",
        unit: "ops",
        stack: true,
        targets: [t(`sum by (result) (rate(conveyor_operator_reconciles_total[${RATE}]))`, "{{result}}")],
      },
      {
        title: "Reconcile duration",
        description: "p50 and p99 of one reconcile.",
        unit: "s",
        targets: [0.5, 0.99].map((q) =>
          t(
            `histogram_quantile(${q}, sum by (le) (rate(conveyor_operator_reconcile_duration_seconds_bucket[${RATE}])))`,
            `p${Math.round(q * 100)}`,
          ),
        ),
      },
      {
        title: "Leader and work queue",
        description:
          "Replicas holding the leader lease (should be exactly 1) and keys waiting to be reconciled.",
        unit: "short",
        targets: [
          t(`sum(conveyor_operator_leader)`, "leaders"),
          t(`max(conveyor_operator_workqueue_depth)`, "work queue depth"),
        ],
      },
      {
        title: "Kubernetes API requests",
        description:
          "The operator's API calls per second by verb and status code (an idle reconcile writes nothing).",
        unit: "ops",
        stack: true,
        targets: [
          t(
            `sum by (verb, code) (rate(conveyor_operator_kube_api_requests_total[${RATE}]))`,
            "{{verb}} {{code}}",
          ),
        ],
      },
    ],
  },
];

/**
 * The scale decisions, as annotations on every time series panel. The counter has a series per
 * direction and reason, so a decision often creates its series at 1: `increase` cannot see that
 * first one, the `unless … offset` part (a series that did not exist a minute ago) does.
 */
const DECISIONS = `conveyor_operator_scale_decisions_total{${P}}`;
export const SCALE_ANNOTATION_EXPR = `sum by (namespace, workerpool, direction, reason) ((increase(${DECISIONS}[1m]) > 0) or (${DECISIONS} unless ${DECISIONS} offset 1m))`;

const variable = (name: string, label: string, query: string) => ({
  name,
  label,
  type: "query",
  datasource: { type: "prometheus", uid: "${datasource}" },
  query: { query, refId: `${name}-var` },
  definition: query,
  refresh: 2,
  includeAll: true,
  multi: true,
  allValue: ".*",
  current: { text: "All", value: "$__all" },
  sort: 1,
});

export function dashboard(): object {
  const panels: object[] = [];
  let id = 1;
  let y = 0;
  for (const row of ROWS) {
    panels.push({
      id: id++,
      type: "row",
      title: row.title,
      collapsed: false,
      gridPos: { h: 1, w: 24, x: 0, y },
    });
    y += 1;
    row.panels.forEach((p, i) => {
      panels.push({
        id: id++,
        type: "timeseries",
        title: p.title,
        description: p.description,
        datasource: { type: "prometheus", uid: "${datasource}" },
        gridPos: { h: 8, w: 12, x: (i % 2) * 12, y: y + Math.floor(i / 2) * 8 },
        fieldConfig: {
          defaults: {
            unit: p.unit,
            min: 0,
            custom: {
              drawStyle: "line",
              fillOpacity: p.stack ? 30 : 10,
              stacking: { mode: p.stack ? "normal" : "none" },
            },
          },
          overrides: [],
        },
        options: { legend: { displayMode: "list", placement: "bottom" }, tooltip: { mode: "multi" } },
        targets: p.targets.map((tg, j) => ({
          refId: String.fromCharCode(65 + j),
          datasource: { type: "prometheus", uid: "${datasource}" },
          expr: tg.expr,
          legendFormat: tg.legendFormat,
          range: true,
        })),
      });
    });
    y += Math.ceil(row.panels.length / 2) * 8;
  }
  return {
    title: "Conveyor",
    uid: "conveyor-overview",
    description: "Conveyor queues, worker pools and the operator (charts/conveyor, docs/dashboards)",
    tags: ["conveyor"],
    timezone: "browser",
    editable: true,
    graphTooltip: 1,
    refresh: "30s",
    schemaVersion: 39,
    version: 1,
    time: { from: "now-3h", to: "now" },
    templating: {
      list: [
        {
          name: "datasource",
          label: "Data source",
          type: "datasource",
          query: "prometheus",
          current: {},
          hide: 0,
        },
        variable("namespace", "Namespace", "label_values(conveyor_operator_pool_backlog, namespace)"),
        variable(
          "pool",
          "Pool",
          'label_values(conveyor_operator_pool_backlog{namespace=~"$namespace"}, workerpool)',
        ),
        variable(
          "queue",
          "Queue",
          'label_values(conveyor_jobs_started_total{namespace=~"$namespace"}, queue)',
        ),
      ],
    },
    annotations: {
      list: [
        {
          name: "Scale decisions",
          enable: true,
          iconColor: "orange",
          datasource: { type: "prometheus", uid: "${datasource}" },
          expr: SCALE_ANNOTATION_EXPR,
          step: "1m",
          titleFormat: "scale {{direction}}",
          textFormat: "{{namespace}}/{{workerpool}}: {{reason}}",
          tagKeys: "workerpool,direction",
          useValueForTime: false,
        },
      ],
    },
    panels,
  };
}

export function dashboardJson(): string {
  return `${JSON.stringify(dashboard(), null, 2)}\n`;
}

if (import.meta.main) {
  const root = join(import.meta.dirname, "..");
  for (const f of DASHBOARD_FILES) {
    mkdirSync(dirname(join(root, f)), { recursive: true });
    writeFileSync(join(root, f), dashboardJson());
    console.log(`wrote ${f}`);
  }
}

// Small shared pieces: formatting, state badges, JSON blocks, a confirmation dialog, a
// sparkline (inline SVG) and a uPlot chart.
import type { ComponentChildren } from "preact";
import { useEffect, useId, useRef } from "preact/hooks";
import type uPlot from "uplot";
import "uplot/dist/uPlot.min.css";

// uPlot is half the JS; loaded with the first chart, so the queues page (no chart) paints sooner.
let uPlotModule: Promise<typeof uPlot> | null = null;
const loadUPlot = () => (uPlotModule ??= import("uplot").then((m) => m.default));

export function ago(iso: string | number | null | undefined): string {
  if (iso === null || iso === undefined || iso === "") return "—";
  const t = typeof iso === "number" ? iso : Date.parse(iso);
  return `${duration(Date.now() - t)} ago`;
}

export function duration(ms: number | null | undefined): string {
  if (ms === null || ms === undefined || !Number.isFinite(ms)) return "—";
  if (ms < 1000) return `${Math.max(0, Math.round(ms))} ms`;
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(s < 10 ? 1 : 0)} s`;
  const m = s / 60;
  if (m < 60) return `${Math.floor(m)} min ${Math.round(s % 60)} s`;
  const h = m / 60;
  if (h < 48) return `${Math.floor(h)} h ${Math.round(m % 60)} min`;
  return `${Math.floor(h / 24)} d`;
}

export const num = (n: number | null | undefined) =>
  n === null || n === undefined ? "—" : n.toLocaleString("en");

export function time(iso: string | null | undefined): string {
  if (!iso) return "—";
  const d = new Date(iso);
  return d.toLocaleString("en-GB", { hour12: false });
}

export function StateBadge({ state }: { state: string }) {
  return <span class={`badge state-${state}`}>{state}</span>;
}

export function Progress({ value, message }: { value: number | null; message?: string | null }) {
  if (value === null || value === undefined) return <span class="muted">—</span>;
  const pct = Math.round(Math.min(1, Math.max(0, value)) * 100);
  return (
    <div class="progress" role="progressbar" aria-valuenow={pct} aria-valuemin={0} aria-valuemax={100}>
      <div class="progress-bar" style={{ width: `${pct}%` }} />
      <span class="progress-label">
        {pct}%{message ? ` · ${message}` : ""}
      </span>
    </div>
  );
}

export function JsonBlock({
  value,
  download,
}: {
  value: { value?: unknown; text?: string; bytes: number; truncated: boolean } | null;
  download?: string;
}) {
  if (!value) return <p class="muted">none</p>;
  const text = value.truncated ? value.text + "\n…" : JSON.stringify(value.value, null, 2);
  return (
    <div>
      <pre class="json">{text}</pre>
      <p class="small muted">
        {num(value.bytes)} bytes{value.truncated ? " — truncated here" : ""}
        {download && (
          <>
            {" · "}
            <a href={download} download>
              download
            </a>
          </>
        )}
      </p>
    </div>
  );
}

export function Confirm({
  open,
  title,
  children,
  confirmLabel,
  onConfirm,
  onClose,
}: {
  open: boolean;
  title: string;
  children: ComponentChildren;
  confirmLabel: string;
  onConfirm: () => void;
  onClose: () => void;
}) {
  const ref = useRef<HTMLDialogElement>(null);
  const titleId = useId(); // a page can hold several dialogs (queue actions, bulk delete)
  useEffect(() => {
    const d = ref.current;
    if (!d) return;
    if (open && !d.open) d.showModal();
    if (!open && d.open) d.close();
  }, [open]);
  return (
    <dialog ref={ref} onClose={onClose} aria-labelledby={titleId}>
      <form
        method="dialog"
        onSubmit={(e) => {
          e.preventDefault();
          onConfirm();
        }}
      >
        <h2 id={titleId}>{title}</h2>
        <div>{children}</div>
        <div class="row end">
          <button type="button" onClick={onClose}>
            Cancel
          </button>
          <button type="submit" class="danger" autofocus>
            {confirmLabel}
          </button>
        </div>
      </form>
    </dialog>
  );
}

export function Sparkline({ values, title }: { values: number[]; title: string }) {
  if (values.length < 2) return <span class="muted small">—</span>;
  const w = 100;
  const h = 24;
  const max = Math.max(1, ...values);
  const pts = values.map(
    (v, i) => `${((i / (values.length - 1)) * w).toFixed(1)},${(h - (v / max) * (h - 2) - 1).toFixed(1)}`,
  );
  return (
    <svg class="spark" viewBox={`0 0 ${w} ${h}`} width={w} height={h} role="img" aria-label={title}>
      <title>{title}</title>
      <polyline points={pts.join(" ")} fill="none" stroke="currentColor" stroke-width="1.5" />
    </svg>
  );
}

export interface Series {
  label: string;
  values: (number | null)[];
  color: string;
  /** Held until the next sample (a replica count): drawn as steps, never as a ramp. */
  step?: boolean;
  /** Samples only, nothing known between them (a backlog read now and then): dots, no line. */
  points?: boolean;
  /** "right": its own scale and axis on the right, for a quantity of another kind or size (replicas beside backlog, ms beside jobs/min). */
  axis?: "right";
  dash?: number[];
  /** Shaded under the line: a count stays visible where another series' line runs over it. */
  fill?: string;
}

/** How each axis is labelled and its ticks written (default: the number). */
export interface AxisLabels {
  left?: string;
  right?: string;
  rightValue?: (v: number) => string;
  /** Axes that count things (jobs, replicas): ticks on whole numbers only, never "2.5 replicas". */
  counts?: ("left" | "right")[];
}

// Tick spacings of an axis of counts: 1, 2, 5, 10, 20, 50, … (uPlot's own list has fractions).
const COUNT_INCRS = Array.from({ length: 10 }, (_, e) => [1, 2, 5].map((m) => m * 10 ** e)).flat();

// Tick spacings of the time axis, in seconds: whole seconds at least, so no label repeats.
const TIME_INCRS = [
  1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 43200, 86400, 172800, 604800,
];

// Clock time on the x axis (uPlot's default for a span under a minute is ":06.500" with the
// date on a second row): HH:MM(:SS when a tick needs them), and the date too when the span crosses a day.
function timeTicks(splits: number[]): string[] {
  const span = (splits.at(-1) ?? 0) - (splits[0] ?? 0);
  const seconds = splits.some((s) => s % 60 !== 0);
  const opts: Intl.DateTimeFormatOptions =
    span >= 86_400
      ? { month: "short", day: "numeric", hour: "2-digit", minute: "2-digit", hourCycle: "h23" }
      : { hour: "2-digit", minute: "2-digit", ...(seconds ? { second: "2-digit" } : {}), hourCycle: "h23" };
  return splits.map((s) => new Date(s * 1000).toLocaleString(undefined, opts));
}

/** How a series is drawn, for tests and readers of the page: "label:scale:path" each. */
const describeSeries = (series: Series[]) =>
  series
    .map((s) => `${s.label}:${s.axis ?? "left"}:${s.points ? "points" : s.step ? "stepped" : "line"}`)
    .join(",");

/** A time chart: x in ms, one or more series. */
export function Chart({
  x,
  series,
  height = 200,
  axes,
  tickSeconds = 1,
}: {
  x: number[];
  series: Series[];
  height?: number;
  axes?: AxisLabels;
  /** The shortest time between x ticks: 60 for per-minute data (a :30 tick names no sample). */
  tickSeconds?: number;
}) {
  const ref = useRef<HTMLDivElement>(null);
  useEffect(() => {
    const el = ref.current;
    if (!el || x.length === 0) return;
    let plot: uPlot | null = null;
    let gone = false;
    // (the axis takes the colour of its last series: the one it is labelled for, p95 beside p50)
    const right = series.findLast((s) => s.axis === "right");
    void loadUPlot().then((UPlot) => {
      if (gone) return;
      // From zero, with headroom — more on the right — so the two axes' highest points do not
      // meet on the top edge, one line hiding the other.
      // The ticks each value axis drew, on the element (data-ticks-left/-right): uPlot writes its
      // labels on the canvas, where neither a test nor a screen reader can read them.
      const ticks =
        (side: "left" | "right", format: (v: number) => string) =>
        (_u: uPlot, splits: number[]): string[] => {
          el.dataset[side === "left" ? "ticksLeft" : "ticksRight"] = splits.join(",");
          return splits.map(format);
        };
      const fromZero =
        (headroom: number): uPlot.Range.Function =>
        (_u, _min, max) => [0, Math.max(1, max * headroom)];
      plot = new UPlot(
        {
          width: Math.max(300, el.clientWidth),
          height,
          scales: {
            x: { time: true },
            y: { range: fromZero(1.15) },
            ...(right ? { right: { range: fromZero(1.5) } } : {}),
          },
          series: [
            {},
            ...series.map((s) => ({
              label: s.label,
              stroke: s.color,
              width: 2,
              scale: s.axis === "right" ? "right" : "y",
              ...(s.dash ? { dash: s.dash } : {}),
              ...(s.fill ? { fill: s.fill } : {}),
              ...(s.axis === "right" && axes?.rightValue
                ? { value: (_u: uPlot, v: number | null) => (v === null ? "--" : axes.rightValue!(v)) }
                : {}),
              paths: s.points ? () => null : s.step ? UPlot.paths.stepped!({ align: 1 }) : undefined,
              ...(s.points ? { points: { show: true, size: 7, fill: s.color } } : {}),
            })),
          ],
          axes: [
            // (space: an HH:MM:SS label is ~55 px wide; closer ticks ran their labels together)
            {
              values: (_u, splits) => timeTicks(splits),
              incrs: TIME_INCRS.filter((i) => i >= tickSeconds),
              space: 80,
            },
            {
              size: 60,
              ...(axes?.left ? { label: axes.left, labelSize: 20 } : {}),
              ...(axes?.counts?.includes("left") ? { incrs: COUNT_INCRS } : {}),
              values: ticks("left", (v) => v.toLocaleString()),
            },
            ...(right
              ? [
                  {
                    scale: "right",
                    side: 1,
                    size: axes?.rightValue ? 70 : 40,
                    grid: { show: false },
                    stroke: right.color,
                    ...(axes?.right ? { label: axes.right, labelSize: 20 } : {}),
                    ...(axes?.counts?.includes("right") ? { incrs: COUNT_INCRS } : {}),
                    values: ticks("right", axes?.rightValue ?? ((v) => v.toLocaleString())),
                  },
                ]
              : []),
          ],
        },
        [x.map((t) => t / 1000), ...series.map((s) => s.values)] as uPlot.AlignedData,
        el,
      );
    });
    const resize = () => plot?.setSize({ width: Math.max(300, el.clientWidth), height });
    window.addEventListener("resize", resize);
    return () => {
      gone = true;
      window.removeEventListener("resize", resize);
      plot?.destroy();
    };
  }, [
    JSON.stringify(x),
    JSON.stringify(series),
    height,
    axes?.left,
    axes?.right,
    axes?.counts?.join(),
    tickSeconds,
  ]);
  if (x.length === 0) return <p class="muted">no data yet</p>;
  // The plot's height is held while uPlot loads, so the page below does not jump.
  return (
    <div
      ref={ref}
      class="chart"
      style={{ minHeight: `${height}px` }}
      data-from={x[0]}
      data-to={x.at(-1)}
      data-points={x.length}
      data-axes={series.some((s) => s.axis === "right") ? 3 : 2}
      data-series={describeSeries(series)}
    />
  );
}

export function ErrorNote({ error }: { error: string | null }) {
  return error ? (
    <p class="error" role="alert">
      {error}
    </p>
  ) : null;
}

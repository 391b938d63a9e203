// The throughput chart as SVG: grouped bars (median) with min–max whiskers, one group per
// concurrency. Markdown renders it directly; no raster, no downloads.

export interface Series {
  name: string;
  color: string;
  /** One point per category: median with min–max. */
  points: { median: number; min: number; max: number }[];
}

export interface BarChart {
  title: string;
  subtitle: string;
  xLabel: string;
  yLabel: string;
  categories: string[];
  series: Series[];
}

class Svg {
  private readonly parts: string[] = [];
  private readonly width: number;
  private readonly height: number;

  constructor(width: number, height: number) {
    this.width = width;
    this.height = height;
  }

  rect(x: number, y: number, w: number, h: number, color: string): void {
    this.parts.push(
      `<rect x="${x.toFixed(1)}" y="${y.toFixed(1)}" width="${w.toFixed(1)}" height="${h.toFixed(1)}" fill="${color}"/>`,
    );
  }

  text(
    x: number,
    y: number,
    s: string,
    color: string,
    size: number,
    anchor: "start" | "middle" | "end" = "start",
  ): void {
    const esc = s.replace(/&/g, "&amp;").replace(/</g, "&lt;");
    this.parts.push(
      `<text x="${x.toFixed(1)}" y="${y.toFixed(1)}" fill="${color}" font-size="${size}" text-anchor="${anchor}" font-family="DejaVu Sans, Helvetica, Arial, sans-serif">${esc}</text>`,
    );
  }

  /** Everything drawn from now on is moved down by `dy`. */
  offset(dy: number): void {
    this.parts.push(`<g transform="translate(0 ${dy})">`);
  }
  endOffset(): void {
    this.parts.push("</g>");
  }

  toString(): string {
    return `<svg xmlns="http://www.w3.org/2000/svg" width="${this.width}" height="${this.height}" viewBox="0 0 ${this.width} ${this.height}">\n<rect width="100%" height="100%" fill="#ffffff"/>\n${this.parts.join("\n")}\n</svg>\n`;
  }
}

// ---- layout -------------------------------------------------------------------------------

function niceStep(max: number, ticks: number): number {
  const raw = max / ticks;
  const p = 10 ** Math.floor(Math.log10(raw));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= raw) return m * p;
  return 10 * p;
}

function fmt(v: number): string {
  if (v >= 1000) return `${(v / 1000).toFixed(v % 1000 === 0 ? 0 : 1)}K`;
  return String(v);
}

const W = 880;
const H = 500;

function draw(s: Svg, c: BarChart): void {
  const left = 90;
  const right = 20;
  const top = 80;
  const bottom = 70;
  const plotW = W - left - right;
  const plotH = H - top - bottom;
  s.text(W / 2, 30, c.title, "#111111", 16, "middle");
  s.text(W / 2, 54, c.subtitle, "#555555", 11, "middle");

  const maxV = Math.max(
    1,
    ...c.series
      .flatMap((se) => se.points.map((p) => (Number.isFinite(p.max) ? p.max : p.median)))
      .filter(Number.isFinite),
  );
  const step = niceStep(maxV * 1.05, 6);
  const yMax = Math.ceil((maxV * 1.05) / step) * step;
  const y = (v: number) => top + plotH - (v / yMax) * plotH;

  for (let v = 0; v <= yMax + 1e-9; v += step) {
    s.rect(left, y(v), plotW, 1, v === 0 ? "#333333" : "#e3e3e3");
    s.text(left - 8, y(v) + 4, fmt(v), "#333333", 11, "end");
  }
  s.rect(left, top, 1, plotH, "#333333");
  s.text(24, top - 14, c.yLabel, "#333333", 11, "start");
  s.text(left + plotW / 2, H - 22, c.xLabel, "#333333", 12, "middle");

  const groupW = plotW / c.categories.length;
  const barW = Math.min(60, (groupW * 0.7) / c.series.length);
  c.categories.forEach((cat, i) => {
    const gx = left + groupW * i + groupW / 2;
    s.text(gx, top + plotH + 20, cat, "#333333", 12, "middle");
    c.series.forEach((se, j) => {
      const p = se.points[i];
      if (!p || !Number.isFinite(p.median)) return;
      const bx = gx - (barW * c.series.length) / 2 + j * barW + 2;
      const bw = barW - 4;
      s.rect(bx, y(p.median), bw, y(0) - y(p.median), se.color);
      if (Number.isFinite(p.min) && Number.isFinite(p.max) && p.max > p.min) {
        const cx = bx + bw / 2;
        s.rect(cx - 1, y(p.max), 2, Math.max(1, y(p.min) - y(p.max)), "#111111");
        s.rect(cx - 6, y(p.max), 12, 2, "#111111");
        s.rect(cx - 6, y(p.min) - 1, 12, 2, "#111111");
      }
      s.text(
        bx + bw / 2,
        y(Number.isFinite(p.max) ? p.max : p.median) - 6,
        // (small values, e.g. µs or bytes per job, keep their own digits)
        p.median >= 1000 ? fmt(Math.round(p.median / 100) * 100) : String(Math.round(p.median * 10) / 10),
        "#111111",
        10,
        "middle",
      );
    });
  });

  let lx = left + 10;
  for (const se of c.series) {
    s.rect(lx, top - 2 - 10, 12, 12, se.color);
    s.text(lx + 18, top - 2, se.name, "#111111", 12, "start");
    lx += 30 + se.name.length * 12;
  }
}

/** The chart as an SVG document. */
export function renderChart(c: BarChart): string {
  const svg = new Svg(W, H);
  draw(svg, c);
  return svg.toString();
}

/** Several charts stacked in one SVG document (e.g. one panel per measure). */
export function renderPanels(charts: BarChart[]): string {
  const svg = new Svg(W, H * charts.length);
  charts.forEach((c, i) => {
    svg.offset(H * i);
    draw(svg, c);
    svg.endOffset();
  });
  return svg.toString();
}

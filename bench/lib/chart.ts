// The throughput chart, drawn twice from one layout: a PNG (pure JS: an RGB raster, a 5×7
// bitmap font, node:zlib for deflate and CRC-32) and an SVG. No downloads, no native tools.
import { crc32, deflateSync } from "node:zlib";

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

// ---- drawing surface ---------------------------------------------------------------------

interface Surface {
  rect(x: number, y: number, w: number, h: number, color: string): void;
  /** anchor: where x is — start, middle or end of the text. */
  text(
    x: number,
    y: number,
    s: string,
    color: string,
    size: number,
    anchor?: "start" | "middle" | "end",
  ): void;
}

const GLYPHS: Record<string, string> = {
  " ": ".".repeat(35),
  "0": ".###.#...##..###.#.###..##...#.###.",
  "1": "..#...##....#....#....#....#...###.",
  "2": ".###.#...#....#...#...#...#...#####",
  "3": "#####...#...#.....#.....##...#.###.",
  "4": "...#...##..#.#.#..#.#####...#....#.",
  "5": "######....####.....#....##...#.###.",
  "6": "..##..#...#....####.#...##...#.###.",
  "7": "#####....#...#...#...#....#....#...",
  "8": ".###.#...##...#.###.#...##...#.###.",
  "9": ".###.#...##...#.####....#...#..##..",
  A: ".###.#...##...#######...##...##...#",
  B: "####.#...##...#####.#...##...#####.",
  C: ".###.#...##....#....#....#...#.###.",
  D: "###..#..#.#...##...##...##..#.###..",
  E: "######....#....####.#....#....#####",
  F: "######....#....####.#....#....#....",
  G: ".###.#...##....#.####...##...#.####",
  H: "#...##...##...#######...##...##...#",
  I: ".###...#....#....#....#....#...###.",
  J: "..###...#....#....#....#.#..#..##..",
  K: "#...##..#.#.#..##...#.#..#..#.#...#",
  L: "#....#....#....#....#....#....#####",
  M: "#...###.###.#.##.#.##...##...##...#",
  N: "#...##...###..##.#.##..###...##...#",
  O: ".###.#...##...##...##...##...#.###.",
  P: "####.#...##...#####.#....#....#....",
  Q: ".###.#...##...##...##.#.##..#..##.#",
  R: "####.#...##...#####.#.#..#..#.#...#",
  S: ".#####....#.....###.....#....#####.",
  T: "#####..#....#....#....#....#....#..",
  U: "#...##...##...##...##...##...#.###.",
  V: "#...##...##...##...##...#.#.#...#..",
  W: "#...##...##...##.#.##.#.##.#.#.#.#.",
  X: "#...##...#.#.#...#...#.#.#...##...#",
  Y: "#...##...#.#.#...#....#....#....#..",
  Z: "#####....#...#...#...#...#....#####",
  "(": "...#...#...#....#....#.....#.....#.",
  ")": ".#.....#.....#....#....#...#...#...",
  "/": ".........#...#...#...#...#.........",
  ",": ".....................##....#...#...",
  "-": "...............#####...............",
  ".": "..........................##...##..",
  ";": "......##...##........##....#...#...",
  ":": "......##...##........##...##.......",
  "=": "..........#####.....#####..........",
  "+": ".......#....#..#####..#....#.......",
  "%": "##...##..#...#...#...#...#..##...##",
  "–": "...............#####...............",
  "×": ".....#...#.#.#...#...#.#.#...#.....",
};

function glyph(ch: string): string {
  const g = GLYPHS[ch] ?? GLYPHS[ch.toUpperCase()] ?? GLYPHS["-"]!;
  return g.padEnd(35, ".");
}

function hex(color: string): [number, number, number] {
  const v = Number.parseInt(color.slice(1), 16);
  return [(v >> 16) & 255, (v >> 8) & 255, v & 255];
}

class Raster implements Surface {
  readonly width: number;
  readonly height: number;
  readonly pixels: Buffer;

  constructor(width: number, height: number) {
    this.width = width;
    this.height = height;
    this.pixels = Buffer.alloc(width * height * 3, 255);
  }

  rect(x: number, y: number, w: number, h: number, color: string): void {
    const [r, g, b] = hex(color);
    const x0 = Math.max(0, Math.round(x));
    const y0 = Math.max(0, Math.round(y));
    const x1 = Math.min(this.width, Math.round(x + w));
    const y1 = Math.min(this.height, Math.round(y + h));
    for (let yy = y0; yy < y1; yy++) {
      for (let xx = x0; xx < x1; xx++) {
        const i = (yy * this.width + xx) * 3;
        this.pixels[i] = r;
        this.pixels[i + 1] = g;
        this.pixels[i + 2] = b;
      }
    }
  }

  text(
    x: number,
    y: number,
    s: string,
    color: string,
    size: number,
    anchor: "start" | "middle" | "end" = "start",
  ): void {
    const scale = Math.max(1, Math.round(size / 8));
    const advance = 6 * scale;
    const width = s.length * advance - scale;
    let left = anchor === "start" ? x : anchor === "middle" ? x - width / 2 : x - width;
    const top = y - 7 * scale; // y is the baseline
    for (const ch of s) {
      const g = glyph(ch);
      for (let row = 0; row < 7; row++) {
        for (let col = 0; col < 5; col++) {
          if (g[row * 5 + col] === "#") this.rect(left + col * scale, top + row * scale, scale, scale, color);
        }
      }
      left += advance;
    }
  }

  png(): Buffer {
    const raw = Buffer.alloc((this.width * 3 + 1) * this.height);
    for (let y = 0; y < this.height; y++) {
      raw[y * (this.width * 3 + 1)] = 0; // filter: none
      this.pixels.copy(raw, y * (this.width * 3 + 1) + 1, y * this.width * 3, (y + 1) * this.width * 3);
    }
    const chunk = (type: string, data: Buffer) => {
      const len = Buffer.alloc(4);
      len.writeUInt32BE(data.length);
      const body = Buffer.concat([Buffer.from(type, "ascii"), data]);
      const crc = Buffer.alloc(4);
      crc.writeUInt32BE(crc32(body) >>> 0);
      return Buffer.concat([len, body, crc]);
    };
    const ihdr = Buffer.alloc(13);
    ihdr.writeUInt32BE(this.width, 0);
    ihdr.writeUInt32BE(this.height, 4);
    ihdr[8] = 8; // bit depth
    ihdr[9] = 2; // colour type: RGB
    return Buffer.concat([
      Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
      chunk("IHDR", ihdr),
      chunk("IDAT", deflateSync(raw, { level: 9 })),
      chunk("IEND", Buffer.alloc(0)),
    ]);
  }
}

class Svg implements Surface {
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

function draw(s: Surface, c: BarChart): void {
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
        fmt(Math.round(p.median / 100) * 100),
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

export function renderChart(c: BarChart): { png: Buffer; svg: string } {
  const raster = new Raster(W, H);
  draw(raster, c);
  const svg = new Svg(W, H);
  draw(svg, c);
  return { png: raster.png(), svg: svg.toString() };
}

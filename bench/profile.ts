// Summarise V8 CPU profiles (from `--cpu-prof`): where the time goes, by function (self time)
// and by area (our folders, each npm package, Node internals, GC, idle).
//   node bench/profile.ts FILE.cpuprofile [--top 25] [--inclusive fnA,fnB] [--callers fnC]
import { readFileSync } from "node:fs";
import { intFlag, cliFlags, REPO } from "./lib/util.ts";

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}
interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}
interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

export interface ProfileSummary {
  totalMs: number;
  busyMs: number;
  byArea: [string, number][];
  byFunction: [string, number][];
  /** Inclusive time of frames whose name matches, by name. */
  inclusive: [string, number][];
  /** For frames named in `callersOf`: self time by calling stack (3 frames up). */
  callers: [string, number][];
}

function area(f: CallFrame): string {
  const { url, functionName } = f;
  if (functionName === "(idle)") return "(idle)";
  if (functionName === "(garbage collector)") return "(gc)";
  if (functionName === "(program)") return "(program)";
  if (!url) return "(native)";
  if (url.startsWith("node:")) return `node:${url.slice(5).split("/")[0]}`;
  const path = url.replace(/^file:\/\//, "");
  const nm = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(path);
  if (nm) return nm[1]!;
  if (path.startsWith(REPO))
    return path.slice(REPO.length).split("/").slice(0, -1).join("/") || path.slice(REPO.length);
  return path;
}

function label(f: CallFrame): string {
  const file = f.url
    .replace(/^file:\/\//, "")
    .replace(REPO, "")
    .replace(/.*node_modules\//, "");
  return `${f.functionName || "(anonymous)"} ${file}:${f.lineNumber + 1}`;
}

export function summarizeProfile(
  file: string,
  inclusiveNames: string[] = [],
  callersOf: string[] = [],
): ProfileSummary {
  const p = JSON.parse(readFileSync(file, "utf8")) as CpuProfile;
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const self = new Map<number, number>();
  for (let i = 0; i < p.samples.length; i++) {
    const dt = (p.timeDeltas[i + 1] ?? 0) / 1000;
    self.set(p.samples[i]!, (self.get(p.samples[i]!) ?? 0) + dt);
  }
  const areas = new Map<string, number>();
  const fns = new Map<string, number>();
  const incl = new Map<string, number>();
  const callers = new Map<string, number>();
  let total = 0;
  let idle = 0;
  for (const [id, ms] of self) {
    const n = byId.get(id)!;
    total += ms;
    if (n.callFrame.functionName === "(idle)") idle += ms;
    const a = area(n.callFrame);
    areas.set(a, (areas.get(a) ?? 0) + ms);
    const l = label(n.callFrame);
    fns.set(l, (fns.get(l) ?? 0) + ms);
    if (callersOf.includes(n.callFrame.functionName)) {
      const chain: string[] = [];
      for (let cur = parent.get(id); cur !== undefined && chain.length < 3; cur = parent.get(cur))
        chain.push(label(byId.get(cur)!.callFrame));
      const key = `${n.callFrame.functionName} ← ${chain.join(" ← ")}`;
      callers.set(key, (callers.get(key) ?? 0) + ms);
    }
    // Inclusive time: walk up once per named ancestor (a frame counted once per sample).
    const seen = new Set<string>();
    for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
      const name = byId.get(cur)!.callFrame.functionName;
      if (inclusiveNames.includes(name) && !seen.has(name)) {
        seen.add(name);
        incl.set(name, (incl.get(name) ?? 0) + ms);
      }
    }
  }
  const sorted = (m: Map<string, number>) => [...m].sort((a, b) => b[1] - a[1]);
  return {
    totalMs: total,
    busyMs: total - idle,
    byArea: sorted(areas),
    byFunction: sorted(fns),
    inclusive: sorted(incl),
    callers: sorted(callers),
  };
}

function main(): void {
  const args = process.argv.slice(2);
  const files: string[] = [];
  const rest: string[] = [];
  for (let i = 0; i < args.length; i++) {
    if (args[i]!.startsWith("--"))
      rest.push(
        args[i]!,
        ...(args[i + 1] !== undefined && !args[i + 1]!.startsWith("--") ? [args[++i]!] : []),
      );
    else files.push(args[i]!);
  }
  const flags = cliFlags(["callers", "inclusive", "top"], rest);
  const top = intFlag(flags, "top", 25);
  for (const file of files) {
    const list = (name: string) => (flags.get(name) ?? "").split(",").filter(Boolean);
    const s = summarizeProfile(file, list("inclusive"), list("callers"));
    const pct = (ms: number) => `${((ms / s.busyMs) * 100).toFixed(1).padStart(5)}%`;
    process.stdout.write(
      `\n${file}\n  ${s.totalMs.toFixed(0)} ms profiled, ${s.busyMs.toFixed(0)} ms busy (percentages of busy)\n  by area:\n`,
    );
    for (const [a, ms] of s.byArea.filter(([a]) => a !== "(idle)").slice(0, top))
      process.stdout.write(`    ${pct(ms)} ${ms.toFixed(0).padStart(6)} ms  ${a}\n`);
    process.stdout.write("  by function (self):\n");
    for (const [f, ms] of s.byFunction.filter(([f]) => !f.startsWith("(idle)")).slice(0, top))
      process.stdout.write(`    ${pct(ms)} ${ms.toFixed(0).padStart(6)} ms  ${f}\n`);
    if (s.inclusive.length > 0) {
      process.stdout.write("  inclusive:\n");
      for (const [f, ms] of s.inclusive)
        process.stdout.write(`    ${pct(ms)} ${ms.toFixed(0).padStart(6)} ms  ${f}\n`);
    }
    if (s.callers.length > 0) {
      process.stdout.write("  callers:\n");
      for (const [f, ms] of s.callers.slice(0, top))
        process.stdout.write(`    ${pct(ms)} ${ms.toFixed(0).padStart(6)} ms  ${f}\n`);
    }
  }
}

if (import.meta.main) main();

// A flame graph of a V8 .cpuprofile (node --cpu-prof) as a standalone SVG: where
// the time goes by call stack, where profile.ts's summary only gives self time.
// `npm run bench -- --profile` writes one next to the summary
// (<out dir>/profile-flame.svg, or next to the .cpuprofile with `--out -`);
// for any other profile: node dist/bench/flame.js <file.cpuprofile> [out.svg]
// (prints the path it wrote; default <file>.flame.svg).
//
// Root at the bottom; each frame's width is its total time (self + callees).
// Each sample's time delta goes to the sample's node, as in profile.ts's
// summary, so the two agree. The (idle) node is left out: the graph is busy
// time only. Identical sibling frames (same function, url and line under the
// same parent) are merged and siblings sorted by name, so that two profiles of
// the same run look alike. Frames under minPct of the busy time are dropped.
// Colour says where the code comes from: the gateway (dist/src, dist/plugins),
// node_modules packages, node: internals, native / VM ((program), (garbage
// collector)) and other JS (the bench, eval). Hovering a frame shows its
// function, file, total and self time (an SVG <title>; no script).
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { shortUrl, type CpuProfile } from './profile.js';

export interface FlameOptions {
  /** First line of the heading; the notes (root at the bottom, busy time only) are always added. */
  title?: string;
  /** SVG width in px (default 1200). */
  width?: number;
  /** Frames whose total is under this % of the busy time are dropped (default 0.1). */
  minPct?: number;
}

/** One frame of the merged call tree; times in µs. */
export interface FlameFrame {
  name: string;
  url: string;
  line: number;
  self_us: number;
  total_us: number;
  children: FlameFrame[];
}

type Origin = 'gateway' | 'package' | 'node' | 'native' | 'other';

const ORIGINS: { origin: Origin; label: string; hue: number; sat: number }[] = [
  { origin: 'gateway', label: 'gateway (dist/src, dist/plugins)', hue: 18, sat: 85 },
  { origin: 'package', label: 'node_modules', hue: 48, sat: 80 },
  { origin: 'node', label: 'node: internals', hue: 125, sat: 45 },
  { origin: 'native', label: 'native / VM / GC', hue: 210, sat: 30 },
  { origin: 'other', label: 'other JS', hue: 280, sat: 40 },
];

export function originOf(url: string): Origin {
  if (!url) return 'native';
  if (url.includes('node_modules/')) return 'package';
  if (url.startsWith('node:')) return 'node';
  if (/\/dist\/(src|plugins)\//.test(url)) return 'gateway';
  return 'other';
}

/**
 * The call tree with identical siblings merged, each frame's self and total
 * time, the (idle) node's time apart. The root frame is the profile's (root).
 */
export function flameTree(prof: CpuProfile): { root: FlameFrame; idle_us: number } {
  const byId = new Map(prof.nodes.map((n) => [n.id, n]));
  const children = new Map<number, number[]>();
  const hasParent = new Set<number>();
  for (const n of prof.nodes) {
    for (const c of n.children ?? []) {
      (children.get(n.id) ?? children.set(n.id, []).get(n.id)!).push(c);
      hasParent.add(c);
    }
    if (n.parent !== undefined && !n.children) {
      (children.get(n.parent) ?? children.set(n.parent, []).get(n.parent)!).push(n.id);
      hasParent.add(n.id);
    }
  }
  const selfUs = new Map<number, number>();
  if (prof.samples?.length) {
    // timeDeltas[i] is the time before sample i: attributed to that sample's node, as summarize() does.
    for (let i = 0; i < prof.samples.length; i++) {
      const id = prof.samples[i];
      selfUs.set(id, (selfUs.get(id) ?? 0) + Math.max(0, prof.timeDeltas?.[i] ?? 0));
    }
  } else {
    // No sample list: hit counts times the mean interval.
    const hits = prof.nodes.reduce((a, n) => a + (n.hitCount ?? 0), 0);
    const per = hits ? Math.max(0, prof.endTime - prof.startTime) / hits : 0;
    for (const n of prof.nodes) if (n.hitCount) selfUs.set(n.id, n.hitCount * per);
  }

  const rootNode = prof.nodes.find((n) => !hasParent.has(n.id));
  const frame = (name: string, url: string, line: number): FlameFrame => ({ name, url, line, self_us: 0, total_us: 0, children: [] });
  const root = frame(rootNode?.callFrame.functionName || '(root)', '', -1);
  let idle = 0;
  if (!rootNode) return { root, idle_us: 0 };
  // Walk the profile's tree, merging each node into its parent's frame by function + url + line.
  const index = new Map<FlameFrame, Map<string, FlameFrame>>();
  const stack: [number, FlameFrame][] = [[rootNode.id, root]];
  const seen = new Set<number>();
  while (stack.length) {
    const [id, into] = stack.pop()!;
    if (seen.has(id)) continue;
    seen.add(id);
    into.self_us += selfUs.get(id) ?? 0;
    for (const cid of children.get(id) ?? []) {
      const c = byId.get(cid);
      if (!c) continue;
      const { functionName, url, lineNumber } = c.callFrame;
      if (functionName === '(idle)') {
        idle += subtreeUs(cid, children, selfUs);
        continue;
      }
      const key = `${functionName}\0${url}\0${lineNumber}`;
      const sibs = index.get(into) ?? index.set(into, new Map()).get(into)!;
      let f = sibs.get(key);
      if (!f) {
        f = frame(functionName || '(anonymous)', url, lineNumber);
        sibs.set(key, f);
        into.children.push(f);
      }
      stack.push([cid, f]);
    }
  }
  const total = (f: FlameFrame): number => {
    f.children.sort((a, b) => cmp(a.name, b.name) || cmp(a.url, b.url) || a.line - b.line);
    f.total_us = f.self_us + f.children.reduce((a, c) => a + total(c), 0);
    return f.total_us;
  };
  total(root);
  return { root, idle_us: idle };
}

function subtreeUs(id: number, children: Map<number, number[]>, selfUs: Map<number, number>): number {
  let us = 0;
  const stack = [id];
  const seen = new Set<number>();
  while (stack.length) {
    const n = stack.pop()!;
    if (seen.has(n)) continue;
    seen.add(n);
    us += selfUs.get(n) ?? 0;
    stack.push(...(children.get(n) ?? []));
  }
  return us;
}

const cmp = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

export function escapeXml(s: string): string {
  return s
    // eslint-disable-next-line no-control-regex -- these control characters are what XML 1.0 forbids
    .replace(/[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]/g, '') // not allowed in XML 1.0
    .replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&apos;' })[c]!);
}

/** "file:line" as profile.ts shows it, or '' for native frames. */
function where(f: FlameFrame): string {
  return f.url ? `${shortUrl(f.url)}:${f.line + 1}` : '';
}

function label(f: FlameFrame): string {
  const w = where(f);
  if (w) return `${f.name} (${w})`;
  return f.name.startsWith('(') ? f.name : `${f.name} (native)`;
}

/** A stable colour: the origin's hue, lightness varied by the function name so that neighbours differ. */
function colour(f: FlameFrame): string {
  const o = ORIGINS.find((x) => x.origin === originOf(f.url))!;
  let h = 0;
  for (const ch of f.name) h = (h * 31 + ch.charCodeAt(0)) >>> 0;
  return hsl(o.hue + (h % 11) - 5, o.sat, 58 + ((h >>> 4) % 18));
}

function hsl(h: number, s: number, l: number): string {
  s /= 100;
  l /= 100;
  const k = (n: number) => (n + h / 30) % 12;
  const a = s * Math.min(l, 1 - l);
  const c = (n: number) => Math.round(255 * (l - a * Math.max(-1, Math.min(k(n) - 3, 9 - k(n), 1))));
  return '#' + [c(0), c(8), c(4)].map((v) => v.toString(16).padStart(2, '0')).join('');
}

const ms = (us: number) => (us / 1000).toFixed(us < 10_000 ? 2 : 1);
const num = (n: number) => String(Math.round(n * 100) / 100);

export function flameGraphSvg(profile: CpuProfile, opts: FlameOptions = {}): string {
  const W = opts.width ?? 1200;
  const minPct = opts.minPct ?? 0.1;
  const { root, idle_us } = flameTree(profile);
  const busy = root.total_us;
  const pad = 10;
  const frameH = 17;
  const fontSize = 11;
  const charW = fontSize * 0.6; // monospace
  const headH = 58;
  const legendH = 28;
  const innerW = W - 2 * pad;
  const minUs = (busy * minPct) / 100;

  // Frames to draw, with their position in time (µs from the root's left edge) and depth.
  const kept: { f: FlameFrame; start: number; depth: number }[] = [];
  const count = (f: FlameFrame): number => 1 + f.children.reduce((a, c) => a + count(c), 0);
  const all = count(root);
  const visit = (f: FlameFrame, start: number, depth: number) => {
    if (f.total_us <= 0 || f.total_us < minUs) return;
    kept.push({ f, start, depth });
    let x = start;
    for (const c of f.children) {
      visit(c, x, depth + 1);
      x += c.total_us;
    }
  };
  if (busy > 0) visit(root, 0, 0);
  const maxDepth = kept.reduce((m, k) => Math.max(m, k.depth), 0);
  const H = headH + (maxDepth + 1) * frameH + legendH + pad;
  const scale = busy > 0 ? innerW / busy : 0;

  const title = opts.title ?? 'CPU flame graph';
  const notes = `root at the bottom, busy time only ((idle) excluded); width = total time (self + callees)`;
  const sub =
    busy > 0
      ? `${ms(busy)} ms busy, ${ms(idle_us)} ms idle excluded; ${kept.length} of ${all} frames shown (under ${minPct}% dropped); hover a frame for its times`
      : `no busy samples (${ms(idle_us)} ms idle)`;
  const out: string[] = [];
  out.push(
    `<?xml version="1.0" encoding="UTF-8" standalone="no"?>`,
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="ui-monospace, Menlo, Consolas, monospace" font-size="${fontSize}">`,
    `<title>${escapeXml(`${title}: ${notes}`)}</title>`,
    `<style>.f text{pointer-events:none}.f rect:hover{stroke:#000;stroke-width:1}</style>`,
    `<rect x="0" y="0" width="${W}" height="${H}" fill="#fdfdf8"/>`,
    `<text x="${W / 2}" y="20" text-anchor="middle" font-size="15" font-weight="bold">${escapeXml(title)}</text>`,
    `<text x="${W / 2}" y="36" text-anchor="middle" fill="#333">${escapeXml(notes)}</text>`,
    `<text x="${W / 2}" y="50" text-anchor="middle" fill="#666">${escapeXml(sub)}</text>`,
    `<g class="f">`,
  );
  for (const { f, start, depth } of kept) {
    const x = pad + start * scale;
    const w = f.total_us * scale;
    const y = headH + (maxDepth - depth) * frameH;
    const isRoot = f === root;
    const lab = isRoot ? `all (${ms(busy)} ms busy)` : label(f);
    const pct = (f.total_us / busy) * 100;
    const tip = isRoot
      ? `all: ${ms(busy)} ms busy (100%), ${ms(idle_us)} ms idle excluded`
      : `${f.name}\n${where(f) || '(native)'}\ntotal ${ms(f.total_us)} ms (${pct.toFixed(2)}%), self ${ms(f.self_us)} ms`;
    out.push(
      `<rect x="${num(x)}" y="${y}" width="${num(w)}" height="${frameH - 1}" rx="2" fill="${isRoot ? '#d8d8d8' : colour(f)}"><title>${escapeXml(tip)}</title></rect>`,
    );
    if (w >= 30) {
      const fit = Math.floor((w - 6) / charW);
      const text = lab.length <= fit ? lab : lab.slice(0, Math.max(1, fit - 2)).replace(/[\ud800-\udbff]$/, '') + '..';
      out.push(`<text x="${num(x + 3)}" y="${y + frameH - 5}">${escapeXml(text)}</text>`);
    }
  }
  out.push(`</g>`);
  // Legend.
  let lx = pad;
  const ly = H - pad - 12;
  for (const o of ORIGINS) {
    out.push(`<rect x="${lx}" y="${ly}" width="12" height="12" fill="${hsl(o.hue, o.sat, 66)}"/>`, `<text x="${lx + 16}" y="${ly + 10}">${escapeXml(o.label)}</text>`);
    lx += 16 + o.label.length * charW + 18;
  }
  out.push(`</svg>`, '');
  return out.join('\n');
}

/** Read a .cpuprofile and write its flame graph; returns the path written. */
export function writeFlameGraph(profileFile: string, outFile = profileFile.replace(/\.cpuprofile$/, '') + '.flame.svg', opts: FlameOptions = {}): string {
  const prof = JSON.parse(readFileSync(profileFile, 'utf8')) as CpuProfile;
  mkdirSync(path.dirname(path.resolve(outFile)), { recursive: true });
  writeFileSync(outFile, flameGraphSvg(prof, { title: `CPU flame graph: ${path.basename(profileFile)}`, ...opts }));
  return outFile;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const file = process.argv[2];
  if (!file || file === '--help' || file === '-h') {
    process.stderr.write('usage: node dist/bench/flame.js <file.cpuprofile> [out.svg]   (default out: <file>.flame.svg)\n');
    process.exit(file ? 0 : 2);
  }
  process.stdout.write(writeFlameGraph(file, process.argv[3]) + '\n');
}

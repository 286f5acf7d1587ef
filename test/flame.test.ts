// The flame graph of a .cpuprofile (bench/flame.ts): a hand-made profile with
// known times checks the arithmetic (widths proportional to totals, (idle)
// left out, identical siblings merged, small frames dropped, labels escaped);
// a real `node --cpu-prof` run checks the CLI end to end.
import t from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { flameGraphSvg, flameTree, escapeXml } from '../bench/flame.js';
import type { CpuProfile } from '../bench/profile.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const cli = path.resolve(here, '../bench/flame.js');

const GW = 'file:///srv/gw/dist/src/server.js';
const PKG = 'file:///srv/gw/node_modules/koa/lib/application.js';
const cf = (functionName: string, url = '', lineNumber = -1) => ({ functionName, url, lineNumber });

// (root)
// ├─ handle (gateway)          self 100 µs
// │  ├─ parse (pkg)            self 200 µs   } two nodes for the same frame:
// │  ├─ parse (pkg)            self 100 µs   } merged into one of 300 µs
// │  ├─ <a&b> (gateway)        self 300 µs
// │  └─ tiny (gateway)         self 0.5 µs   (0.05%, under minPct: dropped)
// ├─ (garbage collector)       self 200 µs
// ├─ (program)                 self 98.5 µs
// └─ (idle)                    self 5000 µs  (excluded)
// busy = 100 + 300 + 300 + 0.5 + 200 + 98.5 = 999 µs
function synthetic(): CpuProfile {
  const nodes: CpuProfile['nodes'] = [
    { id: 1, callFrame: cf('(root)'), children: [2, 7, 8, 9] },
    { id: 2, callFrame: cf('handle', GW, 9), children: [3, 4, 5, 6] },
    { id: 3, callFrame: cf('parse', PKG, 41) },
    { id: 4, callFrame: cf('parse', PKG, 41) },
    { id: 5, callFrame: cf('<a&b>', GW, 19) },
    { id: 6, callFrame: cf('tiny', GW, 29) },
    { id: 7, callFrame: cf('(garbage collector)') },
    { id: 8, callFrame: cf('(program)') },
    { id: 9, callFrame: cf('(idle)') },
  ];
  const samples: number[] = [];
  const timeDeltas: number[] = [];
  const add = (id: number, us: number, n = 1) => {
    for (let i = 0; i < n; i++) {
      samples.push(id);
      timeDeltas.push(us / n);
    }
  };
  add(2, 100, 2);
  add(3, 200, 4);
  add(4, 100);
  add(5, 300, 3);
  add(6, 0.5);
  add(7, 200, 2);
  add(8, 98.5);
  add(9, 5000, 5);
  return { nodes, samples, timeDeltas, startTime: 0, endTime: 5999 };
}

interface Rect {
  x: number;
  width: number;
  y: number;
  tip: string;
}
function rects(svg: string): Rect[] {
  return [...svg.matchAll(/<rect x="([\d.]+)" y="([\d.]+)" width="([\d.]+)" height="[\d.]+" rx="2" fill="[^"]+"><title>([^<]*)<\/title><\/rect>/g)].map((m) => ({
    x: Number(m[1]),
    y: Number(m[2]),
    width: Number(m[3]),
    tip: m[4],
  }));
}
const byName = (rs: Rect[], name: string) => rs.filter((r) => r.tip.split('\n')[0] === name || r.tip.startsWith(`${name}:`));

/** Well-formed enough: every element opened is closed, in order, and no raw & or < in text. */
function wellFormed(svg: string): string | undefined {
  const body = svg.replace(/^<\?xml[^?]*\?>\s*/, '');
  const stack: string[] = [];
  const re = /<(\/?)([a-zA-Z][\w:-]*)((?:\s+[\w:-]+="[^"<]*")*)\s*(\/?)>/g;
  let last = 0;
  for (let m: RegExpExecArray | null; (m = re.exec(body)); ) {
    const between = body.slice(last, m.index);
    if (/<|&(?!(amp|lt|gt|quot|apos|#\d+);)/.test(between)) return `bad text before ${m[0]}: ${between.slice(0, 40)}`;
    for (const attr of m[3].matchAll(/="([^"]*)"/g)) if (/&(?!(amp|lt|gt|quot|apos|#\d+);)/.test(attr[1])) return `bad attribute in ${m[0]}`;
    last = re.lastIndex;
    if (m[4]) continue;
    if (!m[1]) stack.push(m[2]);
    else if (stack.pop() !== m[2]) return `unbalanced </${m[2]}>`;
  }
  if (stack.length) return `unclosed ${stack.join(',')}`;
  if (body.slice(last).trim()) return 'text after the root element';
  return undefined;
}

t.test('totals: self + callees, (idle) apart, identical siblings merged', async (t) => {
  const { root, idle_us } = flameTree(synthetic());
  t.equal(idle_us, 5000);
  t.equal(root.total_us, 999, 'busy time only');
  t.same(
    root.children.map((c) => c.name),
    ['(garbage collector)', '(program)', 'handle'],
    'sorted by name, no (idle)',
  );
  const handle = root.children[2];
  t.equal(handle.self_us, 100);
  t.equal(handle.total_us, 700.5);
  t.same(
    handle.children.map((c) => [c.name, c.total_us]),
    [
      ['<a&b>', 300],
      ['parse', 300],
      ['tiny', 0.5],
    ],
    'the two parse nodes are one frame',
  );
});

t.test('the SVG: widths proportional to totals, small frames dropped, labels escaped, well-formed', async (t) => {
  const W = 1000;
  const svg = flameGraphSvg(synthetic(), { title: 'test <profile>', width: W });
  t.equal(wellFormed(svg), undefined, 'well-formed');
  t.match(svg, /root at the bottom/);
  t.match(svg, /busy time only/);
  t.match(svg, /test &lt;profile&gt;/);
  const rs = rects(svg);
  const inner = W - 20;
  const root = rs.find((r) => r.tip.startsWith('all:'))!;
  t.ok(root, 'the root frame');
  t.equal(root.width, inner, 'the root spans the graph');
  const expect: [string, number][] = [
    ['handle', 700.5],
    ['parse', 300],
    ['<a&b>', 300],
    ['(garbage collector)', 200],
    ['(program)', 98.5],
  ];
  for (const [name, us] of expect) {
    const found = byName(rs, escapeXml(name));
    t.equal(found.length, 1, `one ${name} frame`);
    t.ok(Math.abs(found[0].width - (inner * us) / 999) < 0.02, `${name}: width ${found[0].width} ∝ ${us} µs`);
  }
  t.equal(byName(rs, 'tiny').length, 0, 'a frame under 0.1% is dropped');
  t.notMatch(svg, /<title>\(idle\)/, 'no (idle) frame');
  t.match(svg, />&lt;a&amp;b&gt; \(dist\/src\/server\.js:20\)</, 'escaped label with the shortened file and 1-based line');
  t.notMatch(svg, /<a&b>/, 'nothing unescaped');
  t.match(svg, /parse \(koa\/lib\/application\.js:42\)/, 'package file shortened as in the summary');
  const handle = byName(rs, 'handle')[0];
  const parse = byName(rs, 'parse')[0];
  t.ok(parse.y < handle.y, 'a callee is drawn above its caller (root at the bottom)');
  t.ok(parse.x >= handle.x && parse.x + parse.width <= handle.x + handle.width + 0.01, 'within its caller');
  t.match(byName(rs, 'handle')[0].tip, /dist\/src\/server\.js:10\ntotal 0\.70 ms \(70\.12%\), self 0\.10 ms/, 'tooltip: file, total ms and %');
  // Colours by origin: the gateway's frames and the package's differ.
  const fill = (name: string) => new RegExp(`fill="(#[0-9a-f]{6})"><title>${name}\\n`).exec(svg)![1];
  t.not(fill('handle').slice(1, 3), fill('parse').slice(1, 3));

  // A higher threshold drops more; a zero threshold keeps tiny.
  t.equal(byName(rects(flameGraphSvg(synthetic(), { minPct: 25 })), 'parse').length, 1, '30% stays at 25%');
  t.equal(byName(rects(flameGraphSvg(synthetic(), { minPct: 25 })), '(program)').length, 0, '9.8% goes at 25%');
  t.equal(byName(rects(flameGraphSvg(synthetic(), { minPct: 0 })), 'tiny').length, 1);

  // Narrow frames have no text, and text is clipped to the frame.
  const narrow = flameGraphSvg(synthetic(), { width: 200 });
  t.equal(wellFormed(narrow), undefined);
  t.notMatch(narrow, />\(program\)</, 'a 19 px frame has no label');
  for (const m of narrow.matchAll(/<text x="([\d.]+)" y="([\d.]+)">([^<]*)<\/text>/g)) {
    const r = rects(narrow).find((r) => Math.abs(r.x + 3 - Number(m[1])) < 0.02 && Math.abs(r.y - Number(m[2]) + 12) < 0.02);
    if (!r) continue;
    const chars = m[3].replace(/&[a-z]+;/g, '_').length;
    t.ok(chars * 6.6 <= r.width - 6 + 0.01, `"${m[3]}" fits ${r.width} px`);
  }
});

t.test('older profiles: parent links instead of children, hit counts instead of samples', async (t) => {
  const prof = {
    nodes: [
      { id: 1, callFrame: cf('(root)') },
      { id: 2, callFrame: cf('handle', GW, 9), parent: 1, hitCount: 1 },
      { id: 3, callFrame: cf('parse', PKG, 41), parent: 2, hitCount: 3 },
    ],
    startTime: 0,
    endTime: 400,
  } as unknown as CpuProfile;
  const { root } = flameTree(prof);
  t.equal(root.total_us, 400);
  t.same(root.children.map((c) => [c.name, c.self_us, c.total_us, c.children.map((g) => [g.name, g.total_us])]), [['handle', 100, 400, [['parse', 300]]]]);
});

t.test('an empty or all-idle profile still gives a valid SVG', async (t) => {
  const idle: CpuProfile = { nodes: [{ id: 1, callFrame: cf('(root)'), children: [2] }, { id: 2, callFrame: cf('(idle)') }], samples: [2], timeDeltas: [10], startTime: 0, endTime: 10 };
  const svg = flameGraphSvg(idle);
  t.equal(wellFormed(svg), undefined);
  t.match(svg, /no busy samples/);
});

t.test('the CLI on a real node --cpu-prof profile names the busy functions', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'flame-test-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const script = `
function alphaWork(n){let s=0;for(let i=0;i<n;i++)s+=Math.sqrt(i)*Math.sin(i);return s}
function betaWork(n){const a=[];for(let i=0;i<n;i++)a.push(String(i*7));return a.join(',').length}
function mainLoop(){const end=Date.now()+300;let x=0;while(Date.now()<end){x+=alphaWork(20000);x+=betaWork(5000)}return x}
mainLoop()`;
  const run = spawnSync(process.execPath, ['--cpu-prof', `--cpu-prof-dir=${dir}`, '-e', script], { encoding: 'utf8', timeout: 20_000 });
  t.equal(run.status, 0, run.stderr);
  const prof = fs.readdirSync(dir).find((f) => f.endsWith('.cpuprofile'));
  t.ok(prof, 'a .cpuprofile');
  const out = path.join(dir, 'out.svg');
  const r = spawnSync(process.execPath, [cli, path.join(dir, prof!), out], { encoding: 'utf8', timeout: 20_000 });
  t.equal(r.status, 0, r.stderr);
  t.equal(r.stdout.trim(), out, 'prints the path it wrote');
  const svg = fs.readFileSync(out, 'utf8');
  t.equal(wellFormed(svg), undefined, 'well-formed');
  for (const fn of ['mainLoop', 'alphaWork', 'betaWork']) t.match(svg, new RegExp(`<title>${fn}\\n`), `${fn} has a frame`);
  const rs = rects(svg);
  // V8 may record mainLoop on more than one stack (an on-stack replacement
  // entry, say): each of its callees must be drawn above one of its frames, within it.
  const main = byName(rs, 'mainLoop');
  t.ok(main.length >= 1, 'mainLoop drawn');
  const within = (r: Rect, m: Rect) => r.y < m.y && r.x >= m.x - 0.01 && r.x + r.width <= m.x + m.width + 0.01;
  for (const fn of ['alphaWork', 'betaWork']) {
    const frames = byName(rs, fn);
    t.ok(frames.length > 0 && frames.every((r) => main.some((m) => within(r, m))), `${fn} above mainLoop, within it`);
  }

  // Default output path: next to the profile.
  const d = spawnSync(process.execPath, [cli, path.join(dir, prof!)], { encoding: 'utf8', timeout: 20_000 });
  t.equal(d.stdout.trim(), path.join(dir, prof!.replace(/\.cpuprofile$/, '.flame.svg')));
  t.ok(fs.existsSync(d.stdout.trim()));
  const usage = spawnSync(process.execPath, [cli], { encoding: 'utf8' });
  t.equal(usage.status, 2);
  t.match(usage.stderr, /usage/);
});

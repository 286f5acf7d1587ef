// Summarise a V8 .cpuprofile (node --cpu-prof): the functions with the most
// self time, grouped by function + file + line, and by package/file.
// Usage: node dist/bench/profile.js <file.cpuprofile> [top]
import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';

/** The parts of V8's .cpuprofile that the summary and the flame graph (flame.ts) read. */
export interface CpuProfile {
  nodes: { id: number; callFrame: { functionName: string; url: string; lineNumber: number }; hitCount?: number; children?: number[]; parent?: number }[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

export interface ProfileEntry {
  name: string;
  where: string;
  self_ms: number;
  pct: number;
}

/** A script URL as the summary and the flame graph show it: the package path under node_modules, `dist/...` for the gateway's own code. */
export function shortUrl(url: string): string {
  if (!url) return '(native)';
  const nm = url.lastIndexOf('node_modules/');
  if (nm !== -1) return url.slice(nm + 'node_modules/'.length);
  const dist = url.indexOf('/dist/');
  if (dist !== -1) return url.slice(dist + 1);
  return url.replace(/^file:\/\//, '');
}

export function summarize(file: string, top = 25): { total_ms: number; functions: ProfileEntry[]; files: ProfileEntry[] } {
  const prof = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
  const byId = new Map(prof.nodes.map((n) => [n.id, n]));
  const selfUs = new Map<number, number>();
  // timeDeltas[i] is the time before sample i; attribute it to that sample's node.
  for (let i = 0; i < prof.samples.length; i++) selfUs.set(prof.samples[i], (selfUs.get(prof.samples[i]) ?? 0) + (prof.timeDeltas[i] ?? 0));
  const fn = new Map<string, ProfileEntry>();
  const files = new Map<string, ProfileEntry>();
  let total = 0;
  for (const [id, us] of selfUs) {
    const n = byId.get(id)!;
    total += us;
    const where = `${shortUrl(n.callFrame.url)}${n.callFrame.url ? `:${n.callFrame.lineNumber + 1}` : ''}`;
    const name = n.callFrame.functionName || '(anonymous)';
    const key = `${name}@${where}`;
    const e = fn.get(key) ?? { name, where, self_ms: 0, pct: 0 };
    e.self_ms += us / 1000;
    fn.set(key, e);
    const f = shortUrl(n.callFrame.url) || name;
    const group = f.startsWith('(') ? name : f.includes('/') && !f.startsWith('dist/') ? f.split('/').slice(0, f.startsWith('@') ? 2 : 1).join('/') : f;
    const fe = files.get(group) ?? { name: group, where: '', self_ms: 0, pct: 0 };
    fe.self_ms += us / 1000;
    files.set(group, fe);
  }
  const finish = (m: Map<string, ProfileEntry>) =>
    [...m.values()]
      .map((e) => ({ ...e, self_ms: Math.round(e.self_ms * 10) / 10, pct: Math.round((e.self_ms / (total / 1000)) * 1000) / 10 }))
      .sort((a, b) => b.self_ms - a.self_ms)
      .slice(0, top);
  return { total_ms: Math.round(total / 1000), functions: finish(fn), files: finish(files) };
}

export function formatSummary(s: ReturnType<typeof summarize>): string {
  const lines = [`total sampled: ${s.total_ms} ms`, '', 'self time by function:'];
  for (const e of s.functions) lines.push(`${e.pct.toFixed(1).padStart(5)}%  ${String(e.self_ms).padStart(8)} ms  ${e.name}  ${e.where}`);
  lines.push('', 'self time by package / file:');
  for (const e of s.files) lines.push(`${e.pct.toFixed(1).padStart(5)}%  ${String(e.self_ms).padStart(8)} ms  ${e.name}`);
  return lines.join('\n');
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const file = process.argv[2];
  if (!file) {
    process.stderr.write('usage: node dist/bench/profile.js <file.cpuprofile> [top]\n');
    process.exit(2);
  }
  process.stdout.write(formatSummary(summarize(file, Number(process.argv[3] ?? 25))) + '\n');
}

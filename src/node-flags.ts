// Node and V8 flags: which ones the gateway starts with (server.node_flags
// and the defaults the operator left alone), the one-time re-execution that
// applies the operator's flags, and the command line cluster workers start
// with. Kept free of the gateway's other modules, so that `start` can
// re-execute itself before it loads them.
import cluster from 'node:cluster';
import os from 'node:os';
import v8 from 'node:v8';

const flagName = (f: string) => f.split('=')[0].replace(/_/g, '-');
/** The flags given on the command line and in NODE_OPTIONS, with any others. */
const givenFlags = (execArgv: readonly string[], nodeOptions: string, ...more: readonly string[]) => [...execArgv, ...nodeOptions.split(/\s+/), ...more].filter(Boolean);
export const LACKING_FLAGS = 'running without some of server.node_flags (this Node cannot re-execute itself): pass them on the command line or in NODE_OPTIONS';

/** The flags of `wanted` this process was started without (by name, from its command line or NODE_OPTIONS). */
export function missingNodeFlags(wanted: readonly string[], execArgv: readonly string[] = process.execArgv, nodeOptions = process.env.NODE_OPTIONS ?? ''): string[] {
  const have = new Set(givenFlags(execArgv, nodeOptions).map(flagName));
  return wanted.filter((f) => !have.has(flagName(f)));
}

/**
 * Apply `server.node_flags`: V8 reads heap sizes only when a process starts,
 * so a process started without them replaces itself (process.execve: same
 * pid, same stdio, nothing has been written yet) with one started with them.
 * Once: the relaunched process, or one where execve is not available or
 * fails, goes on as it is and says which flags it lacks. Cluster workers inherit the
 * primary's flags.
 */
export function relaunchWithNodeFlags(flags: readonly string[]): string[] {
  const missing = missingNodeFlags(flags);
  if (!missing.length || cluster.isWorker || process.env.MODEL_GATEWAY_RELAUNCHED === '1' || typeof process.execve !== 'function') return missing;
  try {
    return process.execve(process.execPath, [process.execPath, ...process.execArgv, ...missing, ...process.argv.slice(1)], { ...process.env, MODEL_GATEWAY_RELAUNCHED: '1' });
  } catch {
    // execve(2) refused (a sandbox that forbids it, say; Node versions that throw instead of aborting): go on as started.
    return missing;
  }
}

/**
 * V8 flags the gateway sets on itself before it serves. Unlike heap sizes,
 * V8 reads these while it runs, so no relaunch is needed.
 *
 * `--no-allocation-site-pretenuring`: once V8 sees most objects of an object
 * or array literal survive a young-generation GC, it allocates that literal's
 * objects directly in the old generation. A gateway's objects live for one
 * request or one event, but during a ramp of streams the chunk and frame
 * literals looked long-lived, and V8 then filled the old generation with
 * per-event garbage that only a full GC reclaims (docs/performance.md,
 * "Memory", has the measurements).
 */
export const RUNTIME_V8_FLAGS: readonly string[] = ['--no-allocation-site-pretenuring'];

/**
 * V8 flags held while the gateway starts and set back once it is ready, each
 * as [while starting, once ready] (V8's own default). V8 reads them as it runs.
 *
 * `--semi-space-growth-factor`: loading the gateway (its modules, the config,
 * the plugins) allocates objects that nearly all survive, and V8 grows the
 * young generation on a high survival rate: a start-up left it at 2 × 16 MB,
 * about 15 MB of it resident, for a process that then idles (docs/performance.md,
 * "Start-up"). Held at 1 (no growth) until the gateway is ready; requests grow it
 * as they did.
 *
 * `--no-maglev`, `--no-turbofan`: no optimising compiler while loading. The
 * start-up code (the config loader's and the schemas' set-up, the parse and
 * checks, the plugins) runs once, but long enough for V8 to optimise some of
 * it, and that paged in the compilers' own code (part of the `node` binary)
 * and their output: about 8 MB of idle RSS for code the gateway never runs
 * again. Held from the first line of `start` (src/cli.ts), before the config
 * loader is evaluated; Sparkplug still compiles, and requests get every tier
 * once the gateway is ready.
 *
 * An operator who names a flag decides.
 */
export const STARTUP_V8_FLAGS: readonly (readonly [string, string])[] = [
  ['--semi-space-growth-factor=1', '--semi-space-growth-factor=2'],
  ['--no-maglev', '--maglev'],
  ['--no-turbofan', '--turbofan'],
];

let held: (readonly [string, string])[] = [];

/**
 * Set STARTUP_V8_FLAGS the operator left alone (command line, NODE_OPTIONS,
 * `server.node_flags`); releaseStartupV8Flags() sets them back. Called again
 * with `server.node_flags` once they are read, it sets back those they name.
 * Returns the flags held.
 */
export function holdStartupV8Flags(nodeFlags: readonly string[], execArgv: readonly string[] = process.execArgv, nodeOptions = process.env.NODE_OPTIONS ?? ''): string[] {
  const set = new Set(defaultFlagsToSet(STARTUP_V8_FLAGS.map(([f]) => f), nodeFlags, execArgv, nodeOptions));
  for (const [f, back] of held) if (!set.has(f)) v8.setFlagsFromString(back);
  const before = new Set(held.map(([f]) => f));
  held = STARTUP_V8_FLAGS.filter(([f]) => set.has(f));
  for (const [f] of held) if (!before.has(f)) v8.setFlagsFromString(f);
  return held.map(([f]) => f);
}

/** The gateway is ready: V8's own values for the flags holdStartupV8Flags() set. Returns the flags set. */
export function releaseStartupV8Flags(): string[] {
  const released = held.map(([, f]) => f);
  for (const f of released) v8.setFlagsFromString(f);
  held = [];
  return released;
}

/**
 * Node/V8 flags the gateway's cluster workers start with unless the operator
 * decides otherwise. V8 sizes its heap only when a process starts: a worker is
 * started with them (its execArgv), so no process re-executes itself for a
 * default; a single-process gateway (workers: 1) runs without them unless
 * they are named in `server.node_flags`.
 *
 * `--max-semi-space-size=32`: on a host with 4 GiB of memory or more, V8 lets
 * the young generation grow to 2 × 64 MB, and any sustained load grows it there
 * (every young collection's survivors count towards the next growth). A
 * gateway's objects live for one request or one event, so half of that holds
 * nothing a collection would keep; what the cap saves and costs is in
 * docs/performance.md, "Memory". Any flag that sizes the young generation, in `server.node_flags`,
 * on the command line or in NODE_OPTIONS, replaces this one.
 */
export const START_NODE_FLAGS: readonly string[] = ['--max-semi-space-size=32'];

/** The memory V8 sizes its heap from: the host's, or the cgroup's limit when lower (what Node hands V8). */
export function heapSizingMemory(): number {
  const constrained = process.constrainedMemory?.() ?? 0;
  return constrained > 0 ? Math.min(os.totalmem(), constrained) : os.totalmem();
}

/**
 * Below 4 GiB V8 already keeps its semi-spaces at 32 MB or less (Node 24,
 * measured in memory-limited cgroups: 16 MB at 1 GiB, 32 at 2 GiB, 64 from
 * 4 GiB up), so the cap would change nothing, or raise the limit on a small
 * container: START_NODE_FLAGS apply from this much memory up.
 */
const START_FLAGS_FROM_BYTES = 4 * 2 ** 30;

/** START_NODE_FLAGS where they lower what V8 would pick for `memory`; none below 4 GiB. */
export function startDefaults(memory = heapSizingMemory()): string[] {
  return memory >= START_FLAGS_FROM_BYTES ? [...START_NODE_FLAGS] : [];
}

/** A flag's name without `--`, `no-` and value, `_` read as `-`: both polarities of a flag share it. */
const flagBase = (f: string) => flagName(f).replace(/^--/, '').replace(/^no-/, '');

/** Other flags that decide what a default flag decides: the young generation's size is also set by these. */
const ALSO_DECIDED_BY: Readonly<Record<string, readonly string[]>> = {
  'max-semi-space-size': ['min-semi-space-size', 'max-heap-size', 'scavenger-max-new-space-capacity-mb'],
  // The tiers: --max-opt and --jitless choose them too (--opt is Turbofan's other name).
  maglev: ['max-opt', 'jitless'],
  turbofan: ['opt', 'max-opt', 'jitless'],
};

/**
 * The flags of `defaults` to set: those the operator did not name, in either
 * polarity, on the command line, in NODE_OPTIONS or in `server.node_flags`,
 * nor decide with another flag (ALSO_DECIDED_BY).
 */
export function defaultFlagsToSet(defaults: readonly string[], nodeFlags: readonly string[], execArgv: readonly string[] = process.execArgv, nodeOptions = process.env.NODE_OPTIONS ?? ''): string[] {
  const named = new Set(givenFlags(execArgv, nodeOptions, ...nodeFlags).map(flagBase));
  return defaults.filter((f) => ![flagBase(f), ...(ALSO_DECIDED_BY[flagBase(f)] ?? [])].some((b) => named.has(b)));
}

/**
 * Start with `server.node_flags`: re-execute once if this process lacks any
 * of them. Only flags the operator asked for cause a re-execution (a default
 * never does: see workerExecArgv). Returns the flags this process still lacks
 * (it could not re-execute).
 */
export function applyStartFlags(nodeFlags: readonly string[]): string[] {
  return relaunchWithNodeFlags(nodeFlags);
}

/** The command line a cluster worker starts with: this process's flags plus the START_NODE_FLAGS the operator left alone, where they apply. */
export function workerExecArgv(nodeFlags: readonly string[], execArgv: readonly string[] = process.execArgv, memory = heapSizingMemory()): string[] {
  return [...execArgv, ...defaultFlagsToSet(startDefaults(memory), nodeFlags, execArgv)];
}

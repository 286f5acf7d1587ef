// Random bytes for ids (response and message ids, tool call ids, trace and
// span ids), from a pool of the CSPRNG's output refilled 4 KiB at a time.
// Each byte is handed out once. `crypto.randomBytes` per id cost about
// 1.4 µs a call (Node pools only randomUUID), several ids a request on some
// paths: in a CPU profile of small Messages API requests it was 11% of the
// gateway's busy time (docs/performance.md, "Random ids").
import { randomFillSync } from 'node:crypto';

const POOL = Buffer.alloc(4096);
let at = POOL.length;

/** The offset of `n` fresh bytes in POOL (n ≤ 4096), valid until the next call. */
function take(n: number): number {
  if (at + n > POOL.length) {
    randomFillSync(POOL);
    at = 0;
  }
  const start = at;
  at += n;
  return start;
}

/** `bytes` random bytes as lowercase hex (2 × bytes characters). */
export function randomHex(bytes: number): string {
  const start = take(bytes);
  return POOL.toString('hex', start, start + bytes);
}

/** `bytes` random bytes as base64url, unpadded. */
export function randomBase64url(bytes: number): string {
  const start = take(bytes);
  return POOL.toString('base64url', start, start + bytes);
}

const BASE62 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

/** `length` characters of [A-Za-z0-9], one random byte each (byte mod 62, as Anthropic-style ids are made here). */
export function randomBase62(length: number): string {
  const start = take(length);
  let out = '';
  for (let i = start; i < start + length; i++) out += BASE62[POOL[i] % 62];
  return out;
}

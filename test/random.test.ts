// Ids from the pooled random bytes (src/random.ts): their shapes, and no
// byte handed out twice across the pool's refills.
import t from 'tap';
import { randomHex, randomBase64url, randomBase62 } from '../src/random.js';
import { messageId } from '../src/api/messages-map.js';
import { newId } from '../src/api/responses-map.js';

t.test('shapes', async (t) => {
  t.match(randomHex(12), /^[0-9a-f]{24}$/);
  t.match(randomBase64url(12), /^[A-Za-z0-9_-]{16}$/);
  t.match(randomBase62(22), /^[A-Za-z0-9]{22}$/);
  t.match(messageId(), /^msg_01[A-Za-z0-9]{22}$/);
  t.match(newId('resp'), /^resp_[0-9a-f]{50}$/);
  t.equal(randomHex(0), '');
});

t.test('ids do not repeat across many refills of the pool, and every base62 character appears', async (t) => {
  const seen = new Set<string>();
  const chars = new Set<string>();
  // 25 + 4 bytes a turn: about 283 refills of the 4 KiB pool, each where the next id no longer fits.
  for (let i = 0; i < 40_000; i++) {
    const id = randomHex(25);
    if (seen.has(id)) t.fail(`an id repeated after ${i}`);
    seen.add(id);
    for (const c of randomBase62(4)) chars.add(c);
  }
  t.equal(seen.size, 40_000);
  t.equal(chars.size, 62, 'all 62 characters');
});

t.test('two consecutive ids do not share bytes (each byte is handed out once)', async (t) => {
  // Hex of adjacent takes: were the pool offset not advanced, the two would be equal.
  let equalPairs = 0;
  for (let i = 0; i < 5_000; i++) if (randomHex(8) === randomHex(8)) equalPairs++;
  t.equal(equalPairs, 0);
});

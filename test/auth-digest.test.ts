// The auth plugin compares SHA-256 hex digests in constant time (sameDigest):
// the same answers as comparing the digests' bytes, whatever position differs.
import t from 'tap';
import { hash, randomBytes, timingSafeEqual } from 'node:crypto';
import { sameDigest } from '../plugins/pipeline/auth/index.js';

t.test('sameDigest: equal digests, a difference at any position, other lengths', async (t) => {
  const a = hash('sha256', 'sk-test-key', 'hex');
  t.equal(sameDigest(a, a), true);
  t.equal(sameDigest(a, Buffer.from(a, 'hex').toString('hex')), true, 'the same digest made another way');
  for (let i = 0; i < 64; i++) {
    const flipped = a.slice(0, i) + (a[i] === '0' ? '1' : '0') + a.slice(i + 1);
    t.equal(sameDigest(a, flipped), false, `differs at ${i}`);
    t.equal(sameDigest(flipped, a), false);
  }
  t.equal(sameDigest(a, a.slice(0, 63)), false, 'shorter');
  t.equal(sameDigest(a + '0', a + '0'), false, 'not a SHA-256 hex digest');
  t.equal(sameDigest('', ''), false);
  for (let n = 0; n < 200; n++) {
    const x = randomBytes(32);
    const y = n % 2 ? Buffer.from(x) : randomBytes(32);
    t.equal(sameDigest(x.toString('hex'), y.toString('hex')), timingSafeEqual(x, y));
  }
});

// The requests' AbortControllers under way (src/server/drain.ts, AbortList)
// and how an upstream attempt follows its request's abort (src/abort.ts).
// Both are on every request's path; the end-to-end behaviour (a client that
// leaves aborts the upstream at once, the shutdown deadline ends what is still
// running) is driven through HTTP in test/transports.test.ts and
// test/shutdown.test.ts.
import t from 'tap';
import { AbortList } from '../src/server/drain.js';
import { followRequest } from '../src/abort.js';

t.test('AbortList: entries leave in any order, and abortAll reaches exactly those left', async (t) => {
  const list = new AbortList();
  const acs = Array.from({ length: 5 }, () => new AbortController());
  const entries = acs.map((ac) => list.add(ac));
  // The newest (the head), one in the middle, the oldest (the tail).
  list.delete(entries[4]);
  list.delete(entries[2]);
  list.delete(entries[0]);
  // Taken out twice: nothing happens, the others stay.
  list.delete(entries[2]);
  for (const e of [entries[4], entries[2], entries[0]]) t.same([e.prev, e.next], [undefined, undefined], 'an entry taken out points at nothing');
  const reason = new Error('deadline');
  list.abortAll(reason);
  t.same(
    acs.map((ac) => ac.signal.aborted),
    [false, true, false, true, false],
  );
  t.equal(acs[1].signal.reason, reason);
  t.equal(acs[3].signal.reason, reason);
});

t.test('AbortList: an entry that leaves while abortAll runs does not stop it', async (t) => {
  const list = new AbortList();
  const acs = Array.from({ length: 3 }, () => new AbortController());
  const entries = acs.map((ac) => list.add(ac));
  // What a request's close handler does, should it run inside the abort.
  for (let i = 0; i < 3; i++) acs[i].signal.addEventListener('abort', () => list.delete(entries[i]));
  list.abortAll('stop');
  t.same(
    acs.map((ac) => ac.signal.aborted),
    [true, true, true],
  );
  // All gone: a second deadline aborts nothing new (and does not throw).
  list.abortAll('again');
  t.same(
    acs.map((ac) => ac.signal.reason),
    ['stop', 'stop', 'stop'],
  );
});

t.test('AbortList: an abort whose listener takes another entry out still reaches every entry', async (t) => {
  const list = new AbortList();
  const acs = Array.from({ length: 3 }, () => new AbortController());
  const entries = acs.map((ac) => list.add(ac));
  // The newest is aborted first; its listener takes out the one after it in the list.
  acs[2].signal.addEventListener('abort', () => list.delete(entries[1]));
  list.abortAll('stop');
  t.same(
    acs.map((ac) => ac.signal.aborted),
    [true, true, true],
  );
});

t.test('AbortList: a list emptied and filled again', async (t) => {
  const list = new AbortList();
  const a = new AbortController();
  list.delete(list.add(a));
  const b = new AbortController();
  list.add(b);
  list.abortAll('x');
  t.notOk(a.signal.aborted, 'the one that left is not aborted');
  t.ok(b.signal.aborted);
});

t.test('followRequest: the attempt aborts with the request, with its reason', async (t) => {
  const request = new AbortController();
  const attempt = new AbortController();
  followRequest(request.signal, attempt);
  t.notOk(attempt.signal.aborted);
  const reason = new Error('client left');
  request.abort(reason);
  t.ok(attempt.signal.aborted);
  t.equal(attempt.signal.reason, reason);
});

t.test('followRequest: a request aborted before the attempt started aborts it at once', async (t) => {
  const request = new AbortController();
  request.abort('gone');
  const attempt = new AbortController();
  const unfollow = followRequest(request.signal, attempt);
  t.ok(attempt.signal.aborted);
  t.equal(attempt.signal.reason, 'gone');
  unfollow();
});

t.test('followRequest: an attempt that ended stops following', async (t) => {
  const request = new AbortController();
  const attempt = new AbortController();
  const unfollow = followRequest(request.signal, attempt);
  unfollow();
  request.abort('later');
  t.notOk(attempt.signal.aborted, 'a failed attempt left behind is not aborted again by the client leaving');
});

// The access-log writer must write exactly the line pino writes for the same
// record (it exists only to be cheaper), with the same redaction.
import t from 'tap';
import { Writable } from 'node:stream';
import pino from 'pino';
import { createLogger, accessLogWriter, redactCopy } from '../src/log.js';

function capture() {
  const lines: string[] = [];
  const dest = new Writable({
    write(chunk, _enc, cb) {
      lines.push(chunk.toString());
      cb();
    },
  });
  return { lines, dest: dest as unknown as pino.DestinationStream };
}
const withoutTime = (line: string) => JSON.parse(line, (k, v) => (k === 'time' ? undefined : v));

t.test('the same line as pino, field for field and in the same order', async (t) => {
  const viaPino = capture();
  const viaWriter = capture();
  const a = createLogger('info', viaPino.dest);
  const b = createLogger('info', viaWriter.dest);
  const write = accessLogWriter(b);
  const records: Record<string, unknown>[] = [
    { request_id: 'r1', method: 'POST', path: '/v1/chat/completions', status: 200, latency_ms: 1.25, key_name: 'app', usage: { input: 3, output: 4, total: 7 } },
    { request_id: 'r2', method: 'POST', path: '/v1/x', status: 400, latency_ms: 0, error: 'invalid_json', note: 'quote " and \\ and \n newline, ünïcode' },
    // A plugin that put headers and a provider config in the record: censored, and the originals untouched.
    { request_id: 'r3', headers: { authorization: 'Bearer sk-secret-1', 'x-api-key': 'sk-secret-2', accept: '*/*' }, provider: { api_key: 'sk-secret-3', name: 'p' }, api_key: 'sk-secret-4' },
  ];
  for (const rec of records) {
    a.info(rec, 'request');
    write(rec);
  }
  a.flush();
  t.equal(viaWriter.lines.length, records.length);
  for (let i = 0; i < records.length; i++) {
    t.equal(JSON.stringify(withoutTime(viaWriter.lines[i])), JSON.stringify(withoutTime(viaPino.lines[i])), `record ${i + 1} identical`);
    t.match(viaWriter.lines[i], /^\{"level":"info","time":"\d{4}-\d\d-\d\dT[\d:.]+Z",/, 'level and ISO time first');
    t.ok(viaWriter.lines[i].endsWith('"msg":"request"}\n'));
  }
  t.notMatch(viaWriter.lines.join(''), /sk-secret/, 'no secret in any line');
  const r3 = records[2] as { headers: Record<string, string>; provider: Record<string, string> };
  t.equal(r3.headers.authorization, 'Bearer sk-secret-1', "the plugin's own objects are not changed");
  t.equal(r3.provider.api_key, 'sk-secret-3');
});

t.test('bindings of a child logger, the log level, and records JSON cannot take', async (t) => {
  const c = capture();
  const root = createLogger('info', c.dest);
  accessLogWriter(root.child({ worker: 2 }))({ request_id: 'r' });
  t.same(withoutTime(c.lines[0]), { level: 'info', worker: 2, request_id: 'r', msg: 'request' });
  const quiet = createLogger('warn', c.dest);
  accessLogWriter(quiet)({ request_id: 'never' });
  t.equal(c.lines.length, 1, 'below the level: nothing written');
  const cyclic: Record<string, unknown> = { request_id: 'cyc' };
  cyclic.self = cyclic;
  accessLogWriter(root)(cyclic);
  t.equal(c.lines.length, 2, 'a cycle still gives a line (through pino)');
  t.match(c.lines[1], /"request_id":"cyc"/);
});

t.test('redactCopy leaves a record without secrets as it is', async (t) => {
  const rec = { a: 1, headers: { accept: 'x' } };
  t.equal(redactCopy(rec), rec, 'same object, nothing copied');
});

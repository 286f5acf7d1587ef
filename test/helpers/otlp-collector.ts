// A strict OpenTelemetry collector's OTLP/HTTP traces endpoint for the tests:
// it takes `POST /v1/traces` in either encoding (application/x-protobuf or
// application/json, https://opentelemetry.io/docs/specs/otlp/#otlphttp) and
// keeps each export as OTLP/JSON (ids in hex, 64-bit integers as decimal
// strings, a span's status always present), so that the tests read spans the
// same way whichever encoding the gateway sent. A protobuf export is decoded
// here, independently of the gateway's encoder, against the field numbers and
// wire types of opentelemetry/proto (collector/trace/v1/trace_service.proto,
// trace/v1/trace.proto, common/v1/common.proto, resource/v1/resource.proto):
// an unknown field, a wrong wire type, an id of the wrong length or a
// truncated message is answered 400 and recorded as refused.
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface OtlpExport {
  contentType: string;
  bytes: number;
  body: { resourceSpans: any[] };
}

export interface OtlpCollector {
  url: string;
  exports: OtlpExport[];
  /** Why each refused export was refused. */
  refused: string[];
  /** Answer the next exports with this status (0: accept). */
  status: number;
  /** While set, answers wait for it (an export that takes its time). */
  hold?: Promise<void>;
  close(): Promise<void>;
}

type Field = { kind: 'message'; of: Schema; repeated?: boolean } | { kind: 'string' | 'bytes16' | 'bytes8' | 'fixed64' | 'double' | 'varint' | 'bool' | 'int64' };
type Schema = Record<number, [string, Field]>;

const KEY_VALUE: Schema = {};
const ANY_VALUE: Schema = {
  1: ['stringValue', { kind: 'string' }],
  2: ['boolValue', { kind: 'bool' }],
  3: ['intValue', { kind: 'int64' }],
  4: ['doubleValue', { kind: 'double' }],
};
Object.assign(KEY_VALUE, { 1: ['key', { kind: 'string' }], 2: ['value', { kind: 'message', of: ANY_VALUE }] });
const ATTRS = { kind: 'message', of: KEY_VALUE, repeated: true } as const;
const STATUS: Schema = { 2: ['message', { kind: 'string' }], 3: ['code', { kind: 'varint' }] };
const SPAN: Schema = {
  1: ['traceId', { kind: 'bytes16' }],
  2: ['spanId', { kind: 'bytes8' }],
  4: ['parentSpanId', { kind: 'bytes8' }],
  5: ['name', { kind: 'string' }],
  6: ['kind', { kind: 'varint' }],
  7: ['startTimeUnixNano', { kind: 'fixed64' }],
  8: ['endTimeUnixNano', { kind: 'fixed64' }],
  9: ['attributes', ATTRS],
  15: ['status', { kind: 'message', of: STATUS }],
};
const SCOPE: Schema = { 1: ['name', { kind: 'string' }], 2: ['version', { kind: 'string' }] };
const SCOPE_SPANS: Schema = { 1: ['scope', { kind: 'message', of: SCOPE }], 2: ['spans', { kind: 'message', of: SPAN, repeated: true }] };
const RESOURCE: Schema = { 1: ['attributes', ATTRS] };
const RESOURCE_SPANS: Schema = { 1: ['resource', { kind: 'message', of: RESOURCE }], 2: ['scopeSpans', { kind: 'message', of: SCOPE_SPANS, repeated: true }] };
const REQUEST: Schema = { 1: ['resourceSpans', { kind: 'message', of: RESOURCE_SPANS, repeated: true }] };

/** A protobuf message as an object of its fields (OTLP/JSON's names and value forms); throws on anything off the schema. */
export function decodeProto(buf: Buffer, schema: Schema = REQUEST): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  let at = 0;
  const varint = (): bigint => {
    let v = 0n;
    for (let shift = 0n; ; shift += 7n) {
      if (at >= buf.length) throw new Error('truncated varint');
      if (shift > 63n) throw new Error('varint too long');
      const b = buf[at++];
      v |= BigInt(b & 0x7f) << shift;
      if (b < 0x80) return v;
    }
  };
  while (at < buf.length) {
    const tag = Number(varint());
    const num = tag >> 3;
    const wire = tag & 7;
    const f = schema[num];
    if (!f) throw new Error(`unknown field ${num}`);
    const [name, type] = f;
    const expect = type.kind === 'fixed64' || type.kind === 'double' ? 1 : type.kind === 'varint' || type.kind === 'bool' || type.kind === 'int64' ? 0 : 2;
    if (wire !== expect) throw new Error(`field ${name}: wire type ${wire}, expected ${expect}`);
    let value: unknown;
    if (wire === 0) {
      const v = varint();
      if (type.kind === 'bool' && v > 1n) throw new Error(`${name}: not a bool`);
      value = type.kind === 'bool' ? v === 1n : type.kind === 'int64' ? BigInt.asIntN(64, v).toString() : Number(v);
    } else if (wire === 1) {
      if (at + 8 > buf.length) throw new Error(`${name}: truncated`);
      value = type.kind === 'double' ? buf.readDoubleLE(at) : buf.readBigUInt64LE(at).toString();
      at += 8;
    } else {
      const len = Number(varint());
      if (at + len > buf.length) throw new Error(`${name}: length ${len} past the end`);
      const part = buf.subarray(at, at + len);
      at += len;
      if (type.kind === 'string') value = new TextDecoder('utf-8', { fatal: true }).decode(part);
      else if (type.kind === 'bytes16' || type.kind === 'bytes8') {
        if (part.length !== (type.kind === 'bytes16' ? 16 : 8)) throw new Error(`${name}: ${part.length} bytes`);
        value = part.toString('hex');
      } else if (type.kind === 'message') value = decodeProto(part, type.of);
      else throw new Error(`${name}: unexpected length-delimited`);
    }
    if (type.kind === 'message' && type.repeated) ((out[name] ??= []) as unknown[]).push(value);
    else {
      if (name in out) throw new Error(`${name} twice`);
      out[name] = value;
    }
  }
  // A span's unset status is protobuf's default (left out); OTLP/JSON writers send {"code":0}.
  if (schema === SPAN) out.status = { code: 0, ...(out.status as object | undefined) };
  if (schema === STATUS && out.code === undefined) out.code = 0;
  return out;
}

export async function startOtlpCollector(): Promise<OtlpCollector> {
  const c: OtlpCollector = {
    url: '',
    exports: [],
    refused: [],
    status: 0,
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (d: Buffer) => chunks.push(d));
    req.on('end', () => void (c.hold ?? Promise.resolve()).then(() => {
      const raw = Buffer.concat(chunks);
      const type = String(req.headers['content-type'] ?? '');
      const answer = (status: number, body: string) => {
        res.writeHead(status, { 'content-type': type.startsWith('application/json') ? 'application/json' : 'application/x-protobuf' });
        res.end(body);
      };
      if (req.method !== 'POST' || req.url !== '/v1/traces') return answer(404, '');
      if (c.status) return answer(c.status, '');
      try {
        let body: OtlpExport['body'];
        if (type === 'application/x-protobuf') body = decodeProto(raw) as OtlpExport['body'];
        else if (type === 'application/json') body = JSON.parse(raw.toString('utf8'));
        else throw new Error(`content-type ${type}`);
        if (!Array.isArray(body.resourceSpans) || !body.resourceSpans.length) throw new Error('no resourceSpans');
        c.exports.push({ contentType: type, bytes: raw.length, body });
        answer(200, type === 'application/json' ? '{}' : '');
      } catch (err) {
        c.refused.push((err as Error).message);
        answer(400, '');
      }
    }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  c.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return c;
}

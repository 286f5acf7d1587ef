// A provider plugin for a made-up API ("acme"), loaded by path in
// test/provider-contract.test.ts, that uses every part of the provider
// contract through the published API only (`model-gateway/plugin`): its own
// provider-block schema with environment defaults, a base URL derived from the
// region, credentials that are not one API key, an async authorize step that
// signs the final body bytes with an HMAC and adds a cached bearer token, a
// stream framing of its own (length-prefixed binary frames with a CRC32, like
// the AWS event stream) or newline-delimited JSON, and an error mapper that
// reads a header.
import { createHmac } from 'node:crypto';
import { crc32 } from 'node:zlib';
import * as v from 'valibot';
import {
  upstreamJson,
  upstreamEvents,
  joinUrl,
  ndjsonFraming,
  MappedEvents,
  UpstreamError,
  parseEventJson,
  statusType,
  type ProviderPlugin,
  type ProviderCall,
  type ChatRequest,
  type ChatCompletion,
  type ChatChunk,
  type ErrorMapper,
  type Framing,
  type FrameParser,
  type SSEEvent,
  type Authorizer,
} from 'model-gateway/plugin';

/** acme's own keys of a provider block. */
const AcmeOptions = v.strictObject({
  key_id: v.pipe(v.string(), v.minLength(3, 'must be at least 3 characters')),
  secret: v.optional(v.string()),
  /** Where the regional hosts live: the base URL is `{host}/{region}` unless base_url is given. */
  host: v.optional(v.pipe(v.string(), v.url('must be an absolute URL'))),
  framing: v.optional(v.picklist(['frames', 'ndjson']), 'frames'),
});
type Options = v.InferOutput<typeof AcmeOptions>;

/**
 * acme's frames: a 4-byte big-endian length of the whole frame, the JSON
 * payload, a 4-byte CRC32 of everything before it. A frame may be split
 * across TCP chunks; a bad CRC is a broken stream.
 */
export class AcmeFrameParser implements FrameParser {
  private buf: Buffer = Buffer.alloc(0);
  push(chunk: Buffer, out: SSEEvent[]): void {
    this.buf = this.buf.length ? Buffer.concat([this.buf, chunk]) : chunk;
    while (this.buf.length >= 4) {
      const len = this.buf.readUInt32BE(0);
      if (len < 8) throw new Error(`frame length ${len} is too short`);
      if (this.buf.length < len) break;
      const frame = this.buf.subarray(0, len);
      this.buf = this.buf.subarray(len);
      if (crc32(frame.subarray(0, len - 4)) !== frame.readUInt32BE(len - 4)) throw new Error('frame CRC mismatch');
      const payload = JSON.parse(frame.subarray(4, len - 4).toString('utf8')) as { type: string };
      out.push({ event: payload.type, data: JSON.stringify(payload), headers: { length: len } });
    }
  }
  end(_out: SSEEvent[]): void {
    if (this.buf.length) throw new Error(`the stream ended inside a frame (${this.buf.length} bytes left)`);
  }
}

export const acmeFraming: Framing = { name: 'acme-frames', contentTypes: ['application/x-acme-frames'], parser: () => new AcmeFrameParser() };

/** acme's errors: the kind is in the `x-acme-error-type` header, the body is plain text. */
export const acmeError: ErrorMapper = (status, _body, text, headers) => {
  const kind = String(headers?.['x-acme-error-type'] ?? '');
  const mapped = kind === 'Throttling' ? 429 : kind === 'Validation' ? 400 : status;
  return { error: { message: `${kind || 'Error'}: ${text.slice(0, 200)}`, type: statusType(mapped), param: null, code: kind || null } };
};

interface Token {
  value: string;
  pending?: Promise<string>;
}

/** Sign the final bytes and add the bearer token, fetched once and shared by concurrent calls. */
const authorize: Authorizer = async (req, call) => {
  const o = call.provider.options as Options;
  const key = `acme-token:${call.provider.name}`;
  let tok = call.shared.get(key) as Token | undefined;
  if (!tok) {
    const t: Token = { value: '' };
    t.pending = upstreamJson<{ token: string }>(call, {
      url: joinUrl(call.provider.base_url, '/token'),
      headers: { 'x-acme-key-id': o.key_id },
      body: { secret: o.secret },
      mapError: acmeError,
      authorize: null,
    }).then(
      (r) => {
        t.value = r.token;
        t.pending = undefined;
        return r.token;
      },
      (err) => {
        call.shared.delete(key);
        throw err;
      },
    );
    call.shared.set(key, t);
    tok = t;
  }
  const token = tok.pending ? await tok.pending : tok.value;
  req.headers.authorization = `Bearer ${token}`;
  req.headers['x-acme-signature'] = createHmac('sha256', o.secret!).update(req.body ?? '').digest('hex');
};

function toAcme(r: ChatRequest, stream: boolean): Record<string, unknown> {
  return {
    model: r.model,
    stream,
    turns: r.messages.map((m) => ({ speaker: m.role, text: typeof m.content === 'string' ? m.content : (m.content ?? []).map((p) => (p.type === 'text' ? p.text : '')).join('') })),
  };
}

function chunk(id: string, model: string, delta: ChatChunk['choices'][number]['delta'], finish: ChatChunk['choices'][number]['finish_reason'] = null): ChatChunk {
  return { id, object: 'chat.completion.chunk', created: Math.floor(Date.now() / 1000), model, choices: [{ index: 0, delta, finish_reason: finish, logprobs: null }] } as ChatChunk;
}

export default function acme(): ProviderPlugin {
  return {
    kind: 'provider',
    name: 'acme',
    families: {
      acme: {
        env: { secret: 'ACME_SECRET', region: 'ACME_REGION', key_id: 'ACME_KEY_ID' },
        defaults: { region: 'eu' },
        schema: AcmeOptions,
        secrets: ['secret'],
        baseUrl: (p) => ((p.options as Options).host ? `${(p.options as Options).host}/${p.region}` : undefined),
        missingCredentials: (p) => ((p.options as Options).secret ? undefined : 'no acme secret (ACME_SECRET)'),
      },
    },
    authorize,
    async chat(call: ProviderCall<ChatRequest>) {
      const o = call.provider.options as Options;
      const req = { url: joinUrl(call.provider.base_url, '/generate'), headers: {}, body: toAcme(call.request, call.stream), mapError: acmeError };
      if (!call.stream) {
        const r = await upstreamJson<{ id: string; text: string; tokens: { in: number; out: number } }>(call, req);
        const body: ChatCompletion = {
          id: r.id,
          object: 'chat.completion',
          created: Math.floor(Date.now() / 1000),
          model: call.request.model,
          choices: [{ index: 0, message: { role: 'assistant', content: r.text, refusal: null }, finish_reason: 'stop', logprobs: null }],
          usage: { prompt_tokens: r.tokens.in, completion_tokens: r.tokens.out, total_tokens: r.tokens.in + r.tokens.out, prompt_tokens_details: { cached_tokens: 0 }, completion_tokens_details: { reasoning_tokens: 0 } },
        } as ChatCompletion;
        return { kind: 'json', body };
      }
      const events = await upstreamEvents(call, { ...req, framing: o.framing === 'ndjson' ? ndjsonFraming : acmeFraming });
      const model = call.request.model;
      const usage = !!call.request.stream_options?.include_usage;
      let id = '';
      return {
        kind: 'stream',
        chunks: new MappedEvents<ChatChunk>(events, {
          step(ev, out) {
            const e = parseEventJson<{ type: string; id?: string; text?: string; message?: string; tokens?: { in: number; out: number } }>(ev.data);
            if (e.type === 'start') {
              id = e.id ?? 'acme';
              out.push(chunk(id, model, { role: 'assistant', content: '' }));
            } else if (e.type === 'text') out.push(chunk(id, model, { content: e.text ?? '' }));
            else if (e.type === 'error') throw new UpstreamError(500, { message: e.message ?? 'acme stream error', type: 'api_error', param: null, code: null });
            else if (e.type === 'end') {
              out.push(chunk(id, model, {}, 'stop'));
              if (usage && e.tokens)
                out.push({ id, object: 'chat.completion.chunk', created: Math.floor(Date.now() / 1000), model, choices: [], usage: { prompt_tokens: e.tokens.in, completion_tokens: e.tokens.out, total_tokens: e.tokens.in + e.tokens.out } } as unknown as ChatChunk);
              return true;
            }
            return false;
          },
          end() {
            throw new UpstreamError(502, { message: 'the acme stream ended without its end event', type: 'api_error', param: null, code: null });
          },
        }),
      };
    },
  };
}

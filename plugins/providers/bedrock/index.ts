// The Amazon Bedrock provider plugin: family `bedrock`, the Converse API
// (POST {base}/model/{modelId}/converse and /converse-stream,
// https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_Converse.html).
// Chat requests are translated from the IR (request.ts) and the answers back
// (response.ts, stream.ts over the AWS event-stream framing of
// eventstream.ts); errors keep the status their x-amzn-errortype means
// (errors.ts). Requests are signed with SigV4 in the authorize step, after
// the body is serialised, or carry a Bedrock API key as a Bearer token.
// The Responses API reaches Bedrock through chat (no same-API hook).
import * as v from 'valibot';
import type { SignatureV4 } from '@smithy/signature-v4';
import type { ProviderPlugin, ProviderCall, ChatOutcome } from '../../../src/plugin.js';
import type { ChatRequest } from '../../../src/types.js';
import type { ProviderBlock } from '../../../src/config/load.js';
import { upstreamJson, upstreamEvents, joinUrl, type Authorizer, type OutgoingRequest } from '../../../src/provider/http.js';
import { toConverse } from './request.js';
import { fromConverse } from './response.js';
import { converseChunks } from './stream.js';
import { bedrockError, withShapeStatus } from './errors.js';
import { eventStreamFraming } from './eventstream.js';
import type { ConverseResponse } from './wire.js';

/** The bedrock family's own keys of a provider block (the Bedrock API key is the core `api_key`). */
const BedrockOptions = v.strictObject({
  access_key_id: v.optional(v.pipe(v.string(), v.regex(/^[A-Z0-9]{16,128}$/, 'must be an AWS access key id (AKIA… or ASIA…)'))),
  secret_access_key: v.optional(v.pipe(v.string(), v.minLength(1))),
  session_token: v.optional(v.string()),
});
type Options = v.InferOutput<typeof BedrockOptions>;

/** SigV4 credentials of a provider, or undefined when it authenticates with an API key (or has nothing). */
function keyPair(o: Options): { accessKeyId: string; secretAccessKey: string; sessionToken?: string } | undefined {
  if (!o.access_key_id || !o.secret_access_key) return undefined;
  return { accessKeyId: o.access_key_id, secretAccessKey: o.secret_access_key, ...(o.session_token ? { sessionToken: o.session_token } : {}) };
}

/** RFC 3986 path segment, as the AWS SDK encodes the model id (`:` -> %3A, `/` of an ARN -> %2F). */
export function encodeModelId(id: string): string {
  return encodeURIComponent(id).replace(/[!'()*]/g, (c) => '%' + c.charCodeAt(0).toString(16).toUpperCase());
}

export function converseUrl(base: string, modelId: string, stream: boolean): string {
  return joinUrl(base, `/model/${encodeModelId(modelId)}/${stream ? 'converse-stream' : 'converse'}`);
}

/**
 * A Bedrock API key goes as `Authorization: Bearer` (https://docs.aws.amazon.com/bedrock/latest/userguide/api-keys.html);
 * otherwise the request is signed with SigV4 over its final bytes, service `bedrock`.
 * One signer per provider (it caches the day's signing key).
 */
export const authorize: Authorizer = async (req: OutgoingRequest, call: ProviderCall<unknown>) => {
  if (call.provider.api_key) {
    req.headers.authorization = `Bearer ${call.provider.api_key}`;
    return;
  }
  const creds = keyPair(call.provider.options as Options);
  if (!creds) throw new Error('the bedrock provider has no AWS credentials');
  const key = `bedrock-signer:${call.provider.name}`;
  let signer = call.shared.get(key) as SignatureV4 | undefined;
  if (!signer) {
    // The AWS signing code loads with the first signed request, not with the gateway (docs/performance.md, "Start-up").
    const [{ SignatureV4 }, { Hash }] = await Promise.all([import('@smithy/signature-v4'), import('@smithy/hash-node')]);
    signer = new SignatureV4({ service: 'bedrock', region: call.provider.region, credentials: creds, sha256: Hash.bind(null, 'sha256') });
    call.shared.set(key, signer);
  }
  const url = new URL(req.url);
  const query: Record<string, string> = {};
  url.searchParams.forEach((value, name) => (query[name] = value));
  const signed = await signer.sign({
    method: req.method,
    protocol: url.protocol,
    hostname: url.hostname,
    port: url.port ? Number(url.port) : undefined,
    // As sent: the model id encoded once; the signer encodes it again for the canonical request.
    path: url.pathname,
    query,
    headers: { ...req.headers, host: url.host },
    body: req.body,
  });
  // The transport sends host from the URL itself; everything else the signer added goes out as signed.
  for (const [name, value] of Object.entries(signed.headers)) if (name !== 'host') req.headers[name] = value;
};

export default function bedrock(): ProviderPlugin {
  return {
    kind: 'provider',
    name: 'bedrock',
    families: {
      bedrock: {
        env: {
          api_key: 'AWS_BEARER_TOKEN_BEDROCK',
          base_url: 'BEDROCK_BASE_URL',
          region: 'AWS_REGION',
          access_key_id: 'AWS_ACCESS_KEY_ID',
          secret_access_key: 'AWS_SECRET_ACCESS_KEY',
          session_token: 'AWS_SESSION_TOKEN',
        },
        defaults: { region: 'us-east-1' },
        schema: BedrockOptions,
        secrets: ['secret_access_key', 'session_token'],
        baseUrl: (p: ProviderBlock) => `https://bedrock-runtime.${p.region}.amazonaws.com`,
        missingCredentials: (p: ProviderBlock) =>
          p.api_key || keyPair(p.options as Options) ? undefined : 'no AWS credentials (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_BEARER_TOKEN_BEDROCK)',
      },
    },
    authorize,
    async chat(call: ProviderCall<ChatRequest>): Promise<ChatOutcome> {
      const modelId = call.request.model;
      const { body, plan } = toConverse(call.request, modelId, call.model, call.note);
      const o = { url: converseUrl(call.provider.base_url, modelId, call.stream), headers: {}, body, mapError: bedrockError };
      try {
        if (call.stream) return { kind: 'stream', chunks: converseChunks(await upstreamEvents(call, { ...o, framing: eventStreamFraming }), plan, modelId) };
        return { kind: 'json', body: fromConverse(await upstreamJson<ConverseResponse>(call, o), modelId) };
      } catch (err) {
        throw withShapeStatus(err);
      }
    },
  };
}

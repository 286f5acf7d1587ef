// The Vertex AI mock (test/mocks/vertex.ts) proved faithful with Google's and
// Anthropic's official clients: @google/genai with `vertexai: true`
// (generateContent, generateContentStream, countTokens, cached contents,
// Imagen), its token taken by google-auth-library's own JWT client from the
// mock's token endpoint (the JWT bearer grant, signature checked against the
// key's public half), and @anthropic-ai/vertex-sdk on rawPredict /
// streamRawPredict. Then the token endpoint's refusals, and the gateway's own
// token code (plugins/providers/vertex/token.ts) against it: signing, caching, one
// refresh for many waiters, refresh before expiry, timeout, refusal mapping.
import t from 'tap';
import { GoogleGenAI } from '@google/genai';
import { AnthropicVertex } from '@anthropic-ai/vertex-sdk';
import { JWT, gaxios } from 'google-auth-library';
import { startVertexMock, GOOGLE_TOKEN_URL, CLOUD_PLATFORM_SCOPE, JWT_BEARER, type ServiceAccountKey } from './mocks/vertex.js';
import { TokenSource, parseServiceAccount, readServiceAccount, signAssertion, CredentialsError, type TokenPost } from '../plugins/providers/vertex/token.js';
import { UpstreamError } from '../src/provider/errors.js';
import { TransportError } from '../src/upstream/errors.js';

const mock = await startVertexMock({ minCacheTokens: 50 });
t.teardown(() => mock.close());
const LOCATION = 'us-central1';

/** google-auth-library's JWT client, its token request (to Google's URL, hard-coded) sent to the mock instead. */
function jwtClient(key: ServiceAccountKey): JWT {
  const transporter = new gaxios.Gaxios();
  transporter.interceptors.request.add({
    resolved: async (config) => {
      if (String(config.url) === GOOGLE_TOKEN_URL) config.url = new URL(mock.tokenUrl);
      return config;
    },
  });
  return new JWT({ email: key.client_email, key: key.private_key, keyId: key.private_key_id, scopes: [CLOUD_PLATFORM_SCOPE], transporter });
}

/** A raw form POST to the token endpoint. */
async function grant(form: Record<string, string>, contentType = 'application/x-www-form-urlencoded') {
  const res = await fetch(mock.tokenUrl, { method: 'POST', headers: { 'content-type': contentType }, body: new URLSearchParams(form).toString() });
  return { status: res.status, body: (await res.json()) as any };
}

/** The mock's token endpoint through node's fetch (the tests' TokenPost; the gateway's goes through its transport). */
const fetchPost: TokenPost = async (url, form, signal) => {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: form, signal });
  return { status: res.status, text: await res.text() };
};

t.test('@google/genai (vertexai: true) against the mock, token from google-auth-library', async (t) => {
  const before = mock.tokenRequests;
  const ai = new GoogleGenAI({
    vertexai: true,
    project: mock.project,
    location: LOCATION,
    // The gateway speaks v1; the SDK's default is v1beta1 (the mock serves both).
    httpOptions: { baseUrl: mock.url, apiVersion: 'v1' },
    googleAuthOptions: { authClient: jwtClient(mock.serviceAccount) },
  });
  const r = await ai.models.generateContent({ model: 'gemini-2.5-flash', contents: 'hello vertex', config: { systemInstruction: 'Be brief.', temperature: 0.2 } });
  t.equal(r.text, 'Echo: hello vertex');
  t.ok(r.usageMetadata?.promptTokenCount, 'usage metadata');
  const gen = mock.requests.at(-1)!;
  t.equal(gen.path, `/v1/projects/${mock.project}/locations/${LOCATION}/publishers/google/models/gemini-2.5-flash:generateContent`);
  t.match(gen.headers.authorization, /^Bearer ya29\./);

  let text = '';
  let chunks = 0;
  for await (const c of await ai.models.generateContentStream({ model: 'gemini-2.5-pro', contents: 'stream me please' })) {
    text += c.text ?? '';
    chunks++;
  }
  t.equal(text, 'Echo: stream me please');
  t.ok(chunks > 1, 'several SSE events');
  t.equal(mock.requests.at(-1)!.query.get('alt'), 'sse');

  const count = await ai.models.countTokens({ model: 'gemini-2.5-flash', contents: 'count these tokens' });
  t.ok(count.totalTokens! > 0, 'countTokens');

  // Cached contents on Vertex's own path; the SDK sends the full publisher model name.
  const cache = await ai.caches.create({ model: 'gemini-2.5-flash', config: { contents: [{ role: 'user', parts: [{ text: 'A long shared document. '.repeat(40) }] }], systemInstruction: 'Answer from the document.', ttl: '300s' } });
  t.match(cache.name, new RegExp(`^projects/${mock.projectNumber}/locations/${LOCATION}/cachedContents/\\d+$`), 'the name carries the project number');
  t.equal(mock.requests.at(-1)!.path, `/v1/projects/${mock.project}/locations/${LOCATION}/cachedContents`);
  const cached = await ai.models.generateContent({ model: 'gemini-2.5-flash', contents: 'what does it say?', config: { cachedContent: cache.name } });
  t.equal(cached.text, 'Echo: what does it say?');
  t.ok(cached.usageMetadata?.cachedContentTokenCount, 'cached tokens reported');
  const got = await ai.caches.get({ name: cache.name! });
  t.equal(got.name, cache.name);
  await ai.caches.delete({ name: cache.name! });
  await t.rejects(ai.models.generateContent({ model: 'gemini-2.5-flash', contents: 'again', config: { cachedContent: cache.name } }), /CachedContent not found/);

  // Imagen through :predict.
  const images = await ai.models.generateImages({ model: 'imagen-4.0-generate-001', prompt: 'a red square', config: { numberOfImages: 2, aspectRatio: '4:3' } });
  t.equal(images.generatedImages?.length, 2);
  t.match(mock.requests.at(-1)!.path, /publishers\/google\/models\/imagen-4\.0-generate-001:predict$/);

  // The mock rejects what Vertex rejects.
  await t.rejects(ai.models.generateContent({ model: 'gemini-9-nope', contents: 'x' }), /not found/);
  await t.rejects(ai.models.generateContent({ model: 'gemini-2.5-flash', contents: 'x', config: { thinkingConfig: { thinkingBudget: 999999 } } }), /thinking budget/);
  t.equal(mock.tokenRequests - before, 1, 'one token for every call of the client');
});

t.test('the generate calls check the bearer token and the project', async (t) => {
  const call = (headers: Record<string, string>, project = mock.project) =>
    fetch(`${mock.url}/v1/projects/${project}/locations/${LOCATION}/publishers/google/models/gemini-2.5-flash:generateContent`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify({ contents: [{ role: 'user', parts: [{ text: 'hi' }] }] }),
    });
  let res = await call({});
  t.equal(res.status, 401);
  t.match(((await res.json()) as any).error, { status: 'UNAUTHENTICATED', message: /missing required authentication/ });
  res = await call({ authorization: 'Bearer ya29.made-up' });
  t.equal(res.status, 401);
  const { body } = await grant({ grant_type: JWT_BEARER, assertion: signAssertion(parseServiceAccount(JSON.stringify(mock.serviceAccount), 'key')) });
  res = await call({ authorization: `Bearer ${body.access_token}` });
  t.equal(res.status, 200);
  res = await call({ authorization: `Bearer ${body.access_token}` }, 'someone-elses-project');
  t.equal(res.status, 403);
  res = await call({ authorization: `Bearer ${body.access_token}` }, mock.projectNumber);
  t.equal(res.status, 200, 'the project number names the project too');
  mock.revokeTokens();
  res = await call({ authorization: `Bearer ${body.access_token}` });
  t.equal(res.status, 401, 'a revoked token is refused');
});

t.test('@anthropic-ai/vertex-sdk on rawPredict and streamRawPredict', async (t) => {
  const sa = parseServiceAccount(JSON.stringify(mock.serviceAccount), 'key');
  const { body } = await grant({ grant_type: JWT_BEARER, assertion: signAssertion(sa) });
  const client = new AnthropicVertex({ baseURL: `${mock.url}/v1`, region: LOCATION, projectId: mock.project, authClient: jwtClient(mock.serviceAccount), maxRetries: 0 });
  const msg = await client.messages.create({ model: 'claude-sonnet-4-5@20250929', max_tokens: 100, messages: [{ role: 'user', content: 'hello claude' }] });
  t.equal((msg.content[0] as any).text, 'Echo: hello claude');
  t.equal(msg.model, 'claude-sonnet-4-5-20250929');
  const rec = mock.requests.at(-1)!;
  t.match(rec.path, /publishers\/anthropic\/models\/claude-sonnet-4-5@20250929:rawPredict$/);
  t.equal(rec.body.anthropic_version, '2026-10-21', 'the SDK sends its API version in the body');
  t.notOk('model' in rec.body, 'no model in the body');

  const stream = client.messages.stream({ model: 'claude-haiku-4-5@20251001', max_tokens: 100, messages: [{ role: 'user', content: 'stream claude' }] });
  let text = '';
  stream.on('text', (d) => (text += d));
  const final = await stream.finalMessage();
  t.equal(text, 'Echo: stream claude');
  t.equal(final.stop_reason, 'end_turn');
  t.match(mock.requests.at(-1)!.path, /:streamRawPredict$/);

  const count = await client.messages.countTokens({ model: 'claude-sonnet-4-5@20250929', messages: [{ role: 'user', content: 'count me' }], system: 'Be brief.' });
  t.ok(count.input_tokens > 0, 'countTokens');
  t.match(mock.requests.at(-1)!.path, /publishers\/anthropic\/models\/count-tokens:rawPredict$/);
  t.equal(mock.requests.at(-1)!.body.model, 'claude-sonnet-4-5@20250929', 'the model stays in the count body');
  await t.rejects(client.messages.countTokens({ model: 'claude-9@2030', messages: [{ role: 'user', content: 'x' }] }), { status: 400 } as any);

  // Anthropic's own checks still apply, in Anthropic's error shape.
  await t.rejects(client.messages.create({ model: 'claude-sonnet-4-5@20250929', max_tokens: 100, messages: [{ role: 'assistant', content: 'x' }, { role: 'assistant', content: 'y' }] }), { status: 400 } as any);
  await t.rejects(client.messages.create({ model: 'claude-9@2030', max_tokens: 10, messages: [{ role: 'user', content: 'x' }] }), { status: 404 } as any);

  // What the SDK never sends: a model in the body, another version.
  const raw = (b: unknown) =>
    fetch(`${mock.url}/v1/projects/${mock.project}/locations/${LOCATION}/publishers/anthropic/models/claude-sonnet-4-5@20250929:rawPredict`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${body.access_token}` },
      body: JSON.stringify(b),
    });
  const base = { max_tokens: 10, messages: [{ role: 'user', content: 'x' }] };
  let res = await raw({ ...base, anthropic_version: 'vertex-2023-10-16', model: 'claude-sonnet-4-5' });
  t.equal(res.status, 400);
  t.match(((await res.json()) as any).error.message, /^model: Extra inputs/);
  res = await raw({ ...base, anthropic_version: '2023-06-01' });
  t.match(((await res.json()) as any).error.message, /anthropic_version/);
  res = await raw({ ...base, anthropic_version: 'vertex-2023-10-16', stream: true });
  t.equal(res.status, 400, 'a stream asks for streamRawPredict');
});

t.test('the token endpoint refuses what Google refuses', async (t) => {
  const sa = parseServiceAccount(JSON.stringify(mock.serviceAccount), 'key');
  const ok = await grant({ grant_type: JWT_BEARER, assertion: signAssertion(sa) });
  t.equal(ok.status, 200);
  t.match(ok.body, { access_token: /^ya29\./, expires_in: 3599, token_type: 'Bearer' });

  const foreign = parseServiceAccount(JSON.stringify(mock.foreignKey()), 'key');
  t.match(await grant({ grant_type: JWT_BEARER, assertion: signAssertion(foreign) }), { status: 400, body: { error: 'invalid_grant', error_description: 'Invalid JWT Signature.' } });

  const [h, c, s] = signAssertion(sa).split('.');
  const claims = JSON.parse(Buffer.from(c, 'base64url').toString());
  const forged = Buffer.from(JSON.stringify({ ...claims, iss: 'someone@else.iam.gserviceaccount.com' })).toString('base64url');
  t.match(await grant({ grant_type: JWT_BEARER, assertion: `${h}.${forged}.${s}` }), { status: 400, body: { error: 'invalid_grant' } });
  const widened = Buffer.from(JSON.stringify({ ...claims, exp: claims.exp + 60 })).toString('base64url');
  t.match(await grant({ grant_type: JWT_BEARER, assertion: `${h}.${widened}.${s}` }), { status: 400, body: { error_description: 'Invalid JWT Signature.' } }, 'claims changed after signing');

  t.match(await grant({ grant_type: JWT_BEARER, assertion: signAssertion({ ...sa, tokenUri: 'https://example.com/token' }) }), { status: 400, body: { error_description: /audience/ } });
  t.match(await grant({ grant_type: JWT_BEARER, assertion: signAssertion(sa, 'https://www.googleapis.com/auth/userinfo.email') }), { status: 400, body: { error: 'invalid_scope' } });
  t.match(await grant({ grant_type: JWT_BEARER, assertion: signAssertion(sa, CLOUD_PLATFORM_SCOPE, Date.now() - 2 * 3600_000) }), { status: 400, body: { error_description: /short-lived/ } });
  t.match(await grant({ grant_type: 'client_credentials', assertion: signAssertion(sa) }), { status: 400, body: { error: 'unsupported_grant_type' } });
  t.match(await grant({ grant_type: JWT_BEARER, assertion: 'not-a-jwt' }), { status: 400, body: { error: 'invalid_grant' } });
  t.match(await grant({ grant_type: JWT_BEARER, assertion: signAssertion(sa) }, 'application/json'), { status: 400, body: { error: 'invalid_request' } });
});

t.test('service-account key files', async (t) => {
  const file = mock.writeKeyFile();
  const sa = readServiceAccount(file);
  t.equal(sa.clientEmail, mock.serviceAccount.client_email);
  t.equal(sa.tokenUri, mock.tokenUrl, 'token_uri honoured');
  t.equal(sa.projectId, mock.project);
  const { token_uri: _omit, ...noUri } = mock.serviceAccount;
  t.equal(parseServiceAccount(JSON.stringify(noUri), 'k').tokenUri, 'https://oauth2.googleapis.com/token', "Google's token URL by default");
  t.throws(() => readServiceAccount('/nonexistent/key.json'), CredentialsError);
  t.throws(() => parseServiceAccount('{', 'k.json'), /k\.json is not JSON/);
  t.throws(() => parseServiceAccount('[]', 'k.json'), /not a JSON object/);
  t.throws(() => parseServiceAccount(JSON.stringify({ type: 'authorized_user' }), 'k.json'), /service-account key/);
  t.throws(() => parseServiceAccount(JSON.stringify({ ...mock.serviceAccount, client_email: '' }), 'k.json'), /client_email/);
  t.throws(() => parseServiceAccount(JSON.stringify({ ...mock.serviceAccount, private_key: undefined }), 'k.json'), /"private_key" is missing/);
  const err = t.throws(() => parseServiceAccount(JSON.stringify({ ...mock.serviceAccount, private_key: '-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n' }), 'k.json')) as Error;
  t.match(err.message, /not a PEM private key/);
  t.notMatch(err.message, /BEGIN/, 'the key never appears in the message');
  t.throws(() => parseServiceAccount(JSON.stringify({ ...mock.serviceAccount, token_uri: 'file:///etc/passwd' }), 'k.json'), /token_uri/);
});

t.test('TokenSource: cached, one refresh for 50 waiters, refreshed before expiry', async (t) => {
  const sa = readServiceAccount(mock.writeKeyFile());
  let clock = Date.now();
  const source = new TokenSource(sa, fetchPost, { timeoutMs: 5000, now: () => clock });
  const before = mock.tokenRequests;
  mock.fail({ pathIncludes: '/token', delayMs: 150 });
  const tokens = await Promise.all(Array.from({ length: 50 }, () => source.token()));
  t.equal(mock.tokenRequests - before, 1, 'one token request for 50 concurrent callers');
  t.equal(new Set(tokens).size, 1);
  t.equal(await source.token(), tokens[0], 'cached');
  t.equal(mock.tokenRequests - before, 1);

  // 5 minutes before the 3599 s expiry it is refreshed, while still valid upstream.
  clock += (3599 - 299) * 1000;
  const fresh = await Promise.all(Array.from({ length: 10 }, () => source.token()));
  t.equal(mock.tokenRequests - before, 2, 'refreshed once near expiry');
  t.not(fresh[0], tokens[0]);
  t.equal(new Set(fresh).size, 1);

  source.invalidate('some-other-token');
  t.equal(await source.token(), fresh[0], 'invalidating another token changes nothing');
  source.invalidate(fresh[0]);
  t.not(await source.token(), fresh[0], 'a refused token is replaced');
  t.equal(source.requests, 3);

  // A short-lived token is still used for a second before its refresh.
  mock.tokenTtlSeconds = 2;
  source.invalidate(await source.token());
  const short = await source.token();
  t.equal(await source.token(), short);
  clock += 1500;
  t.not(await source.token(), short);
  mock.tokenTtlSeconds = 3599;
});

t.test('TokenSource: timeouts, refusals, aborted waiters', async (t) => {
  const sa = readServiceAccount(mock.writeKeyFile());
  const slow = new TokenSource(sa, fetchPost, { timeoutMs: 200 });
  mock.fail({ pathIncludes: '/token', hang: true });
  t.match(await slow.token().catch((e) => e), { name: 'TransportError', code: 'ETIMEDOUT_TOKEN' });

  const refused = new TokenSource(readServiceAccount(mock.writeKeyFile(mock.foreignKey())), fetchPost, { timeoutMs: 5000 });
  const err = (await refused.token().catch((e) => e)) as UpstreamError;
  t.ok(err instanceof UpstreamError);
  t.equal(err.status, 401, 'a refused key is a provider-credential failure (fallback)');
  t.match(err.error, { code: 'provider_auth_failed', message: /invalid_grant: Invalid JWT Signature/ });
  t.notMatch(err.error.message, /PRIVATE KEY/);

  const down = new TokenSource(sa, fetchPost, { timeoutMs: 5000 });
  mock.fail({ pathIncludes: '/token', status: 503, body: { error: 'backend_error' } });
  t.match(await down.token().catch((e) => e), { status: 502, error: { code: 'provider_token_failed' } });
  mock.fail({ pathIncludes: '/token', status: 429, body: { error: 'rate_limited' } });
  t.match(await down.token().catch((e) => e), { status: 429 });
  mock.fail({ pathIncludes: '/token', rawBody: 'not json' });
  t.match(await down.token().catch((e) => e), { status: 401 });
  const broken = new TokenSource(sa, async () => {
    throw new Error('connect ECONNREFUSED');
  }, { timeoutMs: 5000 });
  t.match(await broken.token().catch((e) => e), { code: 'ETOKEN', message: /ECONNREFUSED/ });

  // A waiter whose client left stops waiting; the others still get the token.
  const shared = new TokenSource(sa, fetchPost, { timeoutMs: 5000 });
  mock.fail({ pathIncludes: '/token', delayMs: 200 });
  const ac = new AbortController();
  const leaving = shared.token(ac.signal);
  const staying = shared.token(new AbortController().signal);
  ac.abort();
  await t.rejects(leaving, TransportError);
  const token = await staying;
  t.match(token, /^ya29\./);
  shared.invalidate(token);
  const gone = new AbortController();
  gone.abort();
  await t.rejects(shared.token(gone.signal), TransportError);
});

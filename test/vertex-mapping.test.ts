// Vertex AI's pure mappings (plugins/providers/vertex), unit level: where a
// request goes (locations, the API root, Gemini and Claude model URLs, cached
// contents), the Claude bodies for rawPredict and count-tokens, the
// anthropic-beta flags Vertex serves, and error shapes. The HTTP behaviour is
// in vertex.test.ts.
import t from 'tap';
import type { NormalizationEntry } from '../src/types.js';
import { vertexRateLimitBody } from './mocks/vertex.js';
import { apiRoot, claudeUrl, claudeCountUrl, geminiSite, isClaude, locationBaseUrl, toCountRawPredict, toRawPredict, vertexBetas } from '../plugins/providers/vertex/request.js';
import { claudeOnVertexError } from '../plugins/providers/vertex/errors.js';

const place = { base: 'https://us-east5-aiplatform.googleapis.com', project: 'p-1', location: 'us-east5' };

t.test('URLs: locations, the API root, Claude on rawPredict and streamRawPredict', async (t) => {
  t.equal(locationBaseUrl('us-east5'), 'https://us-east5-aiplatform.googleapis.com');
  t.equal(locationBaseUrl('global'), 'https://aiplatform.googleapis.com');
  t.equal(apiRoot('https://x.example/'), 'https://x.example/v1');
  t.equal(apiRoot('https://x.example/v1beta1'), 'https://x.example/v1beta1');
  t.equal(
    claudeUrl({ base: 'https://aiplatform.googleapis.com', project: 'p-1', location: 'global' }, 'claude-sonnet-4-5@20250929', true),
    'https://aiplatform.googleapis.com/v1/projects/p-1/locations/global/publishers/anthropic/models/claude-sonnet-4-5@20250929:streamRawPredict',
  );
  t.equal(claudeUrl({ base: 'https://h', project: 'p', location: 'l' }, 'claude/../x', false), 'https://h/v1/projects/p/locations/l/publishers/anthropic/models/claude%2F..%2Fx:rawPredict', 'a slash cannot leave the model segment');
  t.equal(claudeCountUrl(place), 'https://us-east5-aiplatform.googleapis.com/v1/projects/p-1/locations/us-east5/publishers/anthropic/models/count-tokens:rawPredict');
  t.ok(isClaude('claude-haiku-4-5@20251001'));
  t.notOk(isClaude('gemini-2.5-flash'));
});

t.test("Gemini on Vertex: Google's publisher, cached contents under the location, the count body unwrapped", async (t) => {
  const site = geminiSite(place);
  t.equal(site.modelUrl('gemini-2.5-flash', 'streamGenerateContent'), 'https://us-east5-aiplatform.googleapis.com/v1/projects/p-1/locations/us-east5/publishers/google/models/gemini-2.5-flash:streamGenerateContent');
  t.equal(site.cachesUrl, 'https://us-east5-aiplatform.googleapis.com/v1/projects/p-1/locations/us-east5/cachedContents');
  t.equal(site.cacheModel('models/gemini-2.5-pro'), 'projects/p-1/locations/us-east5/publishers/google/models/gemini-2.5-pro');
  t.same(site.headers, {}, 'no API key: the token is added by the authorize step');
  const body = { contents: [{ role: 'user' as const, parts: [{ text: 'hi' }] }], systemInstruction: { parts: [{ text: 's' }] }, safetySettings: [], cachedContent: 'c' };
  t.same(site.countBody!('gemini-2.5-flash', body), { contents: body.contents, systemInstruction: body.systemInstruction }, "Vertex's countTokens takes the prompt's fields at the top level");
});

t.test('Claude bodies: rawPredict without model, count-tokens with it, anthropic_version on both', async (t) => {
  const body = { model: 'm', max_tokens: 5, messages: [] };
  t.same(toRawPredict(body), { anthropic_version: 'vertex-2023-10-16', max_tokens: 5, messages: [] });
  t.same(body, { model: 'm', max_tokens: 5, messages: [] }, 'pure');
  t.same(toCountRawPredict({ model: 'claude-sonnet-4-5@20250929', messages: [] }), { anthropic_version: 'vertex-2023-10-16', model: 'claude-sonnet-4-5@20250929', messages: [] });
});

t.test('anthropic-beta: the flags Vertex serves kept, the others stripped with a note', async (t) => {
  const notes: NormalizationEntry[] = [];
  const note = (e: NormalizationEntry) => notes.push(e);
  t.equal(vertexBetas(undefined, note), undefined);
  t.equal(vertexBetas('interleaved-thinking-2025-05-14, context-1m-2025-08-07', note), 'interleaved-thinking-2025-05-14, context-1m-2025-08-07', 'all served: sent as the client wrote them');
  t.same(notes, []);
  t.equal(vertexBetas('interleaved-thinking-2025-05-14,claude-code-20250219', note), 'interleaved-thinking-2025-05-14');
  t.match(notes, [{ param: 'anthropic-beta', action: 'strip', before: 'claude-code-20250219' }]);
  t.equal(vertexBetas('claude-code-20250219', note), undefined, 'none served: no header');
});

t.test("errors: Google's shape and Anthropic's, whichever Vertex answers with", async (t) => {
  t.match(claudeOnVertexError(429, vertexRateLimitBody(), ''), { error: { type: 'rate_limit_error', code: 'resource_exhausted' } });
  t.match(claudeOnVertexError(400, { type: 'error', error: { type: 'invalid_request_error', message: 'messages: bad' } }, ''), { error: { type: 'invalid_request_error', message: 'messages: bad' } });
});

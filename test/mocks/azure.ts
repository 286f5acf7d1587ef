// A strict mock of Azure OpenAI (a resource endpoint such as
// https://myres.openai.azure.com). It checks what Azure checks: the key in
// `api-key` (or, on the v1 API only, `Authorization: Bearer <key>`, as the
// plain OpenAI client sends it), the URL scheme (the v1 API under
// /openai/v1/ takes no dated api-version; the dated API under
// /openai/deployments/{deployment}/… and /openai/responses requires a known
// `api-version`), and the deployment names (a deployment is what `model`
// names on v1 and on /openai/responses, the path segment otherwise; an
// unknown one is a 404 DeploymentNotFound). Behind that it answers as the
// OpenAI mocks do (test/mocks/openai*.ts, by the deployment's model), with
// Azure's content-filter annotations (`prompt_filter_results`,
// `content_filter_results`; a first stream chunk with `choices: []` and an
// empty id; a trailing annotation-only chunk) and content-filter outcomes: a
// prompt containing FILTER-PROMPT is refused with Azure's 400
// `content_filter` error (an image prompt with `content_policy_violation`),
// a completion for FILTER-OUTPUT stops with `finish_reason: "content_filter"`
// (a response: `status: "incomplete"`, reason `content_filter`).
// https://learn.microsoft.com/azure/ai-foundry/openai/reference,
// https://learn.microsoft.com/azure/ai-foundry/openai/concepts/content-filter.
import { startMock, sse, type MockServer, type Recorded, type Reply } from './server.js';
import { validateChat, chatReply } from './openai.js';
import { createResponsesMock } from './openai-responses.js';
import { openAIImagesRoute } from './openai-images.js';

export const AZURE_KEY = 'azure-test-key-0123456789abcdef';
/** The dated API versions this mock knows (GA and previews). */
export const AZURE_API_VERSIONS = new Set(['2024-10-21', '2024-12-01-preview', '2025-03-01-preview', '2025-04-01-preview']);
/** Deployment name -> the model deployed under it. */
export const AZURE_DEPLOYMENTS: Record<string, string> = {
  'gpt-4.1-mini-prod': 'gpt-4.1-mini',
  'gpt-5-mini': 'gpt-5-mini',
  'image-gen': 'gpt-image-1',
};

const SAFE = { filtered: false, severity: 'safe' };
const SAFE_RESULTS = { hate: SAFE, self_harm: SAFE, sexual: SAFE, violence: SAFE };
const promptFilterResults = () => [{ prompt_index: 0, content_filter_results: { ...SAFE_RESULTS, jailbreak: { filtered: false, detected: false } } }];

function azureError(status: number, code: string, message: string, extra: Record<string, unknown> = {}): Reply {
  return { status, json: { error: { code, message, ...extra } } };
}

const notFound = () => azureError(404, '404', 'Resource not found');

function lastUserText(body: any): string {
  const m = [...(body.messages ?? [])].reverse().find((x: any) => x.role === 'user');
  if (!m) return '';
  return typeof m.content === 'string' ? m.content : (m.content ?? []).map((p: any) => p.text ?? '').join(' ');
}

/** The text of a Responses request's input (a string, or its items' text parts). */
function inputText(body: any): string {
  if (typeof body.input === 'string') return body.input;
  const parts: string[] = [];
  for (const it of body.input ?? []) {
    if (typeof it?.content === 'string') parts.push(it.content);
    else for (const p of it?.content ?? []) if (typeof p?.text === 'string') parts.push(p.text);
  }
  return parts.join(' ');
}

/**
 * Azure's answer to an image prompt its filter blocks: `content_policy_violation`
 * with the categories under `inner_error.content_filter_results` (the image
 * API's own shape, snake_case, unlike chat's `innererror`).
 */
function imagePromptFiltered(): Reply {
  return azureError(400, 'content_policy_violation', 'Your request was rejected as a result of our safety system. Your prompt may contain text that is not allowed by our safety system.', {
    inner_error: {
      code: 'ResponsibleAIPolicyViolation',
      content_filter_results: { hate: SAFE, self_harm: SAFE, sexual: { filtered: true, severity: 'high' }, violence: SAFE },
      revised_prompt: null,
    },
  });
}

/** Azure's answer to a prompt its content filter blocks. */
function promptFiltered(): Reply {
  return azureError(400, 'content_filter', "The response was filtered due to the prompt triggering Azure OpenAI's content management policy. Please modify your prompt and retry.", {
    param: 'prompt',
    status: 400,
    innererror: {
      code: 'ResponsibleAIPolicyViolation',
      content_filter_result: { hate: SAFE, jailbreak: { filtered: false, detected: false }, self_harm: SAFE, sexual: SAFE, violence: { filtered: true, severity: 'medium' } },
    },
  });
}

/** The OpenAI answer with Azure's annotations; FILTER-OUTPUT stops on the output filter. */
function annotateChat(reply: Reply, body: any, deployment: string): Reply {
  const filterOutput = /FILTER-OUTPUT/.test(lastUserText(body));
  if (reply.json) {
    const j = reply.json as any;
    j.prompt_filter_results = promptFilterResults();
    for (const c of j.choices) {
      c.content_filter_results = filterOutput ? { ...SAFE_RESULTS, violence: { filtered: true, severity: 'high' } } : SAFE_RESULTS;
      if (filterOutput) {
        c.finish_reason = 'content_filter';
        c.message.content = (c.message.content ?? '').split(' ')[0];
      }
    }
    return reply;
  }
  const frames: string[] = [sse({ choices: [], created: 0, id: '', model: '', object: '', prompt_filter_results: promptFilterResults() })];
  let cut = false;
  for (const f of reply.sse ?? []) {
    if (f.startsWith('data: [DONE]')) {
      // With asynchronous filtering, annotations may follow the last content chunk.
      frames.push(sse({ choices: [{ content_filter_results: SAFE_RESULTS, delta: {}, finish_reason: null, index: 0 }], created: 0, id: '', model: deployment, object: 'chat.completion.chunk' }));
      frames.push(f);
      continue;
    }
    const c = JSON.parse(f.slice('data: '.length));
    if (cut && c.choices.length) continue;
    for (const ch of c.choices) {
      ch.content_filter_results = ch.delta?.role ? {} : SAFE_RESULTS;
      if (filterOutput && ch.delta?.content && !ch.delta.role) {
        ch.finish_reason = 'content_filter';
        ch.content_filter_results = { ...SAFE_RESULTS, violence: { filtered: true, severity: 'high' } };
        cut = true;
      }
    }
    frames.push(sse(c));
  }
  return { ...reply, sse: frames };
}

export interface AzureMockOptions {
  deployments?: Record<string, string>;
  /** Delay between stream events (a slow model). */
  sseDelayMs?: number;
}

export async function startAzureMock(opts: AzureMockOptions = {}): Promise<MockServer> {
  const deployments = opts.deployments ?? AZURE_DEPLOYMENTS;
  const models = new Set(Object.values(deployments));
  // The output filter on the Responses API: the response stops `incomplete`, reason `content_filter`.
  const responses = createResponsesMock({ models: [...models], filterOutput: (body) => /FILTER-OUTPUT/.test(inputText(body)) });
  const images = openAIImagesRoute();
  return startMock(async (req: Recorded) => {
    const v1 = req.path.startsWith('/openai/v1/');
    const apiVersion = req.query.get('api-version');
    if (req.headers['api-key'] !== AZURE_KEY && !(v1 && req.headers.authorization === `Bearer ${AZURE_KEY}`))
      return azureError(401, '401', 'Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide a valid key for an active subscription and use a correct regional API endpoint for your resource.');
    let op: string;
    let deployment: string | undefined;
    if (v1) {
      // The v1 API has no dated versions (`preview` opts into preview features).
      if (apiVersion !== null && apiVersion !== 'preview' && apiVersion !== 'latest') return azureError(400, 'BadRequest', `api-version '${apiVersion}' is not allowed on the v1 API path; remove the api-version query parameter`);
      op = req.path.slice('/openai/v1/'.length);
      deployment = req.body?.model;
    } else {
      const m = /^\/openai\/deployments\/([^/]+)\/(chat\/completions|images\/generations)$/.exec(req.path);
      if (m) {
        deployment = decodeURIComponent(m[1]);
        op = m[2];
      } else if (req.path === '/openai/responses') {
        op = 'responses';
        deployment = req.body?.model;
      } else return notFound();
      if (!apiVersion) return notFound();
      if (!AZURE_API_VERSIONS.has(apiVersion)) return azureError(400, 'BadRequest', 'API version not supported');
      if (op === 'responses' && !apiVersion.endsWith('-preview')) return azureError(400, 'BadRequest', `The Responses API is not available in api-version ${apiVersion}`);
    }
    if (req.method !== 'POST' || !['chat/completions', 'responses', 'images/generations'].includes(op)) return notFound();
    const model = deployment !== undefined ? deployments[deployment] : undefined;
    if (!model)
      return azureError(404, 'DeploymentNotFound', 'The API deployment for this resource does not exist. If you created the deployment within the last 5 minutes, please wait a moment and try again.');
    const body = { ...req.body, model };
    if (op === 'chat/completions') {
      const bad = validateChat(body, models);
      if (bad) return bad;
      if (/FILTER-PROMPT/.test(lastUserText(body))) return promptFiltered();
      const reply = annotateChat(chatReply(body, model), body, model);
      return opts.sseDelayMs && reply.sse ? { ...reply, sseDelayMs: opts.sseDelayMs } : reply;
    }
    const inner: Recorded = { ...req, path: `/v1/${op}`, body };
    if (op === 'responses') {
      if (/FILTER-PROMPT/.test(inputText(body))) return promptFiltered();
      return responses.handler(inner);
    }
    if (/FILTER-PROMPT/.test(String(body.prompt ?? ''))) return imagePromptFiltered();
    const r = await images(inner);
    if (r.status === 200) for (const d of (r.json as any).data) d.content_filter_results = SAFE_RESULTS;
    return r;
  });
}

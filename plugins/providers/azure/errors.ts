// Azure OpenAI's error bodies are OpenAI-shaped (`{ error: { code, message,
// param? } }`, `code` often the status as a string or a name such as
// `DeploymentNotFound`) and mapped as OpenAI's are. A prompt that the content
// filter blocks is a 400 with `code: "content_filter"` (images:
// `content_policy_violation`) and the categories in
// `innererror.content_filter_result` (the image API: `inner_error.content_filter_results`)
// (https://learn.microsoft.com/azure/ai-foundry/openai/concepts/content-filter):
// the client gets a 400 `content_filter` that names them.
import type { ErrorMapper } from '../../../src/provider/errors.js';
import { openAIError } from '../openai/errors.js';
import type { AzureErrorBody, FilterResult } from './wire.js';

function filteredCategories(r: FilterResult | undefined): string[] {
  const out: string[] = [];
  for (const [name, v] of Object.entries(r ?? {})) if (v?.filtered) out.push(v.severity ? `${name}: ${v.severity}` : name);
  return out;
}

export const azureError: ErrorMapper = (status, body, text, headers) => {
  const mapped = openAIError(status, body, text, headers);
  const e = (body as AzureErrorBody | undefined)?.error;
  const inner = e?.innererror ?? e?.inner_error;
  const filtered = e?.code === 'content_filter' || e?.code === 'content_policy_violation' || inner?.code === 'ResponsibleAIPolicyViolation';
  if (status === 400 && filtered) {
    const cats = filteredCategories(e?.innererror?.content_filter_result ?? e?.inner_error?.content_filter_results);
    mapped.error = {
      message: `Azure OpenAI's content filter blocked the request${cats.length ? ` (${cats.join(', ')})` : ''}: ${e?.message ?? 'content management policy'}`,
      type: 'invalid_request_error',
      param: e?.param ?? null,
      code: 'content_filter',
    };
  }
  return mapped;
};

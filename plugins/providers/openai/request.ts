// Same-API request mapping: patch what must change, forward the rest.
// Gateway-only fields are removed; `native_fields` merge at the top level
// (OpenAI's own names); `cache_control` is an Anthropic/Gemini concept and is
// stripped here with a note (docs/providers-openai.md).
import type { ChatRequest, NormalizationEntry } from '../../../src/types.js';

const GATEWAY_ONLY = ['native_fields', 'web_search', 'reasoning_summary'] as const;

function hasCacheControl(req: ChatRequest): boolean {
  for (const m of req.messages) {
    if (m.cache_control) return true;
    if (Array.isArray(m.content)) for (const p of m.content) if ((p as { cache_control?: unknown }).cache_control) return true;
  }
  return !!req.tools?.some((t) => t.cache_control);
}

function hasReasoningEcho(req: ChatRequest): boolean {
  return req.messages.some((m) => m.reasoning_content != null || m.reasoning_details != null);
}

export function toOpenAIChat(req: ChatRequest, note: (e: NormalizationEntry) => void): Record<string, unknown> {
  let out: Record<string, unknown> = req as unknown as Record<string, unknown>;
  const needsCopy = GATEWAY_ONLY.some((f) => out[f] !== undefined) || hasCacheControl(req) || hasReasoningEcho(req);
  if (!needsCopy) return out; // fast path: nothing to patch but the model (already set)
  out = { ...out };
  for (const f of GATEWAY_ONLY) delete out[f];
  if (req.native_fields) Object.assign(out, req.native_fields);
  if (req.web_search) out.web_search_options = req.web_search.options ?? {};
  if (hasCacheControl(req)) {
    note({ param: 'cache_control', action: 'strip', reason: 'this provider family has no prompt-cache control; it caches automatically' });
    out.messages = req.messages.map((m) => {
      const { cache_control: _c, ...rest } = m;
      if (Array.isArray(rest.content)) rest.content = rest.content.map(({ cache_control: _p, ...part }) => part) as typeof rest.content;
      return rest;
    });
    if (req.tools) out.tools = req.tools.map(({ cache_control: _t, ...t }) => t);
  }
  if (hasReasoningEcho(req)) {
    out.messages = (out.messages as ChatRequest['messages']).map((m) => {
      if (m.reasoning_content == null && m.reasoning_details == null) return m;
      const { reasoning_content: _rc, reasoning_details: _rd, ...rest } = m;
      return rest;
    });
  }
  return out;
}

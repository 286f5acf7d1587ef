// Input-token counts through OpenAI's POST /v1/responses/input_tokens
// (https://platform.openai.com/docs/api-reference/responses/input-tokens).
// A Responses request is forwarded as the gateway would send it for a
// generation; a request that comes as chat IR (another ingress) is written as
// the Responses input it is: messages as message items, an assistant's tool
// calls as function_call items, tool answers as function_call_output items,
// function tools flat.
import type { ChatRequest, ChatMessage, ContentPart } from '../../../src/types.js';

/** The fields the endpoint takes besides `model` and `input` (its request body in the API reference). */
const COUNT_FIELDS = ['instructions', 'tools', 'tool_choice', 'parallel_tool_calls', 'text', 'reasoning', 'truncation', 'personality', 'conversation', 'previous_response_id'] as const;

/** A generation body cut to what the counting endpoint accepts (it rejects generation-only fields such as `temperature`). */
export function countBody(body: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { model: body.model };
  if (body.input != null) out.input = body.input;
  for (const f of COUNT_FIELDS) if (body[f] != null) out[f] = body[f];
  return out;
}

function parts(content: string | ContentPart[] | null | undefined, role: string): string | Record<string, unknown>[] {
  if (content == null) return '';
  if (typeof content === 'string') return content;
  return content.map((p) =>
    p.type === 'image_url'
      ? { type: 'input_image', image_url: p.image_url.url, detail: p.image_url.detail ?? 'auto' }
      : { type: role === 'assistant' ? 'output_text' : 'input_text', text: p.text },
  );
}

function items(m: ChatMessage): Record<string, unknown>[] {
  if (m.role === 'tool') {
    const output = typeof m.content === 'string' ? m.content : (m.content ?? []).map((p) => (p.type === 'text' ? p.text : '')).join('');
    return [{ type: 'function_call_output', call_id: m.tool_call_id, output }];
  }
  const out: Record<string, unknown>[] = [];
  const content = parts(m.content, m.role);
  if (m.role !== 'assistant' || content.length) out.push({ type: 'message', role: m.role, content });
  for (const tc of m.tool_calls ?? []) out.push({ type: 'function_call', call_id: tc.id, name: tc.function.name, arguments: tc.function.arguments });
  return out;
}

/** A chat IR request as the counting endpoint's body. */
export function countBodyFromChat(req: ChatRequest): Record<string, unknown> {
  const body: Record<string, unknown> = { model: req.model, input: req.messages.flatMap(items) };
  if (req.tools?.length) body.tools = req.tools.map((t) => ({ type: 'function', ...t.function }));
  if (req.tool_choice != null && req.tools?.length) body.tool_choice = typeof req.tool_choice === 'string' ? req.tool_choice : { type: 'function', name: req.tool_choice.function.name };
  if (req.parallel_tool_calls != null && req.tools?.length) body.parallel_tool_calls = req.parallel_tool_calls;
  if (req.reasoning_effort != null) body.reasoning = { effort: req.reasoning_effort };
  const rf = req.response_format;
  if (rf && rf.type !== 'text') body.text = { format: rf.type === 'json_object' ? rf : { type: 'json_schema', ...rf.json_schema } };
  return body;
}

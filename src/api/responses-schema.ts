// Validation of POST /v1/responses (docs/responses.md, docs/errors.md). Known
// fields are checked strictly and every failure names the field (e.g.
// `input[2].content[0].image_url`). Unknown top-level fields are kept: the
// same-API path forwards them to OpenAI, which judges them; translated paths
// drop them and record a `strip` normalization.
//
// Shapes follow the OpenAI Responses API reference
// (https://platform.openai.com/docs/api-reference/responses/create). Two deliberate extensions:
// function tools are accepted both flat (`{type:'function', name, ...}`, the
// Responses wire shape) and nested (`{type:'function', function:{name, ...}}`,
// the shape spec 4.1 describes), and `tool_choice` likewise.
import * as v from 'valibot';
import { num, int, str, bool, oneOf, FN_NAME, looseObject, strictObject, object, record } from '../validate.js';
import { Fallbacks, DebugList, Extra } from './chat-schema.js';

const nonEmpty = (what = 'must not be empty') => v.pipe(str(), v.minLength(1, what));
const Detail = oneOf(['auto', 'low', 'high', 'original'] as const);

// An object schema whose `type` names something we do not accept: the issue
// lands on `<path>.type` with a message listing what is accepted.
const rejectType = (message: string) => looseObject({ type: v.custom<never>(() => false, message) });

// Content parts (https://platform.openai.com/docs/api-reference/responses/create#responses-create-input).
const InputText = looseObject({ type: v.literal('input_text'), text: str() });
const InputImage = v.pipe(
  looseObject({
    type: v.literal('input_image'),
    image_url: v.optional(v.nullable(nonEmpty())),
    file_id: v.optional(v.nullable(nonEmpty())),
    detail: v.optional(v.nullable(Detail)),
  }),
  // Named at the field it lacks (input[0].content[1].image_url), not at the part.
  v.forward(
    v.check((p) => !!p.image_url || !!p.file_id, "an 'input_image' part needs 'image_url' (a URL or data URL) or 'file_id'"),
    ['image_url'],
  ),
);
const InputFile = looseObject({
  type: v.literal('input_file'),
  file_id: v.optional(v.nullable(str())),
  file_data: v.optional(v.nullable(str())),
  file_url: v.optional(v.nullable(str())),
  filename: v.optional(v.nullable(str())),
});
const OutputText = looseObject({ type: v.literal('output_text'), text: str(), annotations: v.optional(v.array(v.unknown())) });
const RefusalPart = looseObject({ type: v.literal('refusal'), refusal: str() });

const InputPart = v.variant('type', [InputText, InputImage, InputFile], "must be a content part of type 'input_text', 'input_image' or 'input_file'");
const AssistantPart = v.variant('type', [OutputText, RefusalPart], "must be a content part of type 'output_text' or 'refusal'");

const itemCommon = { id: v.optional(v.nullable(str())), status: v.optional(v.nullable(oneOf(['in_progress', 'completed', 'incomplete'] as const))) };

const InputMessage = looseObject({
  type: v.optional(v.literal('message')),
  role: oneOf(['user', 'system', 'developer', 'assistant'] as const),
  content: v.union([str(), v.array(InputPart)], 'must be a string or an array of content parts'),
  ...itemCommon,
});
const AssistantMessage = looseObject({
  type: v.optional(v.literal('message')),
  role: v.literal('assistant'),
  content: v.union([str(), v.array(AssistantPart)], "must be a string or an array of 'output_text' / 'refusal' parts"),
  ...itemCommon,
});
const FunctionCall = looseObject({
  type: v.literal('function_call'),
  call_id: nonEmpty(),
  name: FN_NAME,
  arguments: str('must be a JSON string'),
  ...itemCommon,
});
const FunctionCallOutput = looseObject({
  type: v.literal('function_call_output'),
  call_id: nonEmpty(),
  output: v.union([str(), v.array(InputPart)], 'must be a string or an array of content parts'),
  ...itemCommon,
});
const Reasoning = looseObject({
  type: v.literal('reasoning'),
  id: v.optional(v.nullable(str())),
  summary: v.array(looseObject({ type: v.literal('summary_text'), text: str() }), 'must be an array of summary_text parts'),
  content: v.optional(v.nullable(v.array(looseObject({ type: str(), text: str() })))),
  encrypted_content: v.optional(v.nullable(str())),
  status: itemCommon.status,
});
// A hosted web search record from an earlier OpenAI turn (echoed output).
const WebSearchCall = looseObject({ type: v.literal('web_search_call'), id: nonEmpty() });

// An output item of an earlier stored response, by its id (the Vercel AI SDK's
// OpenAI provider sends earlier turns this way while `store` is on). `type` may be
// omitted, as on OpenAI: an item with only an `id` is a reference.
const ItemReference = object({ type: v.optional(v.literal('item_reference')), id: nonEmpty() });

export const INPUT_ITEM_TYPES = ['message', 'function_call', 'function_call_output', 'reasoning', 'web_search_call', 'item_reference'] as const;

/** An input item that refers to a stored output item instead of carrying it. */
export function isItemReference(it: { type?: unknown; role?: unknown; id?: unknown }): boolean {
  return it.type === 'item_reference' || (it.type === undefined && it.role === undefined && typeof it.id === 'string');
}

const InputItem = v.lazy((input) => {
  const o = (input ?? {}) as { type?: unknown; role?: unknown; id?: unknown };
  if (isItemReference(o)) return ItemReference as v.GenericSchema;
  switch (o.type ?? 'message') {
    case 'message':
      return (o.role === 'assistant' ? AssistantMessage : InputMessage) as v.GenericSchema;
    case 'function_call':
      return FunctionCall as v.GenericSchema;
    case 'function_call_output':
      return FunctionCallOutput as v.GenericSchema;
    case 'reasoning':
      return Reasoning as v.GenericSchema;
    case 'web_search_call':
      return WebSearchCall as v.GenericSchema;
    default:
      return rejectType(`must be one of ${INPUT_ITEM_TYPES.map((t) => `'${t}'`).join(', ')}`) as v.GenericSchema;
  }
});

// Tools: function (flat or nested) and hosted web search.
export const WEB_SEARCH_TYPES = ['web_search_preview', 'web_search', 'web_search_preview_2025_03_11', 'web_search_2025_08_26'] as const;
const Params = record(v.string(), v.unknown(), 'must be a JSON Schema object');
const FlatFunctionTool = looseObject({
  type: v.literal('function'),
  name: FN_NAME,
  description: v.optional(v.nullable(str())),
  parameters: v.optional(v.nullable(Params)),
  strict: v.optional(v.nullable(bool())),
});
const NestedFunctionTool = looseObject({
  type: v.literal('function'),
  function: looseObject({
    name: FN_NAME,
    description: v.optional(v.nullable(str())),
    parameters: v.optional(v.nullable(Params)),
    strict: v.optional(v.nullable(bool())),
  }),
});
const WebSearchTool = looseObject({
  type: oneOf(WEB_SEARCH_TYPES),
  search_context_size: v.optional(v.nullable(oneOf(['low', 'medium', 'high'] as const))),
  user_location: v.optional(v.nullable(looseObject({ type: v.optional(v.literal('approximate')) }))),
});
const Tool = v.lazy((input) => {
  const o = (input ?? {}) as { type?: unknown; function?: unknown };
  if (o.type === 'function') return (o.function !== undefined ? NestedFunctionTool : FlatFunctionTool) as v.GenericSchema;
  if ((WEB_SEARCH_TYPES as readonly unknown[]).includes(o.type)) return WebSearchTool as v.GenericSchema;
  return rejectType("must be 'function', 'web_search_preview' or 'web_search' (other hosted tools are not supported)") as v.GenericSchema;
});

const ToolChoice = v.union(
  [
    oneOf(['none', 'auto', 'required'] as const),
    strictObject({ type: v.literal('function'), name: str() }),
    strictObject({ type: v.literal('function'), function: strictObject({ name: str() }) }),
  ],
  "must be 'none', 'auto', 'required' or {type: 'function', name}",
);

const Format = v.variant(
  'type',
  [
    strictObject({ type: v.literal('text') }),
    strictObject({ type: v.literal('json_object') }),
    looseObject({
      type: v.literal('json_schema'),
      name: FN_NAME,
      schema: record(v.string(), v.unknown(), 'must be a JSON Schema object'),
      description: v.optional(v.nullable(str())),
      strict: v.optional(v.nullable(bool())),
    }),
  ],
  "must have type 'text', 'json_object' or 'json_schema'",
);

const Text = looseObject({
  format: v.optional(v.nullable(Format)),
  verbosity: v.optional(v.nullable(oneOf(['low', 'medium', 'high'] as const))),
});

const ReasoningOptions = looseObject({
  effort: v.optional(v.nullable(oneOf(['none', 'minimal', 'low', 'medium', 'high', 'xhigh'] as const))),
  summary: v.optional(v.nullable(oneOf(['auto', 'concise', 'detailed'] as const))),
  generate_summary: v.optional(v.nullable(oneOf(['auto', 'concise', 'detailed'] as const))),
});

const Stop = v.union([str(), v.pipe(v.array(str()), v.maxLength(4, 'must have at most 4 sequences'))], 'must be a string or an array of up to 4 strings');

const Metadata = v.pipe(
  record(v.pipe(v.string(), v.maxLength(64, 'keys must be at most 64 characters')), v.pipe(str('values must be strings'), v.maxLength(512, 'values must be at most 512 characters')), 'must be an object of string values'),
  v.check((m) => Object.keys(m).length <= 16, 'must have at most 16 pairs'),
);

const Input = v.union([str(), v.pipe(v.array(InputItem, 'must be a string or an array of input items'), v.minLength(1, 'must contain at least one item'))], 'must be a string or an array of input items');

// The fields POST /v1/responses/input_tokens shares with POST /v1/responses
// (https://platform.openai.com/docs/api-reference/responses/input-tokens), and the gateway extensions.
const countFields = {
  model: nonEmpty(),
  instructions: v.optional(v.nullable(str())),
  tools: v.optional(v.nullable(v.array(Tool, 'must be an array of tools'))),
  tool_choice: v.optional(v.nullable(ToolChoice)),
  parallel_tool_calls: v.optional(v.nullable(bool())),
  text: v.optional(v.nullable(Text)),
  reasoning: v.optional(v.nullable(ReasoningOptions)),
  previous_response_id: v.optional(v.nullable(nonEmpty())),
  truncation: v.optional(v.nullable(oneOf(['auto', 'disabled'] as const))),
  conversation: v.optional(v.custom<never>(() => false, "the Conversations API is not supported by the gateway: use 'previous_response_id'")),
  native_fields: v.optional(record(v.string(), v.unknown(), 'must be an object')),
  extra: v.optional(Extra),
  fallbacks: v.optional(Fallbacks),
  debug: v.optional(DebugList),
};

type WithTools = { tool_choice?: unknown; tools?: unknown[] | null };
/** `tool_choice` naming a function must name one of `tools`. */
const toolChoiceInTools = <T extends WithTools>() =>
  v.forward<T, v.CheckIssue<T>, ['tool_choice']>(
    v.check<T, string>((b) => {
      const tc = b.tool_choice as { name?: string; function?: { name: string } } | string | null | undefined;
      if (!tc || typeof tc === 'string') return true;
      const name = tc.name ?? tc.function?.name;
      return !!b.tools?.some((t) => functionToolName(t as Record<string, unknown>) === name);
    }, "'tool_choice' names a function that is not in 'tools'"),
    ['tool_choice'] as never,
  );

/** POST /v1/responses/input_tokens: `input` may be left out (a conversation continued by `previous_response_id`). */
export const ResponsesCountBody = v.pipe(looseObject({ ...countFields, input: v.optional(v.nullable(Input)) }), toolChoiceInTools());

export const ResponsesBody = v.pipe(
  looseObject({
    ...countFields,
    input: Input,
    temperature: v.optional(v.nullable(num(0, 2))),
    top_p: v.optional(v.nullable(num(0, 1))),
    max_output_tokens: v.optional(v.nullable(int(1, 10_000_000))),
    stop: v.optional(v.nullable(Stop)),
    stream: v.optional(v.nullable(bool())),
    stream_options: v.optional(v.nullable(looseObject({ include_obfuscation: v.optional(bool()) }))),
    store: v.optional(v.nullable(bool())),
    metadata: v.optional(v.nullable(Metadata)),
    user: v.optional(v.nullable(str())),
    include: v.optional(v.nullable(v.array(str(), 'must be an array of strings'))),
    top_logprobs: v.optional(v.nullable(int(0, 20))),
    max_tool_calls: v.optional(v.nullable(int(1, 1_000))),
    service_tier: v.optional(v.nullable(oneOf(['auto', 'default', 'flex', 'priority'] as const))),
    background: v.optional(v.nullable(v.custom<boolean>((x) => x === false, 'background mode is not supported by the gateway: omit it or send false'))),
  }),
  v.forward(
    v.check((b) => !(b.stream_options && !b.stream), "'stream_options' is only allowed when 'stream' is true"),
    ['stream_options'],
  ),
  toolChoiceInTools(),
);

export function functionToolName(t: Record<string, unknown>): string | undefined {
  if (t.type !== 'function') return undefined;
  return (t.function as { name?: string } | undefined)?.name ?? (t.name as string | undefined);
}

export type ResponsesBodyInput = v.InferOutput<typeof ResponsesBody>;

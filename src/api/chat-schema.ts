// Validation of POST /v1/chat/completions, spec 4.2 and 8. Known fields are
// checked strictly; unknown top-level fields are kept (the same-API path
// forwards them to OpenAI, which judges them; translated paths drop them and
// record a `strip` normalization).
import * as v from 'valibot';
import { num, int, str, bool, oneOf, FN_NAME, looseObject, strictObject, record, withFastPath } from '../validate.js';
import { chatMessage, chatTool } from './fast-check.js';

const CacheControl = strictObject({
  type: v.literal('ephemeral', "must be 'ephemeral'"),
  ttl: v.optional(v.pipe(str(), v.regex(/^\d+(\.\d+)?s$/, "must be a number of seconds with suffix 's', such as '300s'"))),
});

const TextPart = looseObject({ type: v.literal('text'), text: str(), cache_control: v.optional(CacheControl) });
const ImagePart = looseObject({
  type: v.literal('image_url'),
  image_url: strictObject({
    url: v.pipe(str(), v.minLength(1, 'must not be empty')),
    detail: v.optional(oneOf(['auto', 'low', 'high', 'original'] as const)),
  }),
  cache_control: v.optional(CacheControl),
});
const UserPart = v.variant('type', [TextPart, ImagePart], "must be a content part of type 'text' or 'image_url'");
const RefusalPart = looseObject({ type: v.literal('refusal'), refusal: str() });
const AssistantPart = v.variant('type', [TextPart, RefusalPart], "must be a content part of type 'text' or 'refusal'");

const textContent = v.union([str(), v.array(TextPart)], 'must be a string or an array of text parts');

const ToolCall = looseObject({
  id: str(),
  type: v.literal('function', "must be 'function'"),
  function: looseObject({ name: str(), arguments: str('must be a JSON string') }),
});

const ReasoningDetail = looseObject({ type: str() });

// Fields that are real on one role and wrong on another are rejected by name,
// rather than silently dropped: a client that sends them has a bug to hear about.
// Each is an entry of the role's object, so the error names the field itself
// (`messages[0].tool_calls`), not the message.
const forbid = (fields: string[], role: string) =>
  Object.fromEntries(fields.map((f) => [f, v.optional(v.custom<never>(() => false, `the field '${f}' is not allowed on ${role === 'assistant' ? 'an' : 'a'} ${role} message`))]));

const common = { name: v.optional(str()), cache_control: v.optional(CacheControl) };

const SystemMsg = looseObject({
  role: v.picklist(['system', 'developer']),
  content: textContent,
  ...common,
  ...forbid(['tool_calls', 'tool_call_id', 'reasoning_content', 'reasoning_details', 'function_call'], 'system'),
});
const UserMsg = looseObject({
  role: v.literal('user'),
  content: v.union([str(), v.pipe(v.array(UserPart), v.minLength(1, 'must not be empty'))], 'must be a string or an array of content parts'),
  ...common,
  ...forbid(['tool_calls', 'tool_call_id', 'reasoning_content', 'reasoning_details', 'function_call'], 'user'),
});
const AssistantMsg = v.pipe(
  looseObject({
    role: v.literal('assistant'),
    content: v.optional(v.nullable(v.union([str(), v.array(AssistantPart)], 'must be a string, null or an array of text parts'))),
    tool_calls: v.optional(v.array(ToolCall)),
    reasoning_content: v.optional(v.nullable(str())),
    reasoning_details: v.optional(v.array(ReasoningDetail)),
    refusal: v.optional(v.nullable(str())),
    ...common,
    ...forbid(['tool_call_id'], 'assistant'),
    function_call: v.optional(v.nullable(v.custom<never>(() => false, "the deprecated field 'function_call' is not supported: send 'tool_calls'"))),
  }),
  v.forward(
    v.check((m) => (m.content !== undefined && m.content !== null) || !!m.tool_calls?.length || !!m.refusal, "an assistant message needs 'content' or 'tool_calls'"),
    ['content'],
  ),
);
const ToolMsg = looseObject({
  role: v.literal('tool'),
  content: textContent,
  tool_call_id: v.pipe(str(), v.minLength(1, 'must not be empty')),
  ...common,
  ...forbid(['tool_calls', 'reasoning_content', 'reasoning_details'], 'tool'),
});

export const Message = withFastPath(
  v.variant('role', [SystemMsg, UserMsg, AssistantMsg, ToolMsg], "must be one of 'system', 'developer', 'user', 'assistant', 'tool'"),
  chatMessage,
);

export const FunctionTool = withFastPath(looseObject({
  type: v.literal('function', "must be 'function' (only function tools are supported)"),
  function: looseObject({
    name: FN_NAME,
    description: v.optional(str()),
    parameters: v.optional(record(v.string(), v.unknown(), 'must be a JSON Schema object')),
    strict: v.optional(v.nullable(bool())),
  }),
  cache_control: v.optional(CacheControl),
}), chatTool);

const ToolChoice = v.union(
  [oneOf(['none', 'auto', 'required'] as const), strictObject({ type: v.literal('function'), function: strictObject({ name: str() }) })],
  "must be 'none', 'auto', 'required' or {type: 'function', function: {name}}",
);

const ResponseFormat = v.variant(
  'type',
  [
    strictObject({ type: v.literal('text') }),
    strictObject({ type: v.literal('json_object') }),
    strictObject({
      type: v.literal('json_schema'),
      json_schema: looseObject({
        name: FN_NAME,
        description: v.optional(str()),
        schema: v.optional(record(v.string(), v.unknown())),
        strict: v.optional(v.nullable(bool())),
      }),
    }),
  ],
  "must have type 'text', 'json_object' or 'json_schema'",
);

const Stop = v.union([str(), v.pipe(v.array(str()), v.maxLength(4, 'must have at most 4 sequences'))], 'must be a string or an array of up to 4 strings');

const Metadata = v.pipe(
  record(v.pipe(v.string(), v.maxLength(64, 'keys must be at most 64 characters')), v.pipe(str('values must be strings'), v.maxLength(512, 'values must be at most 512 characters')), 'must be an object of string values'),
  v.check((m) => Object.keys(m).length <= 16, 'must have at most 16 pairs'),
);

const LogitBias = record(v.pipe(v.string(), v.regex(/^\d+$/, 'keys must be token ids')), num(-100, 100), 'must map token ids to numbers from -100 to 100');

export const Fallbacks = v.pipe(v.array(v.pipe(str(), v.minLength(1, 'must not be empty')), 'must be an array of model ids'), v.maxLength(10, 'must have at most 10 entries'));
export const DebugList = v.union(
  [bool(), v.array(oneOf(['normalizations', 'deprecations', 'routing'] as const))],
  "must be true or an array of 'normalizations', 'deprecations', 'routing'",
);
export const Extra = looseObject({
  debug: v.optional(DebugList),
  fallbacks: v.optional(Fallbacks),
  normalize: v.optional(bool()),
});

export const ChatBody = v.pipe(
  looseObject({
    model: v.pipe(str(), v.minLength(1, 'must not be empty')),
    messages: v.pipe(v.array(Message, 'must be an array of messages'), v.minLength(1, 'must contain at least one message')),
    temperature: v.optional(v.nullable(num(0, 2))),
    top_p: v.optional(v.nullable(num(0, 1))),
    max_tokens: v.optional(v.nullable(int(1, 10_000_000))),
    max_completion_tokens: v.optional(v.nullable(int(1, 10_000_000))),
    stream: v.optional(v.nullable(bool())),
    stream_options: v.optional(v.nullable(looseObject({ include_usage: v.optional(bool()), include_obfuscation: v.optional(bool()) }))),
    frequency_penalty: v.optional(v.nullable(num(-2, 2))),
    presence_penalty: v.optional(v.nullable(num(-2, 2))),
    stop: v.optional(v.nullable(Stop)),
    seed: v.optional(v.nullable(int(Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER))),
    logprobs: v.optional(v.nullable(bool())),
    top_logprobs: v.optional(v.nullable(int(0, 20))),
    tools: v.optional(v.array(FunctionTool, 'must be an array of tools')),
    tool_choice: v.optional(ToolChoice),
    response_format: v.optional(ResponseFormat),
    reasoning_effort: v.optional(v.nullable(oneOf(['none', 'minimal', 'low', 'medium', 'high', 'xhigh'] as const))),
    user: v.optional(str()),
    n: v.optional(v.nullable(int(1, 128))),
    parallel_tool_calls: v.optional(v.nullable(bool())),
    service_tier: v.optional(v.nullable(oneOf(['auto', 'default', 'flex'] as const))),
    store: v.optional(v.nullable(bool())),
    metadata: v.optional(v.nullable(Metadata)),
    logit_bias: v.optional(v.nullable(LogitBias)),
    native_fields: v.optional(record(v.string(), v.unknown(), 'must be an object')),
    extra: v.optional(Extra),
    fallbacks: v.optional(Fallbacks),
    debug: v.optional(DebugList),
    functions: v.optional(v.custom(() => false, "the deprecated field 'functions' is not supported: send 'tools' instead")),
    function_call: v.optional(v.custom(() => false, "the deprecated field 'function_call' is not supported: send 'tool_choice' instead")),
  }),
  v.forward(
    v.check((b) => !(b.n && b.n > 1 && b.stream), "'n' greater than 1 is not supported with 'stream': true"),
    ['n'],
  ),
  v.forward(
    v.check((b) => !(b.stream_options && !b.stream), "'stream_options' is only allowed when 'stream' is true"),
    ['stream_options'],
  ),
  v.forward(
    v.check((b) => b.top_logprobs === undefined || b.top_logprobs === null || b.logprobs === true, "'top_logprobs' requires 'logprobs': true"),
    ['top_logprobs'],
  ),
  v.forward(
    v.check((b) => {
      if (!b.tool_choice || typeof b.tool_choice === 'string') return true;
      return !!b.tools?.some((t) => t.function.name === (b.tool_choice as { function: { name: string } }).function.name);
    }, "'tool_choice' names a function that is not in 'tools'"),
    ['tool_choice'],
  ),
);

export type ChatBodyInput = v.InferOutput<typeof ChatBody>;

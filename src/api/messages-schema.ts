// Validation of POST /v1/messages and POST /v1/messages/count_tokens, the
// Anthropic Messages API (https://docs.anthropic.com/en/api/messages, version
// 2023-06-01). The fields a translation reads are checked and every failure
// names the field (`messages[1].content[0].source.data`). Unknown top-level
// fields and block types are kept: the same-API path forwards them to the
// provider, which judges them; a translation refuses a block it cannot carry
// and drops an unknown top-level field with a `strip` normalization.
import * as v from 'valibot';
import { num, int, str, bool, oneOf, looseObject, record, withFastPath } from '../validate.js';
import { messagesMessage, messagesTool } from './fast-check.js';
import { Fallbacks, DebugList, Extra } from './chat-schema.js';

const CacheControl = looseObject({
  type: v.literal('ephemeral', "must be 'ephemeral'"),
  ttl: v.optional(oneOf(['5m', '1h'] as const)),
});
const cc = { cache_control: v.optional(v.nullable(CacheControl)) };

const TextBlock = looseObject({ type: v.literal('text'), text: str(), ...cc });
const ImageSource = v.variant(
  'type',
  [
    looseObject({ type: v.literal('base64'), media_type: str(), data: v.pipe(str(), v.minLength(1, 'must not be empty')) }),
    looseObject({ type: v.literal('url'), url: v.pipe(str(), v.minLength(1, 'must not be empty')) }),
    looseObject({ type: v.literal('file'), file_id: str() }),
  ],
  "must be an image source of type 'base64', 'url' or 'file'",
);
const ImageBlock = looseObject({ type: v.literal('image'), source: ImageSource, ...cc });
const DocumentBlock = looseObject({ type: v.literal('document'), source: looseObject({ type: str() }), ...cc });
const ToolUseBlock = looseObject({
  type: v.literal('tool_use'),
  id: v.pipe(str(), v.minLength(1, 'must not be empty')),
  name: v.pipe(str(), v.minLength(1, 'must not be empty')),
  input: record(v.string(), v.unknown(), 'must be an object'),
  ...cc,
});
const ToolResultBlock = looseObject({
  type: v.literal('tool_result'),
  tool_use_id: v.pipe(str(), v.minLength(1, 'must not be empty')),
  content: v.optional(v.union([str(), v.array(v.variant('type', [TextBlock, ImageBlock, DocumentBlock, looseObject({ type: str() })]))], 'must be a string or an array of content blocks')),
  is_error: v.optional(bool()),
  ...cc,
});
const ThinkingBlock = looseObject({ type: v.literal('thinking'), thinking: str(), signature: str() });
const RedactedThinkingBlock = looseObject({ type: v.literal('redacted_thinking'), data: str() });
const KNOWN_BLOCKS = new Set(['text', 'image', 'document', 'tool_use', 'tool_result', 'thinking', 'redacted_thinking']);
/** Server-tool records, search results, container uploads...: kept for the same-API path. */
const OtherBlock = looseObject({ type: v.pipe(str(), v.check((t) => !KNOWN_BLOCKS.has(t), 'is a known block type with missing or wrong fields')) });

const Block = v.variant('type', [TextBlock, ImageBlock, DocumentBlock, ToolUseBlock, ToolResultBlock, ThinkingBlock, RedactedThinkingBlock, OtherBlock]);

export const Message = withFastPath(
  looseObject({
    role: oneOf(['user', 'assistant'] as const),
    content: v.union([str(), v.array(Block, 'must be an array of content blocks')], 'must be a string or an array of content blocks'),
  }),
  messagesMessage,
);

const CustomTool = looseObject({
  type: v.optional(v.nullable(v.literal('custom'))),
  name: v.pipe(str(), v.regex(/^[a-zA-Z0-9_-]{1,128}$/, 'must be 1 to 128 letters, digits, underscores or dashes')),
  description: v.optional(str()),
  input_schema: looseObject({ type: v.literal('object', "must be 'object'") }, 'must be a JSON Schema object'),
  ...cc,
});
/** Anthropic's server tools (web_search_20250305, bash_20250124, text_editor_..., code_execution_...). */
const ServerTool = looseObject({ type: v.pipe(str(), v.regex(/_\d{8}$/, "must be 'custom' or a versioned server tool type")), name: str(), ...cc });
export const Tool = withFastPath(v.union([CustomTool, ServerTool], 'must be a tool with a name and an input_schema, or a server tool'), messagesTool);

const ToolChoice = v.variant(
  'type',
  [
    looseObject({ type: v.literal('auto'), disable_parallel_tool_use: v.optional(bool()) }),
    looseObject({ type: v.literal('any'), disable_parallel_tool_use: v.optional(bool()) }),
    looseObject({ type: v.literal('tool'), name: str(), disable_parallel_tool_use: v.optional(bool()) }),
    looseObject({ type: v.literal('none') }),
  ],
  "must be a tool choice of type 'auto', 'any', 'tool' or 'none'",
);

const Thinking = v.variant(
  'type',
  [
    looseObject({ type: v.literal('enabled'), budget_tokens: int(1, 10_000_000) }),
    looseObject({ type: v.literal('disabled') }),
    // Newer thinking modes (adaptive...): forwarded on the same-API path.
    looseObject({ type: str() }),
  ],
  'must be a thinking configuration',
);

const System = v.union([str(), v.array(TextBlock, 'must be an array of text blocks')], 'must be a string or an array of text blocks');

const prompt = {
  model: v.pipe(str(), v.minLength(1, 'must not be empty')),
  messages: v.pipe(v.array(Message, 'must be an array of messages'), v.minLength(1, 'must contain at least one message')),
  system: v.optional(System),
  tools: v.optional(v.array(Tool, 'must be an array of tools')),
  tool_choice: v.optional(ToolChoice),
  thinking: v.optional(Thinking),
  native_fields: v.optional(record(v.string(), v.unknown(), 'must be an object')),
  extra: v.optional(Extra),
  fallbacks: v.optional(Fallbacks),
  debug: v.optional(DebugList),
};

type ToolsAndChoice = { tool_choice?: { type: string; name?: string }; tools?: { name: string }[] };
const namesATool = (b: ToolsAndChoice) => b.tool_choice?.type !== 'tool' || !!b.tools?.some((t) => t.name === b.tool_choice!.name);
const TOOL_NOT_FOUND = "names a tool that is not in 'tools'";

export const MessagesBody = v.pipe(
  looseObject({
    ...prompt,
    max_tokens: int(1, 10_000_000),
    metadata: v.optional(looseObject({ user_id: v.optional(v.nullable(str())) })),
    stop_sequences: v.optional(v.array(str(), 'must be an array of strings')),
    stream: v.optional(bool()),
    temperature: v.optional(num(0, 1)),
    top_p: v.optional(num(0, 1)),
    top_k: v.optional(int(0, 1_000_000)),
  }),
  v.forward(v.check((b) => namesATool(b as ToolsAndChoice), TOOL_NOT_FOUND), ['tool_choice']),
);

export const MessagesCountBody = v.pipe(looseObject(prompt), v.forward(v.check((b) => namesATool(b as ToolsAndChoice), TOOL_NOT_FOUND), ['tool_choice']));

export type MessagesInput = v.InferOutput<typeof MessagesBody>;

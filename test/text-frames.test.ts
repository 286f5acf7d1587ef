// The chat stream's frames from a template (src/api/text-frames.ts): the bytes
// are always those of serialising the chunk, whatever the chunks do.
import t from 'tap';
import { TextChunkFrames } from '../src/api/text-frames.js';
import { sseFrame } from '../src/sse.js';
import type { ChatChunk } from '../src/types.js';

const chunk = (content: unknown, extra: Record<string, unknown> = {}, delta: Record<string, unknown> = { content }): ChatChunk =>
  ({ id: 'chatcmpl-1', object: 'chat.completion.chunk', created: 1700000000, model: 'm', choices: [{ index: 0, delta, finish_reason: null, logprobs: null }], ...extra }) as unknown as ChatChunk;

t.test('every frame is exactly sseFrame(JSON.stringify(chunk))', async (t) => {
  class WithToJSON {
    toJSON() {
      return { replaced: true };
    }
  }
  const shared = { n: 1 };
  const chunks: ChatChunk[] = [
    chunk('', {}, { role: 'assistant', content: '' }),
    chunk('Hello'),
    chunk(' "quoted" \\ and\nnew line'),
    chunk('é€😀 \u2028 \u0001'),
    chunk('', { system_fingerprint: 'fp_1', service_tier: 'default' }),
    chunk('after new keys', { system_fingerprint: 'fp_1', service_tier: 'default' }),
    chunk('another fingerprint', { system_fingerprint: 'fp_2', service_tier: 'default' }),
    chunk('usage object', { usage: shared }),
    chunk('same object, changed', { usage: (shared.n++, shared) }),
    chunk('a new id', { id: 'chatcmpl-2' }),
    { ...chunk('keys in another order'), id: 'chatcmpl-1', model: 'x' } as ChatChunk,
    chunk('extra delta key', {}, { content: 'extra delta key', refusal: null }),
    chunk(null),
    chunk('two choices', { choices: [{ index: 0, delta: { content: 'a' }, finish_reason: null }, { index: 1, delta: { content: 'b' }, finish_reason: null }] }),
    chunk('undefined value', { usage: undefined }),
    chunk('finish', { choices: [{ index: 0, delta: { content: 'x' }, finish_reason: 'stop', logprobs: null }] }),
    Object.assign(new WithToJSON(), chunk('a class')) as unknown as ChatChunk,
    chunk('a choice with toJSON', { choices: [Object.assign(new WithToJSON(), { index: 0, delta: { content: 'y' } })] }),
    chunk('back to the first shape'),
    chunk('\u0000gateway:text\u0000', { id: '\u0000gateway:text\u0000' }),
    chunk('the hole in another value'),
  ];
  const frames = new TextChunkFrames();
  for (const [i, c] of chunks.entries()) t.equal(frames.frame(c), sseFrame(JSON.stringify(c)), `chunk ${i}`);
  const text = chunks[2].choices[0].delta.content;
  t.equal(chunks[2].choices[0].delta.content, text, 'the chunk is left as it was');
});

t.test('a stream of text chunks is framed from one template', async (t) => {
  const frames = new TextChunkFrames();
  const made = () => (frames as unknown as { made: number }).made;
  for (let i = 0; i < 50; i++) {
    const c = chunk(`t${i} `, { system_fingerprint: 'fp', service_tier: 'default' });
    t.equal(frames.frame(c), sseFrame(JSON.stringify(c)));
  }
  t.equal(made(), 1, 'one template for the whole stream');
  for (let i = 0; i < 10; i++) frames.frame(chunk('x', { obfuscation: `o${i}` }));
  t.equal(made(), 4, 'chunks that keep changing make no more than a few templates, then are serialised');
});

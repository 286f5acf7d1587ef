// The SSE frames of chat chunks, most of which differ only in their text.
import type { ChatChunk } from '../types.js';
import { sseFrame } from '../sse.js';

/** Stands for the text while a template is made (a string no value is likely to hold; checked). */
const HOLE = '\u0000gateway:text\u0000';
const HOLE_JSON = JSON.stringify(HOLE);
/** Templates made for one stream before it falls back to serialising every chunk (chunks that keep changing shape). */
const MAX_TEMPLATES = 4;

type Obj = Record<string, unknown>;

/**
 * Frames chat chunks for one stream. A text chunk (one choice whose delta is
 * `{ content }`) that has the same keys, in the same order, and the same
 * primitive values as the stream's previous text chunk, only another text, is
 * framed from a template: the previous frame split around its text. The bytes
 * are those of `sseFrame(JSON.stringify(chunk))`, without serialising the whole
 * chunk for every token. Any other chunk is serialised as it is.
 */
export class TextChunkFrames {
  /** The template's chunk (its `choices` aside) and its one choice (its `delta` aside). */
  private top: Shape = { keys: [], values: [] };
  private choice: Shape = { keys: [], values: [] };
  private head = '';
  private tail = '';
  private made = 0;

  frame(chunk: ChatChunk): string {
    const c = chunk as unknown as Obj;
    const text = textOf(c);
    if (text === undefined) return sseFrame(JSON.stringify(chunk));
    if (this.made > 0 && this.fits(c)) return this.head + JSON.stringify(text) + this.tail;
    return this.make(c, text) ?? sseFrame(JSON.stringify(chunk));
  }

  /** The same keys in the same order, and the same values but the text. */
  private fits(c: Obj): boolean {
    if (!hasShape(c, 'choices', this.top)) return false;
    const choice = (c.choices as Obj[])[0];
    return Object.getPrototypeOf(choice) === Object.prototype && hasShape(choice, 'delta', this.choice);
  }

  /** A template from this chunk (its frame, or undefined when it cannot serve as one). */
  private make(c: Obj, text: string): string | undefined {
    if (this.made >= MAX_TEMPLATES) return undefined;
    const choice = (c.choices as Obj[])[0];
    if (Object.getPrototypeOf(choice) !== Object.prototype) return undefined;
    const top = shapeOf(c, 'choices');
    const inner = shapeOf(choice, 'delta');
    if (!top || !inner) return undefined;
    const delta = choice.delta as Obj;
    delta.content = HOLE;
    let json: string;
    try {
      json = JSON.stringify(c);
    } finally {
      delta.content = text;
    }
    const at = json.indexOf(HOLE_JSON);
    if (at === -1 || json.indexOf(HOLE_JSON, at + 1) !== -1) return undefined;
    this.made++;
    this.top = top;
    this.choice = inner;
    this.head = 'data: ' + json.slice(0, at);
    this.tail = json.slice(at + HOLE_JSON.length) + '\n\n';
    return this.head + JSON.stringify(text) + this.tail;
  }
}

/** An object's keys in order and their values. */
interface Shape {
  keys: string[];
  values: unknown[];
}

/** The keys and values of `o`, or undefined when a member other than `nested` is not a primitive. */
function shapeOf(o: Obj, nested: string): Shape | undefined {
  const keys: string[] = [];
  const values: unknown[] = [];
  for (const k in o) {
    if (k !== nested && !primitive(o[k])) return undefined;
    keys.push(k);
    values.push(o[k]);
  }
  return { keys, values };
}

/** Whether `o` has the keys of `s` in the same order, and its values but for `nested`. */
function hasShape(o: Obj, nested: string, s: Shape): boolean {
  let i = 0;
  for (const k in o) {
    if (s.keys[i] !== k || (k !== nested && o[k] !== s.values[i])) return false;
    i++;
  }
  return i === s.keys.length;
}

/** The text of a chunk whose only choice's delta is `{ content: string }` (plain objects all), else undefined. */
function textOf(c: Obj): string | undefined {
  if (Object.getPrototypeOf(c) !== Object.prototype) return undefined;
  const choices = c.choices;
  if (!Array.isArray(choices) || choices.length !== 1 || Object.getPrototypeOf(choices) !== Array.prototype) return undefined;
  const delta = (choices[0] as Obj | undefined)?.delta as Obj | undefined;
  if (delta === null || typeof delta !== 'object' || Object.getPrototypeOf(delta) !== Object.prototype) return undefined;
  const text = delta.content;
  if (typeof text !== 'string') return undefined;
  for (const k in delta) if (k !== 'content') return undefined;
  return text;
}

/** A value JSON.stringify writes the same way whenever it is === (no object that could change, no toJSON). */
function primitive(v: unknown): boolean {
  return v === null || v === undefined || typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean';
}

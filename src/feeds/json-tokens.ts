/**
 * What the JSON tokenizer (json-tokenizer.ts) reports and the byte tables it reads with: the sink
 * of values in document order, the result of one document, and the lookups for escapes and details.
 */
/** What the tokenizer reports, in document order. Positions are byte offsets into the buffer. */
export interface JsonSink {
  /** An object or array opens at `start` (its depth is the number of containers already open). */
  openObject(start: number): void;
  openArray(start: number): void;
  /** A member's key, between the quotes at start - 1 and end; `escaped`: it has backslash escapes. */
  key(start: number, end: number, escaped: boolean): void;
  /** A string value [start, end) quotes included; `length`: its length in code points as ajv counts them. */
  string(start: number, end: number, length: number): void;
  number(start: number, end: number): void;
  /** true, false or null: `isNull` tells which kind. */
  literal(start: number, end: number, isNull: boolean): void;
  /** The innermost container closes; `end` is the byte after its bracket. */
  closeObject(end: number): void;
  closeArray(end: number): void;
}

/** The top-level value, worded as the rejection details word it. */
export type TopLevel = 'object' | 'an array' | 'string' | 'null' | 'boolean' | 'number';

export type TokenizeResult =
  | { readonly kind: 'invalid_json'; readonly detail: string }
  | { readonly kind: 'too_deep' }
  | { readonly kind: 'not_i_json'; readonly detail: string }
  | { readonly kind: 'value'; readonly top: TopLevel };

export const HEX = new Int8Array(256).fill(-1);
for (let c = 0; c < 10; c++) HEX[0x30 + c] = c;
for (let c = 0; c < 6; c++) {
  HEX[0x41 + c] = 10 + c;
  HEX[0x61 + c] = 10 + c;
}
/** Characters allowed after a backslash, other than `u`: " \ / b f n r t. */
export const SIMPLE_ESCAPE = new Uint8Array(256);
for (const c of '"\\/bfnrt') SIMPLE_ESCAPE[c.charCodeAt(0)] = 1;

export function show(c: number): string {
  if (c >= 0x21 && c <= 0x7e) return `'${String.fromCharCode(c)}'`;
  return `byte 0x${c.toString(16).padStart(2, '0')}`;
}

export function topLevel(c: number): TopLevel {
  return c === 0x7b ? 'object' : c === 0x5b ? 'an array' : c === 0x22 ? 'string' : c === 0x6e ? 'null' : c === 0x74 || c === 0x66 ? 'boolean' : 'number';
}

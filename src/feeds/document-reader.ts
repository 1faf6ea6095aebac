/**
 * What the two ways of reading a drop (parse-reader.ts: JSON.parse + ajv; scan-reader.ts: one
 * pass over the bytes) share: the interface validate.ts uses, and the rules both must word alike
 * (too deep, schema faults, long values in details).
 */
import type { ErrorObject } from 'ajv';
import { RejectionError } from '../errors.js';

/** The top-level fields the service checks itself, beyond the schema. */
export const HEAD_FIELDS = ['bookmaker', 'sport', 'generated_at'] as const;
export type HeadField = (typeof HEAD_FIELDS)[number];

/** What the checks after the schema need from a document, however it was read. */
export interface DocumentHead {
  /** `{}`: stamping adds no comma. */
  readonly empty: boolean;
  /** The field's value (the last one, as JSON.parse keeps), or undefined when absent. */
  field(name: HeadField): { readonly value: unknown } | undefined;
}

/**
 * Reads the document or throws a RejectionError: `bytes` less the BOM, `start` the first byte in
 * them that is not white space, `raw` the drop as it came (so offsets in details are the file's).
 */
export type DocumentReader = (bytes: Buffer, start: number, raw: Buffer) => DocumentHead;

/**
 * Top-level values larger than this many bytes of JSON are not shown in a detail (no bookmaker,
 * sport or generated_at is this long): they are rejected all the same, with a shorter detail.
 */
export const HEAD_DECODE_LIMIT = 64 * 1024;

/**
 * Stands in for a top-level value too large to show: compares unequal to every string, and
 * prints as a description instead of the value.
 */
export class ElidedValue {
  constructor(readonly description: string) {}
  toString(): string {
    return this.description;
  }
  toJSON(): string {
    return this.description;
  }
}

/** `(a string of N bytes)`: `first` is the value's first JSON byte, `size` its JSON size. */
export function elided(first: number | undefined, size: number): ElidedValue {
  const what = first === 0x22 ? 'a string' : first === 0x7b ? 'an object' : first === 0x5b ? 'an array' : 'a value';
  return new ElidedValue(`(${what} of ${size} bytes)`);
}

export function tooDeep(maxDepth: number): RejectionError {
  return new RejectionError('schema', `nested deeper than ${maxDepth} levels`);
}

export function notAnObject(what: string): RejectionError {
  return new RejectionError('not_an_object', `the top level is ${what}, not an object`);
}

export function schemaFault(err: Pick<ErrorObject, 'instancePath' | 'message'> | null | undefined): RejectionError {
  if (!err) return new RejectionError('schema', 'does not match the document schema');
  const at = err.instancePath === '' ? 'the document' : err.instancePath;
  return new RejectionError('schema', `${at} ${err.message ?? 'is invalid'}`);
}

/**
 * Deepest nesting of arrays and objects, scanning bytes outside strings. Stops counting once past
 * `limit`, so hostile input costs one linear pass at most and never a deep recursion. Too deep
 * is `schema` even in a document that is not JSON: both readers check it before `invalid_json`.
 */
export function nestingDepth(bytes: Uint8Array, limit: number): number {
  let depth = 0;
  let max = 0;
  let inString = false;
  for (let i = 0; i < bytes.length; i++) {
    const c = bytes[i];
    if (inString) {
      if (c === 0x5c)
        i++; // backslash: skip the escaped character
      else if (c === 0x22) inString = false;
      continue;
    }
    if (c === 0x22) inString = true;
    else if (c === 0x7b || c === 0x5b) {
      if (++depth > max) {
        max = depth;
        if (max > limit) return max;
      }
    } else if (c === 0x7d || c === 0x5d) depth--;
  }
  return max;
}

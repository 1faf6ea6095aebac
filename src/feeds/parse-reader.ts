/**
 * The common way to read a drop: JSON.parse, then ajv (compiled once by the caller) over the
 * object graph. Costs a few times the drop's size in memory at its peak, so validate.ts sends
 * large drops to the one-pass scan (scan-reader.ts) instead; both give the same outcome, reason
 * and detail.
 */
import type { ValidateFunction } from 'ajv';
import { RejectionError } from '../errors.js';
import { elided, HEAD_DECODE_LIMIT, nestingDepth, notAnObject, schemaFault, tooDeep, type DocumentReader } from './document-reader.js';
import { createDocumentScanner } from './scan.js';

export function createParseReader(validateSchema: ValidateFunction, maxDepth: number): DocumentReader {
  // The tokenizer without a schema, before JSON.parse: it words syntax errors as the one-pass scan
  // does (what and at which byte of the file: JSON.parse's messages change between Node versions and
  // count UTF-16 units), and only it sees what JSON.parse hides: I-JSON violations (a member twice,
  // a number past a double, a lone surrogate).
  const syntax = createDocumentScanner(null, maxDepth, []);
  return (bytes, start, raw) => {
    // Before JSON.parse, which recurses.
    if (nestingDepth(bytes, maxDepth) > maxDepth) throw tooDeep(maxDepth);
    const r = syntax(raw, raw.length - bytes.length + start);
    if (r.kind === 'invalid_json' || r.kind === 'not_i_json') throw new RejectionError(r.kind, r.detail);
    let doc: unknown;
    try {
      doc = JSON.parse(bytes.toString('utf8'));
    } catch (err) {
      throw new RejectionError('invalid_json', (err as Error).message);
    }
    if (doc === null || typeof doc !== 'object' || Array.isArray(doc)) {
      throw notAnObject(Array.isArray(doc) ? 'an array' : doc === null ? 'null' : typeof doc);
    }
    if (!validateSchema(doc)) throw schemaFault(validateSchema.errors?.[0]);
    const record = doc as Record<string, unknown>;
    return {
      empty: Object.keys(record).length === 0,
      field: (name) => (Object.hasOwn(record, name) ? { value: shown(record[name]) } : undefined),
    };
  };
}

/** The value, or an ElidedValue when its JSON is over HEAD_DECODE_LIMIT bytes (as the one-pass scan does). */
function shown(value: unknown): unknown {
  if (value === null || (typeof value !== 'string' && typeof value !== 'object')) return value;
  if (typeof value === 'string' && value.length * 6 + 2 <= HEAD_DECODE_LIMIT) return value;
  const json = JSON.stringify(value);
  const size = Buffer.byteLength(json);
  return size > HEAD_DECODE_LIMIT ? elided(json.charCodeAt(0), size) : value;
}

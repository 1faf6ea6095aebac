/**
 * The way to read large drops: one pass over the bytes (scan.ts), depth included, which never
 * builds the document; only the head fields are decoded. Same outcome, reason and detail as
 * JSON.parse + ajv (parse-reader.ts).
 */
import { RejectionError } from '../errors.js';
import { elided, HEAD_DECODE_LIMIT, HEAD_FIELDS, nestingDepth, notAnObject, schemaFault, tooDeep, type DocumentReader } from './document-reader.js';
import { createDocumentScanner, type ByteRange } from './scan.js';
import type { SchemaPlan } from './schema-plan.js';

export function createScanReader(plan: SchemaPlan | null, maxDepth: number): DocumentReader {
  const scan = createDocumentScanner(plan, maxDepth, HEAD_FIELDS);
  return (bytes, start, raw) => {
    const r = scan(raw, raw.length - bytes.length + start);
    switch (r.kind) {
      case 'invalid_json':
        // Depth comes first, as on the other path. Where the JSON is valid, the scan measured the
        // same depth as nestingDepth would; beyond that, only nestingDepth can tell.
        if (nestingDepth(bytes, maxDepth) > maxDepth) throw tooDeep(maxDepth);
        throw new RejectionError('invalid_json', r.detail);
      case 'too_deep':
        throw tooDeep(maxDepth);
      case 'not_i_json':
        throw new RejectionError('not_i_json', r.detail);
      case 'not_an_object':
        throw notAnObject(r.what);
      case 'object':
        break;
    }
    if (r.fault) throw schemaFault(r.fault);
    const { fields } = r;
    return {
      empty: r.members === 0,
      field: (name) => {
        const range = fields[HEAD_FIELDS.indexOf(name)];
        return range === undefined ? undefined : { value: decodeValue(raw, range) };
      },
    };
  };
}

/** The value at `range` (JSON.parse of just those bytes), or an ElidedValue beyond HEAD_DECODE_LIMIT bytes. */
function decodeValue(buf: Buffer, range: ByteRange): unknown {
  const size = range.end - range.start;
  if (size <= HEAD_DECODE_LIMIT) return JSON.parse(buf.toString('utf8', range.start, range.end)) as unknown;
  return elided(buf[range.start], size);
}

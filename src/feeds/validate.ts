/**
 * Document checks (CONTRACT §3), as a pure function of the bytes, the feed, the registry and the
 * clock. Either returns the bytes to publish or throws a RejectionError with one of the ten reason
 * codes. Nothing here touches the disk, Redis or the store.
 */
import { isUtf8 } from 'node:buffer';
import { readFileSync } from 'node:fs';
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import type { Bookmaker } from '../config.js';
import { RejectionError } from '../errors.js';
import { schemaPath } from '../paths.js';
import { parseGeneratedAt } from './generated-at.js';
import type { FeedInfo } from './registry.js';

export interface DocumentLimits {
  readonly maxFileBytes: number;
  readonly futureSkewMs: number;
  readonly maxDepth: number;
}

export interface ValidDocument {
  /** What to publish: the drop's bytes, less a leading BOM, with `generated_at` stamped if absent. */
  readonly bytes: Buffer;
  readonly generatedAt: string;
  readonly generatedAtMs: number;
  /** True when `generated_at` was missing and stamped with the time of receipt. */
  readonly stamped: boolean;
}

export interface DocumentCheck {
  readonly feed: FeedInfo;
  readonly bookmaker: Bookmaker;
  readonly bytes: Buffer;
  readonly receivedAt: Date;
  readonly now: Date;
}

export type DocumentValidator = (check: DocumentCheck) => ValidDocument;

const BOM = Buffer.from([0xef, 0xbb, 0xbf]);

/** Compile the loose schema once; the returned function is pure and cheap to call. */
export function createDocumentValidator(limits: DocumentLimits, schema?: object): DocumentValidator {
  const ajv = new Ajv({ allErrors: false, strict: false });
  const validateSchema = ajv.compile(schema ?? loadDocumentSchema());
  return (check) => validateDocument(check, limits, validateSchema);
}

export function loadDocumentSchema(): object {
  return JSON.parse(readFileSync(schemaPath('document.schema.json'), 'utf8')) as object;
}

function validateDocument(
  { feed, bookmaker, bytes: raw, receivedAt, now }: DocumentCheck,
  limits: DocumentLimits,
  validateSchema: ValidateFunction,
): ValidDocument {
  if (raw.length > limits.maxFileBytes) {
    throw new RejectionError('too_large', `${raw.length} bytes; the limit is ${limits.maxFileBytes}`);
  }
  const bytes = raw.subarray(0, 3).equals(BOM) ? raw.subarray(3) : raw;
  const start = firstNonSpace(bytes);
  if (start === bytes.length) throw new RejectionError('empty', raw.length === 0 ? 'the file is empty' : 'the file holds only white space');
  if (!isUtf8(bytes)) throw new RejectionError('invalid_json', 'not valid UTF-8');

  const depth = nestingDepth(bytes, limits.maxDepth);
  if (depth > limits.maxDepth) {
    throw new RejectionError('schema', `nested deeper than ${limits.maxDepth} levels`);
  }
  let doc: unknown;
  try {
    doc = JSON.parse(bytes.toString('utf8'));
  } catch (err) {
    throw new RejectionError('invalid_json', (err as Error).message);
  }
  if (doc === null || typeof doc !== 'object' || Array.isArray(doc)) {
    throw new RejectionError('not_an_object', `the top level is ${Array.isArray(doc) ? 'an array' : doc === null ? 'null' : typeof doc}, not an object`);
  }
  if (!validateSchema(doc)) {
    throw new RejectionError('schema', describeSchemaError(validateSchema.errors?.[0]));
  }
  const record = doc as Record<string, unknown>;
  const has = (k: string) => Object.prototype.hasOwnProperty.call(record, k);

  if (has('bookmaker')) {
    const given = record.bookmaker as string;
    if (given !== bookmaker.key && given !== bookmaker.name.toLowerCase()) {
      throw new RejectionError(
        'bookmaker_mismatch',
        `the document says "${given}", the filename names "${bookmaker.key}"`,
      );
    }
  }
  if (feed.sport !== null && has('sport') && record.sport !== feed.sport) {
    throw new RejectionError('sport_mismatch', `the document says "${String(record.sport)}", the filename names "${feed.sport}"`);
  }

  if (!has('generated_at')) {
    const generatedAt = receivedAt.toISOString();
    return { bytes: stampGeneratedAt(bytes, start, generatedAt, Object.keys(record).length === 0), generatedAt, generatedAtMs: receivedAt.getTime(), stamped: true };
  }
  const value = record.generated_at;
  const ms = typeof value === 'string' ? parseGeneratedAt(value) : undefined;
  if (ms === undefined) {
    throw new RejectionError('bad_generated_at', `${JSON.stringify(value)} is not an ISO 8601 UTC time such as 2026-11-21T18:30:00Z`);
  }
  if (ms > now.getTime() + limits.futureSkewMs) {
    throw new RejectionError('future_generated_at', `${value as string} is more than ${limits.futureSkewMs / 1000}s ahead of the server clock (${now.toISOString()})`);
  }
  return { bytes, generatedAt: value as string, generatedAtMs: ms, stamped: false };
}

function firstNonSpace(bytes: Buffer): number {
  let i = 0;
  while (i < bytes.length) {
    const c = bytes[i];
    if (c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09) break;
    i++;
  }
  return i;
}

/**
 * Deepest nesting of arrays and objects, scanning bytes outside strings. Stops counting once past
 * `limit`, so hostile input costs one linear pass at most and never a deep recursion.
 */
export function nestingDepth(bytes: Uint8Array, limit: number): number {
  let depth = 0;
  let max = 0;
  let inString = false;
  for (let i = 0; i < bytes.length; i++) {
    const c = bytes[i];
    if (inString) {
      if (c === 0x5c) i++; // backslash: skip the escaped character
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

/** Insert `"generated_at":"…"` as the first property, leaving every other byte as it was. */
function stampGeneratedAt(bytes: Buffer, start: number, iso: string, empty: boolean): Buffer {
  const field = Buffer.from(`"generated_at":${JSON.stringify(iso)}${empty ? '' : ','}`);
  return Buffer.concat([bytes.subarray(0, start + 1), field, bytes.subarray(start + 1)]);
}

function describeSchemaError(err: ErrorObject | null | undefined): string {
  if (!err) return 'does not match the document schema';
  const at = err.instancePath === '' ? 'the document' : err.instancePath;
  return `${at} ${err.message ?? 'is invalid'}`;
}

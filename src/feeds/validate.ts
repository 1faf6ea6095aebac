/**
 * Document checks, as a pure function of the bytes, the feed, the registry and the clock. Either
 * returns the bytes to publish or throws a RejectionError with one of the reason codes
 * (REJECTION_REASONS).
 * Nothing here touches the disk, Redis or the store.
 *
 * A drop is published when it is a UTF-8 I-JSON object (RFC 7493: ijson.ts; a leading byte order
 * mark is dropped) that passes the loose schema in schemas/, whose `bookmaker` (when present) is the filename's key or
 * the bookmaker's public name in lowercase, whose `sport` (when present, in a per-sport file) is
 * the filename's sport, and whose `generated_at` (when present) is an ISO 8601 UTC time not later
 * than now plus the allowed skew. A missing `generated_at` is stamped with the time of receipt.
 *
 * The document is read one of two ways, with the same outcome, reason and detail
 * (test/feeds/differential.test.ts): JSON.parse + ajv for drops under `onePassMinBytes` (64 KiB:
 * under it the two cost about the same), and one pass over the bytes for larger ones, which is
 * faster and never builds the document (JSON.parse + ajv peak at several times a
 * drop's size in memory, and leave it all to the garbage collector). The
 * checks before reading (size, BOM, empty, UTF-8) and after (bookmaker, sport, generated_at) are
 * the same code for both.
 */
import { isUtf8 } from 'node:buffer';
import { readFileSync } from 'node:fs';
import { Ajv } from 'ajv';
import type { Bookmaker } from '../config.js';
import { RejectionError } from '../errors.js';
import { schemaPath } from '../paths.js';
import type { DocumentReader } from './document-reader.js';
import { parseGeneratedAt } from './generated-at.js';
import { createParseReader } from './parse-reader.js';
import { acceptedBookmakerValues, type FeedInfo } from './registry.js';
import { createScanReader } from './scan-reader.js';
import { compileSchemaPlan } from './schema-plan.js';

export { nestingDepth } from './document-reader.js';

export interface DocumentLimits {
  readonly maxFileBytes: number;
  readonly futureSkewMs: number;
  readonly maxDepth: number;
  /**
   * Drops of at least this many bytes are checked in one pass over the bytes instead of
   * JSON.parse + ajv (same outcome; next to no memory beyond the bytes). Default
   * DEFAULT_ONE_PASS_MIN_BYTES; 0: every drop; Infinity: none. Ignored (ajv for every drop) when
   * the schema uses a keyword the one-pass check does not support.
   */
  readonly onePassMinBytes?: number;
}

export const DEFAULT_ONE_PASS_MIN_BYTES = 64 * 1024;

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

/** Compile the loose schema once (ajv, and the one-pass plan); the returned function is pure. */
export function createDocumentValidator(limits: DocumentLimits, schema?: object): DocumentValidator {
  const source = schema ?? loadDocumentSchema();
  const parsed = createParseReader(new Ajv({ allErrors: false, strict: false }).compile(source), limits.maxDepth);
  const compiled = compileSchemaPlan(source);
  const threshold = limits.onePassMinBytes ?? DEFAULT_ONE_PASS_MIN_BYTES;
  const scanned = compiled.ok && threshold !== Infinity ? createScanReader(compiled.plan, limits.maxDepth) : null;
  return (check) => validateDocument(check, limits, scanned !== null && check.bytes.length >= threshold ? scanned : parsed);
}

/** Whether a schema can be checked in one pass (else: why not; drops then go through ajv only, and the worker says so at start). */
export function onePassSupport(schema: object): { readonly ok: true } | { readonly ok: false; readonly unsupported: string } {
  const compiled = compileSchemaPlan(schema);
  return compiled.ok ? { ok: true } : compiled;
}

export function loadDocumentSchema(): object {
  return JSON.parse(readFileSync(schemaPath('document.schema.json'), 'utf8')) as object;
}

function validateDocument({ feed, bookmaker, bytes: raw, receivedAt, now }: DocumentCheck, limits: DocumentLimits, read: DocumentReader): ValidDocument {
  if (raw.length > limits.maxFileBytes) {
    throw new RejectionError('too_large', `${raw.length} bytes; the limit is ${limits.maxFileBytes}`);
  }
  const bytes = raw.subarray(0, 3).equals(BOM) ? raw.subarray(3) : raw;
  const start = firstNonSpace(bytes);
  if (start === bytes.length) throw new RejectionError('empty', raw.length === 0 ? 'the file is empty' : 'the file holds only white space');
  if (!isUtf8(bytes)) throw new RejectionError('invalid_json', 'not valid UTF-8');

  const head = read(bytes, start, raw);

  const bookmakerField = head.field('bookmaker');
  if (bookmakerField) {
    const given = bookmakerField.value as string;
    const accepted = acceptedBookmakerValues(bookmaker);
    if (!accepted.includes(given)) {
      throw new RejectionError('bookmaker_mismatch', `the document says "${given}", the filename names "${bookmaker.key}"; accepted: ${accepted.join(' or ')}`);
    }
  }
  const sportField = head.field('sport');
  if (feed.sport !== null && sportField && sportField.value !== feed.sport) {
    throw new RejectionError('sport_mismatch', `the document says "${String(sportField.value)}", the filename names "${feed.sport}"`);
  }

  const generatedAtField = head.field('generated_at');
  if (!generatedAtField) {
    const generatedAt = receivedAt.toISOString();
    return { bytes: stampGeneratedAt(bytes, start, generatedAt, head.empty), generatedAt, generatedAtMs: receivedAt.getTime(), stamped: true };
  }
  const value = generatedAtField.value;
  const ms = typeof value === 'string' ? parseGeneratedAt(value) : undefined;
  if (ms === undefined) {
    throw new RejectionError('bad_generated_at', `${JSON.stringify(value)} is not an ISO 8601 UTC time such as 2026-11-21T18:30:00Z`);
  }
  if (ms > now.getTime() + limits.futureSkewMs) {
    throw new RejectionError(
      'future_generated_at',
      `${value as string} is more than ${limits.futureSkewMs / 1000}s ahead of the server clock (${now.toISOString()})`,
    );
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

/** Insert `"generated_at":"…"` as the first property, leaving every other byte as it was. */
function stampGeneratedAt(bytes: Buffer, start: number, iso: string, empty: boolean): Buffer {
  const field = Buffer.from(`"generated_at":${JSON.stringify(iso)}${empty ? '' : ','}`);
  return Buffer.concat([bytes.subarray(0, start + 1), field, bytes.subarray(start + 1)]);
}

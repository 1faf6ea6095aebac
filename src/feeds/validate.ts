/**
 * Document checks (CONTRACT §3), as a pure function of the bytes, the feed, the registry and the
 * clock. Either returns the bytes to publish or throws a RejectionError with one of the ten reason
 * codes. Nothing here touches the disk, Redis or the store.
 *
 * Two ways to read the document, with the same outcome. By default every drop is checked in one
 * pass over its bytes (scan.ts, against the schema in schemas/ compiled by schema-plan.ts), which
 * never builds the document: JSON.parse + ajv cost about 4.7 times a drop's size in memory at peak
 * and take 1.6–2 times as long (1.6 ms against 1.0 ms for 110 KB, 20 ms against 10 ms for 1.1 MB).
 * JSON.parse + ajv is the reference: test/feeds.differential.test.ts holds the two to the same
 * outcome, reason and detail on generated drops, and it is what runs when the schema uses a
 * keyword the one-pass check does not know (or for drops under limits.onePassMinBytes). The checks
 * before (size, BOM, empty, UTF-8) and after (bookmaker, sport, generated_at) are shared; the
 * depth limit is nestingDepth on the JSON.parse path and the scan's own stack on the other.
 */
import { isUtf8 } from 'node:buffer';
import { readFileSync } from 'node:fs';
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import type { Bookmaker } from '../config.js';
import { RejectionError } from '../errors.js';
import { schemaPath } from '../paths.js';
import { parseGeneratedAt } from './generated-at.js';
import type { FeedInfo } from './registry.js';
import { createDocumentScanner, decodeValue, type SchemaFault } from './scan.js';
import { compileSchemaPlan, type SchemaPlan } from './schema-plan.js';

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

export const DEFAULT_ONE_PASS_MIN_BYTES = 0;

/** The top-level fields the service checks itself, beyond the schema. */
const HEAD_FIELDS = ['bookmaker', 'sport', 'generated_at'] as const;
type HeadField = (typeof HEAD_FIELDS)[number];

/**
 * Top-level values larger than this are not decoded by the one-pass check (no bookmaker, sport
 * or generated_at is this long): they are rejected all the same, with a shorter detail.
 */
const HEAD_DECODE_LIMIT = 64 * 1024;

/** What the checks after the schema need from a document, however it was read. */
interface DocumentHead {
  /** `{}`: stamping adds no comma. */
  readonly empty: boolean;
  /** The field's value (the last one, as JSON.parse keeps), or undefined when absent. */
  field(name: HeadField): { readonly value: unknown } | undefined;
}

/**
 * Reads the document or throws a RejectionError: `bytes` less the BOM, `start` the first byte in
 * them that is not white space, `raw` the drop as it came (so offsets in details are the file's).
 */
type DocumentReader = (bytes: Buffer, start: number, raw: Buffer) => DocumentHead;

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

export interface ValidatorOptions {
  /**
   * Run the one-pass check over a generated document a few times before returning (a worker at
   * start-up: ~60 ms). V8 optimizes the check only once it has run a while: until then a
   * 200 KB drop took 8–21 ms to check instead of ~1 ms, which the first drops after every start
   * paid in freshness.
   */
  readonly warmUp?: boolean;
}

/** Compile the loose schema once; the returned function is pure and cheap to call. */
export function createDocumentValidator(limits: DocumentLimits, schema?: object, options: ValidatorOptions = {}): DocumentValidator {
  const source = schema ?? loadDocumentSchema();
  const ajv = new Ajv({ allErrors: false, strict: false });
  const validateSchema = ajv.compile(source);
  const byAjv = ajvReader(validateSchema, limits.maxDepth);
  const compiled = compileSchemaPlan(source);
  const threshold = limits.onePassMinBytes ?? DEFAULT_ONE_PASS_MIN_BYTES;
  const inOnePass = compiled.ok ? onePassReader(compiled.plan, limits.maxDepth) : null;
  // (Nothing to warm up when no drop takes the one-pass path: `onePassMinBytes: Infinity`.)
  if (options.warmUp && inOnePass !== null && Number.isFinite(threshold)) warmUp(inOnePass);
  return (check) => validateDocument(check, limits, inOnePass !== null && check.bytes.length >= threshold ? inOnePass : byAjv);
}

/**
 * Rounds of the warm-up, per layout. Measured (bench/check.ts, "first three checks"): after four
 * rounds the first 200 KB drop still took 3–8 ms in one start of two (V8 had compiled the
 * check's parts while the first rounds ran, and threw that code away at the first drop); after
 * ten, 1.0–1.5 ms, for ~60 ms of warm-up (~2.7 MB checked).
 */
const WARM_UP_ROUNDS = 10;

function warmUp(read: DocumentReader): void {
  // Both layouts publishers use (indented and compact), of the shipped schema's shape; under
  // another schema they may be rejected, which warms the same code.
  for (const doc of [warmUpDocument(2), warmUpDocument(0)]) {
    for (let i = 0; i < WARM_UP_ROUNDS; i++) {
      try {
        read(doc, 0, doc);
      } catch (err) {
        if (!(err instanceof RejectionError)) throw err;
      }
    }
  }
}

/**
 * An odds document (~190 KB indented, ~80 KB compact) that takes every way through the check: the
 * schema's fields in every type it allows, fields it does not name (scalars, objects, arrays,
 * empty ones), numbers with signs, fractions and exponents, strings with escapes and UTF-8 of two
 * to four bytes. A drop that takes a way the warm-up did not makes V8 throw code away and check
 * that drop slowly (measured: 4–6 ms for the first 200 KB drop after a warm-up without fields the
 * schema does not name, against ~0.6).
 */
function warmUpDocument(indent: number): Buffer {
  const events = Array.from({ length: 60 }, (_, e) => ({
    event_id: e % 2 ? `ev-${e}` : e,
    name: e % 5 ? `Home ${e} vs Away ${e}` : `Atl\u00e9tico \u201cB\u201d vs M\u00fcnchen \u{1F3C6} "A\\B"\u0001`,
    sport: 'soccer',
    league: 'Warm-up League',
    starts_at: '2026-01-01T12:00:00Z',
    status: e % 3 ? 'live' : null,
    minute: e,
    suspended: e % 4 === 0,
    score: { home: e % 3, away: -1, periods: [[1, 0], [0, 2]], extra: {} },
    tags: e % 2 ? [] : ['derby', 1.5e-3, -2e10, false],
    markets: Array.from({ length: 6 }, (_, m) => ({
      market: `m${m}`,
      line: m % 2 ? -2.5 : null,
      selections: Array.from({ length: 3 }, (_, k) => ({ name: `s${k}`, odds: k === 2 ? null : 1.5 + k + m / 100, extra: true })),
    })),
  }));
  return Buffer.from(JSON.stringify({ bookmaker: 'warm-up', sport: 'soccer', generated_at: '2026-01-01T00:00:00Z', events }, null, indent));
}

/** Whether a schema can be checked in one pass (else: why not; drops then go through ajv only, and the worker says so at start). */
export function onePassSupport(schema: object): { readonly ok: true } | { readonly ok: false; readonly unsupported: string } {
  const compiled = compileSchemaPlan(schema);
  return compiled.ok ? { ok: true } : compiled;
}

export function loadDocumentSchema(): object {
  return JSON.parse(readFileSync(schemaPath('document.schema.json'), 'utf8')) as object;
}

function validateDocument(
  { feed, bookmaker, bytes: raw, receivedAt, now }: DocumentCheck,
  limits: DocumentLimits,
  read: DocumentReader,
): ValidDocument {
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
    if (given !== bookmaker.key && given !== bookmaker.name.toLowerCase()) {
      throw new RejectionError(
        'bookmaker_mismatch',
        `the document says "${given}", the filename names "${bookmaker.key}"`,
      );
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
    throw new RejectionError('future_generated_at', `${value as string} is more than ${limits.futureSkewMs / 1000}s ahead of the server clock (${now.toISOString()})`);
  }
  return { bytes, generatedAt: value as string, generatedAtMs: ms, stamped: false };
}

function tooDeep(maxDepth: number): RejectionError {
  return new RejectionError('schema', `nested deeper than ${maxDepth} levels`);
}

/** The reference path: the depth, JSON.parse, then ajv over the object graph (see the header). */
function ajvReader(validateSchema: ValidateFunction, maxDepth: number): DocumentReader {
  return (bytes) => {
    // Before JSON.parse, which recurses: too deep is `schema` even in a document that is not JSON.
    if (nestingDepth(bytes, maxDepth) > maxDepth) throw tooDeep(maxDepth);
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
    return {
      empty: Object.keys(record).length === 0,
      field: (name) => (Object.prototype.hasOwnProperty.call(record, name) ? { value: record[name] } : undefined),
    };
  };
}

/** The default path: one pass over the bytes (scan.ts), depth included; only the head fields are decoded. */
function onePassReader(plan: SchemaPlan | null, maxDepth: number): DocumentReader {
  // One scanner for the validator's life: see createDocumentScanner for why it matters.
  const scan = createDocumentScanner(plan, maxDepth, HEAD_FIELDS);
  return (bytes, start, raw) => {
    const r = scan(raw, raw.length - bytes.length + start);
    switch (r.kind) {
      case 'invalid_json':
        // As on the other path, depth comes first. Where the JSON is valid, the scan measured the
        // same depth as nestingDepth would; beyond that, only nestingDepth can tell.
        if (nestingDepth(bytes, maxDepth) > maxDepth) throw tooDeep(maxDepth);
        throw new RejectionError('invalid_json', r.detail);
      case 'too_deep':
        throw tooDeep(maxDepth);
      case 'not_an_object':
        throw new RejectionError('not_an_object', `the top level is ${r.what}, not an object`);
      case 'object':
        break;
    }
    if (r.fault) throw new RejectionError('schema', describeSchemaError(r.fault));
    const { fields } = r;
    return {
      empty: r.members === 0,
      field: (name) => {
        const range = fields[HEAD_FIELDS.indexOf(name)];
        return range === undefined ? undefined : { value: decodeValue(raw, range, HEAD_DECODE_LIMIT) };
      },
    };
  };
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

function describeSchemaError(err: Pick<ErrorObject, 'instancePath' | 'message'> | SchemaFault | null | undefined): string {
  if (!err) return 'does not match the document schema';
  const at = err.instancePath === '' ? 'the document' : err.instancePath;
  return `${at} ${err.message ?? 'is invalid'}`;
}

/**
 * Differential tests: the one-pass check over the bytes (src/feeds/scan-reader.ts, forced with
 * onePassMinBytes: 0) against JSON.parse + ajv (src/feeds/parse-reader.ts, forced with
 * onePassMinBytes: Infinity), on the same drops. They must agree on the outcome, the reason and
 * the detail, and, when published, on the bytes, generatedAt(Ms) and stamping. The drops: every
 * case of the corpus fixture; odds documents with wrong types anywhere the schema looks,
 * duplicate keys, escaped keys and strings, odd numbers (past a double too) and white space; arbitrary JSON; the same,
 * mutated byte by byte; deep nesting; and random schemas of the supported keywords.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { RejectionError, type RejectionReason } from '../../src/errors.js';
import { buildRegistry, parseFilename } from '../../src/feeds/registry.js';
import { compileSchemaPlan } from '../../src/feeds/schema-plan.js';
import {
  DEFAULT_ONE_PASS_MIN_BYTES,
  createDocumentValidator,
  loadDocumentSchema,
  type DocumentLimits,
  type DocumentValidator,
  type ValidDocument,
} from '../../src/feeds/validate.js';
import {
  DEFAULT_GENERATED_AT,
  EXAMPLE_BOOKMAKERS,
  EXAMPLE_FEEDS,
  EXAMPLE_SPORTS,
  generateCorpus,
  generateDocument,
  type FixtureFeed,
} from '../fixtures/corpus.js';

const scratch = mkdtempSync(join(tmpdir(), 'oddsfiles-differential-'));
const config = loadConfig({ env: {}, cwd: scratch });
rmSync(scratch, { recursive: true, force: true });
const registry = buildRegistry(config.bookmakers, config.sports);
const NOW = new Date('2026-11-21T18:31:00Z');
const RECEIVED = new Date('2026-11-21T18:30:59.123Z');

interface Pair {
  readonly onePass: DocumentValidator;
  readonly parsed: DocumentValidator;
}
const pairOf = (limits: DocumentLimits, schema?: object): Pair => ({
  onePass: createDocumentValidator({ ...limits, onePassMinBytes: 0 }, schema),
  parsed: createDocumentValidator({ ...limits, onePassMinBytes: Infinity }, schema),
});
const standard = pairOf(config.limits);
const shallow = pairOf({ ...config.limits, maxDepth: 5 });

type Outcome = { published: ValidDocument } | { reason: RejectionReason; detail: string };

function run(validate: DocumentValidator, feed: Pick<FixtureFeed, 'filename'>, bytes: Buffer, now = NOW): Outcome {
  const info = parseFilename(registry, feed.filename)!;
  const bookmaker = registry.bookmakers.get(info.bookmaker)!;
  try {
    return { published: validate({ feed: info, bookmaker, bytes, receivedAt: RECEIVED, now }) };
  } catch (err) {
    if (err instanceof RejectionError) return { reason: err.reason, detail: err.detail };
    throw err;
  }
}

/** Outcomes seen, per property: the generators must reach every kind, or the test proves little. */
const seen = new Map<string, Map<string, number>>();

function agree(label: string, pair: Pair, feed: Pick<FixtureFeed, 'filename'>, bytes: Buffer, now = NOW): void {
  const a = run(pair.onePass, feed, bytes, now);
  const b = run(pair.parsed, feed, bytes, now);
  const key = 'published' in b ? 'published' : b.reason;
  const counts = seen.get(label) ?? new Map<string, number>();
  counts.set(key, (counts.get(key) ?? 0) + 1);
  seen.set(label, counts);
  expectSame(a, b, `on ${JSON.stringify(bytes.subarray(0, 1600).toString('utf8').slice(0, 400))}: one pass`, 'JSON.parse');
}

/** The same outcome, reason and detail, or the same published bytes, generatedAt(Ms) and stamping. */
function expectSame(a: Outcome, b: Outcome, aName: string, bName: string): void {
  const show = `${aName} ${JSON.stringify('published' in a ? 'published' : a)}, ${bName} ${JSON.stringify('published' in b ? 'published' : b)}`;
  if ('published' in b) {
    expect('published' in a, show).toBe(true);
    if (!('published' in a)) return;
    expect(a.published.bytes.equals(b.published.bytes), show).toBe(true);
    expect(a.published.generatedAt, show).toBe(b.published.generatedAt);
    expect(a.published.generatedAtMs, show).toBe(b.published.generatedAtMs);
    expect(a.published.stamped, show).toBe(b.published.stamped);
  } else {
    expect('reason' in a && a.reason, show).toBe(b.reason);
    expect('reason' in a && a.detail, show).toBe(b.detail);
  }
}

function expectReached(label: string, reasons: readonly string[]): void {
  const counts = seen.get(label)!;
  for (const r of reasons) expect(counts.get(r) ?? 0, `${label}: no case came to ${r} (${JSON.stringify(Object.fromEntries(counts))})`).toBeGreaterThan(0);
}

// ---------------------------------------------------------------------------------------------
// JSON written by hand, so that it can have duplicate keys, escapes and odd numbers.

type J =
  | { readonly k: 'obj'; readonly entries: readonly (readonly [string, J])[] }
  | { readonly k: 'arr'; readonly items: readonly J[] }
  | { readonly k: 'str'; readonly value: string }
  /** A number or literal, as written. */
  | { readonly k: 'raw'; readonly text: string };

const str = (value: string): J => ({ k: 'str', value });
const raw = (text: string): J => ({ k: 'raw', text });

function fromValue(v: unknown): J {
  if (typeof v === 'string') return str(v);
  if (Array.isArray(v)) return { k: 'arr', items: v.map(fromValue) };
  if (v !== null && typeof v === 'object') return { k: 'obj', entries: Object.entries(v).map(([key, x]) => [key, fromValue(x)] as const) };
  return raw(JSON.stringify(v));
}

/** mulberry32, for the writer's choices (seeded by fast-check, so a failure replays). */
function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const WS = ['', '', '', ' ', '\n', '\n  ', '\t', '\r\n', '  '];

/** A JSON string for `s`: as JSON.stringify writes it, or with some or all characters as escapes. */
function quote(s: string, next: () => number): string {
  const mode = next();
  if (mode < 0.6) return JSON.stringify(s);
  const all = mode > 0.85;
  const u = (c: number) => {
    const hex = c.toString(16).padStart(4, '0');
    return `\\u${next() < 0.5 ? hex : hex.toUpperCase()}`;
  };
  let out = '"';
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (all) out += u(c);
    // JSON.stringify's escapes for quote, backslash, controls and surrogates (each half of a pair too)
    else if (c === 0x22 || c === 0x5c || c < 0x20 || (c >= 0xd800 && c <= 0xdfff)) out += JSON.stringify(s[i]!).slice(1, -1);
    else if (c > 0x7e && next() < 0.5) out += u(c);
    else if (c === 0x2f && next() < 0.5) out += '\\/';
    else out += s[i];
  }
  return `${out}"`;
}

function write(j: J, seed: number, spaced: boolean): string {
  const next = rng(seed);
  const ws = () => (spaced ? WS[Math.floor(next() * WS.length)]! : '');
  const out = (x: J): string => {
    switch (x.k) {
      case 'str':
        return quote(x.value, next);
      case 'raw':
        return x.text;
      case 'arr':
        return `[${ws()}${x.items.map((v) => `${out(v)}${ws()}`).join(`,${ws()}`)}]`;
      case 'obj':
        return `{${ws()}${x.entries.map(([key, v]) => `${quote(key, next)}${ws()}:${ws()}${out(v)}${ws()}`).join(`,${ws()}`)}}`;
    }
  };
  return `${ws()}${out(j)}${ws()}`;
}

// ---------------------------------------------------------------------------------------------
// Odds documents, with wrong types wherever the schema looks

const numberText = fc.oneof(
  fc.integer().map(String),
  fc.double({ noNaN: true, noDefaultInfinity: true }).map((x) => JSON.stringify(x)),
  fc.constantFrom(
    '0',
    '-0',
    '1.0',
    '1.5',
    '1e400',
    '-1e400',
    '1E2',
    '1e-400',
    '0.1e1',
    '2.10',
    '12345678901234567890',
    '12345678901234567890.5',
    '9007199254740993',
    '-1.5e-3',
    '1e+2',
    '4.0000000000000000001',
  ),
);
/** Integers as ajv sees them (the parsed value): 1.0, 1e400 (Infinity), -0 and 1e-400 (0) are. */
const integerText = fc.oneof(
  fc.integer().map(String),
  fc.constantFrom('-0', '1.0', '1e400', '1E2', '0.1e1', '1e-400', '4.0000000000000000001', '12345678901234567890'),
);
const junk: fc.Arbitrary<J> = fc.oneof(
  numberText.map(raw),
  fc.constantFrom('true', 'false', 'null').map(raw),
  fc.string({ maxLength: 6 }).map(str),
  fc.constant<J>({ k: 'arr', items: [] }),
  fc.constant<J>({ k: 'obj', entries: [] }),
  fc.jsonValue({ maxDepth: 2 }).map(fromValue),
);
const anyString = fc.oneof(
  fc.string({ maxLength: 8 }),
  fc.string({ maxLength: 4, unit: 'grapheme' }),
  fc.string({ maxLength: 4, unit: 'binary' }), // lone surrogates included
  fc.constantFrom('', '😀', '\ud83d', '\ude00', '\ud83d\ude00x', 'é', '\u2028', 'a/b', 'tab\there', 'quote"back\\slash'),
);
const extraKey = fc.constantFrom(
  'x',
  'status',
  'score',
  '__proto__',
  'constructor',
  'toString',
  'events',
  'markets',
  'odds',
  'bookmaker',
  'generated_at',
  '',
  'é',
  'a/b~c',
);

/**
 * An object with these fields, each absent, present, or present twice (JSON.parse keeps the last),
 * plus extra members, in an order of the seed's choosing.
 */
function objectOf(fields: Record<string, fc.Arbitrary<J>>): fc.Arbitrary<J> {
  const keys = Object.keys(fields);
  const occurrences = (key: string) =>
    fc.oneof(
      { weight: 2, arbitrary: fc.constant([] as (readonly [string, J])[]) },
      { weight: 8, arbitrary: fields[key]!.map((v) => [[key, v] as const]) },
      { weight: 1, arbitrary: fc.tuple(fields[key]!, fields[key]!).map(([v, w]) => [[key, v] as const, [key, w] as const]) },
    );
  return fc.tuple(fc.tuple(...keys.map(occurrences)), fc.array(fc.tuple(extraKey, junk), { maxLength: 2 }), fc.nat()).map(([present, extras, seed]) => {
    const entries = [...present.flat(), ...extras];
    const next = rng(seed);
    for (let i = entries.length - 1; i > 0; i--) {
      const k = Math.floor(next() * (i + 1));
      [entries[i], entries[k]] = [entries[k]!, entries[i]!];
    }
    return { k: 'obj', entries } as J;
  });
}
const arrayOf = (item: fc.Arbitrary<J>, maxLength: number): fc.Arbitrary<J> => fc.array(item, { maxLength }).map((items) => ({ k: 'arr', items }) as J);

/**
 * An odds document for this feed: with `wrong` > 0, any value the schema looks at is, with odds
 * 1 in (8 + wrong), replaced by a value of another kind; with 0, every value has the right kind.
 */
function oddsDocument(feed: FixtureFeed, wrong: number): fc.Arbitrary<J> {
  const mostly = (good: fc.Arbitrary<J>, more = 0): fc.Arbitrary<J> =>
    wrong === 0 ? good : fc.oneof({ weight: 8, arbitrary: good }, { weight: wrong + more, arbitrary: junk });
  const stringField = mostly(anyString.map(str));
  const bookmakerField = mostly(
    fc.oneof(
      { weight: 3, arbitrary: fc.constantFrom(feed.bookmaker, EXAMPLE_BOOKMAKERS.find((b) => b.key === feed.bookmaker)!.name.toLowerCase()).map(str) },
      fc.constantFrom(...EXAMPLE_BOOKMAKERS.map((b) => b.key), ...EXAMPLE_BOOKMAKERS.map((b) => b.name.toLowerCase()), 'Northwind', '', ' northwind').map(str),
      anyString.map(str),
    ),
  );
  const sportField = mostly(
    fc.oneof(
      { weight: 3, arbitrary: fc.constant(str(feed.sport ?? 'soccer')) },
      fc.constantFrom(...EXAMPLE_SPORTS, 'cricket', 'Soccer', '').map(str),
      anyString.map(str),
    ),
  );
  const generatedAtField = mostly(
    fc.oneof(
      fc
        .constantFrom(
          '2026-11-21T18:30:00Z',
          '2026-11-21T18:30:00.250+00:00',
          '2026-11-21T18:40:00Z',
          '2099-01-01T00:00:00Z',
          '2026-02-30T00:00:00Z',
          'yesterday',
          '',
        )
        .map(str),
      fc.integer({ min: Date.parse('2026-11-21T18:00:00Z'), max: Date.parse('2026-11-21T19:00:00Z') }).map((ms) => str(new Date(ms).toISOString())),
    ),
    2,
  );
  const numberOrNull = mostly(fc.oneof({ weight: 4, arbitrary: numberText.map(raw) }, { weight: 1, arbitrary: fc.constant(raw('null')) }));
  const eventId = mostly(fc.oneof(anyString.map(str), (wrong === 0 ? integerText : numberText).map(raw)));
  const selection = mostly(objectOf({ name: stringField, odds: numberOrNull }));
  const market = mostly(objectOf({ market: stringField, line: numberOrNull, selections: mostly(arrayOf(selection, 3)) }));
  const event = mostly(
    objectOf({
      event_id: eventId,
      name: stringField,
      sport: stringField,
      league: stringField,
      starts_at: stringField,
      markets: mostly(arrayOf(market, 3)),
    }),
  );
  return objectOf({
    bookmaker: bookmakerField,
    sport: sportField,
    generated_at: generatedAtField,
    events: mostly(arrayOf(event, 4)),
  });
}

const feedArb = fc.constantFrom(...EXAMPLE_FEEDS);
const written = (doc: fc.Arbitrary<J>) =>
  fc.tuple(doc, fc.nat(), fc.boolean(), fc.boolean()).map(([j, seed, spaced, bom]) => Buffer.from(`${bom ? '\ufeff' : ''}${write(j, seed, spaced)}`, 'utf8'));

// ---------------------------------------------------------------------------------------------
// Mutations of the bytes

const TOKENS = [
  ',',
  ']',
  '}',
  '[',
  '{',
  '"',
  '\\',
  ':',
  ' ',
  '\\x',
  '\\u',
  '\\u12',
  '\\u12G4',
  '\\uD800',
  '\\uDC00',
  '\\uD83D\\uDE00',
  '\\"',
  '\\\\',
  '01',
  '00',
  '1.',
  '.5',
  '-',
  '--1',
  '1e',
  '1e+',
  'E5',
  '+1',
  '-0',
  '0x1F',
  'NaN',
  'Infinity',
  'tru',
  'nul',
  'fals',
  'true',
  'null',
  'false',
  '\u0000',
  '\u0001',
  '\n',
  '\t',
  '\r',
  '\u001f',
  '\u007f',
  'é',
  '😀',
  '\u2028',
  "'",
  '/',
  '/*',
  '//',
  '\ufeff',
];
const TOKEN_BYTES = TOKENS.map((t) => Buffer.from(t, 'utf8'));
const ANCHORS = [0x7d, 0x5d, 0x22, 0x3a, 0x2c, 0x5c, 0x30, 0x31, 0x32, 0x2e, 0x65, 0x6e, 0x74];

type Mutation = readonly [kind: number, at: number, n: number, m: number];
const mutation: fc.Arbitrary<Mutation> = fc.tuple(fc.nat({ max: 5 }), fc.nat(), fc.nat(), fc.nat());

function mutate(bytes: Buffer, [kind, at, n, m]: Mutation): Buffer {
  const len = bytes.length;
  const p = at % (len + 1);
  const token = TOKEN_BYTES[n % TOKEN_BYTES.length]!;
  switch (kind) {
    case 0: // truncate
      return bytes.subarray(0, p);
    case 1: // insert a token anywhere (inside strings too)
      return Buffer.concat([bytes.subarray(0, p), token, bytes.subarray(p)]);
    case 2: {
      // insert a token before or after the m-th occurrence of a structural byte: trailing commas, bad escapes, bad numbers
      const anchor = ANCHORS[m % ANCHORS.length]!;
      const hits: number[] = [];
      for (let i = 0; i < len; i++) if (bytes[i] === anchor) hits.push(i);
      if (hits.length === 0) return bytes;
      const i = hits[at % hits.length]! + (m % 2);
      return Buffer.concat([bytes.subarray(0, i), token, bytes.subarray(i)]);
    }
    case 3: // delete a few bytes
      return Buffer.concat([bytes.subarray(0, p), bytes.subarray(Math.min(len, p + 1 + (n % 4)))]);
    case 4: {
      // replace one byte (any byte: not UTF-8 any more, sometimes)
      if (len === 0) return bytes;
      const out = Buffer.from(bytes);
      out[at % len] = m % 256;
      return out;
    }
    default: {
      // copy a slice elsewhere (brackets out of balance, keys twice)
      const from = n % (len + 1);
      const slice = bytes.subarray(from, Math.min(len, from + 1 + (m % 40)));
      return Buffer.concat([bytes.subarray(0, p), slice, bytes.subarray(p)]);
    }
  }
}

// ---------------------------------------------------------------------------------------------

describe('one pass over the bytes and JSON.parse + ajv agree', () => {
  it('on every case of the corpus, with the outcome and reason it expects', () => {
    const now = new Date(Date.parse(DEFAULT_GENERATED_AT) + 60_000);
    const byDefault = createDocumentValidator(config.limits);
    let checked = 0;
    for (const c of generateCorpus()) {
      if (!parseFilename(registry, c.filename)) continue; // unknown_filename: rejected before the document is read
      agree('corpus', standard, c, c.bytes, now);
      const b = run(standard.parsed, c, c.bytes, now);
      expectSame(run(byDefault, c, c.bytes, now), b, `${c.name}: by default`, 'JSON.parse');
      expect('published' in b ? 'published' : 'rejected', c.name).toBe(c.expected.outcome);
      if ('reason' in b && c.expected.reason !== 'any') expect(b.reason, c.name).toBe(c.expected.reason);
      if ('published' in b && c.expected.identical) expect(b.published.bytes.equals(c.bytes), c.name).toBe(true);
      checked++;
    }
    expect(checked).toBeGreaterThan(50);
    expectReached('corpus', [
      'published',
      'invalid_json',
      'empty',
      'not_an_object',
      'schema',
      'bookmaker_mismatch',
      'sport_mismatch',
      'bad_generated_at',
      'future_generated_at',
    ]);
  });

  it('on documents either side of the default threshold', () => {
    const feed = EXAMPLE_FEEDS[0]!;
    const byDefault = createDocumentValidator(config.limits);
    for (const targetBytes of [DEFAULT_ONE_PASS_MIN_BYTES - 4096, DEFAULT_ONE_PASS_MIN_BYTES + 4096, 1024 * 1024]) {
      const doc = generateDocument(feed, { targetBytes, generatedAt: '2026-11-21T18:30:00Z' });
      for (const bytes of [doc, doc.subarray(0, doc.length - 2), Buffer.from(doc.toString().replace('"odds":', '"odds":"x","y":'))]) {
        agree('threshold', standard, feed, bytes);
        expectSame(run(byDefault, feed, bytes), run(standard.parsed, feed, bytes), `${bytes.length} bytes: by default`, 'JSON.parse');
      }
    }
    expectReached('threshold', ['published', 'invalid_json', 'schema']);
  });

  it('on odds documents with wrong types at every place the schema looks, duplicate keys and escapes', () => {
    fc.assert(
      fc.property(
        feedArb.chain((feed) => fc.tuple(fc.constant(feed), written(fc.oneof(oddsDocument(feed, 0), oddsDocument(feed, 1))))),
        ([feed, bytes]) => agree('odds', standard, feed, bytes),
      ),
      { numRuns: 2500 },
    );
    expectReached('odds', ['published', 'schema', 'not_i_json', 'bookmaker_mismatch', 'sport_mismatch', 'bad_generated_at', 'future_generated_at']);
  });

  it('on arbitrary JSON values, objects or not', () => {
    const value = fc.oneof(
      fc.jsonValue({ maxDepth: 5 }).map(fromValue),
      fc.dictionary(fc.oneof(extraKey, fc.string({ maxLength: 4 })), fc.jsonValue({ maxDepth: 4 })).map(fromValue),
    );
    fc.assert(
      fc.property(feedArb, written(value), (feed, bytes) => agree('json', standard, feed, bytes)),
      { numRuns: 1000 },
    );
    expectReached('json', ['published', 'not_an_object', 'schema']);
  });

  it('on mutated bytes of documents: truncated, inserted, deleted, replaced, repeated', () => {
    const generated = fc
      .tuple(feedArb, fc.nat({ max: 20 }), fc.boolean())
      .map(([feed, seed, pretty]) => generateDocument(feed, { seed, pretty, targetBytes: 300 }));
    fc.assert(
      fc.property(
        feedArb.chain((feed) =>
          fc.tuple(fc.constant(feed), fc.oneof({ weight: 3, arbitrary: written(oddsDocument(feed, 0)) }, { weight: 1, arbitrary: generated })),
        ),
        fc.array(mutation, { minLength: 1, maxLength: 2 }),
        ([feed, bytes], mutations) => agree('mutated', standard, feed, mutations.reduce(mutate, bytes)),
      ),
      { numRuns: 4000 },
    );
    expectReached('mutated', ['published', 'invalid_json', 'schema', 'bookmaker_mismatch']);
  });

  it('on nesting around maxDepth (5 here), closed or not', () => {
    const nested = fc
      .tuple(
        fc.array(fc.constantFrom('{"events":', '{"x":', '[', '[1,', '{"a":[],"b":'), { minLength: 1, maxLength: 8 }),
        fc.constantFrom('1', '[]', '{}', '"s"', 'null'),
        fc.boolean(),
        fc.nat({ max: 3 }),
      )
      .map(([opens, leaf, close, cut]) => {
        let text = opens.join('') + leaf;
        if (close) for (const o of [...opens].reverse()) text += o.startsWith('{') ? '}' : ']';
        return Buffer.from(text.slice(0, text.length - (close ? 0 : cut)), 'utf8');
      });
    fc.assert(
      fc.property(feedArb, nested, fc.array(mutation, { maxLength: 1 }), (feed, bytes, mutations) =>
        agree('deep', shallow, feed, mutations.reduce(mutate, bytes)),
      ),
      { numRuns: 1000 },
    );
    expectReached('deep', ['published', 'invalid_json', 'schema', 'not_an_object']);
  });

  it('with random schemas of the supported keywords (type, properties, items, minLength)', () => {
    const KEYS = ['a', 'b', '1', 'bookmaker', 'sport', 'generated_at', 'a/b~c'] as const;
    const TYPES = ['string', 'number', 'integer', 'boolean', 'null', 'array', 'object'] as const;
    type S = Record<string, unknown>;
    const schemaArb = (depth: number): fc.Arbitrary<S> =>
      fc
        .record(
          {
            type: fc.oneof(fc.constantFrom(...TYPES), fc.uniqueArray(fc.constantFrom(...TYPES), { minLength: 1, maxLength: 3 })),
            minLength: fc.nat({ max: 3 }),
            properties: depth > 0 ? fc.dictionary(fc.constantFrom(...KEYS), schemaArb(depth - 1), { maxKeys: 2 }) : fc.constant(undefined),
            items: depth > 0 ? schemaArb(depth - 1) : fc.constant(undefined),
            title: fc.constant('annotation'),
          },
          { requiredKeys: [] },
        )
        .map((s) => {
          // Keywords only where the type allows them (otherwise the plan refuses, and both sides are ajv).
          const types = s.type === undefined ? TYPES : typeof s.type === 'string' ? [s.type] : s.type;
          const out: S = { ...s };
          for (const k of Object.keys(out)) if (out[k] === undefined) delete out[k];
          if (!types.includes('string')) delete out.minLength;
          if (!types.includes('object')) delete out.properties;
          if (!types.includes('array')) delete out.items;
          return out;
        });
    const leaf = fc.oneof(numberText.map(raw), fc.constantFrom('true', 'false', 'null').map(raw), anyString.map(str));
    const value: fc.Arbitrary<J> = fc.letrec<{ v: J }>((tie) => ({
      v: fc.oneof(
        { depthSize: 'small', withCrossShrink: true },
        leaf,
        fc.array(tie('v'), { maxLength: 3 }).map((items) => ({ k: 'arr', items }) as J),
        fc.array(fc.tuple(fc.constantFrom(...KEYS), tie('v')), { maxLength: 4 }).map((entries) => ({ k: 'obj', entries }) as J),
      ),
    })).v;
    const root = fc.array(fc.tuple(fc.constantFrom(...KEYS), value), { maxLength: 5 }).map((entries) => ({ k: 'obj', entries }) as J);
    let planned = 0;
    fc.assert(
      fc.property(
        feedArb,
        schemaArb(3),
        fc.array(written(fc.oneof({ weight: 4, arbitrary: root }, { weight: 1, arbitrary: value })), { minLength: 1, maxLength: 8 }),
        (feed, schema, docs) => {
          if (compileSchemaPlan(schema).ok) planned++;
          const pair = pairOf(config.limits, schema);
          for (const bytes of docs) agree('schemas', pair, feed, bytes);
        },
      ),
      { numRuns: 250 },
    );
    expect(planned).toBe(250);
    expectReached('schemas', ['published', 'schema', 'not_an_object']);
  });

  it('on string lengths (minLength) with surrogate pairs, lone surrogates and escapes', () => {
    const pairs = [0, 1, 2, 3, 4, 5].map((n) => pairOf(config.limits, { type: 'object', properties: { s: { type: 'string', minLength: n } } }));
    const piece = fc.oneof({ weight: 5, arbitrary: fc.constantFrom('a', 'é', '😀', '\ud83d', '\ude00') }, fc.constantFrom('浦', '\n', '"'));
    // minLength around the string's length in code points, where counting wrong shows
    const lengthCase = fc.tuple(fc.array(piece, { maxLength: 5 }), fc.integer({ min: -1, max: 1 })).map(([p, off]) => {
      const s = p.join('');
      return { doc: { k: 'obj', entries: [['s', str(s)]] } as J, n: Math.min(5, Math.max(0, [...s].length + off)) };
    });
    fc.assert(
      fc.property(feedArb, lengthCase, fc.nat(), fc.boolean(), (feed, { doc, n }, seed, spaced) =>
        agree('lengths', pairs[n]!, feed, Buffer.from(write(doc, seed, spaced), 'utf8')),
      ),
      { numRuns: 2000 },
    );
    expectReached('lengths', ['published', 'schema']);
  });

  it('on the shipped schema, which compiles to a plan (or the tests above compare ajv with ajv)', () => {
    expect(compileSchemaPlan(loadDocumentSchema()).ok).toBe(true);
  });
});

/**
 * Property tests: parseFilename and the document validator on arbitrary input. The filename
 * oracle restates the filename families (a live and a pregame file per sport for most bookmakers, one
 * combined file for those that publish one) independently of the code; the document oracle lists, for a generated
 * document, every rejection reason that applies to it, so the test does not depend on the order
 * in which the validator happens to check things.
 */
import { isUtf8 } from 'node:buffer';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { REJECTION_REASONS, RejectionError, type RejectionReason } from '../../src/errors.js';
import { buildRegistry, parseFilename } from '../../src/feeds/registry.js';
import { createDocumentValidator, type ValidDocument } from '../../src/feeds/validate.js';
import { EXAMPLE_BOOKMAKERS, EXAMPLE_FEEDS, EXAMPLE_FILENAMES, EXAMPLE_SPORTS, type FixtureFeed } from '../fixtures/corpus.js';

const scratch = mkdtempSync(join(tmpdir(), 'oddsfiles-property-'));
const config = loadConfig({ env: {}, cwd: scratch });
rmSync(scratch, { recursive: true, force: true });
const registry = buildRegistry(config.bookmakers, config.sports);
const validate = createDocumentValidator(config.limits);
const NOW = new Date('2026-11-21T18:31:00Z');
const SKEW = config.limits.futureSkewMs;

type Outcome = { outcome: 'published'; doc: ValidDocument } | { outcome: 'rejected'; reason: RejectionReason };

/** Run the validator; anything thrown other than a RejectionError fails the property. */
function check(feed: FixtureFeed, bytes: Buffer, receivedAt: Date = NOW): Outcome {
  const info = parseFilename(registry, feed.filename);
  if (!info) throw new Error(`${feed.filename} is not in the registry`);
  const bookmaker = registry.bookmakers.get(info.bookmaker)!;
  try {
    return { outcome: 'published', doc: validate({ feed: info, bookmaker, bytes, receivedAt, now: NOW }) };
  } catch (err) {
    if (err instanceof RejectionError) {
      expect(REJECTION_REASONS).toContain(err.reason);
      return { outcome: 'rejected', reason: err.reason };
    }
    throw err;
  }
}

/** What every publication must satisfy, whatever was dropped. */
function expectSanePublication(doc: ValidDocument, receivedAt: Date = NOW): void {
  expect(isUtf8(doc.bytes)).toBe(true);
  expect(doc.bytes.subarray(0, 3).equals(Buffer.from([0xef, 0xbb, 0xbf]))).toBe(false);
  const value: unknown = JSON.parse(doc.bytes.toString('utf8'));
  expect(value !== null && typeof value === 'object' && !Array.isArray(value)).toBe(true);
  const own = Object.getOwnPropertyDescriptor(value, 'generated_at');
  expect(own?.value).toBe(doc.generatedAt);
  if (doc.stamped) {
    expect(doc.generatedAt).toBe(receivedAt.toISOString());
  }
  expect(doc.generatedAtMs).toBeLessThanOrEqual(NOW.getTime() + SKEW);
}

const feedArb = fc.constantFrom(...EXAMPLE_FEEDS);

describe('parseFilename', () => {
  const keys = [...EXAMPLE_BOOKMAKERS.map((b) => b.key), 'starbet', 'nobody', 'Northwind', ''];
  const sports = [...EXAMPLE_SPORTS, 'cricket', 'Soccer', ''];
  const kinds = ['live', 'pregame', 'livepre', 'inplay', 'LIVE', ''];

  /** The filename families, independently of the code: is this assembled name a feed? */
  function oracle(kind: string, key: string, sport: string | null): boolean {
    const b = EXAMPLE_BOOKMAKERS.find((x) => x.key === key);
    if (!b) return false;
    if (sport === null) return (b.feeds === 'livepre' && kind === 'livepre') || (b.feeds === 'combined-live' && kind === 'live');
    if (!EXAMPLE_SPORTS.includes(sport)) return false;
    return b.feeds !== 'livepre' && (kind === 'live' || kind === 'pregame');
  }

  it('says exactly which assembled names are feeds, following the filename families', () => {
    fc.assert(
      fc.property(fc.constantFrom(...kinds), fc.constantFrom(...keys), fc.option(fc.constantFrom(...sports), { nil: null }), (kind, key, sport) => {
        const name = `site_${kind}_${key}${sport === null ? '' : `_${sport}`}.json`;
        const info = parseFilename(registry, name);
        expect(info !== undefined).toBe(oracle(kind, key, sport));
        if (info) expect(info).toEqual({ filename: name, bookmaker: key, kind, sport });
      }),
      { numRuns: 500 },
    );
  });

  const mutated = fc
    .tuple(fc.constantFrom(...EXAMPLE_FILENAMES), fc.nat(), fc.nat({ max: 3 }), fc.string({ maxLength: 3, unit: 'binary' }))
    .map(([name, at, cut, insert]) => {
      const i = at % (name.length + 1);
      return name.slice(0, i) + insert + name.slice(i + cut);
    });

  it('never throws, and returns a feed only for a registry name, naming that file', () => {
    const names = new Set(EXAMPLE_FILENAMES);
    fc.assert(
      fc.property(
        fc.oneof(
          fc.string({ unit: 'binary' }),
          fc.string({ unit: 'grapheme' }),
          fc.constantFrom(...EXAMPLE_FILENAMES, '__proto__', 'constructor', 'toString', ''),
          mutated,
        ),
        (name) => {
          const info = parseFilename(registry, name);
          if (names.has(name)) {
            expect(info?.filename).toBe(name);
          } else {
            expect(info).toBeUndefined();
          }
        },
      ),
      { numRuns: 1000 },
    );
  });
});

describe('the document validator', () => {
  it('throws nothing but RejectionError on arbitrary bytes', () => {
    const bytes = fc.oneof(
      fc.uint8Array({ maxLength: 512 }),
      fc.string({ unit: 'binary', maxLength: 200 }).map((s) => new TextEncoder().encode(s)),
      fc
        .tuple(fc.constantFrom('{', '[', '{"', '\ufeff{', ' {"events":['), fc.uint8Array({ maxLength: 64 }))
        .map(([head, tail]) => Buffer.concat([Buffer.from(head), tail])),
      // well-formed JSON but for the bytes inside a string: any byte that is not a quote, backslash or control
      fc
        .uint8Array({ min: 0x20, maxLength: 16 })
        .map((inside) => Buffer.concat([Buffer.from('{"name":"'), Buffer.from(inside.filter((b) => b !== 0x22 && b !== 0x5c)), Buffer.from('"}')])),
    );
    fc.assert(
      fc.property(feedArb, bytes, (feed, raw) => {
        const r = check(feed, Buffer.from(raw));
        if (r.outcome === 'published') expectSanePublication(r.doc);
      }),
      { numRuns: 1000 },
    );
  });

  it('on arbitrary JSON values: only objects can be published; non-objects are not_an_object', () => {
    fc.assert(
      fc.property(feedArb, fc.jsonValue({ maxDepth: 6 }), fc.boolean(), (feed, value, pretty) => {
        const text = JSON.stringify(value, null, pretty ? 2 : undefined);
        const r = check(feed, Buffer.from(text, 'utf8'));
        const isObject = value !== null && typeof value === 'object' && !Array.isArray(value);
        if (!isObject) {
          expect(r).toEqual({ outcome: 'rejected', reason: 'not_an_object' });
          return;
        }
        if (r.outcome === 'published') expectSanePublication(r.doc);
        else expect(['invalid_json', 'empty', 'not_an_object', 'too_large']).not.toContain(r.reason);
      }),
      { numRuns: 500 },
    );
  });

  // --- documents whose checked fields are drawn at random, with a model of the outcome --------

  type Field = { present: false } | { present: true; value: unknown };
  type GeneratedAt = { present: false } | { present: true; value: unknown; ms: number | 'bad' };

  const absent = fc.constant<{ present: false }>({ present: false });
  const present = <T>(arb: fc.Arbitrary<T>) => arb.map((value) => ({ present: true as const, value }));
  const junk = fc.oneof(fc.integer(), fc.boolean(), fc.constant(null), fc.constant([]), fc.constant({}), fc.double());

  const bookmakerArb: fc.Arbitrary<Field> = fc.oneof(
    absent,
    present(fc.constantFrom(...EXAMPLE_BOOKMAKERS.map((b) => b.key), ...EXAMPLE_BOOKMAKERS.map((b) => b.name.toLowerCase()))),
    present(fc.constantFrom('StarBet', 'Northwind', 'nobody', '', ' northwind')),
    present(fc.string({ maxLength: 10 })),
    present(junk),
  );
  const sportArb: fc.Arbitrary<Field> = fc.oneof(
    absent,
    present(fc.constantFrom(...EXAMPLE_SPORTS, 'cricket', 'Soccer', '')),
    present(fc.string({ maxLength: 8 })),
    present(junk),
  );

  const MIN = Date.parse('2000-01-01T00:00:00Z');
  const MAX = Date.parse('2100-01-01T00:00:00Z');
  const iso = (ms: number, form: number) => {
    const z = new Date(ms).toISOString(); // 2026-11-21T18:30:00.000Z
    switch (form) {
      case 0:
        return z;
      case 1:
        return z.replace('Z', '+00:00');
      case 2:
        return z.replace(/\.\d{3}Z$/, 'Z');
      default:
        return z.replace(/Z$/, '000Z');
    }
  };
  const truncated = (ms: number, form: number) => (form === 2 ? Math.floor(ms / 1000) * 1000 : ms);
  const generatedAtArb: fc.Arbitrary<GeneratedAt> = fc.oneof(
    absent,
    // any valid UTC time, past or future
    fc
      .tuple(fc.integer({ min: MIN, max: MAX }), fc.nat({ max: 3 }))
      .map(([ms, form]) => ({ present: true as const, value: iso(ms, form), ms: truncated(ms, form) })),
    // close to the edge of the allowed skew
    fc.tuple(fc.integer({ min: -2000, max: 2000 }), fc.nat({ max: 3 })).map(([delta, form]) => {
      const ms = NOW.getTime() + SKEW + delta;
      return { present: true as const, value: iso(ms, form), ms: truncated(ms, form) };
    }),
    // not UTC, not a real date, not ISO, not a string
    fc
      .constantFrom('2026-11-21T20:30:00+02:00', '2026-02-30T12:00:00Z', '2026-11-21T18:30:00', '2026-11-21', 'yesterday evening', '')
      .map((value) => ({ present: true as const, value, ms: 'bad' as const })),
    fc
      .string({ maxLength: 12 })
      .filter((s) => !/^\d{4}-/.test(s))
      .map((value) => ({ present: true as const, value, ms: 'bad' as const })),
    junk.map((value) => ({ present: true as const, value, ms: 'bad' as const })),
  );

  const selection = fc.record({ name: fc.string({ maxLength: 4 }), odds: fc.oneof(fc.double({ min: 1, max: 50, noNaN: true }), fc.constant(null)) });
  const goodEvents = fc.array(
    fc.record(
      {
        event_id: fc.oneof(fc.string({ maxLength: 8 }), fc.integer()),
        name: fc.string({ maxLength: 12 }),
        markets: fc.array(
          fc.record({
            market: fc.string({ maxLength: 6 }),
            line: fc.oneof(fc.double({ noNaN: true, noDefaultInfinity: true }), fc.constant(null)),
            selections: fc.array(selection, { maxLength: 3 }),
          }),
          { maxLength: 3 },
        ),
      },
      { requiredKeys: [] },
    ),
    { maxLength: 4 },
  );
  const eventsArb: fc.Arbitrary<Field & { valid?: boolean }> = fc.oneof(
    absent,
    goodEvents.map((value) => ({ present: true as const, value, valid: true })),
    fc
      .oneof(
        junk.filter((v) => !Array.isArray(v)),
        fc.string(),
        fc.constant({ count: 3 }),
        fc.constant([1]),
        fc.constant([{ markets: 'none' }]),
        fc.constant([{ event_id: true }]),
      )
      .map((value) => ({ present: true as const, value, valid: false })),
  );
  const CHECKED = new Set(['bookmaker', 'sport', 'generated_at', 'events']);
  const extrasArb = fc.array(
    fc.tuple(
      fc.oneof(fc.string({ maxLength: 8 }), fc.constantFrom('__proto__', 'constructor', 'toString')).filter((k) => !CHECKED.has(k)),
      fc.jsonValue({ maxDepth: 3 }),
    ),
    { maxLength: 4 },
  );

  function applicable(feed: FixtureFeed, bookmaker: Field, sport: Field, generatedAt: GeneratedAt, events: Field & { valid?: boolean }): Set<RejectionReason> {
    const out = new Set<RejectionReason>();
    const publicName = EXAMPLE_BOOKMAKERS.find((b) => b.key === feed.bookmaker)!.name.toLowerCase();
    const nonEmpty = (v: unknown): v is string => typeof v === 'string' && v.length > 0;
    if (bookmaker.present) {
      if (!nonEmpty(bookmaker.value)) out.add('schema');
      else if (bookmaker.value !== feed.bookmaker && bookmaker.value !== publicName) out.add('bookmaker_mismatch');
    }
    if (sport.present) {
      if (!nonEmpty(sport.value)) out.add('schema');
      else if (feed.sport !== null && sport.value !== feed.sport) out.add('sport_mismatch');
    }
    if (events.present && !events.valid) out.add('schema');
    if (generatedAt.present) {
      if (generatedAt.ms === 'bad') out.add('bad_generated_at');
      else if (generatedAt.ms > NOW.getTime() + SKEW) out.add('future_generated_at');
    }
    return out;
  }

  it('on objects with random bookmaker, sport, generated_at and events: published exactly when no rule applies', () => {
    const receivedAt = new Date('2026-11-21T18:30:59.123Z');
    fc.assert(
      fc.property(
        feedArb,
        bookmakerArb,
        sportArb,
        generatedAtArb,
        eventsArb,
        extrasArb,
        fc.boolean(),
        fc.boolean(),
        (feed, bookmaker, sport, generatedAt, events, extras, pretty, bom) => {
          const entries: [string, unknown][] = [...extras];
          if (bookmaker.present) entries.splice(entries.length > 0 ? 1 : 0, 0, ['bookmaker', bookmaker.value]);
          if (sport.present) entries.push(['sport', sport.value]);
          if (generatedAt.present) entries.unshift(['generated_at', generatedAt.value]);
          if (events.present) entries.push(['events', events.value]);
          // fromEntries defines own properties, so "__proto__" is an ordinary key here, as in JSON.
          const text = JSON.stringify(Object.fromEntries(entries), null, pretty ? 2 : undefined);
          const dropped = Buffer.from(`${bom ? '\ufeff' : ''}${text}`, 'utf8');
          const expected = applicable(feed, bookmaker, sport, generatedAt, events);

          const r = check(feed, dropped, receivedAt);
          if (expected.size === 0) {
            expect(r.outcome, `expected publication, got ${r.outcome === 'rejected' ? r.reason : ''}`).toBe('published');
            if (r.outcome !== 'published') return;
            expectSanePublication(r.doc, receivedAt);
            if (generatedAt.present) {
              expect(r.doc.stamped).toBe(false);
              expect(r.doc.bytes.toString('utf8')).toBe(text); // unchanged, less the BOM
              expect(r.doc.generatedAtMs).toBe(generatedAt.ms);
            } else {
              expect(r.doc.stamped).toBe(true);
              const field = `"generated_at":${JSON.stringify(receivedAt.toISOString())}`;
              const out = r.doc.bytes.toString('utf8');
              const i = out.indexOf('{') + 1;
              expect(out.slice(i, i + field.length)).toBe(field);
              const rest = out.slice(i + field.length);
              expect(out.slice(0, i) + (rest.startsWith(',') ? rest.slice(1) : rest)).toBe(text);
            }
          } else {
            expect(r.outcome, `expected one of ${[...expected].join(', ')}`).toBe('rejected');
            if (r.outcome === 'rejected') expect([...expected]).toContain(r.reason);
          }
        },
      ),
      { numRuns: 2000 },
    );
    expect(Object.prototype).not.toHaveProperty('polluted');
  });
});

describe('I-JSON (RFC 7493)', () => {
  const onePass = createDocumentValidator({ ...config.limits, onePassMinBytes: 0 });
  const parsed = createDocumentValidator({ ...config.limits, onePassMinBytes: Infinity });
  const outcome = (v: typeof validate, feed: FixtureFeed, bytes: Buffer) => {
    const info = parseFilename(registry, feed.filename)!;
    try {
      v({ feed: info, bookmaker: registry.bookmakers.get(info.bookmaker)!, bytes, receivedAt: NOW, now: NOW });
      return 'published';
    } catch (err) {
      if (err instanceof RejectionError) return `${err.reason}: ${err.detail}`;
      throw err;
    }
  };
  /** One violation, written as JSON text that JSON.parse accepts. */
  const violation = fc.oneof(
    fc.constantFrom('1e400', '-1e400', '1E309', '-2e308', `1${'0'.repeat(309)}`).map((n) => ({ text: n, kind: 'number' })),
    fc.constantFrom('"\\ud800"', '"a\\uDBFFb"', '"\\udc00"', '"x\\ude00\\ud83d"').map((s) => ({ text: s, kind: 'surrogate' })),
  );

  it('a document with a number past a double, a lone surrogate or a member twice, anywhere: not_i_json on both paths, with the same detail', () => {
    fc.assert(
      fc.property(
        feedArb,
        fc.dictionary(fc.string({ maxLength: 5 }), fc.jsonValue({ maxDepth: 3 }), { minKeys: 1, maxKeys: 5 }),
        fc.oneof(violation, fc.constant({ text: '', kind: 'duplicate' })),
        fc.nat(),
        (feed, doc, bad, where) => {
          // The violation replaces one member's value, or the member is written twice. The members
          // are written one by one: a search for one in the whole text can match inside another
          // (`"":null` inside `"\"":null`).
          const members = Object.entries(doc).map(([k, v]) => `${JSON.stringify(k)}:${JSON.stringify(v)}`);
          const at = where % members.length;
          const key = JSON.stringify(Object.keys(doc)[at]);
          const written = members.flatMap((m, j) => (j !== at ? [m] : bad.kind === 'duplicate' ? [m, m] : [`${key}:${bad.text}`]));
          const text = `{${written.join(',')}}`;
          const a = outcome(onePass, feed, Buffer.from(text));
          expect(a, text).toMatch(/^not_i_json: /);
          expect(outcome(parsed, feed, Buffer.from(text)), text).toBe(a);
        },
      ),
      { numRuns: 500 },
    );
  });

  it('numbers that fit a double, surrogate pairs and the same name in different objects are I-JSON', () => {
    for (const text of ['{"a":1.7976931348623157e308,"b":-1e-400,"c":"\\ud83d\\ude00","d":{"a":1},"e":[{"a":1},{"a":2}]}']) {
      expect(outcome(onePass, EXAMPLE_FEEDS[0]!, Buffer.from(text))).toBe('published');
      expect(outcome(parsed, EXAMPLE_FEEDS[0]!, Buffer.from(text))).toBe('published');
    }
  });
});

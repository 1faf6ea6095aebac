/**
 * Document checks over every generated corpus case, plus the limits and the
 * generated_at rules; and the fixture generator itself.
 */
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig, type Config } from '../../src/config.js';
import { REJECTION_REASONS, RejectionError, type RejectionReason } from '../../src/errors.js';
import { buildRegistry, parseFilename, type FeedRegistry } from '../../src/feeds/registry.js';
import { createDocumentValidator, nestingDepth, type DocumentLimits, type DocumentValidator, type ValidDocument } from '../../src/feeds/validate.js';
import {
  DEFAULT_GENERATED_AT,
  EDGE_CASES,
  EXAMPLE_FEEDS,
  EXAMPLE_FILENAMES,
  INVALID_CASES,
  casePath,
  expectedManifest,
  generateCorpus,
  generateDocument,
  writeCorpus,
  type FixtureCase,
} from '../fixtures/corpus.js';

const NOW = new Date(Date.parse(DEFAULT_GENERATED_AT) + 60_000);
const cases = generateCorpus();
const byName = (name: string): FixtureCase => {
  const c = cases.find((x) => x.name === name);
  if (!c) throw new Error(`no case ${name}`);
  return c;
};

let dir: string;
let config: Config;
let registry: FeedRegistry;
let validate: DocumentValidator;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'oddsfiles-validate-'));
  config = loadConfig({ env: {}, cwd: dir });
  registry = buildRegistry(config.bookmakers, config.sports);
  validate = createDocumentValidator(config.limits);
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

type Result = { outcome: 'published'; doc: ValidDocument } | { outcome: 'rejected'; reason: RejectionReason; detail: string };

interface DropOptions {
  now?: Date;
  receivedAt?: Date;
  validator?: DocumentValidator;
}

/** What the pipeline decides for a drop: the filename first, then the document. */
function drop(filename: string, bytes: Buffer | string, options: DropOptions = {}): Result {
  const feed = parseFilename(registry, filename);
  if (!feed) return { outcome: 'rejected', reason: 'unknown_filename', detail: filename };
  const bookmaker = registry.bookmakers.get(feed.bookmaker)!;
  const now = options.now ?? NOW;
  try {
    const doc = (options.validator ?? validate)({
      feed,
      bookmaker,
      bytes: typeof bytes === 'string' ? Buffer.from(bytes, 'utf8') : bytes,
      receivedAt: options.receivedAt ?? now,
      now,
    });
    return { outcome: 'published', doc };
  } catch (err) {
    if (err instanceof RejectionError) return { outcome: 'rejected', reason: err.reason, detail: err.detail };
    throw err;
  }
}

function published(filename: string, bytes: Buffer | string, options?: DropOptions): ValidDocument {
  const r = drop(filename, bytes, options);
  if (r.outcome !== 'published') throw new Error(`expected publication, got ${r.reason}: ${r.detail}`);
  return r.doc;
}

function reasonOf(filename: string, bytes: Buffer | string, options?: DropOptions): RejectionReason | 'published' {
  const r = drop(filename, bytes, options);
  return r.outcome === 'published' ? 'published' : r.reason;
}

const NW_SOCCER = 'site_live_northwind_soccer.json';
const doc = (fields: Record<string, unknown>) => JSON.stringify({ bookmaker: 'northwind', sport: 'soccer', ...fields, events: [] });

describe('every generated corpus case', () => {
  it.each(cases.map((c) => [`${c.group}/${c.name}`, c] as const))('%s', (_label, c) => {
    const r = drop(c.filename, c.bytes);
    expect(r.outcome).toBe(c.expected.outcome);
    if (r.outcome === 'rejected') {
      expect(REJECTION_REASONS).toContain(r.reason);
      if (c.expected.reason !== 'any') expect(r.reason).toBe(c.expected.reason);
      expect(r.detail.length).toBeGreaterThan(0);
    } else {
      expect(r.doc.bytes.equals(c.bytes)).toBe(c.expected.identical === true);
      expect(JSON.parse(r.doc.bytes.toString('utf8'))).toBeTypeOf('object');
    }
  });

  it('valid files are published byte for byte, not stamped, with their generated_at', () => {
    for (const c of cases.filter((x) => x.group === 'valid')) {
      const d = published(c.filename, c.bytes);
      expect(d.bytes.equals(c.bytes)).toBe(true);
      expect(d.stamped).toBe(false);
      expect(d.generatedAt).toBe(DEFAULT_GENERATED_AT);
      expect(d.generatedAtMs).toBe(Date.parse(DEFAULT_GENERATED_AT));
    }
  });

  it('does not change the dropped buffer', () => {
    for (const c of cases.filter((x) => x.bytes.length < 100_000)) {
      const copy = Buffer.from(c.bytes);
      drop(c.filename, c.bytes);
      expect(c.bytes.equals(copy)).toBe(true);
    }
  });
});

describe('edge cases', () => {
  it('utf8-bom: published without the byte order mark, otherwise unchanged', () => {
    const c = byName('utf8-bom');
    expect([...c.bytes.subarray(0, 3)]).toEqual([0xef, 0xbb, 0xbf]);
    const d = published(c.filename, c.bytes);
    expect(d.bytes.equals(c.bytes.subarray(3))).toBe(true);
    expect(d.bytes[0]).toBe(0x7b);
    expect(() => JSON.parse(d.bytes.toString('utf8'))).not.toThrow();
    expect(d.stamped).toBe(false);
  });

  it('no-generated-at: stamped with the time of receipt; every other byte unchanged', () => {
    const c = byName('no-generated-at');
    const receivedAt = new Date('2026-11-21T18:29:41.250Z');
    const d = published(c.filename, c.bytes, { receivedAt });
    expect(d.stamped).toBe(true);
    expect(d.generatedAt).toBe('2026-11-21T18:29:41.250Z');
    expect(d.generatedAtMs).toBe(receivedAt.getTime());
    const parsed = JSON.parse(d.bytes.toString('utf8')) as Record<string, unknown>;
    expect(parsed.generated_at).toBe(receivedAt.toISOString());
    const { generated_at: _stamp, ...rest } = parsed;
    expect(rest).toEqual(JSON.parse(c.bytes.toString('utf8')));
    // Take the inserted field out again: the drop's bytes are left, exactly.
    const text = d.bytes.toString('utf8');
    const field = `"generated_at":"${receivedAt.toISOString()}",`;
    expect(text.split(field)).toHaveLength(2);
    expect(text.replace(field, '')).toBe(c.bytes.toString('utf8'));
  });

  it.each([
    ['an empty object', '{}', `{"generated_at":"T"}`],
    ['white space around', '\n\t {  } \n', `\n\t {"generated_at":"T"  } \n`],
    ['a byte order mark', '\ufeff{"bookmaker":"northwind"}', `{"generated_at":"T","bookmaker":"northwind"}`],
    ['pretty printing', '{\n  "bookmaker": "northwind",\n  "events": []\n}', `{"generated_at":"T",\n  "bookmaker": "northwind",\n  "events": []\n}`],
    ['generated_at only inside an event', '{"events":[{"generated_at":"x"}]}', `{"generated_at":"T","events":[{"generated_at":"x"}]}`],
  ])('stamping keeps the JSON valid with %s', (_label, input, expected) => {
    const receivedAt = new Date('2026-11-21T18:00:00.000Z');
    const d = published(NW_SOCCER, input, { receivedAt });
    expect(d.stamped).toBe(true);
    expect(d.bytes.toString('utf8')).toBe(expected.replace('"T"', JSON.stringify(receivedAt.toISOString())));
    expect((JSON.parse(d.bytes.toString('utf8')) as { generated_at: string }).generated_at).toBe(receivedAt.toISOString());
  });

  it('proto-key: published byte for byte and Object.prototype is not polluted', () => {
    const c = byName('proto-key');
    expect(c.bytes.toString('utf8').startsWith('{"__proto__":{"polluted":true},')).toBe(true);
    const d = published(c.filename, c.bytes);
    expect(d.bytes.equals(c.bytes)).toBe(true);
    expect(Object.prototype).not.toHaveProperty('polluted');
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it('a __proto__ key cannot smuggle in or hide the checked fields', () => {
    // Fields under __proto__ are not the document's own: they neither fail nor pass the checks.
    const hidden = '{"__proto__":{"bookmaker":"bluewater","sport":"tennis","generated_at":"yesterday"},"events":[]}';
    const d = published(NW_SOCCER, hidden);
    expect(d.stamped).toBe(true);
    expect(reasonOf(NW_SOCCER, '{"__proto__":{"bookmaker":"northwind"},"bookmaker":"bluewater"}')).toBe('bookmaker_mismatch');
    expect(Object.prototype).not.toHaveProperty('bookmaker');
  });

  it('public-name: the lowercase public name is accepted, other forms are not', () => {
    const c = byName('public-name');
    expect(published(c.filename, c.bytes).bytes.equals(c.bytes)).toBe(true);
    const f = 'site_pregame_hillview_soccer.json';
    expect(reasonOf(f, '{"bookmaker":"starbet"}')).toBe('published');
    expect(reasonOf(f, '{"bookmaker":"hillview"}')).toBe('published');
    expect(reasonOf(f, '{"bookmaker":"StarBet"}')).toBe('bookmaker_mismatch');
    expect(reasonOf(f, '{"bookmaker":"Hillview"}')).toBe('bookmaker_mismatch');
    expect(reasonOf(f, '{"bookmaker":"starbet "}')).toBe('bookmaker_mismatch');
    expect(reasonOf(NW_SOCCER, '{"bookmaker":"starbet"}')).toBe('bookmaker_mismatch');
    expect(reasonOf('site_livepre_oddsport.json', '{"bookmaker":"oddsport"}')).toBe('published');
    expect(reasonOf('site_livepre_oddsport.json', '{"bookmaker":"OddSport"}')).toBe('bookmaker_mismatch');
  });

  it('the bookmaker_mismatch detail names the values the registry accepts for the file', () => {
    const detailOf = (filename: string, bytes: string) => {
      const r = drop(filename, bytes);
      return r.outcome === 'rejected' ? r.detail : undefined;
    };
    expect(detailOf('site_pregame_hillview_soccer.json', '{"bookmaker":"StarBet"}')).toBe(
      'the document says "StarBet", the filename names "hillview"; accepted: hillview or starbet',
    );
    // Key and public name the same in lowercase: one value.
    expect(detailOf(NW_SOCCER, '{"bookmaker":"bluewater"}')).toBe('the document says "bluewater", the filename names "northwind"; accepted: northwind');
    // From the running registry, not a fixed list.
    const other = buildRegistry([{ key: 'acme', name: 'Acme Bet', feeds: 'livepre' }], ['soccer']);
    const feed = parseFilename(other, 'site_livepre_acme.json')!;
    const v = createDocumentValidator({ maxFileBytes: 1e6, futureSkewMs: 300_000, maxDepth: 64 });
    expect(() => v({ feed, bookmaker: other.bookmakers.get('acme')!, bytes: Buffer.from('{"bookmaker":"acme bet "}'), receivedAt: NOW, now: NOW })).toThrow(
      'accepted: acme or acme bet',
    );
  });

  it('empty-events, extra-fields, unicode-names: byte for byte, UTF-8 preserved', () => {
    for (const name of ['empty-events', 'extra-fields', 'unicode-names']) {
      const c = byName(name);
      expect(published(c.filename, c.bytes).bytes.equals(c.bytes)).toBe(true);
    }
    const text = published(byName('unicode-names').filename, byName('unicode-names').bytes).bytes.toString('utf8');
    expect(text).toContain('Atlético Madrid vs Beşiktaş');
    expect(text).toContain('🏆');
  });
});

describe('what is checked', () => {
  it.each([
    ['', 'empty'],
    ['   \n\t\r\n', 'empty'],
    ['\ufeff', 'empty'],
    ['\ufeff  \n', 'empty'],
    ['{', 'invalid_json'],
    ['{"bookmaker":"northwind",}', 'invalid_json'],
    ["{'bookmaker':'northwind'}", 'invalid_json'],
    ['{"a":1} {"b":2}', 'invalid_json'],
    ['NaN', 'invalid_json'],
    ['\ufeff\ufeff{}', 'invalid_json'],
    ['null', 'not_an_object'],
    ['42', 'not_an_object'],
    ['"text"', 'not_an_object'],
    ['true', 'not_an_object'],
    ['[]', 'not_an_object'],
    ['[{"bookmaker":"northwind"}]', 'not_an_object'],
    ['{"bookmaker":5}', 'schema'],
    ['{"bookmaker":""}', 'schema'],
    ['{"sport":null}', 'schema'],
    ['{"events":"none"}', 'schema'],
    ['{"events":[1]}', 'schema'],
    ['{"events":[{"event_id":true}]}', 'schema'],
    ['{"events":[{"markets":{}}]}', 'schema'],
    ['{"events":[{"markets":[{"line":"2.5"}]}]}', 'schema'],
    ['{"events":[{"markets":[{"selections":[{"odds":"2.10"}]}]}]}', 'schema'],
    ['{"events":[{"event_id":17,"markets":[{"line":null,"selections":[{"name":"1","odds":null}]}]}]}', 'published'],
    ['{"bookmaker":"bluewater"}', 'bookmaker_mismatch'],
    ['{"bookmaker":"Northwind"}', 'bookmaker_mismatch'],
    ['{"sport":"tennis"}', 'sport_mismatch'],
    ['{"sport":"Soccer"}', 'sport_mismatch'],
    ['{}', 'published'],
    ['{"anything":{"goes":[1,2,3]},"bookmaker":"northwind","sport":"soccer"}', 'published'],
  ] as const)('%j → %s', (text, expected) => {
    expect(reasonOf(NW_SOCCER, text)).toBe(expected);
  });

  it('not UTF-8 is invalid_json, whatever the bytes', () => {
    for (const bad of [[0xff], [0xc3], [0xed, 0xa0, 0x80], [0xc0, 0xaf], [0xf8, 0x88, 0x80, 0x80, 0x80]]) {
      const bytes = Buffer.concat([Buffer.from('{"bookmaker":"northwind","x":"'), Buffer.from(bad), Buffer.from('"}')]);
      expect(reasonOf(NW_SOCCER, bytes)).toBe('invalid_json');
    }
  });

  it('sport is not compared in combined files', () => {
    expect(reasonOf('site_live_silverline.json', '{"bookmaker":"silverline","sport":"soccer"}')).toBe('published');
    expect(reasonOf('site_livepre_oddsport.json', '{"sport":"cricket","events":[{"sport":"darts"}]}')).toBe('published');
    expect(reasonOf('site_live_silverline_soccer.json', '{"sport":"tennis"}')).toBe('sport_mismatch');
  });

  it('a trailing newline or surrounding white space is published as dropped', () => {
    const bytes = Buffer.from(`\n ${doc({ generated_at: DEFAULT_GENERATED_AT })}\n`);
    expect(published(NW_SOCCER, bytes).bytes.equals(bytes)).toBe(true);
  });

  it('an old generated_at is published (being older than the last version is the pipeline’s business)', () => {
    expect(reasonOf(NW_SOCCER, doc({ generated_at: '2020-01-01T00:00:00Z' }))).toBe('published');
  });
});

describe('limits', () => {
  const limits = (over: Partial<DocumentLimits>): DocumentValidator => createDocumentValidator({ ...config.limits, ...over });

  it('the embedded limits are 50 MiB, 5 minutes and 64 levels', () => {
    expect(config.limits).toEqual({ maxFileBytes: 52_428_800, futureSkewMs: 300_000, maxDepth: 64 });
  });

  it('too_large: a drop of maxFileBytes is read, one byte more is not', () => {
    const text = doc({ generated_at: DEFAULT_GENERATED_AT });
    const size = Buffer.byteLength(text);
    expect(reasonOf(NW_SOCCER, text, { validator: limits({ maxFileBytes: size }) })).toBe('published');
    expect(reasonOf(NW_SOCCER, text, { validator: limits({ maxFileBytes: size - 1 }) })).toBe('too_large');
    // Size comes first: even a file of nothing but spaces is too large, not empty.
    expect(reasonOf(NW_SOCCER, ' '.repeat(size), { validator: limits({ maxFileBytes: size - 1 }) })).toBe('too_large');
  });

  it('too_large with the embedded limit', () => {
    const big = Buffer.alloc(config.limits.maxFileBytes + 1, 0x20);
    expect(reasonOf(NW_SOCCER, big)).toBe('too_large');
  });

  it('a generated 2 MB document is published byte for byte', () => {
    const feed = EXAMPLE_FEEDS.find((f) => f.filename === NW_SOCCER)!;
    const bytes = generateDocument(feed, { targetBytes: 2_000_000 });
    expect(published(NW_SOCCER, bytes).bytes.equals(bytes)).toBe(true);
  });

  const nested = (levels: number) => `{"events":${'['.repeat(levels - 1)}${']'.repeat(levels - 1)}}`;

  it('depth: maxDepth levels of nesting are accepted, one more level is not', () => {
    expect(nestingDepth(Buffer.from(nested(64)), 1000)).toBe(64);
    expect(reasonOf(NW_SOCCER, nested(64))).toBe('schema'); // events must hold objects: schema, not depth
    const objects = (levels: number) => `{"x":${'{"x":'.repeat(levels - 1)}1${'}'.repeat(levels - 1)}}`;
    expect(reasonOf(NW_SOCCER, objects(64))).toBe('published');
    expect(reasonOf(NW_SOCCER, objects(65))).toBe('schema');
    const three = limits({ maxDepth: 3 });
    expect(reasonOf(NW_SOCCER, '{"x":[{"y":1}]}', { validator: three })).toBe('published');
    expect(reasonOf(NW_SOCCER, '{"x":[{"y":[]}]}', { validator: three })).toBe('schema');
  });

  it('depth: brackets inside strings, escaped quotes included, do not count', () => {
    const text = `{"bookmaker":"northwind","note":"${'['.repeat(500)} \\" ${'{'.repeat(500)}","a":"\\\\","b":[1]}`;
    expect(JSON.parse(text)).toBeTypeOf('object');
    expect(nestingDepth(Buffer.from(text), 1000)).toBe(2);
    expect(reasonOf(NW_SOCCER, text)).toBe('published');
  });

  it('deep-nesting: 200 000 levels are rejected, without a stack overflow', () => {
    const c = byName('deep-nesting');
    const r = drop(c.filename, c.bytes);
    expect(r.outcome).toBe('rejected');
  });
});

describe('generated_at', () => {
  it.each([
    ['2026-11-21T18:30:00Z', 'published'],
    ['2026-11-21T18:30:00+00:00', 'published'],
    ['2026-11-21T18:30:00.5Z', 'published'],
    ['2026-11-21T18:30:00.123456789Z', 'published'],
    ['2024-02-29T12:00:00Z', 'published'],
    ['2026-11-21T20:30:00+02:00', 'bad_generated_at'],
    ['2026-11-21T13:30:00-05:00', 'bad_generated_at'],
    ['2026-11-21T18:30:00', 'bad_generated_at'],
    ['2026-11-21', 'bad_generated_at'],
    ['2026-11-21 18:30:00Z', 'bad_generated_at'],
    ['2026-02-30T00:00:00Z', 'bad_generated_at'],
    ['2026-02-29T00:00:00Z', 'bad_generated_at'],
    ['2026-11-31T00:00:00Z', 'bad_generated_at'],
    ['2026-13-01T00:00:00Z', 'bad_generated_at'],
    ['2026-11-21T24:00:00Z', 'bad_generated_at'],
    ['2026-11-21T18:60:00Z', 'bad_generated_at'],
    ['2026-11-21T18:30:60Z', 'bad_generated_at'],
    ['21/11/2026 18:30', 'bad_generated_at'],
    ['yesterday evening', 'bad_generated_at'],
    [' 2026-11-21T18:30:00Z', 'bad_generated_at'],
    ['', 'bad_generated_at'],
    [1_795_285_800, 'bad_generated_at'],
    [1_795_285_800_000, 'bad_generated_at'],
    [null, 'bad_generated_at'],
    [true, 'bad_generated_at'],
    [{}, 'bad_generated_at'],
    [['2026-11-21T18:30:00Z'], 'bad_generated_at'],
  ] as const)('%j → %s', (value, expected) => {
    expect(reasonOf(NW_SOCCER, doc({ generated_at: value }))).toBe(expected);
  });

  it('keeps the text and gives its time in milliseconds', () => {
    const d = published(NW_SOCCER, doc({ generated_at: '2026-11-21T18:30:00.250+00:00' }));
    expect(d.generatedAt).toBe('2026-11-21T18:30:00.250+00:00');
    expect(d.generatedAtMs).toBe(Date.parse('2026-11-21T18:30:00.250Z'));
    expect(d.stamped).toBe(false);
  });

  it('future skew: up to now + future_skew is accepted, later is future_generated_at', () => {
    const now = new Date('2026-11-21T18:30:00Z');
    const at = (text: string) => reasonOf(NW_SOCCER, doc({ generated_at: text }), { now });
    expect(at('2026-11-21T18:34:59Z')).toBe('published');
    expect(at('2026-11-21T18:35:00Z')).toBe('published');
    expect(at('2026-11-21T18:35:00.001Z')).toBe('future_generated_at');
    expect(at('2026-11-21T18:35:01Z')).toBe('future_generated_at');
    expect(at('2099-01-01T00:00:00Z')).toBe('future_generated_at');
    const strict = createDocumentValidator({ ...config.limits, futureSkewMs: 0 });
    expect(reasonOf(NW_SOCCER, doc({ generated_at: '2026-11-21T18:30:00Z' }), { now, validator: strict })).toBe('published');
    expect(reasonOf(NW_SOCCER, doc({ generated_at: '2026-11-21T18:30:00.001Z' }), { now, validator: strict })).toBe('future_generated_at');
  });

  it('the future is measured against now, not against the time of receipt', () => {
    const now = new Date('2026-11-21T18:30:00Z');
    const receivedAt = new Date('2026-11-21T18:00:00Z');
    expect(reasonOf(NW_SOCCER, doc({ generated_at: '2026-11-21T18:34:00Z' }), { now, receivedAt })).toBe('published');
  });
});

describe('the fixture generator', () => {
  it('makes every case of the corpus, named as in EXPECTED.json', () => {
    expect(cases.filter((c) => c.group === 'valid').map((c) => c.filename)).toEqual([...EXAMPLE_FILENAMES]);
    expect(cases.filter((c) => c.group === 'edge').map((c) => c.name)).toEqual([...EDGE_CASES]);
    expect(cases.filter((c) => c.group === 'invalid').map((c) => c.name)).toEqual([...INVALID_CASES]);
    const deep = byName('deep-nesting').bytes;
    expect(nestingDepth(deep, Number.MAX_SAFE_INTEGER)).toBe(200_001);
  });

  it('is deterministic, and the seed matters', () => {
    const again = generateCorpus();
    expect(again.map((c) => c.bytes.toString('base64'))).toEqual(cases.map((c) => c.bytes.toString('base64')));
    const other = generateCorpus({ seed: 7 });
    expect(other.find((c) => c.group === 'valid')!.bytes.equals(cases.find((c) => c.group === 'valid')!.bytes)).toBe(false);
  });

  it('writes documents exactly as JSON.stringify would, live indented and pregame compact', () => {
    for (const c of cases.filter((x) => x.group === 'valid')) {
      const feed = EXAMPLE_FEEDS.find((f) => f.filename === c.filename)!;
      const value = JSON.parse(c.bytes.toString('utf8')) as { events: Record<string, unknown>[]; sport?: string };
      expect(c.bytes.toString('utf8')).toBe(JSON.stringify(value, null, feed.kind === 'pregame' ? undefined : 2));
      expect(value.events.length).toBeGreaterThan(0);
      if (feed.sport === null) {
        expect(value).not.toHaveProperty('sport');
        expect(value.events.every((e) => typeof e.sport === 'string')).toBe(true);
      } else {
        expect(value.sport).toBe(feed.sport);
      }
      if (feed.kind === 'live') expect(value.events.every((e) => e.status === 'live')).toBe(true);
      if (feed.kind === 'pregame') expect(value.events.every((e) => e.status === undefined)).toBe(true);
    }
  });

  it('uses the given generatedAt', () => {
    const c = generateCorpus({ generatedAt: '2027-03-01T09:00:00Z' }).find((x) => x.group === 'valid')!;
    expect((JSON.parse(c.bytes.toString('utf8')) as { generated_at: string }).generated_at).toBe('2027-03-01T09:00:00Z');
  });

  it.each([20_000, 200_000, 2_000_000, 20_000_000])('makes documents of about %i bytes', (targetBytes) => {
    const feeds = targetBytes >= 2_000_000 ? [EXAMPLE_FEEDS[0]!] : EXAMPLE_FEEDS.filter((_, i) => i % 5 === 0);
    for (const feed of feeds) {
      for (const pretty of [true, false]) {
        const bytes = generateDocument(feed, { targetBytes, pretty, seed: 3 });
        expect(bytes.length).toBeGreaterThanOrEqual(targetBytes);
        expect(bytes.length).toBeLessThan(targetBytes + 5_000);
        if (targetBytes <= 200_000) {
          const value: unknown = JSON.parse(bytes.toString('utf8'));
          expect(bytes.toString('utf8')).toBe(JSON.stringify(value, null, pretty ? 2 : undefined));
          expect(reasonOf(feed.filename, bytes)).toBe('published');
        }
      }
    }
  });

  it('writeCorpus lays the cases out as <group>/<case>/<filename>, valid files under valid/, with EXPECTED.json', async () => {
    const out = join(dir, 'corpus');
    await writeCorpus(out, cases);
    for (const c of cases) {
      expect((await readFile(join(out, casePath(c)))).equals(c.bytes)).toBe(true);
    }
    expect(casePath(byName('site_live_silverline'))).toBe(join('valid', 'site_live_silverline.json'));
    expect(casePath(byName('proto-key'))).toBe(join('edge', 'proto-key', 'site_live_northwind_basketball.json'));
    const manifest = JSON.parse(await readFile(join(out, 'EXPECTED.json'), 'utf8')) as Record<string, Record<string, unknown>>;
    expect(manifest).toEqual(expectedManifest(cases));
    expect(Object.keys(manifest.valid!)).toHaveLength(38);
    expect(manifest.invalid!['deep-nesting']).toEqual({ filename: 'site_live_goldcrest_tennis.json', outcome: 'rejected', reason: 'any' });
  });
});

describe('examples/ (the README quick start drops one)', () => {
  it('every example drop is published under its own filename, generated_at stamped', async () => {
    const folder = resolve(fileURLToPath(import.meta.url), '../../../examples');
    const names = (await readdir(folder)).filter((n) => n.endsWith('.json'));
    expect(names).toContain(NW_SOCCER);
    for (const name of names) {
      const d = published(name, await readFile(join(folder, name)));
      expect(d.stamped, name).toBe(true);
    }
  });
});

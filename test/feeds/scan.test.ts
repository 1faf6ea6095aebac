/**
 * The one-pass check (src/feeds/json-tokenizer.ts, scan.ts, schema-plan.ts) by example: every
 * rejection reason through it, its details, the JSON grammar, ajv's way of counting and ordering,
 * the schema keywords it refuses, and which path validate.ts picks. The differential tests
 * (differential.test.ts) compare it with JSON.parse + ajv on the corpus and generated drops.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describe, expect, it, vi } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { RejectionError, type RejectionReason } from '../../src/errors.js';
import { buildRegistry, parseFilename } from '../../src/feeds/registry.js';
import { createDocumentScanner, scanDocument } from '../../src/feeds/scan.js';
import { compileSchemaPlan, T_ANY, T_INTEGER, T_NULL, T_NUMBER, T_OBJECT, T_STRING } from '../../src/feeds/schema-plan.js';
import {
  DEFAULT_ONE_PASS_MIN_BYTES,
  createDocumentValidator,
  loadDocumentSchema,
  onePassSupport,
  type DocumentValidator,
  type ValidDocument,
} from '../../src/feeds/validate.js';
import { DEFAULT_GENERATED_AT, EXAMPLE_FEEDS, generateCorpus, generateDocument } from '../fixtures/corpus.js';

const scratch = mkdtempSync(join(tmpdir(), 'oddsfiles-scan-'));
const config = loadConfig({ env: {}, cwd: scratch });
rmSync(scratch, { recursive: true, force: true });
const registry = buildRegistry(config.bookmakers, config.sports);
const NOW = new Date(Date.parse(DEFAULT_GENERATED_AT) + 60_000);
const NW_SOCCER = 'site_live_northwind_soccer.json';

const onePass = createDocumentValidator({ ...config.limits, onePassMinBytes: 0 });
const parsed = createDocumentValidator({ ...config.limits, onePassMinBytes: Infinity });

type Result = { outcome: 'published'; doc: ValidDocument } | { outcome: 'rejected'; reason: RejectionReason; detail: string };

function drop(bytes: Buffer | string, validator: DocumentValidator = onePass, filename = NW_SOCCER): Result {
  const feed = parseFilename(registry, filename)!;
  const bookmaker = registry.bookmakers.get(feed.bookmaker)!;
  try {
    const doc = validator({ feed, bookmaker, bytes: typeof bytes === 'string' ? Buffer.from(bytes, 'utf8') : bytes, receivedAt: NOW, now: NOW });
    return { outcome: 'published', doc };
  } catch (err) {
    if (err instanceof RejectionError) return { outcome: 'rejected', reason: err.reason, detail: err.detail };
    throw err;
  }
}
const reasonOf = (bytes: Buffer | string, validator?: DocumentValidator, filename?: string) => {
  const r = drop(bytes, validator, filename);
  return r.outcome === 'published' ? 'published' : r.reason;
};
const detailOf = (bytes: Buffer | string, validator?: DocumentValidator) => {
  const r = drop(bytes, validator);
  return r.outcome === 'published' ? 'published' : `${r.reason}: ${r.detail}`;
};

describe('every rejection reason, through the one-pass path', () => {
  it.each([
    ['', 'empty'],
    ['\ufeff \n', 'empty'],
    ['{', 'invalid_json'],
    ['{"bookmaker":"northwind",}', 'invalid_json'],
    ['{"events":[1,]}', 'invalid_json'],
    ["{'bookmaker':'northwind'}", 'invalid_json'],
    ['{"a":1} {"b":2}', 'invalid_json'],
    ['{"a":1}}', 'invalid_json'],
    ['NaN', 'invalid_json'],
    ['\ufeff\ufeff{}', 'invalid_json'],
    ['{"a":01}', 'invalid_json'],
    ['{"a":1.}', 'invalid_json'],
    ['{"a":-}', 'invalid_json'],
    ['{"a":1e}', 'invalid_json'],
    ['{"a":+1}', 'invalid_json'],
    ['{"a":.5}', 'invalid_json'],
    ['{"a":"\\x"}', 'invalid_json'],
    ['{"a":"\\u12"}', 'invalid_json'],
    ['{"a":"tab\there"}', 'invalid_json'],
    ['{"a":"\u0000"}', 'invalid_json'],
    ['{"a":tru}', 'invalid_json'],
    ['{"a" 1}', 'invalid_json'],
    ['{"a":1,,"b":2}', 'invalid_json'],
    ['{"a":[}', 'invalid_json'],
    ['{"a":{]}', 'invalid_json'],
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
    ['{"events":[{"event_id":1.5}]}', 'schema'],
    ['{"events":[{"markets":{}}]}', 'schema'],
    ['{"events":[{"markets":[{"line":"2.5"}]}]}', 'schema'],
    ['{"events":[{"markets":[{"selections":[{"odds":"2.10"}]}]}]}', 'schema'],
    ['{"events":[{"event_id":17,"markets":[{"line":null,"selections":[{"name":"1","odds":null}]}]}]}', 'published'],
    ['{"events":[{"event_id":1.0},{"event_id":1e308},{"event_id":-0},{"event_id":"x"}]}', 'published'],
    ['{"events":[{"event_id":1e400}]}', 'not_i_json'],
    ['{"events":[{"event_id":"x","event_id":"y"}]}', 'not_i_json'],
    ['{"name":"\\ud800"}', 'not_i_json'],
    ['{"bookmaker":"bluewater"}', 'bookmaker_mismatch'],
    ['{"bookmaker":"Northwind"}', 'bookmaker_mismatch'],
    ['{"sport":"tennis"}', 'sport_mismatch'],
    ['{"generated_at":"yesterday evening"}', 'bad_generated_at'],
    ['{"generated_at":1795285800}', 'bad_generated_at'],
    ['{"generated_at":"2099-01-01T00:00:00Z"}', 'future_generated_at'],
    ['{}', 'published'],
    ['{"anything":{"goes":[1,2,3]},"bookmaker":"northwind","sport":"soccer"}', 'published'],
  ] as const)('%j → %s, as with JSON.parse + ajv', (text, expected) => {
    expect(reasonOf(text)).toBe(expected);
    expect(reasonOf(text, parsed)).toBe(expected);
  });

  it('too_large comes first, before the bytes are looked at', () => {
    const small = createDocumentValidator({ ...config.limits, maxFileBytes: 10, onePassMinBytes: 0 });
    expect(reasonOf('{"bookmaker":"northwind"}', small)).toBe('too_large');
  });

  it('not UTF-8 is invalid_json', () => {
    for (const bad of [[0xff], [0xc3], [0xed, 0xa0, 0x80], [0xc0, 0xaf]]) {
      expect(reasonOf(Buffer.concat([Buffer.from('{"x":"'), Buffer.from(bad), Buffer.from('"}')]))).toBe('invalid_json');
    }
  });

  it('depth: maxDepth levels are accepted, one more is schema "nested deeper than N levels"', () => {
    const objects = (levels: number) => `{"x":${'{"x":'.repeat(levels - 1)}1${'}'.repeat(levels - 1)}}`;
    expect(reasonOf(objects(64))).toBe('published');
    expect(detailOf(objects(65))).toBe('schema: nested deeper than 64 levels');
    // Too deep comes before not JSON, as nestingDepth runs before JSON.parse on the other path.
    for (const text of [`{"a":1,}${'['.repeat(70)}`, `{"a":${'['.repeat(65)}`, `{"a":[1}${'{"x":'.repeat(70)}`]) {
      expect(reasonOf(text)).toBe('schema');
      expect(reasonOf(text, parsed)).toBe('schema');
    }
    expect(reasonOf(`{"a":1,}${'['.repeat(60)}`)).toBe('invalid_json');
    const deep = generateCorpus().find((c) => c.name === 'deep-nesting')!;
    expect(reasonOf(deep.bytes, onePass, deep.filename)).toBe('schema');
  });
});

describe('details', () => {
  it('invalid_json says what and at which byte of the file (a BOM counts), on either path', () => {
    for (const text of ['{"a":01}', '\ufeff{"a":01}', '{"a":"x\ny"}', '{"a":[1', '{"a":1} x', '[1,]', 'nul'])
      expect(detailOf(text, parsed)).toBe(detailOf(text));
    expect(detailOf('{"a":01}')).toBe("invalid_json: unexpected '1' at byte 6: expected ',' or '}'");
    expect(detailOf('\ufeff{"a":01}')).toBe("invalid_json: unexpected '1' at byte 9: expected ',' or '}'");
    expect(detailOf('{"a":1.}')).toBe("invalid_json: unexpected '}' at byte 7: expected a digit after the decimal point");
    expect(detailOf('{"a":[1,]}')).toBe("invalid_json: unexpected ']' at byte 8: expected a value");
    expect(detailOf('{"a":1,}')).toBe("invalid_json: unexpected '}' at byte 7: expected a property name");
    expect(detailOf('{"a":"x\ny"}')).toBe('invalid_json: control character 0x0a in a string at byte 7');
    expect(detailOf('{"a":"\\q"}')).toBe("invalid_json: bad escape at byte 6: 'q' after a backslash");
    expect(detailOf('{"a":"\\u00zz"}')).toBe("invalid_json: bad \\u escape at byte 6: 'z' is not a hex digit");
    expect(detailOf('{"a":"abc')).toBe('invalid_json: unterminated string starting at byte 5');
    expect(detailOf('{"a":1} x')).toBe("invalid_json: unexpected 'x' after the top-level value at byte 8");
    expect(detailOf('{"a":[1')).toBe('invalid_json: unexpected end of input at byte 7');
  });

  it('a later syntax error wins over an earlier schema fault, as JSON.parse fails before ajv runs', () => {
    expect(reasonOf('{"bookmaker":5,"x":[}')).toBe('invalid_json');
    expect(reasonOf('[1,2')).toBe('invalid_json');
  });

  it('not_an_object words the top level as the JSON.parse path does', () => {
    for (const text of ['[1]', 'null', '"s"', '1.5', 'false']) expect(detailOf(text)).toBe(detailOf(text, parsed));
    expect(detailOf('[1]')).toBe('not_an_object: the top level is an array, not an object');
  });

  it.each([
    ['{"events":[{"markets":5}]}', '/events/0/markets must be array'],
    ['{"events":[{},{"markets":[{},{"line":"x"}]}]}', '/events/1/markets/1/line must be number,null'],
    ['{"events":[{"event_id":true}]}', '/events/0/event_id must be string,integer'],
    ['{"bookmaker":""}', '/bookmaker must NOT have fewer than 1 characters'],
    // ajv checks properties in the schema's order, not the document's
    ['{"sport":1,"bookmaker":2}', '/bookmaker must be string'],
    ['{"events":[{"markets":5,"name":1}]}', '/events/0/name must be string'],
    ['{"events":[{"markets":[1]}],"sport":false}', '/sport must be string'],
    // and items in index order, the first faulty item only
    ['{"events":[{"name":1},{"event_id":null}]}', '/events/0/name must be string'],
    // a value's own type before anything inside it
    ['{"events":{"0":{"name":1}}}', '/events must be array'],
  ])('schema: %s → "%s", word for word as ajv', (text, message) => {
    expect(detailOf(text)).toBe(`schema: ${message}`);
    expect(detailOf(text, parsed)).toBe(`schema: ${message}`);
  });
});

describe('JSON.parse semantics', () => {
  it('duplicate member names are not I-JSON, however the name is written, at any depth', () => {
    for (const text of [
      '{"bookmaker":5,"bookmaker":"northwind"}',
      '{"bookmaker":"northwind","b\\u006fokmaker":"northwind"}',
      '{"events":[{"name":1,"name":"x"}]}',
      '{"a":{"x":1},"b":{"x":1},"a":2}',
      // past the first names an object compares byte for byte, and escaped after plain ones
      `{${Array.from({ length: 20 }, (_, i) => `"k${i}":${i}`).join(',')},"k3":0}`,
      `{"events":[{${Array.from({ length: 17 }, (_, i) => `"n${i}":1`).join(',')},"n16":2}]}`,
      '{"home":1,"away":2,"h\\u006fme":3}',
      // objects repeating the names of the one before them, in order, then one twice
      '{"events":[{"id":1,"name":"a"},{"id":2,"name":"b","id":3}]}',
      '{"events":[{"id":1,"name":"a","odds":2},{"id":2,"name":"b","name":"c"}]}',
      '{"events":[{"id":1,"name":"a"},{"name":"b","name":"c"}]}',
      '{"events":[{"a":1,"b":2},{"a":1,"b":2},{"a":1,"b":2,"c":3,"b":4}]}',
      // the object before it at that depth was in another array, or kept its names in a Set
      '{"x":[{"a":1,"b":2}],"y":[{"a":1,"b":2,"a":3}]}',
      `{"events":[{${Array.from({ length: 17 }, (_, i) => `"n${i}":1`).join(',')}},{"n0":1,"n1":1,"n0":2}]}`,
      '{"events":[{"h\\u006fme":1,"away":2},{"home":1,"away":2,"home":3}]}',
    ]) {
      expect(reasonOf(text), text).toBe('not_i_json');
      expect(reasonOf(text, parsed), text).toBe('not_i_json');
    }
    // the same name in different objects, or nested under itself, is no duplicate
    expect(reasonOf('{"events":[{"name":"x"},{"name":"y"}],"name":{"name":1}}')).toBe('published');
    expect(reasonOf('{"events":[{"id":1,"name":"a"},{"id":2,"name":"b","odds":1},{"id":3},{"name":"c","id":4},{"id":5,"name":"d"}]}')).toBe('published');
    expect(reasonOf(`{"home":1,"away":2,"draw":3,${Array.from({ length: 30 }, (_, i) => `"k${i}":{"home":1,"away":2}`).join(',')}}`)).toBe('published');
    expect(detailOf('{"events":[],\n "events":[]}')).toBe('not_i_json: the member name "events" appears twice in an object (again at byte 15)');
    expect(detailOf('{"events":[],\n "events":[]}', parsed)).toBe('not_i_json: the member name "events" appears twice in an object (again at byte 15)');
  });

  it('numbers past a double and lone surrogates are not I-JSON; a syntax error later in the file still comes first', () => {
    expect(detailOf('{"x":-1e400}')).toBe('not_i_json: the number -1e400 at byte 5 does not fit an IEEE 754 double');
    expect(detailOf(`{"x":${'9'.repeat(400)}}`, parsed)).toMatch(/^not_i_json: the number 9{37}\.\.\. at byte 5 does not fit/);
    expect(reasonOf('{"x":1e-400,"y":1.7976931348623157e308}')).toBe('published');
    expect(detailOf('{"name":"a\\uD800b"}')).toBe('not_i_json: a lone surrogate \\ud800 in a string at byte 10');
    expect(detailOf('{"name":"\\udc00"}', parsed)).toBe('not_i_json: a lone surrogate \\udc00 in a string at byte 9');
    expect(detailOf('{"\\ud83d":1}')).toBe('not_i_json: a lone surrogate \\ud83d in a string at byte 2');
    expect(reasonOf('{"name":"\\ud83d\\ude00"}')).toBe('published');
    expect(reasonOf('{"x":1e400,')).toBe('invalid_json');
    expect(reasonOf('{"x":1e400,', parsed)).toBe('invalid_json');
    // a high surrogate followed by something that is not its low half: lone, or a syntax error
    for (const [text, detail] of [
      ['{"a":"\\ud83d\\u00e9"}', 'not_i_json: a lone surrogate \\ud83d in a string at byte 6'],
      ['{"a":"\\ud83d\\n"}', 'not_i_json: a lone surrogate \\ud83d in a string at byte 6'],
      ['{"a":"\\ud83d\\ud83d\\ude00"}', 'not_i_json: a lone surrogate \\ud83d in a string at byte 6'],
      ['{"a":"\\ud83d\\uzz00"}', "invalid_json: bad \\u escape at byte 12: 'z' is not a hex digit"],
      ['{"a":"\\ud83d\\ude0', 'invalid_json: unterminated string starting at byte 5'],
      ['{"a":"\\ud8', 'invalid_json: unterminated string starting at byte 5'],
      ['{"a":"\\ud8x', "invalid_json: bad \\u escape at byte 6: 'x' is not a hex digit"],
    ] as const) {
      expect(detailOf(text), text).toBe(detail);
      expect(detailOf(text, parsed), text).toBe(detail);
    }
  });

  it('keys and values with escapes are the same keys and values', () => {
    expect(reasonOf('{"b\\u006fokmaker":5}')).toBe('schema');
    expect(reasonOf('{"bookmaker":"north\\u0077ind","sp\\u006frt":"socc\\u0065r"}')).toBe('published');
    expect(reasonOf('{"ev\\u0065nts":[{"m\\u0061rkets":{}}]}')).toBe('schema');
    const d = drop('{"generated\\u005fat":"2026-11-21T18:30:00\\u005a"}');
    expect(d.outcome === 'published' && d.doc).toMatchObject({ generatedAt: '2026-11-21T18:30:00Z', stamped: false });
  });

  it('fields under __proto__ or deeper are not the top-level ones', () => {
    expect(reasonOf('{"__proto__":{"bookmaker":"bluewater"},"events":[{"bookmaker":5}]}')).toBe('published');
    expect(Object.prototype).not.toHaveProperty('bookmaker');
  });

  it('stamping works as on the JSON.parse path: empty objects, white space, a BOM', () => {
    for (const text of ['{}', ' \n{ } ', '\ufeff{"bookmaker":"northwind"}', '{\n  "events": []\n}']) {
      const a = drop(text);
      const b = drop(text, parsed);
      expect(a.outcome).toBe('published');
      expect(a.outcome === 'published' && b.outcome === 'published' && a.doc.bytes.equals(b.doc.bytes)).toBe(true);
      expect(a.outcome === 'published' && a.doc.stamped).toBe(true);
    }
  });

  it('minLength counts code points as ajv does: a surrogate pair once, raw or escaped', () => {
    const schema = { type: 'object', properties: { s: { type: 'string', minLength: 2 } } };
    const one = createDocumentValidator({ ...config.limits, onePassMinBytes: 0 }, schema);
    const two = createDocumentValidator({ ...config.limits, onePassMinBytes: Infinity }, schema);
    const cases: [string, boolean | 'not_i_json'][] = [
      ['"ab"', true],
      ['"é"', false],
      ['"éé"', true],
      ['"😀"', false],
      ['"\\ud83d\\ude00"', false],
      ['"\\ud83d\\ud83d"', 'not_i_json'],
      ['"\\ude00\\ud83d"', 'not_i_json'],
      ['"\\ud83d😀"', 'not_i_json'],
      ['"😀\\ude00"', 'not_i_json'],
      ['"\\n"', false],
      ['"\\n\\t"', true],
      ['"a\\ud83d"', 'not_i_json'],
      ['"浦"', false],
      ['"浦和"', true],
    ];
    for (const [value, ok] of cases) {
      const text = `{"s":${value}}`;
      const expected = ok === 'not_i_json' ? ok : ok ? 'published' : 'schema';
      expect(reasonOf(text, one), text).toBe(expected);
      expect(reasonOf(text, two), text).toBe(expected);
    }
  });
});

describe('large top-level values', () => {
  it('a bookmaker or generated_at over 64 KiB is rejected without being decoded whole', () => {
    const long = 'x'.repeat(100_000);
    expect(detailOf(`{"bookmaker":"${long}"}`)).toBe(
      'bookmaker_mismatch: the document says "(a string of 100002 bytes)", the filename names "northwind"; accepted: northwind',
    );
    expect(detailOf(`{"bookmaker":"${long}"}`, parsed)).toBe(detailOf(`{"bookmaker":"${long}"}`));
    expect(detailOf(`{"generated_at":[${'1,'.repeat(40_000)}1]}`)).toMatch(/^bad_generated_at: "\(an array of 80003 bytes\)" is not an ISO 8601/);
    expect(detailOf(`{"generated_at":[${'1,'.repeat(40_000)}1]}`, parsed)).toBe(detailOf(`{"generated_at":[${'1,'.repeat(40_000)}1]}`));
    expect(reasonOf(`{"sport":"${long}"}`)).toBe('sport_mismatch');
  });
});

describe('the JSON grammar, against JSON.parse itself', () => {
  const texts = [
    '{}',
    '{ }',
    '{"a":[]}',
    '{"a":[ ]}',
    '{"a":{}}',
    '{"":0}',
    '{"a":"\\"\\\\\\/\\b\\f\\n\\r\\t\\u0000\\uFFFF"}',
    '{"a":-0}',
    '{"a":-0.0e-0}',
    '{"a":0e0}',
    '{"a":1E+5}',
    '{"a":123.456e-789}',
    '{"a":1e400}',
    '{"a":00}',
    '{"a":-01}',
    '{"a":0.}',
    '{"a":.0}',
    '{"a":1e}',
    '{"a":1e+}',
    '{"a":--1}',
    '{"a":-a}',
    '{"a":0x10}',
    '{"a":Infinity}',
    '{"a":-Infinity}',
    '{"a":true}',
    '{"a":false}',
    '{"a":null}',
    '{"a":True}',
    '{"a":nulll}',
    '{"a":truefalse}',
    '{"a":t}',
    '{"a":"\u007f"}',
    '{"a":"\u2028\u2029"}',
    '{"a":"\u001f"}',
    '{"a":"\\u123"}',
    '{"a":"\\U0041"}',
    '{"a":"\\\'"}',
    '{"a":1,}',
    '{,"a":1}',
    '{"a":1 "b":2}',
    '{"a":[1 2]}',
    '{"a":[,1]}',
    '{"a"::1}',
    '{"a":1:}',
    '{1:1}',
    '{a:1}',
    '{"a":1}\n\t\r ',
    '\n{"a":1}',
    '{"a":1}\u000b',
    '{"a":1}\u00a0',
    '{"a":1}/',
    '{"a":[[[]]]}',
    '{"a":[[[]]}',
    '{"a":[{]}',
    '{"a":"x"}"',
    '{"a":"unterminated}',
    '{"a":"\\',
    '{"a":"\\u',
    '{"a":1',
    '{"a"',
    '{"a',
    '{',
  ];
  it.each(texts)('%j', (text) => {
    let ok = true;
    try {
      JSON.parse(text);
    } catch {
      ok = false;
    }
    const bytes = Buffer.from(text, 'utf8');
    let start = 0;
    while (start < bytes.length && ' \n\r\t'.includes(String.fromCharCode(bytes[start]!))) start++;
    const r = scanDocument(bytes, start, null, 64, []);
    expect(r.kind !== 'invalid_json', r.kind === 'invalid_json' ? r.detail : '').toBe(ok);
  });
});

describe('one scanner for many documents', () => {
  const plan = compileSchemaPlan(loadDocumentSchema());
  if (!plan.ok) throw new Error('the shipped schema must compile');
  const fields = ['bookmaker', 'sport', 'generated_at'];
  const big = generateDocument(EXAMPLE_FEEDS[0]!, { targetBytes: 20_000 });
  // Each leaves something behind in a scanner that does not start afresh: a deep stack, an
  // open container, a fault in a slot, field positions, a member count.
  const documents = [
    big,
    '[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]',
    '{"events":[{"markets":[{"selections":[{"odds":"high"}]}]}]}',
    '{"sport":"soccer","events":[{"name":"A","markets":[{"selections":[{"name":"1","odds":',
    '{"bookmaker":"northwind","generated_at":"2026-11-21T18:30:00Z","a":1,"b":2}',
    '{"events":[{"markets":[{}]}]}',
    '{}',
    '"just a string"',
    '{"sport":7}',
    big,
    '{"events":[{"markets":[{"selections":[{"odds":1.5}]}]}]}',
  ].map((d) => (typeof d === 'string' ? Buffer.from(d) : d));

  it('gives every document the result a new scanner gives it', () => {
    const reused = createDocumentScanner(plan.plan, 64, fields);
    for (const order of [documents, [...documents].reverse()]) {
      for (const bytes of order) {
        expect(reused(bytes, 0), bytes.subarray(0, 60).toString()).toEqual(scanDocument(bytes, 0, plan.plan, 64, fields));
      }
    }
  });

  it('keeps no document alive once it has scanned it', async () => {
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const reused = createDocumentScanner(plan.plan, 64, fields);
    const scanOne = (text: string, kind: string) => {
      const bytes = Buffer.from(text); // referenced by nothing but the scanner, if it kept it
      expect(reused(bytes, 0).kind).toBe(kind);
      return new WeakRef(bytes);
    };
    // One that ends normally, one that ends in an exception (invalid JSON half-way down).
    const refs = [scanOne(big.toString(), 'object'), scanOne('{"events":[{"markets":[{"selections":[{"odds":"x"', 'invalid_json')];
    await new Promise((r) => setImmediate(r)); // a WeakRef holds its target until the job ends
    gc();
    expect(refs.map((r) => r.deref() === undefined)).toEqual([true, true]);
  });
});

describe('the schema plan', () => {
  it('compiles the shipped schema: types as flags, properties in the schema’s order, ajv’s messages', () => {
    const r = compileSchemaPlan(loadDocumentSchema());
    expect(r.ok).toBe(true);
    if (!r.ok || r.plan === null) return;
    expect(r.plan.types).toBe(T_OBJECT);
    expect(r.plan.properties!.map((p) => p.name)).toEqual(['bookmaker', 'sport', 'events']);
    const [bookmaker, , events] = r.plan.properties!;
    expect(bookmaker!.plan).toMatchObject({
      types: T_STRING,
      minLength: 1,
      minLengthMessage: 'must NOT have fewer than 1 characters',
      typeMessage: 'must be string',
    });
    const event = events!.plan.items!;
    expect(event.properties!.map((p) => p.name)).toEqual(['event_id', 'name', 'sport', 'league', 'starts_at', 'markets']);
    expect(event.properties![0]!.plan).toMatchObject({ types: T_STRING | T_INTEGER, typeMessage: 'must be string,integer' });
    const line = event.properties![5]!.plan.items!.properties![1]!.plan;
    expect(line).toMatchObject({ types: T_NUMBER | T_NULL, typeMessage: 'must be number,null' });
  });

  it('leaves out what always passes, as ajv does', () => {
    expect(compileSchemaPlan(true)).toEqual({ ok: true, plan: null });
    expect(compileSchemaPlan({})).toEqual({ ok: true, plan: null });
    expect(compileSchemaPlan({ title: 't', description: 'd', $comment: 'c' })).toEqual({ ok: true, plan: null });
    const r = compileSchemaPlan({ properties: { a: {}, b: { type: 'string' }, c: true } });
    expect(r.ok && r.plan?.properties?.map((p) => p.name)).toEqual(['b']);
    expect(r.ok && r.plan?.types).toBe(T_ANY);
    // JSON Pointer escapes in paths, as ajv writes them
    const p = compileSchemaPlan({ properties: { 'a/b~c': { type: 'string' } } });
    expect(p.ok && p.plan?.properties?.[0]?.pointer).toBe('a~1b~0c');
  });

  it.each([
    [{ type: 'object', required: ['bookmaker'] }, 'required'],
    [{ type: 'object', additionalProperties: false }, 'additionalProperties'],
    [{ properties: { a: { enum: [1] } } }, 'enum'],
    [{ properties: { a: { $ref: '#' } } }, '$ref'],
    [{ properties: { a: { type: 'string', pattern: '^x' } } }, 'pattern'],
    [{ properties: { a: { type: 'string', maxLength: 3 } } }, 'maxLength'],
    [{ properties: { a: { type: 'number', minimum: 0 } } }, 'minimum'],
    [{ properties: { a: { type: 'string', default: 'x' } } }, 'default'],
    [{ items: [{ type: 'string' }] }, 'a list of schemas'],
    [{ properties: { a: false } }, 'false'],
    [{ properties: { constructor: { type: 'string' } } }, 'constructor'],
    [{ properties: { a: { type: 'number', minLength: 1 } } }, 'minLength without the type string'],
    [{ type: 'array', properties: { a: { type: 'string' } } }, 'properties without the type object'],
    [{ type: 'object', items: { type: 'string' } }, 'items without the type array'],
    [{ type: 'text' }, 'type'],
  ])('refuses %j (%s), so validate.ts uses ajv', (schema, why) => {
    const r = compileSchemaPlan(schema);
    expect(r.ok).toBe(false);
    expect(!r.ok && r.unsupported).toContain(why);
    expect(onePassSupport(schema).ok).toBe(false);
  });

  it('with a schema it refuses, even a threshold of 0 gets ajv’s verdict', () => {
    const schema = { type: 'object', required: ['bookmaker'], properties: { bookmaker: { type: 'string' } } };
    const v = createDocumentValidator({ ...config.limits, onePassMinBytes: 0 }, schema);
    expect(reasonOf('{}', v)).toBe('schema');
    expect(detailOf('{}', v)).toBe("schema: the document must have required property 'bookmaker'");
  });
});

describe('which path', () => {
  /** The length of the longest text JSON.parse was given while `fn` ran. */
  function longestParse(fn: () => void): number {
    const spy = vi.spyOn(JSON, 'parse');
    try {
      fn();
      return Math.max(0, ...spy.mock.calls.map(([text]) => text.length));
    } finally {
      spy.mockRestore();
    }
  }

  it('drops under onePassMinBytes (default 64 KiB) go through JSON.parse, larger ones through the one-pass check', () => {
    expect(DEFAULT_ONE_PASS_MIN_BYTES).toBe(64 * 1024);
    const feed = EXAMPLE_FEEDS.find((f) => f.filename === NW_SOCCER)!;
    const big = generateDocument(feed, { targetBytes: 200_000, pretty: false });
    const small = generateDocument(feed, { targetBytes: 40_000, pretty: false });
    const byDefault = createDocumentValidator(config.limits);
    expect(longestParse(() => drop(small, byDefault))).toBe(small.length);
    expect(longestParse(() => drop(big, byDefault))).toBeLessThan(100);
    const threshold = createDocumentValidator({ ...config.limits, onePassMinBytes: 20_000 });
    expect(longestParse(() => drop(small, threshold))).toBeLessThan(100);
    expect(longestParse(() => drop('{"a":1}', threshold))).toBe(7);
    expect(longestParse(() => drop(small, parsed))).toBe(small.length);
    expect(longestParse(() => drop('{"a":1}', onePass))).toBe(0);
  });

  it('a generated 5 MB document is published byte for byte, with its generated_at', () => {
    const feed = EXAMPLE_FEEDS.find((f) => f.filename === NW_SOCCER)!;
    const bytes = generateDocument(feed, { targetBytes: 5_000_000 });
    const r = drop(bytes, createDocumentValidator(config.limits));
    expect(r.outcome).toBe('published');
    if (r.outcome !== 'published') return;
    expect(r.doc.bytes.equals(bytes)).toBe(true);
    expect(r.doc.generatedAt).toBe(DEFAULT_GENERATED_AT);
    expect(r.doc.stamped).toBe(false);
  });
});

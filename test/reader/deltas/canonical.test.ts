/**
 * The canonical digest of the deltas (src/reader/deltas/canonical.ts) is the SHA-256 of what the
 * `canonicalize` package (RFC 8785) writes, for every kind of JSON value; a value with no canonical
 * form (a number not finite, a lone surrogate) has none.
 */
import { createHash } from 'node:crypto';
import canonicalize from 'canonicalize';
import { describe, expect, it } from 'vitest';
import { canonicalSha256 } from '../../../src/reader/deltas/canonical.js';

const reference = (v: unknown) => createHash('sha256').update(canonicalize(v)!).digest('hex');

describe('the canonical digest of deltas', () => {
  it("is the SHA-256 of the canonicalize package's RFC 8785 JSON", () => {
    const values: unknown[] = [
      null,
      true,
      0,
      -0,
      1e21,
      1e-7,
      5e-324,
      0.1 + 0.2,
      -123.456e10,
      'plain',
      'quote " backslash \\ control \u0001 newline \n tab \t',
      'é € 😀 \u2028',
      [],
      {},
      [1, [2, [3, { z: 1, a: [] }]], 'x'],
      { b: 1, a: 2, B: 3, _: 4, '': 5, '10': 6, '9': 7, é: 8, '€': 9, '😀': 10, '\ufb33': 11, '\r': 12 },
      { '1': 'a', '2': 'b' },
      { a: { '10': 1, '9': 2 }, b: [{ '0': null }] },
      JSON.parse('{"__proto__": {"b": 1, "a": 2}, "constructor": 3, "toJSON": 4}'),
      JSON.parse('{"z": 0, "__proto__": {"b": 1, "a": 2}}'),
      // A backslash of the text before "ud800" is not a lone surrogate.
      { s: 'a \\ud800 b', t: '\\\\ud83d', pair: '\ud83d\ude00' },
      { nested: { z: { y: { x: [null, false, { k: 'v' }] } } }, price: 1.85, n: -1 },
      // Longer than a hashing chunk.
      { events: Array.from({ length: 3000 }, (_, i) => ({ id: `e${i}`, odds: [1 + i / 100, 2.5, 3.25], name: `Team ${i} – ${'ü'.repeat(i % 5)}` })) },
    ];
    for (const v of values) expect(canonicalSha256(v)).toBe(reference(v));
  });

  it('is null for a value with no canonical form', () => {
    expect(canonicalSha256({ a: [1, Infinity] })).toBeNull();
    expect(canonicalSha256(NaN)).toBeNull();
    expect(canonicalSha256({ s: 'lone \ud800 surrogate' })).toBeNull();
    expect(canonicalSha256({ ['\udc00']: 1 })).toBeNull();
    expect(canonicalSha256({ a: 1, b: { z: 'x \\\udbff' } })).toBeNull();
    expect(canonicalSha256({ '10': [-Infinity], '9': 1 })).toBeNull();
    expect(canonicalSha256({ '10': 'x', '9': '\ud800' })).toBeNull();
  });
});

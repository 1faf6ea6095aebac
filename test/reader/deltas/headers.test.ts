import { describe, expect, it } from 'vitest';
import { baseOf, createAImParser, parseAIm } from '../../../src/reader/deltas/request-headers.js';

describe('delta request headers', () => {
  it('A-IM: the patch kinds taken with q > 0, anything else ignored', () => {
    expect([...parseAIm('json-patch, merge-patch;q=0, gzip')]).toEqual(['json-patch']);
    expect([...parseAIm('Merge-Patch ; q=0.5')]).toEqual(['merge-patch']);
    expect(parseAIm(undefined).size).toBe(0);
    expect(parseAIm(`json-patch,${' '.repeat(300)}`).size).toBe(0);
  });

  it('the kept parse follows the header when it changes', () => {
    const imsOf = createAImParser();
    expect([...imsOf('json-patch')]).toEqual(['json-patch']);
    expect([...imsOf('json-patch')]).toEqual(['json-patch']);
    expect([...imsOf('merge-patch')]).toEqual(['merge-patch']);
    expect(imsOf(undefined)).toEqual([]);
    expect(imsOf('merge-patch, json-patch')).toBe(imsOf('merge-patch, json-patch'));
    expect([...imsOf('json-patch')]).toEqual(['json-patch']);
  });

  it('If-None-Match: the first ETag that is not the current version, in any coding', () => {
    const a = 'a'.repeat(32);
    const b = 'b'.repeat(32);
    const current = a + 'c'.repeat(32);
    expect(baseOf(`"${a}", W/"${b}-gz"`, current)).toBe(b);
    expect(baseOf(`"${a}"`, current)).toBeUndefined();
    expect(baseOf(` W/"${b}-br" `, current)).toBe(b);
    expect(baseOf(`"${b}"`, current)).toBe(b);
    expect(baseOf(`"${b}-zz"`, current)).toBeUndefined();
    expect(baseOf(`"${b.slice(1)}"`, current)).toBeUndefined();
    expect(baseOf('*', current)).toBeUndefined();
  });
});

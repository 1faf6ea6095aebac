/**
 * A build thread keeps the documents it parsed (src/reader/deltas/parsed-docs.ts): the next build
 * of a live file takes its base from there instead of parsing it, and must give exactly what a
 * build from the bytes gives, also when the base it took was used up by an earlier build's check.
 */
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { buildFacts } from '../../../src/reader/deltas/build.js';
import { createParsedDocs } from '../../../src/reader/deltas/parsed-docs.js';

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
const doc = (round: number) =>
  Buffer.from(
    JSON.stringify({
      generated_at: `2026-11-27T12:00:0${round}Z`,
      events: Array.from({ length: 40 }, (_, i) => ({
        id: `e${i}`,
        markets: [{ key: 'h2h', prices: [1.5 + ((i * round) % 7) / 10, 2.5, 3.25 + (i % 3 === round % 3 ? 0.1 : 0)] }],
      })),
    }),
  );

describe('parsed documents kept between builds', () => {
  it('a chain of builds from kept bases gives the patches and digests of builds from bytes', () => {
    const kept = createParsedDocs(1024 * 1024);
    let taken = 0;
    const docs = {
      ...kept,
      take(k: string) {
        const d = kept.take(k);
        if (d !== undefined) taken++;
        return d;
      },
    };
    const versions = [0, 1, 2, 3].map(doc);
    // The first build keeps its target; each next one takes it as its base, then keeps its own.
    buildFacts(versions[0]!, undefined, undefined, { docs, toSha: sha(versions[0]!) });
    for (let i = 1; i < versions.length; i++) {
      const [from, to] = [versions[i - 1]!, versions[i]!];
      const cached = buildFacts(to, from, undefined, { docs, toSha: sha(to), fromSha: sha(from) });
      expect(taken).toBe(i);
      const fresh = buildFacts(to, from);
      expect(cached.digest).toBe(fresh.digest);
      expect(Object.keys(cached.patches).sort()).toEqual(['json-patch', 'merge-patch']);
      for (const im of ['json-patch', 'merge-patch'] as const) expect(cached.patches[im]!.identity.equals(fresh.patches[im]!.identity)).toBe(true);
      // The base was used up, the target kept for the next build.
      expect(kept.size).toBe(1);
    }
  });

  it('a base taken from the cache that an earlier check changed is never used again', () => {
    const docs = createParsedDocs(1024 * 1024);
    const [a, b] = [doc(1), doc(2)];
    buildFacts(a, undefined, undefined, { docs, toSha: sha(a) });
    buildFacts(b, a, ['json-patch'], { docs, toSha: sha(b), fromSha: sha(a) });
    // `a` was patched in place into `b` by the check: a second build from `a` parses it again.
    const again = buildFacts(b, a, ['json-patch'], { docs, toSha: sha(b), fromSha: sha(a) });
    expect(again.patches['json-patch']!.identity.equals(buildFacts(b, a, ['json-patch']).patches['json-patch']!.identity)).toBe(true);
    expect(JSON.parse(again.patches['json-patch']!.identity.toString()).length).toBeGreaterThan(0);
  });

  it('keeps documents up to its bound in bytes, the oldest leaving first', () => {
    const docs = createParsedDocs(100);
    docs.keep('a', { n: 1 }, 40);
    docs.keep('b', { n: 2 }, 40);
    docs.keep('c', { n: 3 }, 40);
    expect(docs.take('a')).toBeUndefined();
    expect(docs.take('b')).toEqual({ n: 2 });
    docs.keep('big', { n: 4 }, 101);
    expect(docs.take('big')).toBeUndefined();
    expect(docs.size).toBe(1);
  });
});

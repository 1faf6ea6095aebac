/**
 * The history written by the catalog's commit, against real Redis: every publication in the
 * file's set (newest first, as of a moment), trimmed by count and by age (never the one just
 * published), and a version's object given up for deletion only when no retained publication,
 * the versions list nor the current entry uses it (the same bytes published again later).
 */
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { createCatalog } from '../../src/catalog/redis-catalog.js';
import type { CatalogEntry } from '../../src/catalog/types.js';
import { redisKeys } from '../../src/redis/key-names.js';
import { dropPrefix, TEST_REDIS_URL, uniquePrefix } from '../helpers/redis.js';

const redis = new Redis(TEST_REDIS_URL);
const prefixes: string[] = [];
afterAll(async () => {
  for (const p of prefixes) await dropPrefix(p);
  redis.disconnect();
});

const sha = (n: number) => n.toString(16).padStart(8, '0').repeat(8);
/** Version `n` of the bytes `bytes` (the same bytes may come back with a later generated_at only if stamped alike: a correction). */
const entry = (n: number, bytes: number, publishedAtMs: number): CatalogEntry => ({
  filename: 'a.json',
  bookmaker: 'northwind',
  kind: 'live',
  sport: 'soccer',
  object: `objects/a.json/${sha(bytes)}.json`,
  sha256: sha(bytes),
  size: 100 + bytes,
  generatedAt: new Date(1_700_000_000_000 + n * 1000).toISOString(),
  generatedAtMs: 1_700_000_000_000 + n * 1000,
  publishedAt: new Date(publishedAtMs).toISOString(),
});

function fresh(label: string) {
  const prefix = uniquePrefix(label);
  prefixes.push(prefix);
  return redisKeys(prefix);
}

describe('the history index', () => {
  it('keeps every publication, trims by count, and gives up an object only when nothing uses it', async () => {
    const keys = fresh('history-count');
    const catalog = createCatalog(redis, keys, undefined, { retentionMs: 86_400_000, maxVersions: 3 });
    const t = Date.now();
    // Bytes 1, 2, 1 again, 3, 4: keep_versions 1, history 3.
    const results = [];
    for (const [n, bytes] of [
      [1, 1],
      [2, 2],
      [3, 1],
      [4, 3],
      [5, 4],
    ] as const)
      results.push(await catalog.commit(entry(n, bytes, t + n * 1000), 1));
    // Bytes 1 left the versions list at commit 2 but was still in history: not given up then.
    expect(results[1]!.evicted).toEqual([]);
    // Commit 4: history trims publication 1 (bytes 1), but publication 3 still uses bytes 1;
    // bytes 2 left the list at 3 and history still had it.
    expect(results[3]!.evicted).toEqual([]);
    // Commit 5: publication 2 trimmed: bytes 2 used by nothing now.
    expect(results[4]!.evicted).toEqual([sha(2)]);
    expect(results[4]!.history!.removed).toHaveLength(1);
    const page = await catalog.history.page('a.json', { limit: 10 });
    expect(page.versions.map((v) => [v.seq, v.sha256])).toEqual([
      [5, sha(4)],
      [4, sha(3)],
      [3, sha(1)],
    ]);
    expect((await catalog.history.at('a.json', t + 4500))!.seq).toBe(4);
    expect(await catalog.history.at('a.json', t)).toBeUndefined();
    expect((await catalog.history.byEtag('a.json', sha(1).slice(0, 32)))!.seq).toBe(3);
    expect(
      await catalog.history.inUse([
        { filename: 'a.json', sha256: sha(1) },
        { filename: 'a.json', sha256: sha(2) },
      ]),
    ).toEqual([true, false]);
  });

  it('trims by age a bounded number per commit, never the publication just made', async () => {
    const keys = fresh('history-age');
    const old = Date.now() - 3_600_000;
    // Kept for a day while they were published, then the retention is an hour.
    const wide = createCatalog(redis, keys, undefined, { retentionMs: 86_400_000, maxVersions: 1000 });
    for (let n = 1; n <= 20; n++) await wide.commit(entry(n, n, old + n), 1);
    const catalog = createCatalog(redis, keys, undefined, { retentionMs: 60_000, maxVersions: 1000 });
    const now = await catalog.commit(entry(21, 21, Date.now()), 1);
    expect(now.history!.removed).toHaveLength(16);
    expect(new Set(now.evicted).size).toBe(now.evicted.length);
    expect((await catalog.history.page('a.json', { limit: 100 })).versions).toHaveLength(5);
    await catalog.commit(entry(22, 22, Date.now()), 1);
    expect((await catalog.history.page('a.json', { limit: 100 })).versions.map((v) => v.seq)).toEqual([22, 21]);
    // A publication older than the retention when made (a clock behind) is still kept while current.
    const late = await catalog.commit(entry(23, 23, old), 1);
    expect(late.history!.removed).not.toContain(late.history!.added);
    expect((await catalog.history.page('a.json', { limit: 1 })).versions[0]!.seq).toBe(23);
  });
});

/**
 * The change log written by the catalog's commit, against real Redis: one entry per published
 * change at the position of the catalog's seq, naming the version it replaced; nothing for an
 * unchanged or superseded commit; trimmed by age (never the entry just written) and by length.
 */
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { createChangeLog } from '../../src/catalog/change-log.js';
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

const entry = (filename: string, n: number, publishedAtMs = Date.now()): CatalogEntry => ({
  filename,
  bookmaker: 'northwind',
  kind: 'live',
  sport: 'soccer',
  object: `objects/${filename}/${n}.json`,
  sha256: n.toString(16).padStart(64, '0'),
  size: 100 + n,
  generatedAt: new Date(1_700_000_000_000 + n * 1000).toISOString(),
  generatedAtMs: 1_700_000_000_000 + n * 1000,
  publishedAt: new Date(publishedAtMs).toISOString(),
});

function fresh(label: string) {
  const prefix = uniquePrefix(label);
  prefixes.push(prefix);
  return redisKeys(prefix);
}

describe('the change log', () => {
  it('has one entry per published change, at the catalog seq, with the sha256 it replaced', async () => {
    const keys = fresh('changelog');
    const catalog = createCatalog(redis, keys);
    const log = createChangeLog(redis, keys);
    expect(await log.bounds()).toEqual({ first: undefined, last: 0 });
    await catalog.commit(entry('a.json', 1), 5);
    await catalog.commit(entry('b.json', 2), 5);
    expect((await catalog.commit(entry('a.json', 1), 5)).outcome).toBe('unchanged');
    expect((await catalog.commit(entry('a.json', 0), 5)).outcome).toBe('superseded');
    await catalog.commit(entry('a.json', 3), 5);
    const all = await log.range(0, 100);
    expect(all.map((c) => [c.seq, c.entry.filename, c.entry.sha256.slice(-1), c.previousSha256?.slice(-1) ?? null])).toEqual([
      [1, 'a.json', '1', null],
      [2, 'b.json', '2', null],
      [3, 'a.json', '3', '1'],
    ]);
    expect(all[2]!.entry).toEqual({
      filename: 'a.json',
      sha256: entry('a.json', 3).sha256,
      size: 103,
      generatedAt: entry('a.json', 3).generatedAt,
      generatedAtMs: entry('a.json', 3).generatedAtMs,
      publishedAt: all[2]!.entry.publishedAt,
    });
    expect((await log.range(1, 1)).map((c) => c.seq)).toEqual([2]);
    expect(await log.bounds()).toEqual({ first: 1, last: 3 });
    // Waiting reads return what comes after the position, or nothing when the wait ends.
    expect(await log.read(3, 10, 50)).toEqual([]);
    expect((await log.read(1, 10, 50)).map((c) => c.seq)).toEqual([2, 3]);
  });

  it('drops entries older than the retention, a few per commit, never the one just written', async () => {
    const keys = fresh('changelog-age');
    const catalog = createCatalog(redis, keys, { retentionMs: 60_000, maxEntries: 1000 });
    const log = createChangeLog(redis, keys);
    const old = Date.now() - 120_000;
    for (let n = 1; n <= 3; n++) await catalog.commit(entry(`f${n}.json`, n, old), 5);
    // Each old commit removed the old ones before it, not itself.
    expect(await log.bounds()).toEqual({ first: 3, last: 3 });
    await catalog.commit(entry('new.json', 4), 5);
    expect(await log.bounds()).toEqual({ first: 4, last: 4 });
    await catalog.commit(entry('new.json', 5), 5);
    expect((await log.range(0, 10)).map((c) => c.seq)).toEqual([4, 5]);
  });

  it('is trimmed to about max_entries', async () => {
    const keys = fresh('changelog-length');
    const catalog = createCatalog(redis, keys, { retentionMs: 3_600_000, maxEntries: 100 });
    for (let n = 1; n <= 600; n++) await catalog.commit(entry(`f${n % 7}.json`, n), 5);
    const length = await redis.xlen(keys.changeLog);
    expect(length).toBeGreaterThanOrEqual(100);
    expect(length).toBeLessThan(300);
    const { first, last } = await createChangeLog(redis, keys).bounds();
    expect(last).toBe(600);
    expect(last - first! + 1).toBe(length);
  });
});

describe('the commit script', () => {
  it('runs from the script cache, and is sent whole again once Redis has forgotten it (SCRIPT FLUSH, a restart or a failover)', async () => {
    const keys = fresh('commit-script');
    const catalog = createCatalog(redis, keys);
    const monitor = await redis.duplicate().monitor();
    const sent: string[] = [];
    monitor.on('monitor', (_time: string, args: string[]) => {
      if (args[0]?.toLowerCase().startsWith('eval') && args.some((a) => a.includes(keys.catalog))) sent.push(args[0].toLowerCase());
    });
    let commits = 0;
    /** What the next commit (a newer version) sent, as MONITOR saw it. */
    const sentByNext = async (): Promise<string[]> => {
      const before = sent.length;
      commits++;
      expect((await catalog.commit(entry('a.json', commits), 5)).seq).toBe(commits);
      for (let i = 0; i < 200 && sent.length === before; i++) await new Promise((r) => setTimeout(r, 10));
      await new Promise((r) => setTimeout(r, 50));
      return sent.slice(before);
    };
    try {
      await sentByNext();
      // Other tests share this Redis and may load the script again between the flush and the
      // commit: flushed until a commit finds it gone.
      let afterFlush: string[] = [];
      for (let tries = 0; tries < 5 && !afterFlush.includes('eval'); tries++) {
        await redis.script('FLUSH');
        afterFlush = await sentByNext();
      }
      expect(afterFlush).toEqual(['evalsha', 'eval']);
      expect(await sentByNext()).toEqual(['evalsha']);
    } finally {
      monitor.disconnect();
    }
  });
});

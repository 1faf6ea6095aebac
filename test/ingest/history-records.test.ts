/**
 * The store's history records, against real Redis and a real folder: written in batches (one
 * object per flush, not per publication), read back whole by the rebuild after Redis lost the
 * index, and a publication trimmed by another worker before its own worker wrote it never comes
 * back (nor stays in the store once the log is merged).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { pathToFileURL } from 'node:url';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { createCatalog } from '../../src/catalog/redis-catalog.js';
import type { CatalogEntry } from '../../src/catalog/types.js';
import { parseMember } from '../../src/catalog/history-index.js';
import { createHistoryRecords } from '../../src/ingest/background/history-records.js';
import { createLogger } from '../../src/log.js';
import { redisKeys } from '../../src/redis/key-names.js';
import { createFsStore } from '../../src/store/fs-store.js';
import { dropPrefix, TEST_REDIS_URL, uniquePrefix } from '../helpers/redis.js';

const redis = new Redis(TEST_REDIS_URL);
const prefix = uniquePrefix('history-records');
const dirs: string[] = [];
afterAll(async () => {
  await dropPrefix(prefix);
  redis.disconnect();
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});
const log = createLogger({ level: 'warn', pretty: false, destination: new Writable({ write: (_c, _e, cb) => cb() }) });

const sha = (n: number) => n.toString(16).padStart(8, '0').repeat(8);
const entry = (n: number): CatalogEntry => ({
  filename: 'a.json',
  bookmaker: 'northwind',
  kind: 'live',
  sport: 'soccer',
  object: `objects/a.json/${sha(n)}.json`,
  sha256: sha(n),
  size: 100 + n,
  generatedAt: new Date(1_700_000_000_000 + n * 1000).toISOString(),
  generatedAtMs: 1_700_000_000_000 + n * 1000,
  publishedAt: new Date(Date.now() + n).toISOString(),
});

const keys = redisKeys(prefix);
/** Redis loses the file's history index (as after a restart without its data). */
const loseIndex = (filename: string) => redis.del(keys.history(filename), keys.historyRefs(filename));
const seqs = async (catalog: ReturnType<typeof createCatalog>, filename: string) =>
  (await catalog.history.page(filename, { limit: 100 })).versions.map((v) => v.seq);

async function setup(maxVersions: number) {
  const dir = await mkdtemp(join(tmpdir(), 'oddsfiles-history-records-'));
  dirs.push(dir);
  const store = createFsStore(pathToFileURL(dir).href);
  const catalog = createCatalog(redis, keys, undefined, { retentionMs: 86_400_000, maxVersions });
  return { dir, store, catalog };
}

describe('history records', () => {
  it('a flush writes one object for every publication it covers, and the rebuild reads them all back', async () => {
    await redis.del(keys.catalog);
    const { store, catalog } = await setup(100);
    const records = createHistoryRecords({ catalog, store, log });
    const made: number[] = [];
    for (const n of [11, 12, 13, 14, 15]) {
      const r = await catalog.commit({ ...entry(n), filename: 'b.json', object: `objects/b.json/${sha(n)}.json` }, 1);
      records.committed('b.json', r.history!.added, r.history!.removed);
      made.push(parseMember(r.history!.added)!.seq);
    }
    await records.flush();
    expect(await store.list('history-log/')).toHaveLength(1);
    expect(await store.list('history/')).toEqual([]);
    await loseIndex('b.json');
    await records.repair();
    expect(await seqs(catalog, 'b.json')).toEqual(made.reverse());
  });

  it('records wait for the next log object at most writeEveryMs, and many are due at once', async () => {
    let clock = 1_000_000;
    const { store, catalog } = await setup(100);
    const records = createHistoryRecords({ catalog, store, log, writeEveryMs: 1000, now: () => clock });
    expect(records.dueInMs()).toBe(Infinity);
    const r = await catalog.commit({ ...entry(41), filename: 'e.json', object: `objects/e.json/${sha(41)}.json` }, 1);
    records.committed('e.json', r.history!.added, r.history!.removed);
    expect(records.dueInMs()).toBe(1000);
    clock += 600;
    expect(records.dueInMs()).toBe(400);
    clock += 400;
    expect(records.dueInMs()).toBe(0);
    await records.flush();
    expect(records.dueInMs()).toBe(Infinity);
    for (let i = 0; i < 1024; i++) records.committed('e.json', r.history!.added, []);
    expect(records.dueInMs()).toBe(0);
  });

  it('a record written after another worker trimmed its publication never comes back, and is gone once merged', async () => {
    await redis.del(keys.catalog);
    const { store, catalog } = await setup(2);
    const slow = createHistoryRecords({ catalog, store, log, mergeAfter: 3 });
    const quick = createHistoryRecords({ catalog, store, log, mergeAfter: 3 });

    // Worker "slow" publishes version 1 but has not flushed its record yet.
    const first = await catalog.commit(entry(1), 1);
    slow.committed('a.json', first.history!.added, first.history!.removed);
    // Worker "quick" publishes 2 and 3; 3 trims 1 (history keeps 2), and "quick" flushes at once.
    for (const n of [2, 3]) {
      const r = await catalog.commit(entry(n), 1);
      quick.committed('a.json', r.history!.added, r.history!.removed);
      await quick.flush();
    }
    // Now "slow" writes its record of 1, already trimmed.
    await slow.flush();
    const kept = await seqs(catalog, 'a.json');
    expect(kept).toHaveLength(2);
    await loseIndex('a.json');
    await slow.repair();
    expect(await seqs(catalog, 'a.json')).toEqual(kept);

    // The log (3 objects) is merged: what the store holds lists only the retained publications.
    await quick.tidy();
    expect(await store.list('history-log/')).toEqual([]);
    const listed: string[] = [];
    for (const k of await store.list('history/a.json/')) listed.push(...((JSON.parse((await store.get(k)).toString()) as { members: string[] }).members ?? []));
    expect(listed.map((m) => parseMember(m)!.seq).sort()).toEqual([...kept].sort());
    await loseIndex('a.json');
    await quick.repair();
    expect(await seqs(catalog, 'a.json')).toEqual(kept);
  });

  it('a check of the index against the store, before the trim is in the store, does not bring the trimmed publication back', async () => {
    await redis.del(keys.catalog);
    const { store, catalog } = await setup(2);
    const slow = createHistoryRecords({ catalog, store, log });
    const quick = createHistoryRecords({ catalog, store, log });
    const first = await catalog.commit({ ...entry(31), filename: 'd.json', object: `objects/d.json/${sha(31)}.json` }, 1);
    slow.committed('d.json', first.history!.added, first.history!.removed);
    await slow.flush();
    // "quick" trims 31 with its second publication, and has not flushed yet when "slow" checks.
    for (const n of [32, 33]) {
      const r = await catalog.commit({ ...entry(n), filename: 'd.json', object: `objects/d.json/${sha(n)}.json` }, 1);
      quick.committed('d.json', r.history!.added, r.history!.removed);
    }
    const kept = await seqs(catalog, 'd.json');
    expect(kept).toHaveLength(2);
    await slow.repair();
    expect(await seqs(catalog, 'd.json')).toEqual(kept);
  });

  it('reads the records of one object per publication (the earlier form) and deletes them once trimmed', async () => {
    await redis.del(keys.catalog);
    const { store, catalog } = await setup(2);
    const records = createHistoryRecords({ catalog, store, log, mergeAfter: 1 });
    const old = await catalog.commit({ ...entry(21), filename: 'c.json', object: `objects/c.json/${sha(21)}.json` }, 1);
    const oldKey = `history/c.json/${old.history!.added.replaceAll(':', '.')}.json`;
    await store.put(oldKey, Buffer.from('{}'));
    await loseIndex('c.json');
    await records.repair();
    expect(await seqs(catalog, 'c.json')).toEqual([parseMember(old.history!.added)!.seq]);
    for (const n of [22, 23]) {
      const r = await catalog.commit({ ...entry(n), filename: 'c.json', object: `objects/c.json/${sha(n)}.json` }, 1);
      records.committed('c.json', r.history!.added, r.history!.removed);
    }
    await records.flush();
    expect(await store.list('history/c.json/')).not.toContain(oldKey);
    const kept = await seqs(catalog, 'c.json');
    await loseIndex('c.json');
    await records.repair();
    expect(await seqs(catalog, 'c.json')).toEqual(kept);
  });
});

/**
 * The store's history records written by two workers, against real Redis and a real folder: a
 * worker that trims a publication before the worker that made it has written its record must not
 * leave that record behind (a rebuilt index would bring the trimmed publication back).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { pathToFileURL } from 'node:url';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { historyRecordKey } from '../src/catalog/history-index.js';
import { createCatalog } from '../src/catalog/redis-catalog.js';
import type { CatalogEntry } from '../src/catalog/types.js';
import { createHistoryRecords } from '../src/ingest/background/history-records.js';
import { createLogger } from '../src/log.js';
import { redisKeys } from '../src/redis/key-names.js';
import { createFsStore } from '../src/store/fs-store.js';
import { dropPrefix, TEST_REDIS_URL, uniquePrefix } from './helpers/redis.js';

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

describe('history records from two workers', () => {
  it('a record written after another worker trimmed its publication is deleted, not left behind', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'oddsfiles-history-records-'));
    dirs.push(dir);
    const store = createFsStore(pathToFileURL(dir).href);
    const catalog = createCatalog(redis, redisKeys(prefix), undefined, { retentionMs: 86_400_000, maxVersions: 2 });
    const slow = createHistoryRecords({ catalog, store, log });
    const quick = createHistoryRecords({ catalog, store, log });

    // Worker "slow" publishes version 1 but has not flushed its record yet.
    const first = await catalog.commit(entry(1), 1);
    slow.committed('a.json', first.history!.added, first.history!.removed);
    // Worker "quick" publishes 2 and 3; 3 trims 1 (history keeps 2), and "quick" flushes at once.
    for (const n of [2, 3]) {
      const r = await catalog.commit(entry(n), 1);
      quick.committed('a.json', r.history!.added, r.history!.removed);
    }
    await quick.flush();
    // Now "slow" writes its record of 1, already trimmed: it must end up deleted.
    await slow.flush();

    const records = (await store.list('history/a.json/')).sort();
    const page = await catalog.history.page('a.json', { limit: 10 });
    expect(page.versions.map((v) => v.seq)).toEqual([3, 2]);
    expect(records).toEqual(page.versions.map((v) => historyRecordKey('a.json', v.member)).sort());
  });
});

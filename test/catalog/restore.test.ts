/**
 * What Redis lost, restored from the store, against real Redis and a real folder: the catalog from
 * manifest.json (newest wins against what Redis still holds; the change log in a new epoch past
 * every old position only when Redis lost commits), the key records (a revocation the store knows
 * is kept), and a worker's commit refused into a catalog that was not restored yet.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { syncManifest } from '../../src/catalog/manifest.js';
import { createCatalog } from '../../src/catalog/redis-catalog.js';
import { restoreCatalog } from '../../src/catalog/restore.js';
import type { CatalogEntry } from '../../src/catalog/types.js';
import { createKeyBackup } from '../../src/keys/backup.js';
import { createKeyStore } from '../../src/keys/store.js';
import { redisKeys } from '../../src/redis/key-names.js';
import { createFsStore } from '../../src/store/fs-store.js';
import { dropPrefix, TEST_REDIS_URL, uniquePrefix } from '../helpers/redis.js';

const redis = new Redis(TEST_REDIS_URL);
const prefixes: string[] = [];
const dirs: string[] = [];
afterAll(async () => {
  for (const p of prefixes) await dropPrefix(p);
  redis.disconnect();
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

const sha = (n: number) => n.toString(16).padStart(8, '0').repeat(8);
const entry = (filename: string, n: number): CatalogEntry => ({
  filename,
  bookmaker: 'northwind',
  kind: 'live',
  sport: 'soccer',
  object: `objects/${filename}/${sha(n)}.json`,
  sha256: sha(n),
  size: 100 + n,
  generatedAt: new Date(1_700_000_000_000 + n * 1000).toISOString(),
  generatedAtMs: 1_700_000_000_000 + n * 1000,
  publishedAt: new Date(1_700_000_000_000 + n * 1000 + 5).toISOString(),
});

async function setup(label: string) {
  const prefix = uniquePrefix(label);
  prefixes.push(prefix);
  const dir = await mkdtemp(join(tmpdir(), `oddsfiles-${label}-`));
  dirs.push(dir);
  const keys = redisKeys(prefix);
  const store = createFsStore(pathToFileURL(dir).href);
  const catalog = createCatalog(redis, keys, { maxEntries: 1000, retentionMs: 86_400_000 }, undefined, { requireEpoch: true });
  return { prefix, keys, store, catalog };
}

describe('the catalog restored from the store', () => {
  it('refuses commits before the restore, restores a lost catalog with the same entries, and starts the change log past every old position', async () => {
    const t = await setup('restore-lost');
    expect((await restoreCatalog(redis, t.keys, t.store)).ran).toBe(true); // a new install: nothing to restore
    await t.catalog.commit(entry('a.json', 1), 3);
    await t.catalog.commit(entry('b.json', 2), 3);
    await t.catalog.commit(entry('a.json', 3), 3);
    await syncManifest(t.catalog, t.store);
    const before = await t.catalog.snapshot();
    expect(before.seq).toBe(3);

    await dropPrefix(t.prefix); // Redis lost everything
    await expect(t.catalog.commit(entry('a.json', 4), 3)).rejects.toMatchObject({ code: 'redis.not_restored' });
    const r = await restoreCatalog(redis, t.keys, t.store);
    expect(r).toMatchObject({ ran: true, files: 2, manifestFiles: 2, manifestSeq: 3, newEpoch: true });
    expect(r.seq).toBeGreaterThan(Date.now() - 60_000);
    const after = await t.catalog.snapshot();
    expect(after.entries).toEqual(before.entries);
    expect(after.seq).toBe(r.seq);
    // Once restored, another restore does nothing; a commit goes on from the new epoch.
    expect((await restoreCatalog(redis, t.keys, t.store)).ran).toBe(false);
    const c = await t.catalog.commit(entry('a.json', 4), 3);
    expect(c).toMatchObject({ outcome: 'published', seq: r.seq + 1 });
    expect(await redis.xlen(t.keys.changeLog)).toBe(1);
  });

  it('merges a catalog that came back on older data: newer entries win on both sides; positions move past the manifest', async () => {
    const t = await setup('restore-older');
    await restoreCatalog(redis, t.keys, t.store);
    await t.catalog.commit(entry('a.json', 1), 3);
    await t.catalog.commit(entry('b.json', 2), 3);
    await syncManifest(t.catalog, t.store);
    // Redis goes back to an older state: b.json lost, seq back to 1; then a.json gets a newer version.
    await redis.hdel(t.keys.catalog, 'b.json');
    await redis.set(t.keys.catalogSeq, '1');
    await redis.hset(t.keys.catalog, 'a.json', JSON.stringify(entry('a.json', 9)));
    const r = await restoreCatalog(redis, t.keys, t.store, { force: true });
    expect(r).toMatchObject({ files: 1, newEpoch: true });
    const snap = await t.catalog.snapshot();
    expect(snap.entries.map((e) => e.sha256)).toEqual([sha(9), sha(2)]);
    // Nothing missing, nothing older: a forced restore changes nothing and keeps the positions.
    const again = await restoreCatalog(redis, t.keys, t.store, { force: true });
    expect(again).toMatchObject({ files: 0, newEpoch: false, seq: r.seq });
  });
});

describe('the key records kept in the store', () => {
  it('restores lost keys with their hashes and keeps a revocation Redis lost', async () => {
    const t = await setup('restore-keys');
    const ks = createKeyStore({ redis, keys: t.keys, plans: { pro: { allow: ['*'] } as never } });
    const backup = createKeyBackup({ redis, keys: t.keys, store: t.store });
    const a = await ks.create({ name: 'acme', plan: 'pro' });
    const b = await ks.create({ name: 'beta', allow: ['site_*'] });
    expect(await backup.sync()).toBe(true);
    expect(await backup.sync()).toBe(false); // unchanged: not written again
    await ks.revoke('beta');
    expect(await backup.sync()).toBe(true);
    const stored = await t.store.get('keys/records.json');
    expect(stored.toString()).not.toContain(a.key);

    await dropPrefix(t.prefix);
    expect(await backup.sync()).toBe(false); // an empty Redis never empties the store's copy
    expect(await backup.restore()).toBe(2);
    expect((await ks.verify(a.key))?.name).toBe('acme');
    expect(await ks.verify(b.key)).toBeUndefined();
    // Redis came back with beta not revoked: the store's revocation wins.
    const all = await redis.hgetall(t.keys.apiKeys);
    const betaId = Object.keys(all).find((id) => all[id]!.includes('"beta"'))!;
    await redis.hset(t.keys.apiKeys, betaId, all[betaId]!.replace(/"revoked_at":"[^"]*"/, '"revoked_at":null'));
    expect(await ks.verify(b.key)).toBeDefined();
    expect(await backup.restore()).toBe(1);
    expect(await ks.verify(b.key)).toBeUndefined();
  });
});

describe('a commit into a catalog that went back', () => {
  it('says so once, when its seq is at or below one this process was given before', async () => {
    const t = await setup('went-back');
    await restoreCatalog(redis, t.keys, t.store);
    const first = await t.catalog.commit(entry('a.json', 1), 3);
    const second = await t.catalog.commit(entry('b.json', 2), 3);
    expect([first.behind, second.behind]).toEqual([undefined, undefined]);
    // Another process's commits move the seq on: not a loss.
    await createCatalog(redis, t.keys).commit(entry('c.json', 3), 3);
    expect((await t.catalog.commit(entry('a.json', 4), 3)).behind).toBeUndefined();
    // Redis lost the last two commits (its counter back by two): the next commit takes a seq given before.
    await redis.decrby(t.keys.catalogSeq, 2);
    const after = await t.catalog.commit(entry('d.json', 5), 3);
    expect(after.outcome).toBe('published');
    expect(after.behind).toBe(true);
    expect((await t.catalog.commit(entry('e.json', 6), 3)).behind).toBeUndefined();
    // An answer that publishes nothing says so too, when its seq is below the highest seen.
    await redis.decrby(t.keys.catalogSeq, 1);
    expect((await t.catalog.commit(entry('e.json', 6), 3)).behind).toBe(true);
    // A read of the seq that finds it lower tells the next commit, whatever seq that one gets.
    await redis.decrby(t.keys.catalogSeq, 1);
    await t.catalog.seq();
    await redis.incrby(t.keys.catalogSeq, 10);
    expect((await t.catalog.commit(entry('f.json', 7), 3)).behind).toBe(true);
  });

  it('is never said of commits sent together with reads of the seq, on one connection', async () => {
    const t = await setup('not-back');
    await restoreCatalog(redis, t.keys, t.store);
    // Replies come back in the order sent; a commit whose answer were seen after a later seq
    // read's (as a reply settled a microtask late would be) would look like one gone back.
    const results = await Promise.all(
      Array.from({ length: 200 }, async (_, i) => {
        const r = await t.catalog.commit(entry(`f${i % 7}.json`, i + 1), 3);
        await t.catalog.seq();
        return r;
      }),
    );
    expect(results.filter((r) => r.behind)).toEqual([]);
    expect(results.filter((r) => r.outcome === 'published')).toHaveLength(200);
  });
});

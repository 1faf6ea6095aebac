/**
 * The background manifest writer (src/ingest/background/manifest-sync.ts), against the real Redis catalog
 * and a filesystem store: two writers racing end with the newest manifest; a claim goes only once
 * a manifest covers its commit; an evicted version is deleted only after that; a commit whose
 * process died before the manifest is repaired by the next writer at start; a catalog started
 * afresh does not wipe the manifest until something is published again.
 */
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Writable } from 'node:stream';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { createCatalog } from '../../src/catalog/redis-catalog.js';
import type { CatalogEntry } from '../../src/catalog/types.js';
import { CLEANUP_BATCH } from '../../src/ingest/background/cleanup-batch.js';
import { createManifestWriter } from '../../src/ingest/background/manifest-sync.js';
import { createLogger } from '../../src/log.js';
import { redisKeys } from '../../src/redis/key-names.js';
import { createFsStore } from '../../src/store/fs-store.js';
import { MANIFEST_KEY, objectKey, type Store } from '../../src/store/store.js';
import { TEST_REDIS_URL, dropPrefix, uniquePrefix } from '../helpers/redis.js';
import { waitFor } from '../helpers/service.js';

const log = createLogger({ level: 'warn', pretty: false, destination: new Writable({ write: (_c, _e, cb) => cb() }) });

/** History keeps just the current publication: what leaves the versions list (its `keep`) is evicted. */
const ONE_VERSION_OF_HISTORY = { retentionMs: 86_400_000, maxVersions: 1 };

describe('the background manifest writer', () => {
  const redis = new Redis(TEST_REDIS_URL);
  const prefixes: string[] = [];
  afterAll(async () => {
    redis.disconnect();
    for (const p of prefixes) await dropPrefix(p);
  });

  const setup = async () => {
    const prefix = uniquePrefix('faults-manifest');
    prefixes.push(prefix);
    const dir = await mkdtemp(join(tmpdir(), 'oddsfiles-faults-manifest-'));
    const store = createFsStore(pathToFileURL(join(dir, 'store')).href);
    const catalog = createCatalog(redis, redisKeys(prefix), undefined, ONE_VERSION_OF_HISTORY);
    let n = 0;
    /** Put a version's bytes and commit it, as the publish step does. */
    const publish = async (filename: string, keep = 10) => {
      const bytes = Buffer.from(JSON.stringify({ filename, n: ++n }));
      const sha256 = createHash('sha256').update(bytes).digest('hex');
      const entry: CatalogEntry = {
        filename,
        bookmaker: 'northwind',
        kind: 'live',
        sport: 'soccer',
        object: objectKey(filename, sha256),
        sha256,
        size: bytes.length,
        generatedAt: new Date(1_700_000_000_000 + n * 1000).toISOString(),
        generatedAtMs: 1_700_000_000_000 + n * 1000,
        publishedAt: new Date().toISOString(),
      };
      await store.put(entry.object, bytes);
      const claim = join(dir, `claim-${n}`);
      await writeFile(claim, bytes);
      return { entry, claim, result: await catalog.commit(entry, keep) };
    };
    const manifest = async () => JSON.parse((await store.get(MANIFEST_KEY)).toString('utf8')) as { seq: number; files: Record<string, CatalogEntry> };
    return { dir, store, catalog, publish, manifest };
  };

  it('two writers racing over interleaved commits leave the newest manifest, and every claim goes after it', async () => {
    const { store, catalog, publish, manifest } = await setup();
    const a = createManifestWriter({ catalog, store, log, coalesceMs: 5 });
    const b = createManifestWriter({ catalog, store, log, coalesceMs: 5 });
    const claims: string[] = [];
    for (let i = 0; i < 60; i++) {
      const { result, claim, entry } = await publish(`site_live_f${i % 7}.json`);
      (i % 2 ? a : b).committed(result.seq, entry.filename, result.evicted, claim);
      claims.push(claim);
      if (i % 5 === 0) await new Promise((r) => setTimeout(r, 3));
    }
    await Promise.all([a.flush(), b.flush()]);
    const m = await manifest();
    const snapshot = await catalog.snapshot();
    expect(m.seq).toBe(snapshot.seq);
    expect(
      Object.values(m.files)
        .map((e) => e.sha256)
        .sort(),
    ).toEqual(snapshot.entries.map((e) => e.sha256).sort());
    expect(claims.filter((c) => existsSync(c))).toEqual([]);
    a.close();
    b.close();
  });

  it('deletes an evicted version only after a manifest that no longer names it', async () => {
    const { store, catalog, publish, manifest } = await setup();
    const w = createManifestWriter({ catalog, store, log, coalesceMs: 60_000, checkEveryMs: 60_000 });
    const first = await publish('site_live_x.json', 1);
    w.committed(first.result.seq, 'site_live_x.json', first.result.evicted, first.claim);
    await w.flush();
    const second = await publish('site_live_x.json', 1);
    expect(second.result.evicted).toEqual([first.entry.sha256]);
    w.committed(second.result.seq, 'site_live_x.json', second.result.evicted, second.claim);
    // Nothing written yet (the coalescing window is long): the old object and the claim stay.
    expect(await store.exists(first.entry.object)).toBe(true);
    expect(existsSync(second.claim)).toBe(true);
    expect((await manifest()).files['site_live_x.json']!.sha256).toBe(first.entry.sha256);
    await w.flush();
    expect((await manifest()).files['site_live_x.json']!.sha256).toBe(second.entry.sha256);
    expect(await store.exists(first.entry.object)).toBe(false);
    expect(existsSync(second.claim)).toBe(false);
    w.close();
  });

  it('never deletes an evicted version that was published again before the manifest write', async () => {
    const { store, catalog, publish, manifest } = await setup();
    const w = createManifestWriter({ catalog, store, log, coalesceMs: 60_000, checkEveryMs: 60_000 });
    const first = await publish('site_live_z.json', 1);
    w.committed(first.result.seq, 'site_live_z.json', first.result.evicted, first.claim, first.entry);
    await w.flush();
    const second = await publish('site_live_z.json', 1);
    expect(second.result.evicted).toEqual([first.entry.sha256]);
    w.committed(second.result.seq, 'site_live_z.json', second.result.evicted, second.claim, second.entry);
    // The first bytes again, newer: they are current once more, and evict the second version.
    const again: CatalogEntry = {
      ...first.entry,
      generatedAtMs: second.entry.generatedAtMs + 1000,
      generatedAt: new Date(second.entry.generatedAtMs + 1000).toISOString(),
    };
    const third = await catalog.commit(again, 1);
    expect(third.evicted).toEqual([second.entry.sha256]);
    w.committed(third.seq, 'site_live_z.json', third.evicted, second.claim, again);
    await w.flush();
    expect((await manifest()).files['site_live_z.json']!.sha256).toBe(first.entry.sha256);
    expect(await store.exists(first.entry.object)).toBe(true);
    expect(await store.exists(second.entry.object)).toBe(false);
    w.close();
  });

  it(`settles a burst in one write: every claim removed (small ones synchronously, the rest on the thread pool), every evicted version deleted, at most ${CLEANUP_BATCH} deletes at a time`, async () => {
    const { dir, store, catalog, publish, manifest } = await setup();
    let inFlight = 0;
    let most = 0;
    // The real filesystem store, with its deletes counted while they run.
    const counted: Store = {
      ...store,
      delete: async (key) => {
        most = Math.max(most, ++inFlight);
        try {
          await new Promise((r) => setTimeout(r, 5));
          await store.delete(key);
        } finally {
          inFlight--;
        }
      },
    };
    // Claims of up to 40 bytes go synchronously; the test's documents are 30–40 bytes, so a few
    // are marked bigger to take the other path.
    const w = createManifestWriter({ catalog, store: counted, log, coalesceMs: 60_000, checkEveryMs: 60_000, syncIoMaxBytes: 40 });
    const names = Array.from({ length: 20 }, (_, i) => `site_live_b${i}.json`);
    const olds = [];
    for (const name of names) {
      const p = await publish(name, 1);
      w.committed(p.result.seq, name, p.result.evicted, p.claim, p.entry);
      olds.push(p.entry);
    }
    await w.flush();
    const claims: string[] = [];
    for (const [i, name] of names.entries()) {
      const p = await publish(name, 1);
      expect(p.result.evicted).toEqual([olds[i]!.sha256]);
      w.committed(p.result.seq, name, p.result.evicted, p.claim, i % 3 === 0 ? { ...p.entry, size: 1_000_000 } : p.entry);
      claims.push(p.claim);
    }
    // A claim that cannot be removed (a folder) is reported, and holds none of the others up.
    const stuck = join(dir, 'stuck-claim');
    await mkdir(stuck);
    const p = await publish('site_live_stuck.json', 1);
    w.committed(p.result.seq, 'site_live_stuck.json', p.result.evicted, stuck, p.entry);
    await w.flush();
    expect((await manifest()).seq).toBe(p.result.seq);
    expect(claims.filter((c) => existsSync(c))).toEqual([]);
    expect(existsSync(stuck)).toBe(true);
    for (const e of olds) expect(await store.exists(e.object), e.filename).toBe(false);
    expect(most).toBeLessThanOrEqual(CLEANUP_BATCH);
    expect(most).toBeGreaterThan(1);
    w.close();
  });

  it('repairs, at start, a commit whose process died before writing the manifest', async () => {
    const { store, catalog, publish, manifest } = await setup();
    const w1 = createManifestWriter({ catalog, store, log, coalesceMs: 5 });
    const one = await publish('site_live_y.json');
    w1.committed(one.result.seq, 'site_live_y.json', [], one.claim);
    await w1.flush();
    w1.close();
    // Committed, then "killed": no writer learns of it.
    const two = await publish('site_live_y.json');
    expect((await manifest()).seq).toBeLessThan(two.result.seq);
    const w2 = createManifestWriter({ catalog, store, log, coalesceMs: 5 });
    await waitFor(async () => (await manifest()).seq === two.result.seq, 5000, 'the manifest repaired at start');
    // The drop, processed again, finds itself committed (unchanged): its claim goes after a check.
    w2.check(two.claim);
    await waitFor(() => !existsSync(two.claim), 5000, 'the claim removed');
    w2.close();
  });

  it('leaves the manifest of a lost catalog alone until something is published again', async () => {
    const { store, catalog, publish, manifest } = await setup();
    await store.put(
      MANIFEST_KEY,
      Buffer.from(JSON.stringify({ format: 1, seq: 500, written_at: new Date().toISOString(), files: { 'site_live_old.json': { sha256: 'old' } } })),
    );
    const w = createManifestWriter({ catalog, store, log, coalesceMs: 5 });
    await new Promise((r) => setTimeout(r, 200));
    expect((await manifest()).seq).toBe(500);
    const { result, claim } = await publish('site_live_new.json');
    w.committed(result.seq, 'site_live_new.json', [], claim);
    await w.flush();
    const m = await manifest();
    expect(m.seq).toBe(result.seq);
    expect(Object.keys(m.files)).toEqual(['site_live_new.json']);
    expect(JSON.parse(await readFile(claim, 'utf8').catch(() => 'null'))).toBeNull();
    w.close();
  });
});

/**
 * The manifest writer keeps the catalog of its last write in memory and applies its own commits to
 * it (src/ingest/background/manifest-sync.ts): against the real Redis catalog and a filesystem store, after
 * many commits the manifest holds every one of them, equal to the catalog; the whole catalog is
 * re-read only when another process committed (another publisher on the same prefix) or a commit
 * came without its entry; its coalescing window follows the cost of a write.
 */
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Writable } from 'node:stream';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { renderManifest, toManifest } from '../../src/catalog/manifest.js';
import { createCatalog, type Catalog } from '../../src/catalog/redis-catalog.js';
import { restoreCatalog } from '../../src/catalog/restore.js';
import type { CatalogEntry } from '../../src/catalog/types.js';
import { createManifestWriter } from '../../src/ingest/background/manifest-sync.js';
import { createLogger } from '../../src/log.js';
import { redisKeys } from '../../src/redis/key-names.js';
import { createFsStore } from '../../src/store/fs-store.js';
import { MANIFEST_KEY, objectKey, type Store } from '../../src/store/store.js';
import { TEST_REDIS_URL, dropPrefix, uniquePrefix } from '../helpers/redis.js';
import { waitFor } from '../helpers/service.js';

const log = createLogger({ level: 'warn', pretty: false, destination: new Writable({ write: (_c, _e, cb) => cb() }) });

describe('the manifest writer, incrementally', () => {
  const redis = new Redis(TEST_REDIS_URL);
  const other = new Redis(TEST_REDIS_URL);
  const prefixes: string[] = [];
  afterAll(async () => {
    redis.disconnect();
    other.disconnect();
    for (const p of prefixes) await dropPrefix(p);
  });

  const setup = async () => {
    const prefix = uniquePrefix('manifest-incr');
    prefixes.push(prefix);
    const dir = await mkdtemp(join(tmpdir(), 'oddsfiles-manifest-incr-'));
    const store = createFsStore(pathToFileURL(join(dir, 'store')).href);
    const catalog = createCatalog(redis, redisKeys(prefix));
    // Another process: its own connection, the same prefix, no writer of ours hears of its commits.
    const otherCatalog = createCatalog(other, redisKeys(prefix));
    /** Counts the whole-catalog reads and the manifest writes (the real catalog and store underneath). */
    const counts = { fullReads: 0, manifestWrites: 0 };
    const counted: Catalog = {
      ...catalog,
      snapshot: () => {
        counts.fullReads++;
        return catalog.snapshot();
      },
      snapshotJson: () => {
        counts.fullReads++;
        return catalog.snapshotJson();
      },
    };
    /** A test clock for the writers (`now`): only a manifest write made slow moves it. */
    const clock = { ms: 0 };
    let manifestDelayMs = 0;
    const countedStore: Store = {
      ...store,
      put: async (key, bytes, type) => {
        if (key === MANIFEST_KEY) {
          counts.manifestWrites++;
          clock.ms += manifestDelayMs;
        }
        return store.put(key, bytes, type);
      },
    };
    /** Make every manifest write take this much longer on the test clock (a big catalog, a slow store). */
    const slowManifest = (ms: number) => {
      manifestDelayMs = ms;
    };
    let n = 0;
    const publish = async (filename: string, via: Catalog = catalog, keep = 10) => {
      const bytes = Buffer.from(JSON.stringify({ filename, n: ++n }));
      const sha256 = createHash('sha256').update(bytes).digest('hex');
      const entry: CatalogEntry = {
        filename,
        bookmaker: 'northwind',
        kind: 'live',
        sport: null,
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
      return { entry, claim, result: await via.commit(entry, keep) };
    };
    const manifest = async () => JSON.parse((await store.get(MANIFEST_KEY)).toString('utf8')) as { seq: number; files: Record<string, CatalogEntry> };
    /** The manifest says exactly what the catalog says now. */
    const expectMirrors = async () => {
      const m = await manifest();
      const snapshot = await catalog.snapshot();
      expect(m.seq).toBe(snapshot.seq);
      expect(Object.keys(m.files)).toEqual(snapshot.entries.map((e) => e.filename));
      expect(Object.values(m.files)).toEqual(snapshot.entries);
    };
    /** Restores the catalog from the store's manifest, forced, as a worker's recovery guard does. */
    const restore = async () => {
      restores++;
      await restoreCatalog(redis, redisKeys(prefix), store, { force: true });
    };
    let restores = 0;
    return {
      store: countedStore,
      catalog: counted,
      otherCatalog,
      publish,
      manifest,
      expectMirrors,
      counts,
      slowManifest,
      now: () => clock.ms,
      prefix,
      restore,
      restores: () => restores,
    };
  };

  it('renders the same bytes as toManifest', async () => {
    const { catalog, publish } = await setup();
    for (const f of ['site_live_b.json', 'site_live_a.json', 'site_live_c_soccer.json', 'site_live_a.json']) await publish(f);
    const json = await catalog.snapshotJson();
    const now = new Date();
    expect(renderManifest(json.seq, now, json.entries).toString('utf8')).toBe(JSON.stringify(toManifest(await catalog.snapshot(), now)));
  });

  it('holds every one of many own commits, reading the whole catalog once', async () => {
    const { store, catalog, publish, expectMirrors, counts } = await setup();
    const w = createManifestWriter({ catalog, store, log, coalesceMs: 5, checkEveryMs: 600_000 });
    const claims: string[] = [];
    for (let round = 0; round < 6; round++) {
      for (let i = 0; i < 25; i++) {
        const { result, claim, entry } = await publish(`site_live_f${(round * 7 + i) % 40}.json`);
        w.committed(result.seq, entry.filename, result.evicted, claim, entry);
        claims.push(claim);
      }
      await w.flush();
      await expectMirrors();
    }
    expect(claims.filter((c) => existsSync(c))).toEqual([]);
    // The start-up check's write re-reads it once; every later write applies own commits.
    expect(counts.fullReads).toBe(1);
    expect(counts.manifestWrites).toBeGreaterThanOrEqual(6);
    w.close();
  });

  it("picks up another process's commits: with its own next commit, and by the periodic check", async () => {
    const { store, catalog, otherCatalog, publish, manifest, expectMirrors, counts } = await setup();
    const w = createManifestWriter({ catalog, store, log, coalesceMs: 5, checkEveryMs: 600_000 });
    const mine = await publish('site_live_mine.json');
    w.committed(mine.result.seq, 'site_live_mine.json', [], mine.claim, mine.entry);
    await w.flush();
    await expectMirrors();
    const reads = counts.fullReads;

    // Another publisher commits twice (one a new filename, one replacing ours), then we commit.
    const theirs = await publish('site_live_theirs.json', otherCatalog);
    const replaced = await publish('site_live_mine.json', otherCatalog);
    expect(replaced.result.outcome).toBe('published');
    const next = await publish('site_live_next.json');
    w.committed(next.result.seq, 'site_live_next.json', [], next.claim, next.entry);
    await w.flush();
    await expectMirrors();
    const m = await manifest();
    expect(m.files['site_live_theirs.json']!.sha256).toBe(theirs.entry.sha256);
    expect(m.files['site_live_mine.json']!.sha256).toBe(replaced.entry.sha256);
    expect(counts.fullReads).toBe(reads + 1);

    // Our own commits again: no more whole reads.
    for (let i = 0; i < 5; i++) {
      const p = await publish(`site_live_own${i}.json`);
      w.committed(p.result.seq, p.entry.filename, [], p.claim, p.entry);
      await w.flush();
    }
    await expectMirrors();
    expect(counts.fullReads).toBe(reads + 1);
    w.close();

    // A writer whose periodic check runs often picks up a commit it never heard of, alone.
    const w2 = createManifestWriter({ catalog, store, log, coalesceMs: 5, checkEveryMs: 100 });
    await w2.flush();
    await publish('site_live_later.json', otherCatalog);
    await waitFor(async () => (await manifest()).files['site_live_later.json'] !== undefined, 5000, 'the periodic check writes the other commit');
    await expectMirrors();
    w2.close();
  });

  it('re-reads the whole catalog for a commit reported without its entry', async () => {
    const { store, catalog, publish, expectMirrors, counts } = await setup();
    const w = createManifestWriter({ catalog, store, log, coalesceMs: 5, checkEveryMs: 600_000 });
    const a = await publish('site_live_a.json');
    w.committed(a.result.seq, 'site_live_a.json', [], a.claim, a.entry);
    await w.flush();
    const reads = counts.fullReads;
    const b = await publish('site_live_b.json');
    w.committed(b.result.seq, 'site_live_b.json', [], b.claim);
    await w.flush();
    await expectMirrors();
    expect(counts.fullReads).toBe(reads + 1);
    w.close();
  });

  it('two writers with interleaved commits end with the newest manifest', async () => {
    const { store, catalog, otherCatalog, publish, expectMirrors } = await setup();
    const a = createManifestWriter({ catalog, store, log, coalesceMs: 5 });
    const b = createManifestWriter({ catalog: otherCatalog, store, log, coalesceMs: 5 });
    const claims: string[] = [];
    for (let i = 0; i < 80; i++) {
      const mine = i % 3 !== 0;
      const { result, claim, entry } = await publish(`site_live_g${i % 9}.json`, mine ? catalog : otherCatalog);
      (mine ? a : b).committed(result.seq, entry.filename, result.evicted, claim, entry);
      claims.push(claim);
      if (i % 4 === 0) await new Promise((r) => setTimeout(r, 4));
    }
    await Promise.all([a.flush(), b.flush()]);
    await expectMirrors();
    expect(claims.filter((c) => existsSync(c))).toEqual([]);
    a.close();
    b.close();
  });

  it('two writers racing, each able to restore the catalog, never find it lacking what the manifest holds', async () => {
    const { store, catalog, otherCatalog, publish, expectMirrors, restore, restores } = await setup();
    const a = createManifestWriter({ catalog, store, log, coalesceMs: 2, onCatalogBehind: restore });
    const b = createManifestWriter({ catalog: otherCatalog, store, log, coalesceMs: 2, onCatalogBehind: restore });
    for (let i = 0; i < 80; i++) {
      const mine = i % 2 === 0;
      const { result, claim, entry } = await publish(`site_live_r${i % 7}.json`, mine ? catalog : otherCatalog);
      (mine ? a : b).committed(result.seq, entry.filename, result.evicted, claim, entry);
      if (i % 3 === 0) await new Promise((r) => setTimeout(r, 3));
    }
    await Promise.all([a.flush(), b.flush()]);
    await expectMirrors();
    // Older snapshots than a manifest just written are read again, not taken for a loss.
    expect(restores()).toBe(0);
    a.close();
    b.close();
  });

  /** Two workers' writers on one catalog, each able to restore it; `commit` publishes and writes the manifest. */
  const twoWriters = async () => {
    const t = await setup();
    const writer = (catalog: Catalog) =>
      createManifestWriter({ catalog, store: t.store, log, coalesceMs: 2, checkEveryMs: 600_000, onCatalogBehind: t.restore });
    const writers = { a: writer(t.catalog), b: writer(t.otherCatalog) };
    const commit = async (filename: string, by: 'a' | 'b') => {
      const { result, claim, entry } = await t.publish(filename, by === 'a' ? t.catalog : t.otherCatalog);
      writers[by].committed(result.seq, entry.filename, result.evicted, claim, entry);
      await writers[by].flush();
      return entry;
    };
    /** Redis comes back without the last commit: `before` under its filename again, the seq one lower. */
    const loseLast = async (before: CatalogEntry) => {
      const keys = redisKeys(t.prefix);
      await redis.hset(keys.catalog, before.filename, JSON.stringify(before));
      await redis.decr(keys.catalogSeq);
    };
    const close = () => {
      writers.a.close();
      writers.b.close();
    };
    return { ...t, commit, loseLast, close };
  };

  it('a writer that never saw the commits Redis lost restores them from the manifest before writing over it', async () => {
    const { catalog, manifest, commit, loseLast, restores, close } = await twoWriters();
    await commit('site_live_other.json', 'b');
    const first = await commit('site_live_lost.json', 'a');
    const newest = await commit('site_live_lost.json', 'a');
    expect((await manifest()).files['site_live_lost.json']?.sha256).toBe(newest.sha256);
    await loseLast(first);
    expect((await catalog.get('site_live_lost.json'))?.sha256).toBe(first.sha256);
    // The other writer commits next, at the lost seq, and writes its manifest.
    await commit('site_live_next.json', 'b');
    expect(restores()).toBeGreaterThan(0);
    expect((await catalog.get('site_live_lost.json'))?.sha256).toBe(newest.sha256);
    const m = await manifest();
    expect(m.files['site_live_lost.json']?.sha256).toBe(newest.sha256);
    expect(Object.keys(m.files).sort()).toEqual(['site_live_lost.json', 'site_live_next.json', 'site_live_other.json']);
    close();
  });

  it('the same when that writer never saw the other commit: its next own commit took the lost seq', async () => {
    const { catalog, manifest, commit, loseLast, restores, close } = await twoWriters();
    // b publishes everything but the one commit a makes, which Redis then loses: b never sees it.
    const first = await commit('site_live_lost.json', 'b');
    await commit('site_live_other.json', 'b');
    const newest = await commit('site_live_lost.json', 'a');
    expect((await manifest()).files['site_live_lost.json']?.sha256).toBe(newest.sha256);
    await loseLast(first);
    // b's next commit takes the lost seq, the one after its last write: its catalog in memory
    // advances through its own commit alone, without reading the catalog whole.
    await commit('site_live_next.json', 'b');
    expect(restores()).toBeGreaterThan(0);
    expect((await catalog.get('site_live_lost.json'))?.sha256).toBe(newest.sha256);
    expect((await manifest()).files['site_live_lost.json']?.sha256).toBe(newest.sha256);
    close();
  });

  it('writes over a manifest that is not JSON instead of failing every write', async () => {
    const { store, catalog, publish, expectMirrors, restore, restores } = await setup();
    await store.put(MANIFEST_KEY, Buffer.from('{"format":1,"seq":'));
    const w = createManifestWriter({ catalog, store, log, coalesceMs: 2, checkEveryMs: 600_000, onCatalogBehind: restore });
    const { result, claim, entry } = await publish('site_live_x.json');
    w.committed(result.seq, entry.filename, result.evicted, claim, entry);
    await w.flush();
    await expectMirrors();
    expect(existsSync(claim)).toBe(false);
    expect(restores()).toBe(0);
    w.close();
  });

  it('a writer whose older snapshot lands over a newer manifest writes the newer one again', async () => {
    // The race of the test above, made certain: B reads the catalog at seq 1 and its write is held;
    // A commits seq 2, writes its manifest and removes its claim; then B's older manifest lands.
    const { store, catalog, otherCatalog, publish, expectMirrors, manifest } = await setup();
    let release: () => void = () => undefined;
    let held: Promise<void> | undefined;
    const gatedStore: Store = {
      ...store,
      put: async (key, bytes, type) => {
        if (key === MANIFEST_KEY && held) {
          const gate = held;
          held = undefined;
          await gate;
        }
        return store.put(key, bytes, type);
      },
    };
    const a = createManifestWriter({ catalog, store, log, coalesceMs: 5, checkEveryMs: 600_000 });
    const b = createManifestWriter({ catalog: otherCatalog, store: gatedStore, log, coalesceMs: 5, checkEveryMs: 600_000 });
    await Promise.all([a.flush(), b.flush()]);
    held = new Promise<void>((r) => (release = r));
    const first = await publish('site_live_b1.json', otherCatalog);
    b.committed(first.result.seq, first.entry.filename, first.result.evicted, first.claim, first.entry);
    const bDone = b.flush();
    await waitFor(() => held === undefined, 5000, "B's manifest write held");
    const second = await publish('site_live_a2.json', catalog);
    a.committed(second.result.seq, second.entry.filename, second.result.evicted, second.claim, second.entry);
    await a.flush();
    expect((await manifest()).seq).toBe(second.result.seq);
    expect(existsSync(second.claim)).toBe(false);
    release();
    await bDone;
    await expectMirrors();
    a.close();
    b.close();
  });

  it('sizes its window by what a write costs: fast writes keep the base window, slow ones widen it', async () => {
    const { store, catalog, publish, expectMirrors, slowManifest, now } = await setup();
    const w = createManifestWriter({ catalog, store, log, coalesceMs: 20, maxCoalesceMs: 400, checkEveryMs: 600_000, now });
    await w.flush();
    /** Commit one version and write its manifest: the window is then what that write cost. */
    const commitAndWrite = async (name: string) => {
      const p = await publish(name);
      w.committed(p.result.seq, p.entry.filename, p.result.evicted, p.claim, p.entry);
      await w.flush();
      await expectMirrors();
      expect(existsSync(p.claim)).toBe(false);
    };
    // Writes that cost nothing keep the base window.
    await commitAndWrite('site_live_s1.json');
    expect(w.windowMs()).toBe(20);
    // A write of 60 ms: four times that.
    slowManifest(60);
    await commitAndWrite('site_live_s2.json');
    expect(w.windowMs()).toBe(240);
    // A write of 1 s: no more than maxCoalesceMs.
    slowManifest(1000);
    await commitAndWrite('site_live_s3.json');
    expect(w.windowMs()).toBe(400);
    // Fast again: one fast write brings the base window back.
    slowManifest(0);
    await commitAndWrite('site_live_s4.json');
    expect(w.windowMs()).toBe(20);
    w.close();
  });
});

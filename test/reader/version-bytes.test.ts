/**
 * Older versions read from the store on demand (a real filesystem store): the bytes of a version
 * the store has, undefined for one it no longer has, one store GET for concurrent reads of one
 * version, a cache bounded in bytes, and no cache at all: a Buffer of the caller's own.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createVersionBytes } from '../../src/reader/data/version-bytes.js';
import { createFsStore } from '../../src/store/fs-store.js';
import { objectKey, type Store } from '../../src/store/store.js';

describe('version bytes from the store', () => {
  let dir: string;
  let store: Store;
  let gets = 0;
  let counted: Pick<Store, 'get'>;

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'oddsfiles-versions-'));
    store = createFsStore(pathToFileURL(join(dir, 'store')).href);
    gets = 0;
    counted = { get: (k) => (gets++, store.get(k)) };
  });
  afterEach(() => rm(dir, { recursive: true, force: true }));

  it('reads a version once, shares concurrent reads, and says undefined for a version the store lacks', async () => {
    await store.put(objectKey('site_live_a_b.json', 'a'.repeat(64)), Buffer.from('{"v":1}'));
    const versions = createVersionBytes({ store: counted });
    const [x, y] = await Promise.all([versions.get('site_live_a_b.json', 'a'.repeat(64)), versions.get('site_live_a_b.json', 'a'.repeat(64))]);
    expect(x?.toString()).toBe('{"v":1}');
    expect(y).toBe(x);
    expect(gets).toBe(1);
    expect(await versions.get('site_live_a_b.json', 'b'.repeat(64))).toBeUndefined();
    expect(await versions.get('site_live_a_b.json', 'b'.repeat(64))).toBeUndefined();
    expect(gets).toBe(2);
  });

  it('keeps no more than its byte bound: an evicted version is read from the store again', async () => {
    const big = Buffer.alloc(600, 'x');
    for (const s of ['1', '2']) await store.put(objectKey('site_live_a_b.json', s.repeat(64)), big);
    const versions = createVersionBytes({ store: counted, maxBytes: 1000 });
    await versions.get('site_live_a_b.json', '1'.repeat(64));
    await versions.get('site_live_a_b.json', '2'.repeat(64));
    await versions.get('site_live_a_b.json', '1'.repeat(64));
    expect(gets).toBe(3);
  });

  it('without a cache, reads the store each time and hands each caller a Buffer of its own', async () => {
    await store.put(objectKey('site_live_a_b.json', 'a'.repeat(64)), Buffer.alloc(5000, 'x'));
    const versions = createVersionBytes({ store: counted, maxBytes: 0 });
    const x = (await versions.get('site_live_a_b.json', 'a'.repeat(64)))!;
    const y = (await versions.get('site_live_a_b.json', 'a'.repeat(64)))!;
    expect(gets).toBe(2);
    expect(y.equals(x)).toBe(true);
    expect(await versions.get('site_live_a_b.json', 'b'.repeat(64))).toBeUndefined();
  });
});

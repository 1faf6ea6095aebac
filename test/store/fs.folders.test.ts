/**
 * The filesystem store remembers the folders it made (no mkdir per put): a folder removed behind
 * its back (an operator's cleanup, a restored backup) is made again by the next put, which still
 * lands whole and durable. Real filesystem, no mocks.
 */
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createFsStore } from '../../src/store/fs-store.js';
import { MANIFEST_KEY } from '../../src/store/store.js';

describe('fs store: folders removed behind its back', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'oddsfiles-store-folders-'));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("makes an object's folder again when it was removed after a put", async () => {
    const root = join(dir, 'store');
    const store = createFsStore(pathToFileURL(root).href);
    await store.put('objects/site_live_a.json/1.json', Buffer.from('one'));
    await rm(join(root, 'objects', 'site_live_a.json'), { recursive: true });
    await store.put('objects/site_live_a.json/2.json', Buffer.from('two'));
    expect((await store.get('objects/site_live_a.json/2.json')).toString()).toBe('two');
    expect(await store.exists('objects/site_live_a.json/1.json')).toBe(false);
    // And the whole objects/ folder.
    await rm(join(root, 'objects'), { recursive: true });
    await store.put('objects/site_live_a.json/3.json', Buffer.from('three'));
    expect((await store.get('objects/site_live_a.json/3.json')).toString()).toBe('three');
    expect(await store.list('objects/')).toEqual(['objects/site_live_a.json/3.json']);
    expect(await readdir(join(root, '.tmp'))).toEqual([]);
  });

  it('makes the root and its temp folder again when the whole store was removed', async () => {
    const root = join(dir, 'store');
    const store = createFsStore(pathToFileURL(root).href);
    await store.put(MANIFEST_KEY, Buffer.from('{"v":1}'));
    await store.put('objects/site_live_b.json/1.json', Buffer.from('one'));
    await rm(root, { recursive: true });
    await store.put('objects/site_live_b.json/2.json', Buffer.from('two'));
    expect((await store.get('objects/site_live_b.json/2.json')).toString()).toBe('two');
    await rm(root, { recursive: true });
    await store.put(MANIFEST_KEY, Buffer.from('{"v":2}'));
    expect((await store.get(MANIFEST_KEY)).toString()).toBe('{"v":2}');
    expect(await readdir(join(root, '.tmp'))).toEqual([]);
  });

  it('puts many objects into many folders at once, then again after they were all removed', async () => {
    const root = join(dir, 'store');
    const store = createFsStore(pathToFileURL(root).href);
    const keys = Array.from({ length: 60 }, (_, i) => `objects/f${i % 12}/${i}.json`);
    await Promise.all(keys.map((k, i) => store.put(k, Buffer.from(String(i)))));
    await rm(join(root, 'objects'), { recursive: true });
    await Promise.all(keys.map((k, i) => store.put(k, Buffer.from(`again ${i}`))));
    expect(await store.list('objects/')).toEqual([...keys].sort());
    expect((await store.get(keys[7]!)).toString()).toBe('again 7');
    expect(await readdir(join(root, '.tmp'))).toEqual([]);
  });
});

import { readdirSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createFsStore } from '../../src/store/fs-store.js';
import type { Store } from '../../src/store/store.js';
import { StoreUnavailableError } from '../../src/errors.js';
import { SYNC_IO_MAX_BYTES } from '../../src/sync-io.js';
import { storeContract } from './contract.js';

const newDir = () => mkdtemp(join(tmpdir(), 'oddsfiles-store-'));

storeContract(
  'fs',
  async () => {
    const dir = await newDir();
    const store = createFsStore(pathToFileURL(join(dir, 'store')).href);
    return { store, cleanup: () => rm(dir, { recursive: true, force: true }) };
  },
  {
    // The root's parent is a regular file: nothing below it can exist, even for root.
    openUnavailable: async () => {
      const dir = await newDir();
      await writeFile(join(dir, 'file'), 'not a folder');
      const store = createFsStore(pathToFileURL(join(dir, 'file', 'store')).href);
      return { store, cleanup: () => rm(dir, { recursive: true, force: true }) };
    },
  },
);

// The same contract with every file call on the thread pool (`ingest.sync_io_max_bytes: 0`).
storeContract(
  'fs, no synchronous I/O',
  async () => {
    const dir = await newDir();
    const store = createFsStore(pathToFileURL(join(dir, 'store')).href, { syncIoMaxBytes: 0 });
    return { store, cleanup: () => rm(dir, { recursive: true, force: true }) };
  },
  {
    openUnavailable: async () => {
      const dir = await newDir();
      await writeFile(join(dir, 'file'), 'not a folder');
      const store = createFsStore(pathToFileURL(join(dir, 'file', 'store')).href, { syncIoMaxBytes: 0 });
      return { store, cleanup: () => rm(dir, { recursive: true, force: true }) };
    },
  },
);

describe('fs store specifics', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await newDir();
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('leaves no temp files after puts, overwrites and deletes', async () => {
    const root = join(dir, 'store');
    const store: Store = createFsStore(pathToFileURL(root).href);
    await Promise.all(Array.from({ length: 40 }, (_, i) => store.put(`objects/f${i % 5}/${i}.json`, Buffer.from(`${i}`))));
    await Promise.all(Array.from({ length: 20 }, (_, i) => store.put('manifest.json', Buffer.from(`${i}`))));
    await store.delete('objects/f0/0.json');
    expect(await readdir(join(root, '.tmp'))).toEqual([]);
    const all = await readdir(root, { recursive: true });
    expect(all.filter((p) => p.endsWith('.tmp') && p !== '.tmp')).toEqual([]);
    expect(await store.list('')).toHaveLength(40);
  });

  it('creates a root that does not exist yet on the first put', async () => {
    const root = join(dir, 'does', 'not', 'exist', 'yet');
    const store = createFsStore(pathToFileURL(root).href);
    expect(await store.list('')).toEqual([]);
    expect(await store.exists('manifest.json')).toBe(false);
    await store.put('manifest.json', Buffer.from('{"v":1}'));
    expect((await store.get('manifest.json')).toString()).toBe('{"v":1}');
    expect(await readdir(root)).toContain('manifest.json');
  });

  it('writes and reads objects on both sides of the synchronous I/O limit byte for byte', async () => {
    const root = join(dir, 'store');
    const store = createFsStore(pathToFileURL(root).href);
    // Up to SYNC_IO_MAX_BYTES the temp file is written and the object read with synchronous calls, beyond on the thread pool.
    for (const size of [SYNC_IO_MAX_BYTES, SYNC_IO_MAX_BYTES + 1]) {
      const bytes = Buffer.alloc(size, size % 251);
      bytes.write(`object of ${size} bytes`);
      await store.put(`objects/f/${size}.json`, bytes);
      expect((await readFile(join(root, 'objects', 'f', `${size}.json`))).equals(bytes)).toBe(true);
      expect((await store.get(`objects/f/${size}.json`)).equals(bytes)).toBe(true);
    }
    expect(await readdir(join(root, '.tmp'))).toEqual([]);
  });

  it('a put that fails leaves no temp file and no open file, small or big', async () => {
    const root = join(dir, 'store');
    const store = createFsStore(pathToFileURL(root).href);
    await store.put('objects/f/ok.json', Buffer.from('{}'));
    // The key names a folder that is not empty: the rename into place fails.
    await mkdir(join(root, 'objects', 'f', 'taken.json', 'inside'), { recursive: true });
    const asyncOnly = createFsStore(pathToFileURL(root).href, { syncIoMaxBytes: 0 });
    const openFds = () => readdirSync('/proc/self/fd').length;
    const before = openFds();
    for (let i = 0; i < 10; i++) {
      for (const size of [10, SYNC_IO_MAX_BYTES + 1]) {
        await expect(store.put('objects/f/taken.json', Buffer.alloc(size, 0x20))).rejects.toBeInstanceOf(StoreUnavailableError);
        await expect(asyncOnly.put('objects/f/taken.json', Buffer.alloc(size, 0x20))).rejects.toBeInstanceOf(StoreUnavailableError);
      }
    }
    expect(openFds()).toBe(before);
    expect(await readdir(join(root, '.tmp'))).toEqual([]);
  });

  it('stores each key at <root>/<key>', async () => {
    const root = join(dir, 'store');
    const store = createFsStore(pathToFileURL(root).href);
    await store.put('objects/site_live_soccer/abc.json', Buffer.from('x'));
    expect(await readdir(join(root, 'objects', 'site_live_soccer'))).toEqual(['abc.json']);
  });
});

/**
 * The filesystem store's probe (Store.ping: /readyz and oddsfiles_dependency_up{dependency="store"})
 * fails whenever puts would: the root replaced by a plain file (QA: `mv STORE store.real && echo x
 * > STORE`), its temp folder replaced by one, a folder the process cannot write into. It recovers
 * once the store is repaired, without a restart. Real filesystem, no mocks.
 */
import { chmod, mkdir, mkdtemp, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { StoreUnavailableError } from '../../src/errors.js';
import { createFsStore } from '../../src/store/fs-store.js';
import { MANIFEST_KEY, type Store } from '../../src/store/store.js';

const failure = (p: Promise<unknown>) =>
  p.then(
    () => undefined,
    (e: unknown) => e,
  );

describe('fs store: the probe fails when puts would', () => {
  let dir: string;
  let root: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'oddsfiles-store-probe-'));
    root = join(dir, 'store');
  });
  afterEach(async () => {
    await chmod(root, 0o755).catch(() => undefined);
    await rm(dir, { recursive: true, force: true });
  });

  const working = async (syncIoMaxBytes?: number): Promise<Store> => {
    const store = createFsStore(pathToFileURL(root).href, syncIoMaxBytes === undefined ? {} : { syncIoMaxBytes });
    await store.put(MANIFEST_KEY, Buffer.from('{"v":1}'));
    await store.ping();
    return store;
  };

  for (const syncIoMaxBytes of [undefined, 0]) {
    it(`the root replaced by a plain file, then put back${syncIoMaxBytes === 0 ? ' (no synchronous I/O)' : ''}`, async () => {
      const store = await working(syncIoMaxBytes);
      await rename(root, `${root}.real`);
      await writeFile(root, 'x\n');

      const put = await failure(store.put('objects/f/1.json', Buffer.from('{}')));
      expect(put).toBeInstanceOf(StoreUnavailableError);
      const ping = await failure(store.ping());
      expect(ping).toBeInstanceOf(StoreUnavailableError);
      expect((ping as Error).message).toMatch(/^store ping: ENOTDIR: /);
      expect((ping as Error).cause).toBeDefined();

      await rm(root);
      await rename(`${root}.real`, root);
      await store.ping();
      await store.put('objects/f/2.json', Buffer.from('{}'));
      expect((await store.get(MANIFEST_KEY)).toString()).toBe('{"v":1}');
    });
  }

  it('its temp folder replaced by a plain file; removed, it is made again', async () => {
    const store = await working();
    await rm(join(root, '.tmp'), { recursive: true });
    await writeFile(join(root, '.tmp'), 'x\n');
    expect(await failure(store.put('objects/f/1.json', Buffer.from('{}')))).toBeInstanceOf(StoreUnavailableError);
    expect(await failure(store.ping())).toBeInstanceOf(StoreUnavailableError);

    // A removed temp folder is no outage: the next put (or probe) makes it again.
    await rm(join(root, '.tmp'));
    await store.ping();
    await store.put('objects/f/2.json', Buffer.from('{}'));
  });

  it('a root that is gone stays a failure (a lost mount is not made again by the probe)', async () => {
    const store = await working();
    await rm(root, { recursive: true });
    expect(await failure(store.ping())).toBeInstanceOf(StoreUnavailableError);
    await mkdir(root);
    await store.ping();
  });

  // Root (the test machine's user) may write anywhere: chmod proves nothing there.
  it.skipIf(process.getuid?.() === 0)('a root the process cannot write into', async () => {
    const store = await working();
    await chmod(root, 0o555);
    expect(await failure(store.ping())).toBeInstanceOf(StoreUnavailableError);
    await chmod(root, 0o755);
    await store.ping();
  });
});

import { randomBytes } from 'node:crypto';
import { closeSync, constants, openSync, renameSync } from 'node:fs';
import { access, mkdir, readdir, rename, rm, stat, unlink } from 'node:fs/promises';
import { dirname, join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { StoreNotFoundError, StoreUnavailableError } from '../errors.js';
import { SYNC_IO_MAX_BYTES, closeFd, fsyncFd, openFd, readWholeFile, writeAllFd, writeAllSync } from '../sync-io.js';
import { assertValidKey, type Store } from './store.js';

const TMP_DIR = '.tmp';

export interface FsStoreOptions {
  /** Objects up to this size are written (but for the fsyncs) and read with synchronous calls (sync-io.ts); 0: none. */
  readonly syncIoMaxBytes?: number;
}

/**
 * The filesystem backend: each put writes a temp file, fsyncs it, renames it into place and
 * fsyncs the folder, so a crash leaves the old object or the new one and never a partial file
 * (a put with `durable: false` skips both fsyncs: atomic still, but a crash may lose it).
 * The folders it made are remembered (no mkdir per put); one removed meanwhile is made again.
 * Objects up to `syncIoMaxBytes` are written with synchronous calls but for the two fsyncs, and
 * read with synchronous calls (a reader loads each new version: a page-cache read of microseconds,
 * where four hops to the thread pool wait behind whatever else the process does).
 */
export function createFsStore(url: string, options: FsStoreOptions = {}): Store {
  const syncIoMaxBytes = options.syncIoMaxBytes ?? SYNC_IO_MAX_BYTES;
  const root = fileURLToPath(url);
  const tmpRoot = join(root, TMP_DIR);
  let ready: Promise<void> | undefined;
  /** `ready` has resolved: put() need not wait a tick for it. */
  let initialized = false;
  // A failed mkdir is forgotten, so a store broken at start-up recovers once repaired.
  const init = () =>
    (ready ??= mkdir(tmpRoot, { recursive: true }).then(
      () => {
        initialized = true;
      },
      (err: unknown) => {
        ready = undefined;
        throw err;
      },
    ));
  /** Folders of objects already made by this process. */
  const made = new Set<string>();
  const makeDir = async (dir: string) => {
    await mkdir(dir, { recursive: true });
    made.add(dir);
  };
  const pathOf = (key: string) => {
    assertValidKey(key);
    return join(root, key);
  };
  /**
   * No object at the key: ENOENT, the key names a folder (EISDIR), or a folder in the key is an
   * object (ENOTDIR), unless that is the root itself (then the store is broken, not empty).
   */
  const isMissing = async (err: unknown): Promise<boolean> => {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'EISDIR') return true;
    if (code !== 'ENOTDIR') return false;
    return stat(root).then(
      (s) => s.isDirectory(),
      () => false,
    );
  };
  const wrap = (what: string, err: unknown): never => {
    if (err instanceof StoreNotFoundError || err instanceof TypeError) throw err;
    const code = (err as NodeJS.ErrnoException).code ?? 'error';
    throw new StoreUnavailableError(`store ${what}: ${code}: ${(err as Error).message}`, { cause: err });
  };

  return {
    description: url,
    async put(key, bytes, _contentType, options) {
      const durable = options?.durable !== false;
      const target = pathOf(key);
      const dir = dirname(target);
      const tmp = join(tmpRoot, `${randomBytes(8).toString('hex')}.tmp`);
      try {
        if (!initialized) await init();
        // Folders made once are remembered: no mkdir per put. One removed behind our back is
        // found by the rename (ENOENT), made again, and the rename retried once.
        if (!made.has(dir)) await makeDir(dir);
        // Small objects: open, write, close and rename synchronously, only the fsyncs on the
        // thread pool (sync-io.ts: two hops instead of eight).
        const small = syncIoMaxBytes > 0 && bytes.length <= syncIoMaxBytes;
        // (No `await` on the synchronous open: the write happens within this call, see publish.ts.)
        let fd: number;
        try {
          fd = small ? openSync(tmp, 'w', 0o644) : await openFd(tmp, 'w', 0o644);
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
          ready = undefined;
          initialized = false;
          await init();
          fd = small ? openSync(tmp, 'w', 0o644) : await openFd(tmp, 'w', 0o644);
        }
        try {
          if (small) writeAllSync(fd, bytes);
          else await writeAllFd(fd, bytes);
          if (durable) await fsyncFd(fd);
        } finally {
          if (small) closeSync(fd);
          else await closeFd(fd);
        }
        const move = () => (small ? renameSync(tmp, target) : rename(tmp, target));
        try {
          await move();
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
          made.delete(dir);
          await makeDir(dir);
          await move();
        }
        if (durable) await fsyncDir(dir, small);
      } catch (err) {
        await rm(tmp, { force: true }).catch(() => undefined);
        wrap(`put ${key}`, err);
      }
    },
    async get(key) {
      const path = pathOf(key);
      try {
        return await readWholeFile(path, syncIoMaxBytes);
      } catch (err) {
        if (await isMissing(err)) throw new StoreNotFoundError(key);
        return wrap(`get ${key}`, err);
      }
    },
    async exists(key) {
      const path = pathOf(key);
      try {
        return (await stat(path)).isFile();
      } catch (err) {
        if (await isMissing(err)) return false;
        return wrap(`stat ${key}`, err);
      }
    },
    async delete(key) {
      const path = pathOf(key);
      try {
        await unlink(path);
      } catch (err) {
        if (!(await isMissing(err))) wrap(`delete ${key}`, err);
      }
    },
    async list(prefix) {
      try {
        // Only the folder the prefix names is walked (e.g. incoming/ for the sweep of staged uploads, not every object).
        const folder = prefix.includes('/') ? prefix.slice(0, prefix.lastIndexOf('/')) : '';
        const entries = await readdir(validKey(folder) ? join(root, folder) : root, { recursive: true, withFileTypes: true });
        return entries
          .filter((e) => e.isFile())
          .map((e) => relative(root, join(e.parentPath, e.name)).split(sep).join('/'))
          .filter((k) => !k.startsWith(`${TMP_DIR}/`) && k.startsWith(prefix))
          .sort();
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
        return wrap(`list ${prefix}`, err);
      }
    },
    async ping() {
      try {
        await init();
        // The root must be a folder this process can write into (a plain file or a read-only
        // folder in its place fails every put); a missing root stays a failure (a lost mount).
        await assertWritableDir(root);
        try {
          await assertWritableDir(tmpRoot);
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
          // The temp folder was removed: the next put makes it again, so may the probe.
          ready = undefined;
          initialized = false;
          await init();
          await assertWritableDir(tmpRoot);
        }
      } catch (err) {
        wrap('ping', err);
      }
    },
    async close() {},
  };
}

function validKey(key: string): boolean {
  if (key === '') return false;
  try {
    assertValidKey(key);
    return true;
  } catch {
    return false;
  }
}

/**
 * A folder this process can make entries in: a directory, writable and searchable. Two cheap calls
 * (a stat and an access), as the probe runs at every scrape and readiness check.
 */
async function assertWritableDir(path: string): Promise<void> {
  const st = await stat(path);
  if (!st.isDirectory()) {
    throw Object.assign(new Error(`ENOTDIR: not a folder, '${path}'`), { code: 'ENOTDIR', path });
  }
  await access(path, constants.W_OK | constants.X_OK);
}

async function fsyncDir(dir: string, sync: boolean): Promise<void> {
  const fd = sync ? openSync(dir, 'r') : await openFd(dir, 'r');
  try {
    await fsyncFd(fd);
  } finally {
    if (sync) closeSync(fd);
    else await closeFd(fd);
  }
}

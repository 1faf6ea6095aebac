/**
 * The mirror's folder: each file replaced atomically (a temp file in the same folder, written,
 * synced to disk, renamed over the old one), so a reader of DIR sees the old bytes or the new ones, never
 * part of either, and a crash, even of the machine, leaves no torn file (at worst the previous
 * version, whose rename was not yet on disk; and a stray temp file, removed on the next start).
 */
import { randomBytes } from 'node:crypto';
import { closeSync, fdatasyncSync, openSync, renameSync, rmSync, writeSync } from 'node:fs';
import { mkdir, open, readdir, readFile, rename, rm, rmdir } from 'node:fs/promises';
import { dirname, join } from 'node:path';

export const TEMP_PREFIX = '.oddsfiles-tmp-';

/**
 * A filename the service could publish (no path parts, not hidden, short enough for any
 * filesystem with room for the temp file's prefix): anything else is refused.
 */
export function safeName(name: unknown): name is string {
  return typeof name === 'string' && name.length <= 200 && /^[A-Za-z0-9_][A-Za-z0-9_.-]*$/.test(name) && !name.includes('..');
}

/** Makes DIR if needed and checks it can be written; returns the first folder it made (undefined: DIR was there). */
export async function ensureDir(dir: string): Promise<string | undefined> {
  const made = await mkdir(dir, { recursive: true });
  // A write probe: a folder that exists but cannot be written is found now, not at the first change.
  await writeAtomic(dir, `${TEMP_PREFIX}probe`, new Uint8Array(0));
  await rm(join(dir, `${TEMP_PREFIX}probe`), { force: true });
  return made;
}

/**
 * Removes DIR and its parents up to `made` (what ensureDir made), each only if empty: a mirror
 * that stops before writing anything (a refused key, a wrong URL) leaves no folder behind.
 */
export async function removeMadeDirs(dir: string, made: string): Promise<void> {
  for (let d = dir; ; d = dirname(d)) {
    try {
      await rmdir(d);
    } catch {
      return;
    }
    if (d === made || dirname(d) === d) return;
  }
}

/**
 * Files up to this size are written with synchronous calls: five thread-pool hops (open, write,
 * sync, close, rename) cost more of an update's latency than the calls themselves; a larger
 * file would hold the event loop for its write, and takes the thread pool.
 */
const SYNC_WRITE_MAX_BYTES = 1024 * 1024;

/**
 * `durable`: the bytes are on disk before the rename (for files; the state can be rebuilt):
 * fdatasync, which flushes the data and the size that reads them back but not the timestamps
 * (quicker than fsync on ext4, most in the tail).
 */
export async function writeAtomic(dir: string, name: string, bytes: Uint8Array, durable = true): Promise<void> {
  const temp = join(dir, `${TEMP_PREFIX}${randomBytes(6).toString('hex')}`);
  if (bytes.length <= SYNC_WRITE_MAX_BYTES) return writeAtomicSync(temp, join(dir, name), bytes, durable);
  const h = await open(temp, 'w', 0o644);
  try {
    await h.writeFile(bytes);
    if (durable) await h.datasync();
  } catch (err) {
    await h.close().catch(() => undefined);
    await rm(temp, { force: true });
    throw err;
  }
  await h.close();
  try {
    await rename(temp, join(dir, name));
  } catch (err) {
    await rm(temp, { force: true });
    throw err;
  }
}

function writeAtomicSync(temp: string, path: string, bytes: Uint8Array, durable: boolean): void {
  const fd = openSync(temp, 'w', 0o644);
  let open = true;
  try {
    for (let at = 0; at < bytes.length;) at += writeSync(fd, bytes, at);
    if (durable) fdatasyncSync(fd);
    open = false; // never closed twice: the number may belong to another file by then
    closeSync(fd);
    renameSync(temp, path);
  } catch (err) {
    if (open) closeSync(fd);
    rmSync(temp, { force: true });
    throw err;
  }
}

export async function removeFile(dir: string, name: string): Promise<void> {
  await rm(join(dir, name), { force: true });
}

export async function readHeld(dir: string, name: string): Promise<Uint8Array | undefined> {
  try {
    return new Uint8Array(await readFile(join(dir, name)));
  } catch {
    return undefined;
  }
}

/** Temp files a crash left behind. */
export async function removeStrayTemps(dir: string): Promise<void> {
  const names = await readdir(dir).catch(() => [] as string[]);
  await Promise.all(names.filter((n) => n.startsWith(TEMP_PREFIX)).map((n) => rm(join(dir, n), { force: true })));
}

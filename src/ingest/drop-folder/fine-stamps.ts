/**
 * Whether the inbox's filesystem gives a file new times on every write that follows a look at
 * its times. Linux's local filesystems (ext4, xfs, btrfs, tmpfs) do since 6.13 (multigrain
 * timestamps): once a file's times were read, its next change is stamped from the fine clock, not
 * the coarse one whose tick can hide a rewrite. There, a claim whose bytes were read again after a
 * look at its times and found unchanged needs no further read: any later write changes its times
 * (written-since.ts).
 *
 * Told by trying, on those filesystems only (a network filesystem may show cached times): a file
 * in the inbox is written right after each look at its times, many times within one tick of the
 * coarse clock, and every write must show new times as Node's stat reports them.
 */
import { randomBytes } from 'node:crypto';
import { closeSync, fstatSync, openSync, unlinkSync, writeSync } from 'node:fs';
import { statfs } from 'node:fs/promises';
import { join } from 'node:path';

/** statfs(2) magic numbers of the local filesystems that stamp times this way on a recent kernel. */
const LOCAL_FILESYSTEMS = new Set([
  0xef53, // ext2, ext3, ext4
  0x58465342, // xfs
  0x9123683e, // btrfs
  0x01021994, // tmpfs
]);

/** Writes tried; each must show new times. They take microseconds: all within one tick. */
const TRIES = 64;

/** True when every write after a look at a file's times in `dir` changes them; false when not, or when it cannot tell. */
export async function probeFineStamps(dir: string): Promise<boolean> {
  try {
    if (!LOCAL_FILESYSTEMS.has(Number((await statfs(dir)).type))) return false;
  } catch {
    return false;
  }
  // A dot-name ending in .tmp: the watcher and recovery never take it for a drop.
  const path = join(dir, `.oddsfiles-stamps-${randomBytes(6).toString('hex')}.tmp`);
  let fd: number | undefined;
  try {
    fd = openSync(path, 'w', 0o600);
    const one = Buffer.from('x');
    for (let i = 0; i < TRIES; i++) {
      const before = fstatSync(fd);
      writeSync(fd, one, 0, 1, 0);
      const after = fstatSync(fd);
      if (after.mtimeMs === before.mtimeMs || after.ctimeMs === before.ctimeMs) return false;
    }
    return true;
  } catch {
    return false;
  } finally {
    if (fd !== undefined) closeSync(fd);
    try {
      unlinkSync(path);
    } catch {
      // never made, or already gone
    }
  }
}

/**
 * The drop folder on disk. A drop is claimed by renaming it into INBOX_DIR/.processing/ under a
 * name that records who claimed it, so a new drop under the same filename can land while the old
 * one is processed, and a crash leaves the claimed drop where the next start finds it.
 */
import { randomBytes } from 'node:crypto';
import { closeSync, constants, fstatSync, openSync, readSync, renameSync } from 'node:fs';
import { mkdir, rename } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { RejectionError } from '../../errors.js';
import { SYNC_IO_MAX_BYTES, closeFd, fstatFd, openFd, readFd } from '../../sync-io.js';
import { isMissing } from '../../missing.js';
import { sha256Hex } from '../../sha256.js';

export const PROCESSING_DIR = '.processing';

/** Publishers write to such names, then rename: they are never read. */
export function isIgnoredName(name: string): boolean {
  return name.startsWith('.') || name.endsWith('.tmp') || name.endsWith('.part');
}

export interface Claim {
  /** Unique per claim; `d<jobId>-<job's creation time, base 36>` for drops claimed by a drop job (dropClaimId). */
  readonly claimId: string;
  /** The drop's filename as the publisher named it. */
  readonly name: string;
  readonly path: string;
  /** Its bytes were whole when claimed (a staged upload, written in by a rename): one that does not parse is not waited on. */
  readonly complete?: boolean;
}

export function processingDir(inboxDir: string): string {
  return join(inboxDir, PROCESSING_DIR);
}

/** Longest file name (bytes) the filesystems we run on accept. */
const NAME_MAX = 255;

/**
 * `<claimId>--<name>`. A drop whose name is so long that this would not fit (no feed filename is
 * anywhere near) is claimed under its name cut short plus a hash of the whole name; the job keeps
 * the whole name, so it is rejected under it (unknown_filename) instead of failing for ever with
 * ENAMETOOLONG.
 */
export function claimFileName(claimId: string, name: string): string {
  const full = `${claimId}--${name}`;
  if (Buffer.byteLength(full) <= NAME_MAX) return full;
  const hash = sha256Hex(name).slice(0, 16);
  const room = NAME_MAX - Buffer.byteLength(`${claimId}--~${hash}`);
  const chars = Array.from(name);
  let cut = '';
  for (const c of chars) {
    if (Buffer.byteLength(cut + c) > room) break;
    cut += c;
  }
  return `${claimId}--${cut}~${hash}`;
}

export function claimPath(inboxDir: string, claimId: string, name: string): string {
  return join(processingDir(inboxDir), claimFileName(claimId, name));
}

/** Split a claim file's name into its parts; undefined for anything else. */
export function parseClaimFileName(inboxDir: string, fileName: string): Claim | undefined {
  const i = fileName.indexOf('--');
  if (i <= 0 || i + 2 >= fileName.length) return undefined;
  const claimId = fileName.slice(0, i);
  const name = fileName.slice(i + 2);
  return { claimId, name, path: join(processingDir(inboxDir), fileName) };
}

/**
 * The claim id of a drop job: its id and its creation time. BullMQ's job ids restart at 1 when
 * Redis loses its data; the creation time keeps a new job's claim from landing on (rename over)
 * a claim an earlier job of the same id left in .processing, and tells recovery that a pending
 * job of that id is not the claim's owner.
 */
export function dropClaimId(jobId: string, createdAtMs: number): string {
  return `d${jobId}-${Math.max(0, Math.floor(createdAtMs)).toString(36)}`;
}

/**
 * The job that made a drop claim: its id and, but for claims made before 2026-11-23 (`d<jobId>`),
 * its creation time. Undefined for claims that are not a drop job's (`p…` from publish or retry).
 */
export function parseDropClaimId(claimId: string): { jobId: string; createdAtMs?: number } | undefined {
  const m = /^d(\d+)(?:-([0-9a-z]+))?$/.exec(claimId);
  if (!m) return undefined;
  return m[2] === undefined ? { jobId: m[1]! } : { jobId: m[1]!, createdAtMs: parseInt(m[2], 36) };
}

/** A fresh claim id for drops that did not come through a drop job (publish, retry). */
export function newClaimId(now: Date = new Date()): string {
  return `p${now.getTime().toString(36)}${randomBytes(4).toString('hex')}`;
}

export async function ensureInbox(inboxDir: string): Promise<void> {
  await mkdir(processingDir(inboxDir), { recursive: true });
}

/**
 * Take INBOX_DIR/<name> into .processing; undefined when it is gone (already processed). The
 * rename is synchronous (a rename within one local folder takes microseconds, a thread-pool hop
 * more: sync-io.ts) unless `sync` is false (an inbox on a network filesystem).
 */
export async function claimDrop(inboxDir: string, name: string, claimId: string, sync = true): Promise<Claim | undefined> {
  if (basename(name) !== name || isIgnoredName(name)) return undefined;
  const path = claimPath(inboxDir, claimId, name);
  try {
    if (sync) renameSync(join(inboxDir, name), path);
    else await rename(join(inboxDir, name), path);
  } catch (err) {
    if (isMissing(err)) return undefined;
    throw err;
  }
  return { claimId, name, path };
}

// O_NOFOLLOW: a symlink dropped into the inbox is never followed out of it.
// O_NONBLOCK: opening a FIFO does not wait for a writer.
export const CLAIM_OPEN_FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;

/** What readClaim read, with the size and times of the file (its fstat, taken before reading). */
export interface ClaimRead {
  readonly bytes: Buffer;
  readonly size: number;
  readonly mtimeMs: number;
  readonly ctimeMs: number;
  readonly ino: number;
  /** When that fstat was taken (Date.now()). */
  readonly statAtMs: number;
}

/**
 * Read a claimed drop, refusing regular files over the limit without reading them, and anything
 * that is not a regular file (a FIFO would block, a directory cannot be read). One open, one
 * fstat, the reads, one close: `beforeRead(size)` is called between the fstat and the first read
 * (the publish step waits there for its memory budget), and the fstat's size and mtime are
 * returned, so no separate lstat is needed to settle a drop written in place.
 */
export async function readClaim(
  path: string,
  maxBytes: number,
  beforeRead?: (size: number) => Promise<void> | void,
  syncIoMaxBytes: number = SYNC_IO_MAX_BYTES,
  sharedMinBytes = Infinity,
): Promise<ClaimRead> {
  // With synchronous I/O on (syncIoMaxBytes > 0) the open, fstat and close are synchronous
  // (microseconds on a local folder, sync-io.ts), and so is the read of a drop up to
  // syncIoMaxBytes; bigger drops are read on the thread pool.
  const syncOk = syncIoMaxBytes > 0;
  let fd: number;
  try {
    fd = syncOk ? openSync(path, CLAIM_OPEN_FLAGS) : await openFd(path, CLAIM_OPEN_FLAGS);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ELOOP' || code === 'EMLINK') throw new RejectionError('unknown_filename', 'a symbolic link, not a regular file');
    if (code === 'EACCES' || code === 'EPERM') throw new RejectionError('unknown_filename', 'the file cannot be read (permission denied)');
    throw err;
  }
  try {
    const st = syncOk ? fstatSync(fd) : await fstatFd(fd);
    const statAtMs = Date.now();
    if (!st.isFile())
      throw new RejectionError('unknown_filename', `not a regular file (${st.isFIFO() ? 'a FIFO' : st.isDirectory() ? 'a directory' : 'a special file'})`);
    if (st.size > maxBytes) throw new RejectionError('too_large', `${st.size} bytes; the limit is ${maxBytes}`);
    await beforeRead?.(st.size);
    // Read at most one byte past the limit: a file still growing cannot make us read it all.
    // From `sharedMinBytes` on, into shared memory, which validation threads read in place.
    const size = Math.min(st.size, maxBytes) + 1;
    const buf = st.size >= sharedMinBytes ? Buffer.from(new SharedArrayBuffer(size)) : Buffer.allocUnsafe(size);
    let filled = 0;
    if (syncOk && st.size <= syncIoMaxBytes) filled = fillSync(fd, buf, buf.length);
    else {
      for (;;) {
        const n = (await readFd(fd, buf, filled, buf.length - filled, filled)).bytesRead;
        if (n === 0 || (filled += n) === buf.length) break;
      }
    }
    if (filled > maxBytes) throw new RejectionError('too_large', `more than ${maxBytes} bytes`);
    return { bytes: filled === buf.length ? buf : buf.subarray(0, filled), size: st.size, mtimeMs: st.mtimeMs, ctimeMs: st.ctimeMs, ino: st.ino, statAtMs };
  } finally {
    if (syncOk) closeSync(fd);
    else await closeFd(fd);
  }
}

/**
 * A claim's bytes read again synchronously into `scratch` (which must hold `maxBytes` + 1): a view
 * of it, valid until the next call with the same scratch, or undefined when the claim is no longer
 * a regular file of at most `maxBytes`. Checking a settled claim for a rewrite (written-since.ts)
 * reads every fresh drop again; into one buffer, that costs the copy and no garbage.
 */
export function readClaimSyncInto(path: string, maxBytes: number, scratch: Buffer): Buffer | undefined {
  const fd = openSync(path, CLAIM_OPEN_FLAGS);
  try {
    const st = fstatSync(fd);
    if (!st.isFile() || st.size > maxBytes) return undefined;
    const filled = fillSync(fd, scratch, Math.min(maxBytes + 1, scratch.length));
    return filled > maxBytes ? undefined : scratch.subarray(0, filled);
  } finally {
    closeSync(fd);
  }
}

/** Reads from the start of `fd` into buf[0, end) until it is full or the file ends; the bytes read. */
function fillSync(fd: number, buf: Buffer, end: number): number {
  let filled = 0;
  for (;;) {
    const n = readSync(fd, buf, filled, end - filled, filled);
    if (n === 0 || (filled += n) === end) return filled;
  }
}

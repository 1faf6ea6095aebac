/**
 * Small file I/O on the hot path, done with synchronous calls; waiting for the disk (fsync) and
 * big reads or writes stay on the thread pool.
 *
 * Each asynchronous fs call is a hop to libuv's thread pool and back, which costs far more than
 * the call itself when the bytes are in the page cache (open, fstat, rename, close, a small read
 * or write). The copy grows with the size while the hops do not, so files over the limit
 * (SYNC_IO_MAX_BYTES by default) are read and written asynchronously: no call blocks the event
 * loop (and, in one process, the reader) for long. The figures: docs/BENCHMARKS.md, measurements
 * behind design choices.
 * On a network filesystem every call is a round trip that would block the event loop:
 * `ingest.sync_io_max_bytes: 0` sends every file call to the thread pool again.
 */
import { close, closeSync, fstat, fstatSync, fsync, open, openSync, read, readSync, write, writeSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { promisify } from 'node:util';

/** Up to this many bytes, a claimed drop is read and a store object written and read synchronously (`ingest.sync_io_max_bytes`). */
export const SYNC_IO_MAX_BYTES = 256 * 1024;

/** fsync(fd) on the thread pool: the one wait for the disk. */
export const fsyncFd = promisify(fsync);

/** The same calls on the thread pool: files over the limit, or every file with the limit at 0. */
export const openFd = promisify(open);
export const fstatFd = promisify(fstat);
export const closeFd = promisify(close);
export const readFd = promisify(read);
const writeFd = promisify(write);

/** Write all of `bytes` at the current position (a short write is continued, as fs.writeFile does). */
export function writeAllSync(fd: number, bytes: Buffer): void {
  let done = 0;
  while (done < bytes.length) done += writeSync(fd, bytes, done, bytes.length - done);
}

/** writeAllSync on the thread pool. */
export async function writeAllFd(fd: number, bytes: Buffer): Promise<void> {
  let done = 0;
  while (done < bytes.length) done += (await writeFd(fd, bytes, done, bytes.length - done)).bytesWritten;
}

/**
 * A whole file that nothing rewrites (a store object): with synchronous calls when it is at most
 * `syncIoMaxBytes` (one open, fstat, read and close), else with readFile on the thread pool. It
 * first lets the event loop turn once, as an asynchronous read would: a caller that reads in a
 * loop until some I/O is done must not starve that I/O.
 */
export async function readWholeFile(path: string, syncIoMaxBytes: number): Promise<Buffer> {
  if (syncIoMaxBytes <= 0) return readFile(path);
  await new Promise((resolve) => setImmediate(resolve));
  const fd = openSync(path, 'r');
  try {
    const { size } = fstatSync(fd);
    if (size <= syncIoMaxBytes) {
      const buf = Buffer.allocUnsafe(size);
      let filled = 0;
      while (filled < size) {
        const n = readSync(fd, buf, filled, size - filled, filled);
        if (n === 0) break;
        filled += n;
      }
      return filled === size ? buf : buf.subarray(0, filled);
    }
  } finally {
    closeSync(fd);
  }
  return readFile(path);
}

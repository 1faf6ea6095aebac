/**
 * Small file I/O on the hot path, done with synchronous calls; waiting for the disk (fsync) and
 * big reads or writes stay on the thread pool.
 *
 * Each asynchronous fs call is a hop to libuv's thread pool and back: on the 2-CPU machine of
 * docs/BENCHMARKS.md it cost 0.1–0.3 ms, far more than the call itself when the bytes are in the
 * page cache (open, fstat, a 200 KB read or write, rename, close: microseconds each). Reading a
 * 200 KB claimed drop took 0.7–1.0 ms asynchronously and 0.2–0.3 ms with synchronous calls; the
 * store's temp file + fsync + rename + fsync of the folder 2.5–2.9 ms as eight hops and 2.0–2.2 ms
 * as two (only the fsyncs asynchronous), of which 0.23 ms blocked the event loop. Files bigger than
 * SYNC_IO_MAX_BYTES are read and written asynchronously, so no call blocks the event loop for long.
 * Both folders are local: the inbox is watched with inotify, and a filesystem store on a network
 * mount (where every call is a round trip) is not a shape we support (use S3).
 */
import { fsync, read, writeSync } from 'node:fs';

/** Up to this many bytes, a claimed drop is read and a store object written synchronously. */
export const SYNC_IO_MAX_BYTES = 1024 * 1024;

/** fsync(fd) on the thread pool: the one wait for the disk. */
export function fsyncFd(fd: number): Promise<void> {
  return new Promise((resolve, reject) => fsync(fd, (err) => (err ? reject(err) : resolve())));
}

/** read(fd) on the thread pool (files over SYNC_IO_MAX_BYTES). */
export function readFd(fd: number, buf: Buffer, offset: number, length: number, position: number): Promise<number> {
  return new Promise((resolve, reject) => read(fd, buf, offset, length, position, (err, n) => (err ? reject(err) : resolve(n))));
}

/** Write all of `bytes` at the current position (a short write is continued, as fs.writeFile does). */
export function writeAllSync(fd: number, bytes: Buffer): void {
  let done = 0;
  while (done < bytes.length) done += writeSync(fd, bytes, done, bytes.length - done);
}

/**
 * Reading a claimed drop that may still be written in place. A drop that parses is complete (a
 * prefix of a JSON object never parses), so it is decided at once: a renamed drop pays no settling
 * delay. One that does not parse (`empty`, `invalid_json`) may be a file claimed mid-write, the
 * writer still writing into it: it is rejected only once it has been unchanged for
 * `ingest.settle`, re-read each time it changed, for at most `ingest.settle_max`. A claim whose
 * bytes were whole when claimed (an upload) is decided at once.
 */
import { lstat } from 'node:fs/promises';
import type { Config } from '../../config.js';
import { RejectionError, type RejectionReason } from '../../errors.js';
import { readClaim, type ClaimRead } from './inbox.js';
import { ifExists } from '../../missing.js';

/**
 * A file still being written up to this size is read again as soon as it changes (it may be
 * complete now: published without waiting for quiet); a larger one once it has been quiet for
 * `settle`, so that a file growing for a while is not read again and again.
 */
const REREAD_AT_ONCE_MAX_BYTES = 1024 * 1024;

/** The reasons a file still being written gives: it does not parse yet. */
const INCOMPLETE: ReadonlySet<RejectionReason> = new Set(['empty', 'invalid_json']);

/** A rejection with the bytes it was decided on. */
export class SettledRejection extends RejectionError {
  constructor(
    err: RejectionError,
    readonly bytes: Buffer,
  ) {
    super(err.reason, err.detail);
  }
}

/**
 * Read and validate `path` until the outcome holds. `beforeRead(size)` is called before each read
 * (the memory budget, held while waiting: the bytes read are kept for the rejection). A rejection
 * of bytes that were read is thrown as a SettledRejection carrying them. Files of at least
 * `sharedMinBytes` are read into shared memory (for validation threads).
 */
export async function readSettled<T>(
  path: string,
  config: Pick<Config, 'limits' | 'ingest'>,
  beforeRead: (size: number) => Promise<void>,
  validate: (raw: Buffer, read: ClaimRead) => T | Promise<T>,
  complete = false,
  sharedMinBytes = Infinity,
): Promise<T> {
  const { settleMs, settleMaxMs } = config.ingest;
  const deadline = Date.now() + settleMaxMs;
  for (;;) {
    // Size and mtime as they were before the read: the open claim's fstat (readClaim).
    const read = await readClaim(path, config.limits.maxFileBytes, beforeRead, config.ingest.syncIoMaxBytes, sharedMinBytes);
    let err: RejectionError;
    try {
      return await validate(read.bytes, read);
    } catch (e) {
      if (!(e instanceof RejectionError)) throw e;
      err = e;
    }
    if (complete || !INCOMPLETE.has(err.reason)) throw new SettledRejection(err, read.bytes);
    const quiet = await waitQuiet(path, read, settleMs, config.limits.maxFileBytes, deadline);
    // Unchanged since it was read and quiet for `settle`: complete, and the rejection stands.
    if (quiet === 'quiet') throw new SettledRejection(err, read.bytes);
    if (quiet === 'gone' || quiet === 'timeout' || Date.now() >= deadline) {
      const detail = quiet === 'gone' ? err.detail : `${err.detail} (still being written after ${Math.round(settleMaxMs / 1000)}s)`;
      throw new SettledRejection(new RejectionError(err.reason, detail), read.bytes);
    }
    // Changed: read it again.
  }
}

/**
 * Wait (lstat only) until the file has been quiet for `settleMs`, by its mtime or, once we saw it
 * change (or should the writer's clock disagree with ours, on a network share), by our own watch.
 * `quiet`: unchanged since `seen` was read, for `settleMs`; `changed`: worth reading again
 * (changed while small enough to read again at once, changed and quiet since, over the size
 * limit); `timeout`: the deadline came before the file was quiet for `settleMs`.
 */
async function waitQuiet(
  path: string,
  seen: { size: number; mtimeMs: number },
  settleMs: number,
  maxBytes: number,
  deadline: number,
): Promise<'quiet' | 'changed' | 'timeout' | 'gone'> {
  const watchedSince = Date.now();
  let last = seen;
  let changedAt: number | undefined;
  for (;;) {
    const st = await ifExists(lstat(path));
    if (!st) return 'gone';
    const now = Date.now();
    // Over the limit: the next read refuses it without reading.
    if (st.size > maxBytes) return 'changed';
    if (st.size !== last.size || st.mtimeMs !== last.mtimeMs) {
      if (st.size <= REREAD_AT_ONCE_MAX_BYTES) return 'changed';
      last = { size: st.size, mtimeMs: st.mtimeMs };
      changedAt = now;
    }
    const quietFor = changedAt === undefined ? Math.max(now - st.mtimeMs, now - watchedSince) : now - changedAt;
    if (quietFor >= settleMs) return last === seen ? 'quiet' : 'changed';
    // Not quiet for `settle` by the deadline, though perhaps unchanged since it was read (a small
    // file written on at short intervals is read again at once): still being written.
    if (now >= deadline) return 'timeout';
    await new Promise((r) => setTimeout(r, Math.min(Math.max(5, settleMs - quietFor), 100, Math.max(5, deadline - now))));
  }
}

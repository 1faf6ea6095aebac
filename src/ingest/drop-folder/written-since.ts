/**
 * Whether a claimed drop was written after it was read. A writer that holds the file open (it
 * truncates and writes in place) goes on writing into the claim: once its outcome is settled, a
 * claim written since holds newer content, so it is processed again instead of removed (the
 * publish step loops; a removal that finds it written leaves it to recovery).
 *
 * The file's size, mtime, ctime and inode are compared with the fstat taken before the read. A
 * kernel stamps times from a coarse clock (a few ms): a rewrite of the same size within that tick
 * of the read leaves them alike, so when the read came that close after the last write, the bytes
 * are read again and compared: with the bytes read, while the caller still holds them (a memcmp),
 * else by their SHA-256. (The claim's rename stamps its ctime, so a fresh drop is always that close.)
 * A claim above `ingest.sync_io_max_bytes` is read again in chunks: a 50 MB drop costs 1 MiB more,
 * not another 50 MB.
 */
import { createHash } from 'node:crypto';
import { lstatSync, type Stats } from 'node:fs';
import { lstat } from 'node:fs/promises';
import { sha256Hex } from '../../sha256.js';
import { ifExists, isMissing } from '../../missing.js';
import { closeFd, openFd, readFd } from '../../sync-io.js';
import { CLAIM_OPEN_FLAGS, readClaimSyncInto, type ClaimRead } from './inbox.js';

/** What was read of a claim: its fstat before the read, and the SHA-256 of the bytes read. */
export interface SeenClaim {
  readonly size: number;
  readonly mtimeMs: number;
  readonly ctimeMs: number;
  readonly ino: number;
  readonly statAtMs: number;
  readonly sha256: string;
}

/**
 * How close (ms) to the last write a read must come for equal times to prove nothing: the
 * coarse clock's tick, with room for a network filesystem's clock.
 */
const SAME_TICK_MS = 50;

/** Where claims up to `ingest.sync_io_max_bytes` are read again (readClaimSyncInto); grows to the largest. */
let scratch = Buffer.alloc(0);

/** `sha256`: of `read.bytes` (the publish step has it already). */
export function seenClaim(read: ClaimRead, sha256: string): SeenClaim {
  return { size: read.size, mtimeMs: read.mtimeMs, ctimeMs: read.ctimeMs, ino: read.ino, statAtMs: read.statAtMs, sha256 };
}

/**
 * True when the claim at `path` holds other content than was seen; false when it is unchanged or
 * gone. `syncIoMaxBytes` (`ingest.sync_io_max_bytes`): above 0, the lstat (and a re-read up to
 * that size) is synchronous, microseconds on a local folder (src/sync-io.ts). `held`: the bytes
 * that were read, when the caller still has them.
 */
export async function writtenSince(path: string, seen: SeenClaim, syncIoMaxBytes = 0, held?: Buffer): Promise<boolean> {
  let st: Stats | undefined;
  if (syncIoMaxBytes > 0) {
    try {
      st = lstatSync(path);
    } catch (err) {
      if (!isMissing(err)) throw err;
    }
  } else st = await ifExists(lstat(path));
  if (!st) return false;
  if (st.size !== seen.size || st.mtimeMs !== seen.mtimeMs || st.ctimeMs !== seen.ctimeMs || st.ino !== seen.ino) return true;
  if (seen.statAtMs - Math.max(seen.mtimeMs, seen.ctimeMs) > SAME_TICK_MS) return false;
  try {
    // Read only when its size is still the one seen: at most that many bytes.
    const compareWith = held?.length === seen.size ? held : undefined;
    if (seen.size > syncIoMaxBytes) return !(await sameInChunks(path, seen, compareWith));
    // Compared before anything else runs: the scratch buffer is shared.
    if (scratch.length <= seen.size) scratch = Buffer.allocUnsafe(Math.max(seen.size + 1, Math.min(2 * scratch.length, syncIoMaxBytes + 1)));
    const again = readClaimSyncInto(path, seen.size, scratch);
    if (!again) return false;
    return compareWith ? !again.equals(compareWith) : sha256Hex(again) !== seen.sha256;
  } catch {
    // Gone, or no longer readable as a drop: let the next look decide.
    return false;
  }
}

const CHUNK_BYTES = 1024 * 1024;

/**
 * Whether the claim at `path` still holds what was seen, read in chunks of CHUNK_BYTES: compared
 * with `held` (the bytes read), else hashed and compared with the SHA-256 seen. Throws when it is
 * gone or not readable.
 */
async function sameInChunks(path: string, seen: SeenClaim, held: Buffer | undefined): Promise<boolean> {
  const fd = await openFd(path, CLAIM_OPEN_FLAGS);
  try {
    const chunk = Buffer.allocUnsafe(Math.min(CHUNK_BYTES, seen.size + 1));
    const hash = held ? undefined : createHash('sha256');
    let at = 0;
    for (;;) {
      const n = (await readFd(fd, chunk, 0, chunk.length, at)).bytesRead;
      if (n === 0) break;
      if (at + n > seen.size) return false;
      const part = chunk.subarray(0, n);
      if (held && !part.equals(held.subarray(at, at + n))) return false;
      hash?.update(part);
      at += n;
    }
    return at === seen.size && (hash === undefined || hash.digest('hex') === seen.sha256);
  } finally {
    await closeFd(fd);
  }
}

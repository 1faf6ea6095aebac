/**
 * A bound on the bytes REJECTED_DIR holds (`ingest.rejected_max_bytes`): past it, the oldest
 * rejected drops are removed (with their entries of the rejection log) until it holds at most
 * nine tenths of it. Retention by age alone cannot keep a publisher key from filling the disk: a
 * 50 KB gzip upload that decompresses to 50 MB and is rejected is kept whole.
 *
 * Each worker process keeps an estimate: REJECTED_DIR's size when it last measured it, plus the
 * drops it rejected since (their folders measured as they are written). Past the bound it measures
 * the folder again (other workers' rejections included) and removes what is over. So the folder
 * may pass the bound by what other processes rejected since, never for long.
 */
import { lstat, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from '../../log.js';
import { ifExists } from '../../missing.js';
import { datedRejections, removeRejections, type PurgedRejection } from './rejected-purge.js';

/** The bytes of the files under `path` (a file, or a folder walked without following links). */
export async function bytesUnder(path: string): Promise<number> {
  const st = await ifExists(lstat(path));
  if (st === undefined) return 0;
  if (!st.isDirectory()) return st.size;
  let total = 0;
  for (const name of (await ifExists(readdir(path))) ?? []) total += await bytesUnder(join(path, name));
  return total;
}

/**
 * Remove the oldest rejected drops until REJECTED_DIR holds at most `keepBytes`; what was removed
 * and the bytes left. Drops whose time of receipt is unknown are counted, never removed.
 */
export async function purgeToBytes(
  rejectedDir: string,
  keepBytes: number,
  forget?: (ids: string[]) => Promise<void>,
): Promise<{ removed: PurgedRejection[]; bytes: number }> {
  // One walk: each rejected drop's bytes, and their sum.
  const sizes = new Map<string, number>();
  let bytes = 0;
  for (const name of (await ifExists(readdir(rejectedDir))) ?? []) {
    const size = await bytesUnder(join(rejectedDir, name));
    sizes.set(name, size);
    bytes += size;
  }
  const remove: PurgedRejection[] = [];
  // Under the bound (a worker's start, most often): no reason.json is read.
  if (bytes <= keepBytes) return { removed: remove, bytes };
  for (const r of await datedRejections(rejectedDir)) {
    if (bytes <= keepBytes) break;
    bytes -= sizes.get(r.id) ?? 0;
    remove.push(r);
  }
  return { removed: await removeRejections(rejectedDir, remove, forget), bytes };
}

export interface RejectedBytes {
  /**
   * A drop was rejected into REJECTED_DIR/<id>: counted, and a trim started if the folder passed
   * the bound (not waited for: the rejection's job does not wait on it). Never rejects.
   */
  added(id: string): Promise<void>;
  /** Resolves when no measure or trim is under way (on stop, and for tests). */
  settled(): Promise<void>;
}

export interface RejectedBytesDeps {
  readonly rejectedDir: string;
  /** ingest.rejected_max_bytes; 0: no bound. */
  readonly maxBytes: number;
  readonly forget: (ids: string[]) => Promise<void>;
  readonly log: Logger;
}

export function createRejectedBytes(deps: RejectedBytesDeps): RejectedBytes {
  const { rejectedDir, maxBytes, log } = deps;
  /** REJECTED_DIR's bytes as this process knows them; undefined until first measured. */
  let estimate: number | undefined;
  let trimming: Promise<void> | undefined;
  const trim = () =>
    (trimming ??= purgeToBytes(rejectedDir, Math.floor(maxBytes * 0.9), deps.forget)
      .then(
        ({ removed, bytes }) => {
          estimate = bytes;
          if (removed.length > 0) log.warn({ removed: removed.length, bytes, rejectedDir }, 'removed the oldest rejected drops past ingest.rejected_max_bytes');
        },
        (err: unknown) =>
          log.warn({ err: { message: (err as Error).message }, rejectedDir }, 'could not trim the rejected drops; retrying at the next rejection'),
      )
      .finally(() => (trimming = undefined)));
  // Measured (and trimmed) once at start, in the background.
  if (maxBytes > 0) void trim();
  return {
    async added(id) {
      // Not measured yet: the measure under way counts it, or the next one will.
      if (maxBytes <= 0 || estimate === undefined) return;
      estimate += await bytesUnder(join(rejectedDir, id)).catch(() => 0);
      if (estimate > maxBytes) void trim();
    },
    async settled() {
      await trimming;
    },
  };
}

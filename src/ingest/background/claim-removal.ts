/**
 * The claims (.processing files) of settled drops that wait for the manifest before they go: a
 * published drop's claim once a manifest covering its commit is written, an `unchanged` drop's
 * claim after the next check of the manifest against the catalog (it may have been committed by
 * an attempt that died before the manifest was written).
 */
import { unlinkSync } from 'node:fs';
import { unlink } from 'node:fs/promises';
import type { Logger } from '../../log.js';
import { inBatches } from './cleanup-batch.js';
import { isMissing } from '../../missing.js';

export interface ClaimRemoval {
  /** Remove `path` once a manifest covering `seq` is written; `bytes`: the drop's size, when known. */
  afterManifest(seq: number, path: string, bytes?: number): void;
  /** Remove `path` after the next check of the manifest. */
  afterCheck(path: string): void;
  /** Whether claims wait for a check. */
  awaitingCheck(): boolean;
  /** The claims waiting for a check, handed to the check about to start. */
  takeChecks(): string[];
  /** The check those claims were handed to failed: they wait for the next one. */
  putBackChecks(paths: readonly string[]): void;
  /** Remove claims whose check is done. */
  removeChecked(paths: readonly string[]): Promise<void>;
  /** Remove the claims a manifest at `written` covers. */
  removeCovered(written: number): Promise<void>;
  /** Claims waiting (for a manifest or a check). */
  pending(): number;
}

export interface ClaimRemovalOptions {
  readonly log: Logger;
  /**
   * Claims of known size up to this many bytes are removed with a synchronous unlink
   * (`ingest.sync_io_max_bytes`; 0, the default here: every removal on the thread pool).
   */
  readonly syncIoMaxBytes?: number;
}

interface PendingClaim {
  readonly seq: number;
  readonly path: string;
  readonly bytes?: number;
}

export function createClaimRemoval(opts: ClaimRemovalOptions): ClaimRemoval {
  const { log } = opts;
  const syncIoMaxBytes = opts.syncIoMaxBytes ?? 0;
  let covered: PendingClaim[] = [];
  let checks: string[] = [];

  const notRemoved = (err: NodeJS.ErrnoException, path: string) => {
    if (!isMissing(err)) log.warn({ err: { message: err.message }, path }, 'could not remove a settled claim; recovery will settle it again');
  };

  /**
   * Small claims of known size go at once with unlinkSync (a metadata call of microseconds, where
   * a hop to the thread pool costs 0.1–0.3 ms: src/sync-io.ts), the others on the thread pool,
   * CLEANUP_BATCH at a time.
   */
  const remove = async (list: readonly { readonly path: string; readonly bytes?: number }[]) => {
    const later: string[] = [];
    for (const c of list) {
      if (c.bytes === undefined || c.bytes > syncIoMaxBytes) later.push(c.path);
      else {
        try {
          unlinkSync(c.path);
        } catch (err) {
          notRemoved(err as NodeJS.ErrnoException, c.path);
        }
      }
    }
    await inBatches(later, (path) => unlink(path).catch((err: NodeJS.ErrnoException) => notRemoved(err, path)));
  };

  return {
    afterManifest(seq, path, bytes) {
      covered.push(bytes !== undefined ? { seq, path, bytes } : { seq, path });
    },
    afterCheck(path) {
      checks.push(path);
    },
    awaitingCheck: () => checks.length > 0,
    takeChecks() {
      const taken = checks;
      checks = [];
      return taken;
    },
    putBackChecks(paths) {
      checks.push(...paths);
    },
    removeChecked: (paths) => remove(paths.map((path) => ({ path }))),
    async removeCovered(written) {
      const due = covered.filter((c) => c.seq <= written);
      covered = covered.filter((c) => c.seq > written);
      await remove(due);
    },
    pending: () => covered.length + checks.length,
  };
}

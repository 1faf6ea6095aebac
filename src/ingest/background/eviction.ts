/**
 * Versions that fell out of a filename's history, deleted from the store once a manifest newer
 * than their eviction is written, so a reader that starts from the manifest (Redis away) never
 * finds it naming a deleted object. A crash before that leaves the old object behind (garbage),
 * never a dangling manifest. At that point a version is deleted only if nothing uses it again:
 * not the current entry, the versions list nor a retained publication (the same bytes may have
 * been published again meanwhile).
 */
import type { Catalog } from '../../catalog/redis-catalog.js';
import type { Logger } from '../../log.js';
import { objectKey, type Store } from '../../store/store.js';
import { inBatches } from './cleanup-batch.js';

export interface Eviction {
  /** `sha256s` fell out of `filename`'s history with the commit at `seq`. */
  evicted(seq: number, filename: string, sha256s: readonly string[]): void;
  /** Delete the versions evicted by commits a manifest at `written` covers. */
  deleteCovered(written: number): Promise<void>;
}

export interface EvictionDeps {
  readonly catalog: Pick<Catalog, 'history'>;
  readonly store: Pick<Store, 'delete'>;
  readonly log: Logger;
}

interface PendingDelete {
  readonly seq: number;
  readonly filename: string;
  readonly sha256: string;
}

export function createEviction(deps: EvictionDeps): Eviction {
  const { catalog, store, log } = deps;
  let deletes: PendingDelete[] = [];
  return {
    evicted(seq, filename, sha256s) {
      for (const sha256 of sha256s) deletes.push({ seq, filename, sha256 });
    },
    async deleteCovered(written) {
      const due = deletes.filter((d) => d.seq <= written);
      deletes = deletes.filter((d) => d.seq > written);
      if (due.length === 0) return;
      // A version may have been published again since it was evicted: never delete what is used.
      // One pipeline for them all; if Redis fails, nothing is deleted (garbage, never a dangling name).
      const used = await catalog.history.inUse(due).catch(() => undefined);
      if (!used) return;
      const doomed = due.filter((_, i) => used[i] === false);
      await inBatches(doomed, (d) =>
        store
          .delete(objectKey(d.filename, d.sha256))
          .catch((err: unknown) => log.warn({ err, filename: d.filename, sha: d.sha256 }, 'could not delete an old version')),
      );
    },
  };
}

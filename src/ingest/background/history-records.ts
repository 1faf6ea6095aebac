/**
 * The store's records of every retained publication (history-log.ts), written after the commit in
 * the manifest writer's background step, never on the publish path: one log object at most every
 * `writeEveryMs` for every publication and trim since (not an object per publication), merged
 * into one object per file once the log has grown (`mergeAfter` objects), when the merged-away
 * objects and those whose every member was trimmed are deleted. A file's index is checked against the
 * records once (its first publication, or after Redis lost it): what it lacked is restored, and
 * only then logged (warn), naming the file and how many.
 * A crash between a commit and the next log object leaves that publication out of a rebuilt
 * index (Redis still has it while it keeps its data); a stop writes what is pending.
 *
 * Another worker may trim a publication before this one has written it: the trim's log object
 * carries the newest member trimmed, and everything at or below it is left out of a rebuild and
 * of a merge, whichever order the two objects were written in.
 */
import type { Catalog } from '../../catalog/redis-catalog.js';
import type { Logger } from '../../log.js';
import type { Store } from '../../store/store.js';
import { inBatches } from './cleanup-batch.js';
import {
  encodeBatch,
  encodeLog,
  factsOf,
  fileBatchKey,
  later,
  LOG_PREFIX,
  logKey,
  parseFileKey,
  readFileObjects,
  readLog,
  retainedMembers,
  type HistoryFacts,
} from './history-log.js';

export interface HistoryRecords {
  /** `added` was published under `filename`; `removed` were trimmed from its history. */
  committed(filename: string, added: string, removed: readonly string[]): void;
  /** Write what is pending as one log object (merging the log when this process has added enough); what fails stays pending. */
  flush(): Promise<void>;
  /** Ms until what is pending is due to be written (`writeEveryMs` after the oldest, or at once when it is many); Infinity when none is. */
  dueInMs(): number;
  /** Rebuild from the store's records the index of every published file whose index is missing. */
  repair(): Promise<void>;
  /** Merge the log when it holds `mergeAfter` objects or more, whoever wrote them (a worker that stopped). */
  tidy(): Promise<void>;
  pending(): number;
}

export interface HistoryRecordsDeps {
  readonly catalog: Pick<Catalog, 'history'>;
  readonly store: Pick<Store, 'put' | 'get' | 'delete' | 'list'>;
  readonly log: Logger;
  /** Log objects that make a merge (default 256). */
  readonly mergeAfter?: number;
  /** How long a publication's record may wait for the next log object (default 1000 ms). */
  readonly writeEveryMs?: number;
  /** The clock naming log objects, ms (default Date.now). */
  readonly now?: () => number;
}

/** Pending records written at once, whatever their age. */
const MANY = 1024;

export function createHistoryRecords(deps: HistoryRecordsDeps): HistoryRecords {
  const { catalog, store, log } = deps;
  const mergeAfter = deps.mergeAfter ?? 256;
  const now = deps.now ?? Date.now;
  const writeEveryMs = deps.writeEveryMs ?? 1000;
  let pending: HistoryFacts = new Map();
  /** When the oldest pending record was committed, and how many are pending. */
  let pendingSince = 0;
  let pendingCount = 0;
  /** Log objects this process wrote since its last merge. */
  let written = 0;

  const putBack = (facts: HistoryFacts) => {
    for (const [filename, f] of facts) {
      const into = factsOf(pending, filename);
      for (const m of f.added) into.added.add(m);
      into.trimmed = later(into.trimmed, f.trimmed);
    }
  };

  /**
   * Folds the log objects `keys` into one object per file, then deletes them, and the file's
   * objects whose every member is trimmed. A log object written meanwhile is not in `keys` and
   * stays; two merges at once each write what they read before deleting it.
   */
  const merge = async (keys: readonly string[]) => {
    const facts = await readLog(store, keys);
    // One file at a time: a merge is background work and must leave the thread pool to publications.
    for (const [filename, f] of facts) {
      const newest = retainedMembers(f).at(-1) ?? f.trimmed;
      if (newest === undefined) continue;
      const key = fileBatchKey(filename, newest);
      await store.put(key, encodeBatch(f), 'application/json');
      if (f.trimmed === undefined) continue;
      const trimmed = f.trimmed;
      const gone = (await store.list(`history/${filename}/`)).filter((k) => k !== key && (parseFileKey(k)?.member ?? '~') <= trimmed);
      await inBatches(gone, (k) => store.delete(k));
    }
    await inBatches(keys, (k) => store.delete(k));
    written = 0;
  };

  return {
    committed(filename, added, removed) {
      if (pending.size === 0) pendingSince = now();
      pendingCount++;
      const f = factsOf(pending, filename);
      f.added.add(added);
      for (const m of removed) f.trimmed = later(f.trimmed, m);
    },
    async flush() {
      if (pending.size > 0) {
        const taking = pending;
        pending = new Map();
        pendingCount = 0;
        try {
          await store.put(logKey(now()), encodeLog(taking), 'application/json');
        } catch (err) {
          putBack(taking);
          throw err;
        }
        written++;
      }
      if (written >= mergeAfter) await merge(await store.list(LOG_PREFIX));
    },
    async repair() {
      const unbuilt = await catalog.history.unbuilt();
      if (unbuilt.length === 0) return;
      const logged = await readLog(store, await store.list(LOG_PREFIX));
      for (const filename of unbuilt) {
        const f = factsOf(logged, filename);
        await readFileObjects(store, await store.list(`history/${filename}/`), f);
        const members = retainedMembers(f);
        const { restored, versions } = await catalog.history.rebuild(filename, members);
        // Checking a file's index against the store is routine (its first publication, every
        // start); only versions the index had actually lost are worth a line.
        if (restored > 0) {
          log.warn(
            { filename, restored, versions, records: members.length },
            `history index of ${filename} lacked ${restored} version(s) kept in the store (Redis lost them); restored from the store's records`,
          );
        }
      }
    },
    async tidy() {
      const keys = await store.list(LOG_PREFIX);
      if (keys.length >= mergeAfter) await merge(keys);
    },
    dueInMs: () => (pending.size === 0 ? Infinity : pendingCount >= MANY ? 0 : Math.max(0, pendingSince + writeEveryMs - now())),
    pending: () => pending.size,
  };
}

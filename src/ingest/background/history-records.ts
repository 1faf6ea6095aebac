/**
 * The store's record of every retained publication (`history/<filename>/...json`, named by its
 * history member: history-index.ts), written after the commit in the manifest writer's background
 * step, never on the publish path; a trimmed publication's record is deleted there too. A file's
 * index is checked against these records once (its first publication, or after Redis lost it):
 * what it lacked is restored, and only then logged (warn), naming the file and how many.
 * A crash between a commit and its record's write leaves that publication out of a rebuilt index
 * (Redis still has it while it keeps its data).
 *
 * Another worker may trim a publication before this one has written its record (its delete then
 * finds nothing): so after writing, a record whose member the index no longer holds is deleted
 * here. The trim commits before its own delete runs, so one of the two deletes always comes last.
 */
import { historyRecordKey, memberOfRecordKey, parseMember } from '../../catalog/history-index.js';
import type { Catalog } from '../../catalog/redis-catalog.js';
import type { Logger } from '../../log.js';
import type { Store } from '../../store/store.js';
import { inBatches } from './cleanup-batch.js';

export interface HistoryRecords {
  /** `added` was published under `filename`; `removed` were trimmed from its history. */
  committed(filename: string, added: string, removed: readonly string[]): void;
  /** Write the pending records and delete the trimmed ones; what fails stays pending. */
  flush(): Promise<void>;
  /** Rebuild from the store's records the index of every published file whose index is missing. */
  repair(): Promise<void>;
  pending(): number;
}

export interface HistoryRecordsDeps {
  readonly catalog: Pick<Catalog, 'history'>;
  readonly store: Pick<Store, 'put' | 'delete' | 'list'>;
  readonly log: Logger;
}

interface Pending {
  readonly filename: string;
  readonly member: string;
}

export function createHistoryRecords(deps: HistoryRecordsDeps): HistoryRecords {
  const { catalog, store, log } = deps;
  let puts: Pending[] = [];
  let deletes: Pending[] = [];
  /** The written records whose publication was trimmed (by any worker) since it was committed. */
  async function trimmedMeanwhile(written: readonly Pending[]): Promise<Pending[]> {
    const byFile = new Map<string, Pending[]>();
    for (const p of written) byFile.set(p.filename, [...(byFile.get(p.filename) ?? []), p]);
    const out: Pending[] = [];
    for (const [filename, items] of byFile) {
      const kept = await catalog.history
        .retained(
          filename,
          items.map((p) => p.member),
        )
        .catch(() => undefined);
      if (kept) items.forEach((p, i) => kept[i] || out.push(p));
    }
    return out;
  }
  return {
    committed(filename, added, removed) {
      puts.push({ filename, member: added });
      for (const member of removed) deletes.push({ filename, member });
    },
    async flush() {
      const gone = new Set(deletes.map((d) => `${d.filename}\n${d.member}`));
      const writing = puts.filter((p) => !gone.has(`${p.filename}\n${p.member}`));
      puts = [];
      const failed: Pending[] = [];
      await inBatches(writing, async (p) => {
        const v = parseMember(p.member);
        if (!v) return;
        const body = {
          filename: p.filename,
          seq: v.seq,
          sha256: v.sha256,
          size: v.size,
          generated_at: new Date(v.generatedAtMs).toISOString(),
          published_at: new Date(v.publishedMs).toISOString(),
        };
        await store.put(historyRecordKey(p.filename, p.member), Buffer.from(JSON.stringify(body)), 'application/json').catch(() => failed.push(p));
      });
      puts = failed.concat(puts);
      const written = writing.filter((p) => !failed.includes(p));
      const removing = deletes.concat(await trimmedMeanwhile(written));
      deletes = [];
      await inBatches(removing, (d) =>
        store
          .delete(historyRecordKey(d.filename, d.member))
          .catch((err: unknown) => log.warn({ err, filename: d.filename }, 'could not delete a history record')),
      );
      if (failed.length > 0) throw new Error(`${failed.length} history records could not be written; will retry`);
    },
    async repair() {
      for (const filename of await catalog.history.unbuilt()) {
        const keys = await store.list(`history/${filename}/`);
        const members = keys.map(memberOfRecordKey).filter((m): m is string => m !== undefined);
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
    pending: () => puts.length + deletes.length,
  };
}

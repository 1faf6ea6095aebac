/**
 * The catalog as of the manifest writer's last write, kept in memory (each entry's JSON, as Redis
 * stores it) so that a write costs O(commits since) rather than O(feeds): re-reading the whole
 * catalog (HGETALL, every entry parsed and serialized again) for each write cost a large part of
 * the ingest throughput with thousands of feeds. This process's own commits are applied to it; the whole catalog is
 * read again when the catalog's seq shows a commit this process did not make (another worker),
 * when a commit came without its entry, and after forget().
 */
import type { Catalog } from '../../catalog/redis-catalog.js';
import type { CatalogEntry } from '../../catalog/types.js';

export interface CatalogMirror {
  /** This process committed `entry` at `seq`: the next read applies it instead of re-reading. */
  committed(seq: number, filename: string, entry?: CatalogEntry): void;
  /** Whether the commit at `seq` is one of this process's not yet applied. */
  isOwn(seq: number): boolean;
  /** Read the whole catalog again on the next read. */
  forget(): void;
  /** The catalog went back (Redis lost commits): forget it, and the commits not yet applied (their seqs name others now). */
  reset(): void;
  /**
   * The catalog exactly as of one recent seq, sorted by filename: [filename, entry JSON]; `get`
   * answers for that same seq until the next read.
   */
  read(): Promise<{ seq: number; files: Iterable<readonly [string, string]>; get(filename: string): string | undefined }>;
}

interface Mirror {
  seq: number;
  readonly files: Map<string, string>;
  /** The filenames sorted; undefined when a filename was added since. */
  names: string[] | undefined;
}

export function createCatalogMirror(catalog: Pick<Catalog, 'seq' | 'snapshotJson'>): CatalogMirror {
  /** The catalog as of the last read; undefined: read it whole on the next one. */
  let mirror: Mirror | undefined;
  /** This process's commits not yet applied to the mirror: seq → [filename, entry JSON]. */
  const ownCommits = new Map<number, readonly [string, string]>();

  /**
   * Apply this process's commits after the mirror's seq, up to `seq`, as long as they follow each
   * other; how many were applied (0: the catalog went back, or the next commit is not ours).
   */
  const advance = (m: Mirror, seq: number): number => {
    if (seq < m.seq) return 0;
    let applied = 0;
    for (let s = m.seq + 1; s <= seq && ownCommits.has(s); s++) {
      const [filename, json] = ownCommits.get(s)!;
      if (!m.files.has(filename)) m.names = undefined;
      m.files.set(filename, json);
      ownCommits.delete(s);
      m.seq = s;
      applied++;
    }
    return applied;
  };

  return {
    committed(seq, filename, entry) {
      if (entry && entry.filename === filename && !(mirror && seq <= mirror.seq)) ownCommits.set(seq, [filename, JSON.stringify(entry)]);
    },
    isOwn: (seq) => ownCommits.has(seq),
    forget() {
      mirror = undefined;
    },
    reset() {
      mirror = undefined;
      ownCommits.clear();
    },
    /**
     * The mirror advanced through this process's own commits since, as far as they follow each
     * other; else the whole catalog, read again. A commit whose committed() has not come yet (it is
     * reported just after the commit) ends the run like another process's would: what follows it is
     * read next time.
     */
    async read() {
      // Only when the next commit after the mirror is ours can the mirror be advanced: one GET of
      // the seq says how far the catalog has gone.
      const next = mirror && ownCommits.has(mirror.seq + 1) ? await catalog.seq() : undefined;
      if (!mirror || next === undefined || advance(mirror, next) === 0) {
        const snapshot = await catalog.snapshotJson();
        mirror = { seq: snapshot.seq, files: new Map(snapshot.entries), names: snapshot.entries.map(([f]) => f) };
      }
      for (const s of ownCommits.keys()) if (s <= mirror.seq) ownCommits.delete(s);
      const m = mirror;
      m.names ??= [...m.files.keys()].sort((a, b) => (a < b ? -1 : 1));
      return { seq: m.seq, files: m.names.map((f) => [f, m.files.get(f)!] as const), get: (f) => m.files.get(f) };
    },
  };
}
